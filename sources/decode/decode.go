// Package decode computes the data address a sampled x86-64 thread was
// accessing from its user registers and the instruction bytes around the
// interrupted ip. It backs the PMU-less `decode` sample source: a cpu-clock
// timer interrupt lands on an instruction boundary, so the ip is either a
// memory access itself or, more often for latency-bound code, the consumer
// of a load that has just retired.
package decode

// Regs are the user registers of the sampled thread, in x86-64 encoding order.
type Regs struct {
	GPR [16]uint64 // rax rcx rdx rbx rsp rbp rsi rdi r8..r15 (x86 encoding numbering)
	IP  uint64
}

// RegsFromPtRegs maps the kernel's x86-64 struct pt_regs (r15 r14 r13 r12 rbp
// rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss) into
// Regs.
func RegsFromPtRegs(p *[21]uint64) Regs {
	return Regs{
		GPR: [16]uint64{
			p[10], p[11], p[12], p[5], // rax rcx rdx rbx
			p[19], p[4], p[13], p[14], // rsp rbp rsi rdi
			p[9], p[8], p[7], p[6], // r8 r9 r10 r11
			p[3], p[2], p[1], p[0], // r12 r13 r14 r15
		},
		IP: p[16],
	}
}

// Method says how an address was obtained.
type Method uint8

const (
	// None: no address (no memory operand, unknown encoding, fs/gs
	// segment, gather/scatter, or an ambiguous look-back).
	None Method = iota
	// AtIP: the instruction at ip accesses memory.
	AtIP
	// LookBack: the instruction ending at ip is a load whose result the
	// instruction at ip consumes; its address was rebuilt.
	LookBack
	// Base: the instruction ending at ip is a load whose result the
	// instruction at ip consumes, but the load overwrote its own index
	// register (C2's `mov (%rdi,%r10,1),%r10; bswap %r10` in
	// DirectByteBuffer.getLong). Addr is base+disp: the start of what the
	// access indexes into (an array's elements, a buffer's memory), not the
	// byte it read. Good for naming the owner, not for offsets or lines.
	Base
	// Straight: no access at ip nor a load ending there, but the last
	// load before ip in the method's straight-line code (Code.Straight),
	// its address registers unwritten since.
	Straight
)

func (m Method) String() string {
	switch m {
	case AtIP:
		return "at-ip"
	case LookBack:
		return "look-back"
	case Base:
		return "base"
	case Straight:
		return "straight"
	}
	return "none"
}

// Result is the decoded access.
type Result struct {
	Addr   uint64
	Method Method
	Size   int  // access size in bytes if known, else 0
	Store  bool // best effort
	// The memory operand, Addr = Base + Index*Scale + Disp: register
	// numbers as in Regs.GPR, NoReg for none, RIP for rip-relative.
	Base, Index int8
	Scale       uint8
	Disp        int64
}

// Register numbers of Result.Base and Result.Index besides Regs.GPR's.
const (
	NoReg = regNone
	RIP   = regRIP
)

// maxBefore is the look-back window: the bytes the sampling program reads
// before ip (sample.BeforeBytes).
const maxBefore = 64

// shortBefore is the window samples had until they held maxBefore bytes,
// and still have when only ip's page was readable: x86 instructions are at
// most 15 bytes.
const shortBefore = 16

// consensusStarts is how many of a long window's first start offsets must
// agree on the boundary (see boundary).
const consensusStarts = 8

// Decoder is reusable and not safe for concurrent use: it holds scratch
// state so that Decode does not allocate.
type Decoder struct {
	at   insn
	cand [maxBefore]insn
	end  [maxBefore]int8
	path [maxBefore]int8
}

// endUnknown marks an offset whose forward decoding has not been followed.
const endUnknown = -2

// Decode returns the effective address of the memory access at or just
// before r.IP. before holds the bytes ending at ip (up to 64 are used), at the
// bytes starting at ip; either may be empty if it was unreadable.
//
// Precedence follows where timer samples land on this kind of machine: just
// after the instruction that stalled. A load ending at ip whose result the
// instruction at ip consumes is the stall (C2 spills the sum of an array
// loop: `add 0x10(%r8,%r11,8),%r10` then `mov %r10,0x48(%rsp)` at ip, where
// taking the store's stack address put 90% of samples outside the heap).
// Otherwise an access at ip wins, and failing that a load ending at ip.
func (d *Decoder) Decode(before, at []byte, r *Regs) Result {
	x := &d.at
	if !x.decode(at) {
		return Result{}
	}
	lb, consumed, lbOK := d.lookBack(before, r, x.reads())
	if lbOK && consumed && lb.Method == LookBack {
		return lb
	}
	if x.access() {
		// The access at ip wins even when we cannot compute it: the stalled
		// instruction may be this one, so looking back would be a guess.
		a, ok := x.ea(r, r.IP+uint64(x.n))
		if !ok {
			return Result{}
		}
		return x.result(a, AtIP, x.store())
	}
	if lbOK && (lb.Method == LookBack || consumed) {
		return lb
	}
	return Result{}
}

