//go:build ignore

// Sampling program for djx-bpf. It runs on perf_event overflows (the cpu-clock
// timer for the decode source, the software page-fault event, and later
// hardware address-sampling events), keeps only threads of the profiled JVMs
// and hands user registers, instruction bytes and ctx->addr to user space.
// Decoding happens in Go: BPF only copies.

#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define INSN_BYTES 16
// The bytes before ip: four instructions' worth, so that user space finds
// the boundary of the one ending at ip by decoding forward from several
// starts (16 bytes left a seventh of the boundaries undecided).
#define BEFORE_BYTES 64
#define HDR_MASKS 16384

#ifdef DJX_UNWIND
#include "hotspot_unwind.h"
#endif

// Sample flags: an enum, so that bpf2go generates them for Go.
enum sample_flag {
	SAMPLE_BEFORE_OK = 1 << 0, // before[] holds the 64 bytes ending at ip
	SAMPLE_AT_OK = 1 << 1,     // at[] holds the 16 bytes starting at ip
	SAMPLE_MEM_OK = 1 << 2,    // data_src and weight were read from the sample
	SAMPLE_NO_STACK = 1 << 3,  // no stack signal was sent for it on purpose (gap, young or non-Java thread)
	SAMPLE_HDR_MASKED = 1 << 4, // only the header slots hdr_masks gives for this instruction were read
	SAMPLE_BEFORE_SHORT = 1 << 5, // with BEFORE_OK: only before[]'s last 16 bytes were readable
};

// General-purpose registers are pt_regs slots 0-14 (r15 .. rdi); rsp (19)
// never points at an object.
#define GPR_SLOTS 15

struct sample {
	__u64 time; // bpf_ktime_get_ns: CLOCK_MONOTONIC, the agent's clock too
	__u32 pid;  // tgid, host pid namespace
	__u32 tid;
	__u64 addr;   // ctx->addr: the data address for page faults / PEBS / IBS / SPE
	__u64 period; // ctx->sample_period
	__u64 regs[21]; // user struct pt_regs, kernel layout
	__u8 before[BEFORE_BYTES];
	__u8 at[INSN_BYTES];
	enum sample_flag flags; // an int: 4 bytes, as the __u32 it replaced
	__u32 cpu;
	__u64 data_src; // union perf_mem_data_src (PEBS, IBS): level, TLB, snoop
	__u64 weight;   // union perf_sample_weight: latency in cycles
	// The object headers the registers point at, read now because a GC may
	// move the object before user space decodes which register was the
	// base: hdr[i] is the mark and klass words at the object that pt_regs
	// slot i names. Bit i of hdr_ok: read; of hdr_narrow: slot i held a
	// compressed oop (the object is at oop_base + (reg << oop_shift)).
	__u16 hdr_ok;
	__u16 hdr_narrow;
	__u32 pad;
	__u64 hdr[GPR_SLOTS][2];
#ifdef DJX_UNWIND
	// The Java stack, unwound in BPF (hotspot_unwind.h): nframes of
	// frames[], and why the walk ended (enum unwind_end). The record ends
	// after the nframes: its length varies.
	__u16 nframes;
	__u16 uw_end;
	__u32 uw_pad;
	struct unwind_frame frames[UNWIND_FRAMES];
#endif
};

// One profiled JVM: the signal that asks a sampled thread for its Java
// stack (0: none) and where its heap is, for the header reads (heap_hi 0:
// unknown, no reads).
struct target {
	__u8 signo;
	__u8 oop_shift;
	__u8 pad[6];
	__u64 heap_lo;
	__u64 heap_hi;
	__u64 oop_base;
};

// hdr_masks: at an instruction the loader has seen often, the pt_regs
// slots whose object headers user space used (bit i: slot i). Every header
// read is a cold page walk in a guest whose kernel flushes the TLB at each
// entry (PTI without PCID): ~3.5 us, 2.5 of them a sample. Keyed by ip
// only: the code bytes are read after the headers (reading them first
// made the verifier walk the header loop once per way that read ends);
// user space drops a mask that new code at a freed address outgrew.
struct hdr_key {
	__u32 pid;
	__u32 pad;
	__u64 ip;
};

