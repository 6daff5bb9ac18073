package join

import (
	"encoding/hex"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// fakeMem is a JVM's memory holding one code blob.
type fakeMem struct {
	start uint64
	code  []byte
	reads int
}

func (m *fakeMem) ReadAt(b []byte, off int64) (int, error) {
	m.reads++
	i := uint64(off) - m.start
	return copy(b, m.code[i:]), nil
}

// Samples in a java.lang.Long that C2's code is initialising: its header
// is not yet written, or the access goes through a register past it. Each
// is named java.lang.Long by the code's klass store or by the register
// holding the object's start, and counted apart.
func TestTypesOfObjectsBeingInitialised(t *testing.T) {
	// C2 on JDK 17 (AVX-512 host): movq $1,(%rax); movq %rax,%r10;
	// addq $16,%r10; movl $0x44f28,8(%rax); movl %r12d,12(%rax);
	// vpxor; vmovq %xmm0,(%r10); ret.
	code, _ := hex.DecodeString("48c700010000004c8bd04983c210c74008284f04004489600cc5fdefc0c4c179d602" + "c3909090909090909090909090909090")
	const blob, obj = 0x7f00_0000_1000, 0x7_1000_0000
	mem := &fakeMem{start: blob, code: code}
	j := newJVM(1)
	j.codeMem = mem
	j.heap, j.heapKnown = heap.Info{Ranges: []heap.Range{{Start: 0x7_0000_0000, End: 0x8_0000_0000}}}, true
	j.OnBatch(batch(10, hello(1), &agentwire.TypesInfo{OK: true, Fields: true, OopBytes: 4, OopShift: 3, KlassBytes: 4},
		&agentwire.Class{Klass: 0x8_0004_4f28, Narrow: 0x44f28, Sig: "Ljava/lang/Long;", Fields: []agentwire.Field{{Offset: 16, Name: "value", Sig: "J"}}},
		&agentwire.Code{Time: 2, Method: 1, Start: blob, Size: uint32(len(code))}))
	at := func(off int) *sample.Sample {
		s := &sample.Sample{Time: 20, Flags: sample.FlagAtOK}
		copy(s.At[:], code[off:])
		s.Regs[16] = blob + uint64(off)
		s.Regs[10] = obj // rax
		// The sampling program read rax's header: mark and klass not yet
		// written (fresh TLAB memory is zero) before offset 21.
		s.HdrOK = 1 << 10
		return s
	}
	// At the mark store: the klass store ends 21 bytes on, past the
	// sample's 16, so it is read from the JVM's memory.
	s1 := at(0)
	j.OnSample(s1, sample.Decode)
	// At the klass store itself: the sample's own bytes name it.
	s2 := at(14)
	s2.Hdr[10] = [2]uint64{1, 0}
	j.OnSample(s2, sample.Decode)
	// Zeroing the body through r10 = rax+16: r10's "header" is the body's
	// garbage, rax's is written.
	s3 := at(29)
	s3.Regs[7] = obj + 16 // r10: pt_regs slot 7
	s3.HdrOK = 1<<10 | 1<<7
	s3.Hdr[10] = [2]uint64{1, 0x44f28}
	j.OnSample(s3, sample.Decode)
	j.OnBatch(batch(100))
	j.Drain(true)
	st := j.stats
	if st.InHeap != 3 || st.TypeUnknown != 0 || st.TypedByAllocation != 2 || st.TypedByEnclosing != 1 {
		t.Fatalf("in heap %d, unknown %d, by allocation %d, by enclosing %d", st.InHeap, st.TypeUnknown, st.TypedByAllocation, st.TypedByEnclosing)
	}
	got := map[string]uint64{}
	for _, d := range j.DataTypes() {
		got[d.Type+"."+d.Field] = d.Samples
	}
	if got["java.lang.Long.[header]"] != 2 || got["java.lang.Long.value"] != 1 {
		t.Errorf("data types %v", got)
	}
	if mem.reads != 1 {
		t.Errorf("%d reads of the JVM's code, want 1 (the mark store's pc)", mem.reads)
	}
	// Code replaced since the sample: the JVM's bytes differ from those
	// the sample saw, and are not read into a type.
	mem.code = append([]byte(nil), code...)
	mem.code[3] = 0x90
	j.allocCache = nil
	s4 := at(0)
	s4.Time = 200
	j.OnSample(s4, sample.Decode)
	j.OnBatch(batch(300))
	j.Drain(true)
	if j.stats.TypedByAllocation != 2 || j.stats.TypeUnknown != 1 {
		t.Errorf("by allocation %d, unknown %d: changed code was read into a type", j.stats.TypedByAllocation, j.stats.TypeUnknown)
	}
}

// On a busy host the CODE record of freshly compiled code reaches the
// join after the code's first samples. Such a sample is named when it is
// judged, once the records up to its time are in; nothing is remembered
// from the scan that found no code.
func TestTypesBeforeTheirCodeRecord(t *testing.T) {
	code, _ := hex.DecodeString("48c700010000004c8bd04983c210c74008284f04004489600cc5fdefc0c4c179d602" + "c3909090909090909090909090909090")
	const blob, obj = 0x7f00_0000_1000, 0x7_1000_0000
	j := newJVM(1)
	j.codeMem = &fakeMem{start: blob, code: code}
	j.heap, j.heapKnown = heap.Info{Ranges: []heap.Range{{Start: 0x7_0000_0000, End: 0x8_0000_0000}}}, true
	j.OnBatch(batch(10, hello(1), &agentwire.TypesInfo{OK: true, Fields: true, OopBytes: 4, OopShift: 3, KlassBytes: 4},
		&agentwire.Class{Klass: 0x8_0004_4f28, Narrow: 0x44f28, Sig: "Ljava/lang/Long;", Fields: []agentwire.Field{{Offset: 16, Name: "value", Sig: "J"}}}))
	for i := range 3 {
		s := &sample.Sample{Time: 20 + uint64(i), Flags: sample.FlagAtOK, HdrOK: 1 << 10}
		copy(s.At[:], code)
		s.Regs[16], s.Regs[10] = blob, obj
		j.OnSample(s, sample.Decode)
	}
	j.OnBatch(batch(100, &agentwire.Code{Time: 15, Method: 1, Start: blob, Size: uint32(len(code))}))
	j.Drain(true)
	if st := j.stats; st.TypedByAllocation != 3 || st.TypeUnknown != 0 {
		t.Fatalf("by allocation %d, unknown %d: samples before their CODE record not named", st.TypedByAllocation, st.TypeUnknown)
	}
}