// lookBack rebuilds the address of the load that ends exactly at ip, and says
// whether the instruction at ip (which reads the registers in reads)
// consumes its result.
func (d *Decoder) lookBack(before []byte, r *Regs, reads uint64) (Result, bool, bool) {
	s, ok := d.boundary(before)
	if !ok {
		return Result{}, false, false
	}
	if res, consumed, ok := d.candidate(&d.cand[s], r, reads); ok {
		return res, consumed, ok
	}
	return d.constBase(before, s, r, reads)
}

// constBase rebuilds the address of the load at before[s:], which
// overwrote its base register, when the instruction just before it put a
// constant in that register: C2 addresses a static final array as
// `movabs $array,%r9; mov 0x10(%r9,%r10,4),%r9d` (StandardTokenizerImpl's
// tables). The constant is the base the load used, as the load's own
// operands are when the loads ending at ip are rebuilt.
func (d *Decoder) constBase(before []byte, s int, r *Regs, reads uint64) (Result, bool, bool) {
	c := d.cand[s]
	dst, ok := c.loadDest()
	if !ok || c.base < 0 || c.base >= 16 || c.base == 4 || dst&gprBit(uint8(c.base)) == 0 ||
		c.index >= 0 && dst&gprBit(uint8(c.index)) != 0 ||
		c.vsib || c.str || !c.dispOK || c.addr32 || c.seg == 0x64 || c.seg == 0x65 {
		return Result{}, false, false
	}
	p, ok := d.boundary(before[:s])
	if !ok {
		return Result{}, false, false
	}
	m := &d.cand[p]
	if m.enc != encLegacy || m.mapSel != map1 || m.op < 0xb8 || m.op > 0xbf || m.has66 || m.rm != uint8(c.base) {
		return Result{}, false, false
	}
	imm := before[p : p+m.n]
	var base uint64
	if m.w {
		base = le(imm[len(imm)-8:]) // movabs $imm64
	} else {
		base = le(imm[len(imm)-4:]) // mov $imm32, zero-extended
	}
	a := base + uint64(c.disp)
	if c.index >= 0 {
		a += r.GPR[c.index] * uint64(c.scale)
	}
	// The base register holds the loaded value now: the result names none.
	res := c.result(a, LookBack, false)
	res.Base, res.Disp = NoReg, int64(base)+c.disp
	return res, dst&reads != 0, true
}

// boundary returns the start, within the last maxBefore bytes of before, of
// the instruction that ends exactly at ip. Backward decoding is ambiguous:
// a suffix of the true instruction, or bytes of its predecessors, may also
// decode to something ending at ip; decoding forward resynchronises with
// the true instructions within a few of them. Readings with an instruction
// compilers never emit are out (see misread): C2's `mov 0x48(%rsp),%r10;
// add 0x10(%r8,%r11,8),%r10` ends in one with a dead REX byte, and its FFM
// segment read `test %ebp,%ebp; jl; mov (%r10),%rax` in one with a segment
// register move.
//
// A window longer than shortBefore is decided by the linear decodings from
// its first consensusStarts offsets: every one that reaches ip exactly must
// end in the same instruction. On the oracle's JIT code with 64 bytes this
// is right for 98.5% of ips and wrong for 0.07%. A short window is decided
// by two independent readings, which must agree: the linear decoding from
// the earliest start offset that reaches ip, and the longest instruction
// that ends at ip (right for 84% of ips, wrong for 1%); see TestOracle.
func (d *Decoder) boundary(before []byte) (int, bool) {
	if len(before) > maxBefore {
		before = before[len(before)-maxBefore:]
	}
	n := len(before)
	if n > shortBefore {
		for o := range n {
			d.end[o] = endUnknown
		}
		got := int8(-1)
		for o := range consensusStarts {
			switch e := d.chainEnd(before, o); {
			case e < 0:
			case got >= 0 && e != got:
				return 0, false
			default:
				got = e
			}
		}
		return int(got), got >= 0
	}
	longest, earliest := -1, -1
	for o := n - 1; o >= 0; o-- {
		d.end[o] = -1
		if !d.cand[o].decode(before[o:]) || d.cand[o].misread() {
			continue
		}
		switch next := o + d.cand[o].n; {
		case next == n:
			d.end[o] = int8(o)
			longest = o
		case next < n:
			d.end[o] = d.end[next]
		}
		if d.end[o] >= 0 {
			earliest = int(d.end[o])
		}
	}
	if longest < 0 || longest != earliest {
		return 0, false
	}
	return longest, true
}