// Counter slots (bpf2go -type counter: the loader reads them by name).
enum counter {
	CNT_MATCHED = 0, // sample of a profiled process
	CNT_DROPPED = 1, // ring buffer full
	CNT_KERNEL = 2,  // sample taken in kernel mode (no user registers)
	CNT_SIGNALED = 3,   // stack signal queued to the sampled thread
	CNT_SIGNAL_FAIL = 4, // ... refused (-EBUSY: one still pending on this CPU)
	CNT_SIGNAL_SKIP = 5, // ... not sent: one less than sig_gap_ns ago, or a thread younger than SIG_MIN_AGE_NS
	CNT_SIGNAL_NOJAVA = 6, // ... not sent: the thread is in no_java
	CNT_MAX = 8,
};

// At most one stack signal per thread per sig_gap_ns (set by the loader;
// at least 100 us). A stack costs the thread tens of us on deep Java
// stacks, so the loader spaces them (--stack-interval) and borrows a
// thread's last stack for the samples in between. Page faults come in
// bursts, and the handler's own faults (its signal frame) would otherwise
// feed back into more signals and starve the thread.
volatile const __u64 sig_gap_ns = 100000;

// Threads younger than this get no stack signal. The agent's handler asks
// the JVM for the thread's JNIEnv (libjvm thread-local storage); on a
// thread the JVM has just created (G1 starts GC workers on demand, at the
// start of a pause) that access can race the thread's own TLS setup: one
// GC worker crashed with a null Thread::current() right after such a
// signal. Sampled, but not signalled, while young.
#define SIG_MIN_AGE_NS (200ULL * 1000 * 1000)

struct task_struct___djx {
	__u64 start_time; // CLOCK_MONOTONIC ns, as bpf_ktime_get_ns
} __attribute__((preserve_access_index));

// Wake the reader only once this much is pending; it also polls every few
// milliseconds. A wakeup per sample cost the loader more than the samples.
#define WAKEUP_BYTES (16 * 1024)

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);   // tid
	__type(value, __u64); // bpf_ktime_get_ns of the last stack signal
} sig_last SEC(".maps");

// Threads the agent found without a JNIEnv (GC workers, the VM thread):
// no Java stack to take, and a signal costs the thread ~60-100 us, on a
// GC worker mostly inside a pause (an attached AllocHeavy sent them 199 of
// 992 signals). Filled by the loader from the agent's stack records (host
// ids). Keyed by process too: a target's agent can then only name its own
// threads, whatever tids it reports.
struct thread_key {
	__u32 tgid;
	__u32 tid;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct thread_key);
	__type(value, __u8); // 1
} no_java SEC(".maps");

// tgids to sample. Filled by the loader.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct target);
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 23);
} samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HDR_MASKS);
	__type(key, struct hdr_key);
	__type(value, __u32);
} hdr_masks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

// The kernel's view of a perf_event program's context (CO-RE: only the
// fields used, relocated by name against the running kernel's BTF).
// Hardware address-sampling events fill data_src and weight in the
// perf_sample_data, which struct bpf_perf_event_data does not expose.
union perf_mem_data_src___djx {
	__u64 val;
} __attribute__((preserve_access_index));

union perf_sample_weight___djx {
	__u64 full;
} __attribute__((preserve_access_index));

struct perf_sample_data___djx {
	__u64 sample_flags;
	union perf_mem_data_src___djx data_src;
	union perf_sample_weight___djx weight;
} __attribute__((preserve_access_index));

struct bpf_perf_event_data_kern___djx {
	struct perf_sample_data___djx *data;
} __attribute__((preserve_access_index));

// Kernel 6.2+; only the on_sample_mem program calls it, and the loader
// loads that program only for hardware events.
extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

#define PERF_SAMPLE_WEIGHT_ (1U << 14)
#define PERF_SAMPLE_DATA_SRC_ (1U << 15)
#define PERF_SAMPLE_WEIGHT_STRUCT_ (1U << 24)

// Force emission of the types for bpf2go -type.
const struct sample *unused_sample __attribute__((unused));
const struct target *unused_target __attribute__((unused));
const enum counter *unused_counter __attribute__((unused));
const struct thread_key *unused_thread_key __attribute__((unused));
const struct hdr_key *unused_hdr_key __attribute__((unused));

#define READ(x) (*(volatile typeof(x) *)&(x))

