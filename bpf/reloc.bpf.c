//go:build ignore

// Relocation capture for djx-bpf. on_copy reports GC object copies (src,
// dst, len) from uprobes placed, by default, on the memcpy/memmove call
// instructions inside the Serial, Parallel and G1 collectors' copy
// functions of libjvm.so (sources/reloc/gcsites.go): at a call, as at the callee's
// entry, rdi/rsi/rdx hold the arguments, so the same program serves the
// fallback, a uprobe on the memmove/memcpy implementation that libjvm.so
// calls (when libjvm.so has no symbols). Uprobes on the USDT sites
// hotspot:gc__begin / gc__end report GC epochs. The programs are attached
// per JVM with the uprobe's pid filter; the per-tgid filter map here also
// holds the heap ranges and the minimum length. Each uprobe hit costs a
// trap (7-10 us measured, design.md) even when the filter drops the copy,
// so the filter only saves ring traffic: the call-site probes trap only
// when a collector copies an object of more than 64 bytes, the fallback on
// every copy of every thread.

#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define MAX_RANGES 4

// Event kinds and flags: enums in struct reloc_event, so that bpf2go
// generates them for Go (a reloc test holds reloc.Kind to them).
enum reloc_kind {
	KIND_GC_BEGIN = 1,
	KIND_GC_END = 2,
	KIND_COPY = 3,
};

enum reloc_flag {
	FLAG_FULL = 1,   // gc__begin: the probe's argument says full GC
	FLAG_ARG_OK = 2, // gc__begin: the argument could be read
};

struct reloc_event {
	__u64 time; // bpf_ktime_get_ns: CLOCK_MONOTONIC
	__u32 pid;  // tgid, host pid namespace
	__u32 tid;
	__u64 src;
	__u64 dst;
	__u64 len;
	enum reloc_kind kind; // 4 bytes each: the 8 that kind, flags and pad took
	enum reloc_flag flags;
};

struct range {
	__u64 start, end; // [start, end)
};

// What a tracked JVM keeps: copies of at least min_len bytes whose source
// lies in one of the first nranges ranges.
struct target {
	__u64 min_len;
	__u32 nranges;
	__u32 in_gc; // set between gc__begin and gc__end, by the BPF programs
	struct range ranges[MAX_RANGES];
};

// Counter slots (bpf2go -type reloc_counter: the tracker reads them by name).
enum reloc_counter {
	CNT_HITS = 0,        // copy uprobe hits of tracked tgids (each paid a trap)
	CNT_KEPT = 1,        // copies sent to the ring buffer
	CNT_FILTER_LEN = 2,  // shorter than min_len
	CNT_FILTER_HEAP = 3, // source outside the heap ranges
	CNT_DROPPED = 4,     // ring buffer full (copies and GC events)
	CNT_GC = 5,          // gc__begin/gc__end events sent
	CNT_FOREIGN = 6,     // hits of untracked tgids (uprobe pid filter leaks)
	CNT_HITS_GC = 7,     // copy uprobe hits inside a GC epoch
	CNT_MAX = 8,
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct target);
} reloc_targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} reloc_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} reloc_counters SEC(".maps");

// Force emission of the type for bpf2go -type.
const struct reloc_event *unused_reloc_event __attribute__((unused));
const enum reloc_counter *unused_reloc_counter __attribute__((unused));

static __always_inline void count(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&reloc_counters, &slot);
	if (v)
		*v += 1;
}

SEC("uprobe")
int on_copy(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;

	struct target *tg = bpf_map_lookup_elem(&reloc_targets, &tgid);
	if (!tg) {
		count(CNT_FOREIGN);
		return 0;
	}
	count(CNT_HITS);
	if (tg->in_gc)
		count(CNT_HITS_GC);

	// System V x86-64: memmove(dst=rdi, src=rsi, len=rdx), same for memcpy.
	__u64 dst = ctx->rdi, src = ctx->rsi, len = ctx->rdx;
	if (len < tg->min_len) {
		count(CNT_FILTER_LEN);
		return 0;
	}
	int in = 0;
#pragma unroll
	for (int i = 0; i < MAX_RANGES; i++) {
		if (i < tg->nranges && src >= tg->ranges[i].start && src < tg->ranges[i].end)
			in = 1;
	}
	if (!in) {
		count(CNT_FILTER_HEAP);
		return 0;
	}

	struct reloc_event *e = bpf_ringbuf_reserve(&reloc_events, sizeof(*e), 0);
	if (!e) {
		count(CNT_DROPPED);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->time = bpf_ktime_get_ns();
	e->pid = tgid;
	e->tid = (__u32)id;
	e->src = src;
	e->dst = dst;
	e->len = len;
	e->kind = KIND_COPY;
	bpf_ringbuf_submit(e, 0);
	count(CNT_KEPT);
	return 0;
}

// USDT argument specs travel in the attach cookie (set by reloc.AddJVM):
// bits 0-7 the arg kind, 8-15 the register's index in struct pt_regs (in
// u64 words), 16-23 the size in bytes, 32-63 a constant.
enum {
	ARG_NONE = 0,
	ARG_CONST = 1,
	ARG_REG = 2,
};

static __always_inline int gc_event(struct pt_regs *ctx, __u8 kind)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;

	struct target *tg = bpf_map_lookup_elem(&reloc_targets, &tgid);
	if (!tg)
		return 0;
	// Racy against the hits of other threads, but gc__begin/gc__end run
	// on the VM thread, one operation at a time.
	tg->in_gc = kind == KIND_GC_BEGIN;

	__u8 flags = 0;
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u64 arg = 0;
	switch (cookie & 0xff) {
	case ARG_CONST:
		arg = cookie >> 32;
		flags |= FLAG_ARG_OK;
		break;
	case ARG_REG: {
		__u32 idx = (cookie >> 8) & 0xff;
		if (idx < sizeof(struct pt_regs) / 8 &&
		    bpf_probe_read_kernel(&arg, sizeof(arg), (void *)ctx + idx * 8) == 0)
			flags |= FLAG_ARG_OK;
		__u32 size = (cookie >> 16) & 0xff;
		if (size == 1)
			arg &= 0xff;
		else if (size == 2)
			arg &= 0xffff;
		else if (size == 4)
			arg &= 0xffffffff;
		break;
	}
	}
	if ((flags & FLAG_ARG_OK) && arg)
		flags |= FLAG_FULL;

	struct reloc_event *e = bpf_ringbuf_reserve(&reloc_events, sizeof(*e), 0);
	if (!e) {
		count(CNT_DROPPED);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->time = bpf_ktime_get_ns();
	e->pid = tgid;
	e->tid = (__u32)id;
	e->kind = kind;
	e->flags = flags;
	bpf_ringbuf_submit(e, 0);
	count(CNT_GC);
	return 0;
}

SEC("uprobe")
int on_gc_begin(struct pt_regs *ctx)
{
	return gc_event(ctx, KIND_GC_BEGIN);
}

SEC("uprobe")
int on_gc_end(struct pt_regs *ctx)
{
	return gc_event(ctx, KIND_GC_END);
}
