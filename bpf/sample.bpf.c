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

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define INSN_BYTES 16

// Sample flags.
#define SAMPLE_BEFORE_OK 1 // before[] holds the 16 bytes ending at ip
#define SAMPLE_AT_OK 2     // at[] holds the 16 bytes starting at ip

struct sample {
	__u64 time; // bpf_ktime_get_ns: CLOCK_MONOTONIC, the agent's clock too
	__u32 pid;  // tgid, host pid namespace
	__u32 tid;
	__u64 addr;   // ctx->addr: the data address for page faults / PEBS / IBS / SPE
	__u64 period; // ctx->sample_period
	__u64 regs[21]; // user struct pt_regs, kernel layout
	__u8 before[INSN_BYTES];
	__u8 at[INSN_BYTES];
	__u32 flags;
	__u32 cpu;
};

// Counter slots; keep in sync with loader.Counters.
enum {
	CNT_MATCHED = 0, // sample of a profiled process
	CNT_DROPPED = 1, // ring buffer full
	CNT_KERNEL = 2,  // sample taken in kernel mode (no user registers)
	CNT_SIGNALED = 3,   // stack signal queued to the sampled thread
	CNT_SIGNAL_FAIL = 4, // ... refused (-EBUSY: one still pending on this CPU)
	CNT_MAX = 8,
};

// tgids to sample. The value is the signal that asks the sampled thread for
// its Java stack (the agent's handler is installed on it), 0 for none.
// Filled by the loader.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 23);
} samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

// Force emission of the type for bpf2go -type.
const struct sample *unused_sample __attribute__((unused));

static __always_inline void count(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &slot);
	if (v)
		*v += 1;
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;

	__u8 *sig = bpf_map_lookup_elem(&targets, &tgid);
	if (!sig)
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
	s->time = bpf_ktime_get_ns();
	s->pid = tgid;
	s->tid = (__u32)id;
	s->addr = ctx->addr;
	s->period = ctx->sample_period;
	s->cpu = bpf_get_smp_processor_id();
	__builtin_memcpy(s->regs, &ctx->regs, sizeof(s->regs));

	__u64 ip = ctx->regs.rip;
	__u32 flags = 0;
	// Two reads: the bytes before ip may sit on an unmapped page even when
	// the instruction at ip is readable, and vice versa.
	if (bpf_probe_read_user(s->before, INSN_BYTES, (void *)(ip - INSN_BYTES)) == 0)
		flags |= SAMPLE_BEFORE_OK;
	else
		__builtin_memset(s->before, 0, INSN_BYTES);
	if (bpf_probe_read_user(s->at, INSN_BYTES, (void *)ip) == 0)
		flags |= SAMPLE_AT_OK;
	else
		__builtin_memset(s->at, 0, INSN_BYTES);
	s->flags = flags;
	bpf_ringbuf_submit(s, 0);

	// After the sample is in the ring: the handler runs when the thread
	// returns to user mode, at the same ip, and stamps a later time.
	__u8 signo = *sig;
	if (signo) {
		if (bpf_send_signal_thread(signo) == 0)
			count(CNT_SIGNALED);
		else
			count(CNT_SIGNAL_FAIL);
	}
	return 0;
}