// read_headers fills s->hdr for every register that points into the heap,
// directly or as a compressed oop. Objects are 8-byte aligned, which also
// skips most pointers into the middle of one. The bounds are loaded again
// for every slot: comparing two registers narrows both, so bounds carried
// in registers made every path a new verifier state (0.4 s to load).
static __always_inline void read_headers(struct sample *s, const struct target *t)
{
	__u16 ok = 0, narrow = 0;
	for (int i = 0; i < GPR_SLOTS; i++) {
		__u64 lo = READ(t->heap_lo), hi = READ(t->heap_hi), base = READ(t->oop_base);
		__u8 shift = READ(t->oop_shift) & 7;
		__u64 v = s->regs[i], a = 0;
		int n = 0;
		if (v >= lo && v < hi && (v & 7) == 0)
			a = v;
		else if (shift && v != 0 && v < (1ULL << 32)) {
			__u64 d = base + (v << shift);
			if (d >= lo && d < hi) {
				a = d;
				n = 1;
			}
		}
		// A slot outside the mask fill_headers left in hdr_ok takes the
		// no-object path. The mask is loaded again for every slot, as the
		// bounds: a mask kept in a register, narrowed by each test, made
		// every path a new verifier state.
		if (!(READ(s->hdr_ok) & (1U << i)))
			a = 0;
		if (!a || bpf_probe_read_user(s->hdr[i], 16, (void *)a) != 0) {
			s->hdr[i][0] = 0;
			s->hdr[i][1] = 0;
			continue;
		}
		ok |= 1 << i;
		if (n)
			narrow |= 1 << i;
	}
	s->hdr_ok = ok;
	s->hdr_narrow = narrow;
}

static __always_inline void count(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &slot);
	if (v)
		*v += 1;
}

// read_insns copies the 64 bytes before and the 16 at ip (before[] and
// at[] are adjacent): in one read when all lie on one page, as nearly
// always, else in two, since the bytes before ip may sit on an unmapped
// page even when the instruction at ip is readable, and vice versa; then
// the last 16 bytes before ip, on ip's page, are worth a third read. Each
// read is a helper call, dearer than the copy.
static __always_inline __u32 read_insns(struct sample *s, __u64 ip)
{
	__u32 flags = 0;
	if (((ip - BEFORE_BYTES) >> 12) == ((ip + INSN_BYTES - 1) >> 12) &&
	    bpf_probe_read_user(s->before, BEFORE_BYTES + INSN_BYTES, (void *)(ip - BEFORE_BYTES)) == 0)
		return SAMPLE_BEFORE_OK | SAMPLE_AT_OK;
	if (bpf_probe_read_user(s->before, BEFORE_BYTES, (void *)(ip - BEFORE_BYTES)) == 0) {
		flags |= SAMPLE_BEFORE_OK;
	} else {
		__builtin_memset(s->before, 0, BEFORE_BYTES - INSN_BYTES);
		if (bpf_probe_read_user(s->before + BEFORE_BYTES - INSN_BYTES, INSN_BYTES, (void *)(ip - INSN_BYTES)) == 0)
			flags |= SAMPLE_BEFORE_OK | SAMPLE_BEFORE_SHORT;
		else
			__builtin_memset(s->before + BEFORE_BYTES - INSN_BYTES, 0, INSN_BYTES);
	}
	if (bpf_probe_read_user(s->at, INSN_BYTES, (void *)ip) == 0)
		flags |= SAMPLE_AT_OK;
	else
		__builtin_memset(s->at, 0, INSN_BYTES);
	return flags;
}

// fill_headers reads the headers of the slots worth reading at this
// instruction (all but where hdr_masks knows better).
// Whether a mask applied is left in s->pad (SAMPLE_HDR_MASKED or 0) for
// sample_flags: in memory, it does not split the verifier's states.
static __always_inline void fill_headers(struct sample *s, const struct target *tg)
{
	s->pad = 0;
	if (!tg->heap_hi) {
		s->hdr_ok = 0;
		s->hdr_narrow = 0;
		__builtin_memset(s->hdr, 0, sizeof(s->hdr));
		return;
	}
	s->hdr_ok = (1U << GPR_SLOTS) - 1;
	struct hdr_key k = {.pid = s->pid, .pad = 0, .ip = s->regs[16]};
	__u32 *m = bpf_map_lookup_elem(&hdr_masks, &k);
	if (m) {
		s->hdr_ok = *m;
		s->pad = SAMPLE_HDR_MASKED;
	}
	read_headers(s, tg);
}

// sample_flags is the sample's flags: flags and fill_headers' mark.
static __always_inline __u32 sample_flags(struct sample *s, __u32 flags)
{
	__u32 f = flags | READ(s->pad);
	s->pad = 0;
	return f;
}

