package join

import (
	"encoding/hex"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/hotspot/vmcode"
	"github.com/djx-bpf/djx-bpf/naming/bpfstack"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// A sample on register arithmetic two instructions after a heap load:
// the method, read whole from the code cache, shows that every path to ip
// ran the load, so the sample gets its address; the method is read once.
// Once the code at that address is no longer what the sample saw, it gets
// none.
func TestStraightFromTheCodeCache(t *testing.T) {
	// mov 0x10(%rbx),%r10; add $0x1,%r11d; mov %r10,%r8; add %r11d,%r8d (ip); ret
	code, _ := hex.DecodeString("4c8b53104183c3014d89d04501d8c3")
	const blob, obj = 0x7f00_0000_1000, 0x7_1000_0000
	mem := &fakeMem{start: blob, code: code}
	j := newJVM(1)
	j.codeMem = mem
	j.heap, j.heapKnown = heap.Info{GC: "G1", Ranges: []heap.Range{{Start: 0x7_0000_0000, End: 0x8_0000_0000}}}, true
	j.OnBatch(batch(10, hello(1)))
	j.UseBPFStacks(bpfstack.New(&cacheCode{blobs: []vmcode.Blob{{Start: blob - 0x100, End: blob + 0x100, CodeBegin: blob, CodeEnd: blob + uint64(len(code)),
		Kind: vmcode.KindNMethod, Method: 0x800, CompileID: 3}}}))
	mk := func(tm uint64) *sample.Sample {
		s := &sample.Sample{Time: tm, Flags: sample.FlagAtOK | sample.FlagBeforeOK}
		copy(s.Before[sample.BeforeBytes-0xb:], code[:0xb])
		copy(s.At[:], code[0xb:])
		s.Regs[16] = blob + 0xb // rip
		s.Regs[5] = obj         // rbx
		return s
	}
	j.OnSample(mk(20), sample.Decode)
	j.OnSample(mk(21), sample.Decode)
	if mem.reads != 1 {
		t.Errorf("%d reads of the method for two samples at one ip, want 1", mem.reads)
	}
	mem.code = append([]byte(nil), code...)
	mem.code[3] = 0x18 // mov 0x18(%rbx),%r10: not the code of the sample
	j.straightCode = straightCache{}
	j.OnSample(mk(22), sample.Decode)
	j.OnBatch(batch(100))
	j.Drain(true)
	st := j.stats
	if st.DecodedStraight != 2 || st.WithAddress != 2 || st.InHeap != 2 || st.UndecodedNoMemory != 1 {
		t.Fatalf("straight %d, with an address %d, in heap %d, no memory operand %d: want the first two samples at rbx+0x10, the third none",
			st.DecodedStraight, st.WithAddress, st.InHeap, st.UndecodedNoMemory)
	}
}
