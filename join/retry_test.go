package join

import (
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// libc's memset zeroing a large array outside the TLAB (rep stosb, rdi the
// destination) before the agent records the allocation: judged again after
// the grace, the store is the new array's. A load there, or a store from
// JIT code, is judged once.
func TestVMStoreBeforeAllocRecord(t *testing.T) {
	const ms = 1_000_000
	const jit, arr = 0x7f00_0000_1000, 0x7_2000_0000
	j := newJVM(1)
	j.heap, j.heapKnown = heap.Info{Ranges: []heap.Range{{Start: 0x7_0000_0000, End: 0x8_0000_0000}}}, true
	j.OnBatch(batch(1*ms, hello(1), &agentwire.Code{Time: 1, Method: 1, Start: jit, Size: 0x100}))
	at := func(tm, ip, rdi uint64, code ...byte) *sample.Sample {
		s := &sample.Sample{Time: tm, Flags: sample.FlagAtOK}
		copy(s.At[:], code)
		s.Regs[16], s.Regs[14] = ip, rdi // rip; rdi is pt_regs slot 14
		return s
	}
	stosb := []byte{0xf3, 0xaa}
	loadRdi := []byte{0x48, 0x8b, 0x07}                                        // mov (%rdi),%rax
	j.OnSample(at(2*ms, 0x7fff_0000_0000, arr+0x800, stosb...), sample.Decode) // libc: retried
	j.OnSample(at(2*ms+1, 0x7fff_0000_0100, arr+0x900, loadRdi...), sample.Decode)
	j.OnSample(at(2*ms+2, jit+0x10, arr+0xa00, stosb...), sample.Decode)
	j.OnBatch(batch(100*ms, alloc(3*ms, arr, 1<<20, "[J", agentwire.Frame{Method: 1})))
	j.Drain(true)
	st := j.stats
	if st.InHeap != 3 || st.Rejudged != 1 || st.Attributed != 1 {
		t.Fatalf("in heap %d, rejudged %d, attributed %d; want 3, 1, 1", st.InHeap, st.Rejudged, st.Attributed)
	}
	var untracked uint64
	for _, a := range j.remainder {
		untracked += a.samples
	}
	if untracked != 2 {
		t.Errorf("%d samples in the remainder, want the load and the JIT store", untracked)
	}
}