// read_mem copies a hardware sample's data source and weight, as far as
// sample_flags (6.1+) says the PMU driver filled them.
static __always_inline __u32 read_mem(struct bpf_perf_event_data *ctx, struct sample *s)
{
	struct bpf_perf_event_data_kern___djx *k = bpf_cast_to_kern_ctx(ctx);
	struct perf_sample_data___djx *d = BPF_CORE_READ(k, data);
	__u64 sf = BPF_CORE_READ(d, sample_flags);
	if (sf & PERF_SAMPLE_DATA_SRC_)
		s->data_src = BPF_CORE_READ(d, data_src.val);
	if (sf & (PERF_SAMPLE_WEIGHT_ | PERF_SAMPLE_WEIGHT_STRUCT_))
		s->weight = BPF_CORE_READ(d, weight.full);
	return SAMPLE_MEM_OK;
}

#ifdef DJX_UNWIND
// The unwinding variant's programs: the sample is built in a per-CPU
// scratch while the stack is walked over tail calls.
#include "hotspot_unwind_prog.h"
#else
// stack_signal says which signal asks the thread for its stack: none when
// one was sent a moment ago, the thread is young, or it runs no Java code
// (then *flags gets SAMPLE_NO_STACK).
static __always_inline __u8 stack_signal(const struct target *tg, __u32 tgid, __u32 tid, __u64 now, __u32 *flags)
{
	__u8 signo = tg->signo;
	if (!signo)
		return 0;
	__u64 *last = bpf_map_lookup_elem(&sig_last, &tid);
	struct task_struct___djx *task = (void *)bpf_get_current_task();
	__u64 born = BPF_CORE_READ(task, start_time);
	if ((last && now - *last < sig_gap_ns) || now - born < SIG_MIN_AGE_NS) {
		count(CNT_SIGNAL_SKIP);
		*flags |= SAMPLE_NO_STACK;
		return 0;
	}
	if (bpf_map_lookup_elem(&no_java, &(struct thread_key){.tgid = tgid, .tid = tid})) {
		count(CNT_SIGNAL_NOJAVA);
		*flags |= SAMPLE_NO_STACK;
		return 0;
	}
	return signo;
}

// send_stack_signal runs after the sample is in the ring: the handler runs
// when the thread returns to user mode, at the same ip, and stamps a later
// time.
static __always_inline void send_stack_signal(__u8 signo, __u32 tid, __u64 now)
{
	if (bpf_send_signal_thread(signo) == 0) {
		bpf_map_update_elem(&sig_last, &tid, &now, BPF_ANY);
		count(CNT_SIGNALED);
	} else {
		count(CNT_SIGNAL_FAIL);
	}
}

// sample fills and submits one sample; mem says whether to read the data
// source and weight from the kernel's sample data.
static __always_inline int sample(struct bpf_perf_event_data *ctx, int mem)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;

	struct target *tg = bpf_map_lookup_elem(&targets, &tgid);
	if (!tg)
		return 0;
	count(CNT_MATCHED);

	// exclude_kernel is set on the events, but a sample that still lands in
	// kernel mode carries kernel registers: useless for decoding.
	if ((ctx->regs.cs & 3) != 3) {
		count(CNT_KERNEL);
		return 0;
	}

	struct sample *s = bpf_ringbuf_reserve(&samples, sizeof(*s), 0);
	if (!s) {
		count(CNT_DROPPED);
		return 0;
	}
	__u64 now = bpf_ktime_get_ns();
	s->time = now;
	s->pid = tgid;
	s->tid = tid;
	s->addr = ctx->addr;
	s->period = ctx->sample_period;
	s->cpu = bpf_get_smp_processor_id();
	__builtin_memcpy(s->regs, &ctx->regs, sizeof(s->regs));
	fill_headers(s, tg);
	__u32 flags = read_insns(s, ctx->regs.rip);
	s->data_src = 0;
	s->weight = 0;
	if (mem)
		flags |= read_mem(ctx, s);
	__u8 signo = stack_signal(tg, tgid, tid, now, &flags);
	s->flags = sample_flags(s, flags);
	__u64 pending = bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA);
	bpf_ringbuf_submit(s, pending >= WAKEUP_BYTES ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	if (signo)
		send_stack_signal(signo, tid, now);
	return 0;
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, 0);
}

// For hardware address-sampling events (PEBS, IBS): also the data source
// and the load latency.
SEC("perf_event")
int on_sample_mem(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, 1);
}
#endif
