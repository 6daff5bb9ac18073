package join

import (
	"testing"

	"github.com/djx-bpf/djx-bpf/sources/decode"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// TestHeaderMasksLearned: an instruction gets the mask of the slots the
// join used after hdrLearnAfter named samples, a wider use widens it, and
// a masked sample that names nothing drops it for good.
func TestHeaderMasksLearned(t *testing.T) {
	j := newJVM(1)
	at := func(ip uint64, flags uint32) *sample.Sample {
		s := &sample.Sample{PID: 1, Flags: sample.FlagAtOK | flags}
		s.Regs[16] = ip
		s.At = [16]byte{0x8b, 0x43, 0x0c} // mov 0xc(%rbx),%eax
		return s
	}
	key := sample.KeyOf(at(0x1000, 0))
	rbx := uint32(1 << 5) // pt_regs slot of rbx
	j.learnHeaders(at(0x1000, 0), rbx, true)
	if u := j.HeaderMasks(); len(u) != 0 {
		t.Fatalf("mask %+v after one sample, want none before %d", u, hdrLearnAfter)
	}
	for range hdrLearnAfter - 1 {
		j.learnHeaders(at(0x1000, 0), rbx, true)
	}
	if u := j.HeaderMasks(); len(u) != 1 || u[0] != (HeaderMask{Key: key, Mask: rbx}) {
		t.Fatalf("masks %+v, want rbx's slot at %+v", u, key)
	}
	j.learnHeaders(at(0x1000, 0), rbx|1<<3, true) // in flight before the mask: r12 too
	if u := j.HeaderMasks(); len(u) != 1 || u[0].Mask != rbx|1<<3 || u[0].Drop {
		t.Fatalf("masks %+v, want the mask widened to rbx and r12", u)
	}
	j.learnHeaders(at(0x1000, sample.FlagHdrMasked), rbx, true)
	j.learnHeaders(at(0x1000, sample.FlagHdrMasked), rbx, false)
	if u := j.HeaderMasks(); len(u) != 1 || !u[0].Drop || u[0].Key != key {
		t.Fatalf("masks %+v, want the mask dropped after a masked sample named nothing", u)
	}
	if j.stats.HdrMasked != 2 || j.stats.HdrMaskDropped != 1 {
		t.Errorf("stats masked %d dropped %d, want 2 and 1", j.stats.HdrMasked, j.stats.HdrMaskDropped)
	}
	for range 2 * hdrLearnAfter {
		j.learnHeaders(at(0x1000, 0), rbx, true)
	}
	if u := j.HeaderMasks(); len(u) != 0 {
		t.Fatalf("masks %+v for a banned instruction", u)
	}
	// Another instruction learns on its own.
	for range hdrLearnAfter {
		j.learnHeaders(at(0x1008, 0), rbx, true)
	}
	if u := j.HeaderMasks(); len(u) != 1 || u[0].Key.IP != 0x1008 {
		t.Fatalf("masks %+v, want one at 0x1008", u)
	}
}

// TestUsedSlots: the base and index registers' slots, and the register
// holding an enclosing object's start, directly or as a compressed oop.
func TestUsedSlots(t *testing.T) {
	j := newJVM(1)
	j.geo.OopShift = 3
	j.regs.GPR[1] = 0x7000 >> 3             // rcx: a compressed oop of the object at 0x7000
	res := decode.Result{Base: 3, Index: 6} // rbx, rsi
	if m := j.usedSlots(&res, 0, false); m != 1<<5|1<<13 {
		t.Errorf("base and index slots %#x, want rbx (5) and rsi (13)", m)
	}
	if m := j.usedSlots(&res, 0x7000, true); m != 1<<5|1<<13|1<<11 {
		t.Errorf("slots %#x with the enclosing object in rcx, want rcx (11) added", m)
	}
	res = decode.Result{Base: 4, Index: decode.NoReg} // rsp: no header
	if m := j.usedSlots(&res, 0, false); m != 0 {
		t.Errorf("slots %#x for an rsp-based access, want none", m)
	}
}