// chainEnd decodes forward from before[o:] and returns the start of the
// instruction of that decoding which ends exactly at ip, or -1 if none does.
// Decodings from different offsets merge within a few instructions:
// d.end remembers each offset's answer, so that each is decoded once.
func (d *Decoder) chainEnd(before []byte, o int) int8 {
	n := len(before)
	k, p := 0, o
	res := int8(-1)
	for {
		if d.end[p] != endUnknown {
			res = d.end[p]
			break
		}
		d.path[k] = int8(p)
		k++
		if !d.cand[p].decode(before[p:]) || d.cand[p].misread() {
			break
		}
		next := p + d.cand[p].n
		if next == n {
			res = int8(p)
		}
		if next >= n {
			break
		}
		p = next
	}
	for _, q := range d.path[:k] {
		d.end[q] = res
	}
	return res
}

// misread says x is a reading of bytes that no compiler wrote as one
// instruction: a REX byte another prefix follows (the CPU ignores it), or a
// move to or from a segment register, which 64-bit user code has no use for.
func (x *insn) misread() bool {
	return x.deadREX || x.enc == encLegacy && x.mapSel == map1 && (x.op == 0x8c || x.op == 0x8e)
}

// candidate checks that c is a load that left its address registers intact,
// rebuilds its address, and says whether the instruction at ip consumes the
// loaded value. A consumer is not required: measured on C2 code here, the
// timer lands just after a stalled load-op (`add 0x10(%r9,%rcx,8),%rax`) on an
// unrelated `inc` or `jmp` 400 times as often as on the load itself.
func (d *Decoder) candidate(c *insn, r *Regs, reads uint64) (Result, bool, bool) {
	dst, ok := c.loadDest()
	if !ok {
		return Result{}, false, false
	}
	if dst&c.addrRegs() != 0 {
		return c.baseOnly(dst, r, reads)
	}
	a, ok := c.ea(r, r.IP)
	if !ok {
		return Result{}, false, false
	}
	return c.result(a, LookBack, false), dst&reads != 0, true
}

// baseOnly is the candidate of a load that overwrote its index register
// and nothing else of its address: only base+disp survives. It needs a
// consumer, and a base that is a pointer: not rsp (a spill slot is no
// object) and not r12, which HotSpot keeps as the compressed-oop heap base
// (`mov 0x10(%r12,%r11,8),%r11` indexes the heap by a narrow oop).
func (x *insn) baseOnly(dst uint64, r *Regs, reads uint64) (Result, bool, bool) {
	if x.index < 0 || x.base < 0 || x.base >= 16 || x.base == 4 || x.base == 12 ||
		dst&gprBit(uint8(x.base)) != 0 || dst&gprBit(uint8(x.index)) == 0 || dst&reads == 0 ||
		x.vsib || x.str || !x.dispOK || x.seg == 0x64 || x.seg == 0x65 {
		return Result{}, false, false
	}
	mask := ^uint64(0)
	if x.addr32 {
		mask = 0xffffffff
	}
	a := (r.GPR[x.base]&mask + uint64(x.disp)) & mask
	return Result{Addr: a, Method: Base, Base: x.base, Index: NoReg, Disp: x.disp}, true, true
}

func (x *insn) result(a uint64, m Method, store bool) Result {
	return Result{Addr: a, Method: m, Size: x.size, Store: store, Base: x.base, Index: x.index, Scale: x.scale, Disp: x.disp}
}

// ea computes the effective address with next as the address of the
// following instruction (for RIP-relative operands).
func (x *insn) ea(r *Regs, next uint64) (uint64, bool) {
	if (x.seg == 0x64 || x.seg == 0x65) && !(x.str && x.base == 7) {
		return 0, false // fs/gs bases are not in pt_regs
	}
	if x.vsib || !x.dispOK {
		return 0, false
	}
	mask := ^uint64(0)
	if x.addr32 {
		mask = 0xffffffff
	}
	var a uint64
	switch x.base {
	case regNone:
	case regRIP:
		a = next
	default:
		a = r.GPR[x.base] & mask
	}
	if x.index >= 0 {
		a += (r.GPR[x.index] & mask) * uint64(x.scale)
	}
	a += uint64(x.disp)
	return a & mask, true
}

// Previous is the look-back reading alone: the load that ends at r.IP,
// whatever the instruction at ip does (None when there is none). For a
// caller that knows the access at ip is not the data's (a ZGC load
// barrier's test of the thread's bad mask right after the load it checks).
func (d *Decoder) Previous(before []byte, r *Regs) Result {
	lb, _, ok := d.lookBack(before, r, 0)
	if !ok {
		return Result{}
	}
	return lb
}
