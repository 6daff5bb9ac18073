// The unwinding variant's programs (sample.bpf.c with -DDJX_UNWIND). The
// entry program fills the sample as the default one does, but in a
// per-CPU scratch, and tail-calls uw_step, which walks UNWIND_STEP_FRAMES
// frames per run (hotspot_unwind.h) and tail-calls itself until the walk
// ends. A ring buffer reservation cannot be held across a tail call, so
// the last run copies the record out with bpf_ringbuf_output: the sample,
// then only the frames walked (a record of variable length). This variant
// sends no stack signal.

#ifndef DJX_HOTSPOT_UNWIND_PROG_H
#define DJX_HOTSPOT_UNWIND_PROG_H

// The record being built and the walk's state. perf_event programs do not
// nest on a CPU (bpf_prog_active), so one slot per CPU is enough.
struct uw_scratch {
	struct sample s;
	struct uw_state st;
	// The process's code cache, copied once per sample: the step
	// program's runs then need no hash lookup.
	struct unwind_target ut;
	struct uw_cache_entry cache[UW_CACHE_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct uw_scratch);
} uw_scratch SEC(".maps");

// Slot 0: uw_step, put there by the loader.
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} uw_progs SEC(".maps");

// The JVM's own threads (its compilers, GC workers, the VM thread), which
// run no Java code: their samples skip the walk, which would only climb
// their native frames to a stop. User space marks a thread with 1 (by its
// name, after a walk of it found no Java frames); the thread's next
// sample puts its start time there, so that a later thread reusing the
// tid does not match and is walked again, its entry dropped.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct thread_key);
	__type(value, __u64); // 1, then the thread's start time (CLOCK_MONOTONIC ns)
} vm_threads SEC(".maps");

// uw_vm_thread says whether the sampled thread is one of its JVM's own.
static __always_inline int uw_vm_thread(__u32 tgid, __u32 tid)
{
	struct thread_key k = {.tgid = tgid, .tid = tid};
	__u64 *v = bpf_map_lookup_elem(&vm_threads, &k);
	if (!v)
		return 0;
	struct task_struct___djx *task = (void *)bpf_get_current_task();
	__u64 born = BPF_CORE_READ(task, start_time);
	if (*v == 1)
		*v = born;
	else if (*v != born) {
		bpf_map_delete_elem(&vm_threads, &k);
		return 0;
	}
	return 1;
}

#define UW_RECORD_HEAD __builtin_offsetof(struct sample, frames)

// uw_emit copies the sample and its n frames into the ring buffer.
static __always_inline void uw_emit(struct uw_scratch *w, int end)
{
	__u32 n = w->st.n;
	if (n > UNWIND_FRAMES)
		n = UNWIND_FRAMES;
	w->s.nframes = n;
	w->s.uw_end = end;
	__u64 size = UW_RECORD_HEAD + (__u64)n * sizeof(struct unwind_frame);
	__u64 pending = bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) + size;
	if (bpf_ringbuf_output(&samples, &w->s, size, pending >= WAKEUP_BYTES ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP) != 0)
		count(CNT_DROPPED);
}

// uw_after_return_poll says whether ip is the `ja` after an epilogue's
// return poll `cmp disp(%r15),%rsp` (disp32: 49 3b a7, disp8: 49 3b 67),
// where the frame is already torn down.
static __always_inline int uw_after_return_poll(const struct sample *s, __u32 flags)
{
	if (!(flags & SAMPLE_AT_OK) || !(flags & SAMPLE_BEFORE_OK))
		return 0;
	if (!(s->at[0] == 0x77 || (s->at[0] == 0x0f && s->at[1] == 0x87)))
		return 0;
	const __u8 *b = s->before + BEFORE_BYTES - 16; // b[15] is the byte before ip
	return (b[9] == 0x49 && b[10] == 0x3b && b[11] == 0xa7) || (b[12] == 0x49 && b[13] == 0x3b && b[14] == 0x67);
}

// sample_unwind fills one sample and starts its walk; mem as sample's in
// the default program. The sample's time is taken here, a few
// microseconds before the record reaches the ring: the reader's
// completeness margin (milliseconds) covers that.
static __always_inline int sample_unwind(struct bpf_perf_event_data *ctx, int mem)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;

	struct target *tg = bpf_map_lookup_elem(&targets, &tgid);
	if (!tg)
		return 0;
	count(CNT_MATCHED);
	if ((ctx->regs.cs & 3) != 3) {
		count(CNT_KERNEL);
		return 0;
	}
	__u32 zero = 0;
	struct uw_scratch *w = bpf_map_lookup_elem(&uw_scratch, &zero);
	if (!w)
		return 0;
	struct sample *s = &w->s;
	s->time = bpf_ktime_get_ns();
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
	s->flags = sample_flags(s, flags);
	s->uw_pad = 0;

	struct uw_state *st = &w->st;
	st->n = 0;
	st->java = 0;
	if (uw_vm_thread(tgid, tid)) {
		uw_emit(w, UW_END_NO_JAVA);
		return 0;
	}
	const struct unwind_target *ut = bpf_map_lookup_elem(&unwind_targets, &tgid);
	if (ut) {
		__builtin_memcpy(&w->ut, ut, sizeof(w->ut));
		st->pc = s->regs[16];
		st->sp = s->regs[19];
		st->fp = s->regs[4];
		st->tick = (__u32)(s->time >> UW_TICK_SHIFT);
		// A top frame in its prologue is told by the instruction at ip.
		st->insn = (flags & SAMPLE_AT_OK) ? s->at[0] | s->at[1] << 8 | s->at[2] << 16 : 0;
		if (uw_after_return_poll(s, flags))
			st->insn = 0xc3; // the frame is torn down as at the `ret`
		st->tgid = tgid;
		st->chunk_end = 0;
		st->enter_blob = 0;
		st->barrier = 0;
		// A hot word of libjvm: one read, for any stack.
		if (w->ut.enter_special)
			bpf_probe_read_user(&st->enter_blob, 8, (void *)w->ut.enter_special);
		bpf_tail_call(ctx, &uw_progs, 0);
	}
	// No code cache known, or uw_step is not in uw_progs.
	uw_emit(w, UW_END_NO_INFO);
	return 0;
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	return sample_unwind(ctx, 0);
}

SEC("perf_event")
int on_sample_mem(struct bpf_perf_event_data *ctx)
{
	return sample_unwind(ctx, 1);
}

// uw_step walks the next frames of the sample in the scratch. A tail call
// that fails is the kernel's chain limit: the walk is cut (depth).
SEC("perf_event")
int uw_step(struct bpf_perf_event_data *ctx)
{
	__u32 zero = 0;
	struct uw_scratch *w = bpf_map_lookup_elem(&uw_scratch, &zero);
	if (!w)
		return 0;
	int end = -1;
	if (w->st.barrier) {
		// The last run stopped at the return barrier: on in the chunk.
		w->st.barrier = 0;
		if (uw_chunk(&w->ut, &w->st) != UW_CHUNK_ENTERED)
			end = UW_END_CHUNK;
	}
	if (end < 0)
		end = uw_walk(&w->ut, &w->st, w->s.frames, w->cache);
	if (end == UW_AT_BARRIER) {
		w->st.barrier = 1;
		end = -1;
	}
	if (end < 0) {
		bpf_tail_call(ctx, &uw_progs, 0);
		end = UW_END_DEPTH;
	}
	// A walk that found no Java frame has no stack to give, whatever
	// stopped it.
	if (!w->st.java)
		end = UW_END_NO_JAVA;
	uw_emit(w, end);
	return 0;
}

#endif
