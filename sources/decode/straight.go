package decode

import "sort"

// maxStraight bounds how many instructions Straight looks back.
const maxStraight = 12

// Code is one compiled method's instructions, decoded from its first byte:
// where each starts, and which its direct branches target. Only a whole
// method tells whether ip can be reached other than through the code just
// before it.
type Code struct {
	Start uint64
	Bytes []byte
	insn  []int32 // instruction starts, ascending
	// target marks the offsets a direct branch of the method jumps to.
	target map[int32]bool
	// ok: every byte decoded, and no indirect jump (a jump table's
	// targets are not in the code).
	ok bool
}

// NewCode decodes code, the instructions of one compiled method at start.
func NewCode(start uint64, code []byte) *Code {
	c := &Code{Start: start, Bytes: code, target: map[int32]bool{}}
	var x insn
	for off := 0; off < len(code); off += x.n {
		if !x.decode(code[off:]) {
			return c
		}
		c.insn = append(c.insn, int32(off))
		if x.enc != encLegacy {
			continue
		}
		next := off + x.n
		var rel int64
		switch {
		case x.mapSel == map1 && (x.op >= 0x70 && x.op <= 0x7f || x.op == 0xeb || x.op >= 0xe0 && x.op <= 0xe3):
			rel = int64(int8(code[next-1]))
		case x.mapSel == map1 && x.op == 0xe9, x.mapSel == map0F && x.op >= 0x80 && x.op <= 0x8f:
			rel = int64(int32(le(code[next-4 : next])))
		case x.mapSel == map1 && x.op == 0xff && (x.regOp == 4 || x.regOp == 5):
			return c // an indirect jump
		default:
			continue
		}
		if t := int64(next) + rel; t >= 0 && t < int64(len(code)) {
			c.target[int32(t)] = true
		}
	}
	c.ok = true
	return c
}

// Holds says whether the method's bytes at ip-len(before) .. ip+len(at)
// are before and at, as far as the method goes: the sample was taken in
// this code.
func (c *Code) Holds(ip uint64, before, at []byte) bool {
	if ip < c.Start || ip >= c.Start+uint64(len(c.Bytes)) {
		return false
	}
	off := int(ip - c.Start)
	b := before[max(0, len(before)-off):]
	if string(c.Bytes[off-len(b):off]) != string(b) {
		return false
	}
	a := at[:min(len(at), len(c.Bytes)-off)]
	return string(c.Bytes[off:off+len(a)]) == string(a)
}

// Straight is the address of the last load before ip in straight-line
// code: no instruction from just after the load through ip is the target
// of a branch of the method, none between them transfers control or is
// another memory access, and none between them (nor the load) writes the
// load's address registers. Then every path to ip ran that load with the
// registers ip has. None if the method is not fully known (Code.ok).
func (c *Code) Straight(r *Regs) Result {
	if !c.ok || r.IP < c.Start {
		return Result{}
	}
	off := int32(r.IP - c.Start)
	k := sort.Search(len(c.insn), func(i int) bool { return c.insn[i] >= off })
	if k == len(c.insn) || c.insn[k] != off {
		return Result{}
	}
	var written uint64
	var x insn
	for j := k - 1; j >= 0 && j >= k-maxStraight; j-- {
		if c.target[c.insn[j+1]] {
			return Result{}
		}
		x.decode(c.Bytes[c.insn[j]:])
		if branches(&x) {
			return Result{}
		}
		if x.access() {
			dst, ok := x.loadDest()
			regs := x.addrRegs()
			if !ok || x.vsib || x.str || regs&(written|dst) != 0 {
				return Result{}
			}
			next := c.Start + uint64(c.insn[j]) + uint64(x.n)
			a, ok := x.ea(r, next)
			if !ok {
				return Result{}
			}
			return x.result(a, Straight, false)
		}
		for g := uint8(0); g < 16; g++ {
			if mayWrite(&x, g) {
				written |= gprBit(g)
			}
		}
	}
	return Result{}
}
