package join

import (
	"github.com/djx-bpf/djx-bpf/naming/datatype"
	"github.com/djx-bpf/djx-bpf/sources/decode"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// Header masks. The sampling program reads the object header of every
// register that points into the heap, 2.5 a sample, and each read is the
// dearest part of its run in a guest without PCID. At one instruction the
// join uses the same registers every time: the decoded access's base and
// index, or the register that holds the start of an object being
// initialised. After hdrLearnAfter samples at an instruction all named
// that way, the session gives the program a mask of those registers' slots
// for it. A masked sample that then finds no object bans the instruction:
// its mask is dropped and every header is read there again.

const (
	// hdrLearnAfter: samples at an instruction before its mask is set.
	hdrLearnAfter = 2
	// maxHdrKeys bounds the instructions followed (the program's map holds
	// fewer: past it, instructions keep every header).
	maxHdrKeys = 1 << 16
)

// HeaderMask is a change to the sampling program's masks: set Mask at Key,
// or drop Key's mask.
type HeaderMask struct {
	Key  sample.HeaderKey
	Mask uint32
	Drop bool
}

type hdrState struct {
	seen   uint16
	mask   uint32
	set    bool // the mask was handed out
	banned bool // a sample here found no object: never masked
}

type hdrLearner struct {
	hdrKeys    map[sample.HeaderKey]*hdrState
	hdrUpdates []HeaderMask
}

// HeaderMasks returns the mask changes since the last call.
func (j *JVM) HeaderMasks() []HeaderMask {
	u := j.hdrUpdates
	j.hdrUpdates = nil
	return u
}

// learnHeaders follows sample s, whose used header slots were used; named
// says whether the join found its object, if it was in the heap (else
// true: it needed no header).
func (j *JVM) learnHeaders(s *sample.Sample, used uint32, named bool) {
	masked := s.Flags&sample.FlagHdrMasked != 0
	if masked {
		j.stats.HdrMasked++
	}
	k := sample.KeyOf(s)
	st := j.hdrKeys[k]
	if st == nil {
		if len(j.hdrKeys) >= maxHdrKeys {
			return
		}
		if j.hdrKeys == nil {
			j.hdrKeys = make(map[sample.HeaderKey]*hdrState)
		}
		st = &hdrState{}
		j.hdrKeys[k] = st
	}
	if st.banned {
		return
	}
	if !named {
		st.banned = true
		if st.set {
			j.hdrUpdates = append(j.hdrUpdates, HeaderMask{Key: k, Drop: true})
			j.stats.HdrMaskDropped++
		}
		return
	}
	if masked {
		return
	}
	grew := used&^st.mask != 0
	st.mask |= used
	st.seen = min(st.seen+1, hdrLearnAfter)
	if st.seen >= hdrLearnAfter && (!st.set || grew) {
		st.set = true
		j.hdrUpdates = append(j.hdrUpdates, HeaderMask{Key: k, Mask: st.mask})
	}
}

// usedSlots are the header slots the join reads for a decoded access: its
// base and index registers, and the register holding obj when the object
// was found by enclosing (another register than the base).
func (j *JVM) usedSlots(res *decode.Result, obj uint64, enclosing bool) uint32 {
	var m uint32
	for _, r := range [2]int8{res.Base, res.Index} {
		if sl := datatype.Slot(r); sl >= 0 {
			m |= 1 << sl
		}
	}
	if !enclosing {
		return m
	}
	for r := int8(0); r < 16; r++ {
		v := j.regs.GPR[r]
		narrow := (j.geo.OopShift > 0 || j.geo.OopBase != 0) && v != 0 && v < 1<<32
		if v == obj || narrow && j.geo.OopBase+v<<j.geo.OopShift == obj {
			if sl := datatype.Slot(r); sl >= 0 {
				m |= 1 << sl
			}
		}
	}
	return m
}
