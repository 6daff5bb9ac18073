package decode

// This file is a small x86-64 instruction decoder that recovers only what the
// profiler needs: the instruction length, the explicit memory operand, and
// enough register semantics to check a load→consumer dependency. It handles
// legacy/REX, VEX (C4/C5) and EVEX (62) encodings. It is table driven and
// allocation free; golang.org/x/arch/x86/x86asm boxes every memory operand
// into an interface (one allocation per decode) and is several times slower,
// which matters when look-back decodes up to 16 candidates per sample.

// Register numbering of the base/index fields; GPRs use x86 encoding order.
const (
	regNone = -1
	regRIP  = 16
)

// Bit positions in the register sets used for dependency checks.
const (
	bitVec   = 16 // vector registers 0..31 occupy bits 16..47
	bitFlags = 48
)

const flagsBit = uint64(1) << bitFlags

func gprBit(r uint8) uint64 { return 1 << (r & 15) }
func vecBit(r uint8) uint64 { return 1 << (bitVec + uint(r&31)) }

// Encoding kinds.
const (
	encLegacy = iota
	encVEX
	encEVEX
)

// Opcode maps.
const (
	map1   = 0 // one-byte opcodes
	map0F  = 1
	map38  = 2
	map3A  = 3
	mapFP5 = 5 // EVEX FP16 maps: decoded for length only
	mapFP6 = 6
)

// insn is one decoded instruction. The zero value is not meaningful; use
// decode.
type insn struct {
	n      int   // length in bytes
	enc    uint8 // encLegacy, encVEX, encEVEX
	mapSel uint8
	op     uint8
	pp     uint8 // mandatory prefix: 0 none, 1 66, 2 F3, 3 F2
	w      bool  // REX.W / VEX.W / EVEX.W
	has66  bool
	modrm  bool
	mod    uint8
	reg    uint8 // ModRM.reg extended by R (and EVEX R')
	regOp  uint8 // raw ModRM.reg (opcode extension)
	rm     uint8 // ModRM.rm extended by B (and EVEX X for registers)
	vvvv   uint8 // VEX/EVEX second source, extended by EVEX V'
	vl     int   // vector length in bytes for VEX/EVEX (16/32/64)
	bcst   bool  // EVEX.b on a memory operand
	seg    uint8 // segment override prefix byte, 0 if none
	addr32 bool  // 0x67 prefix
	mem    bool  // has an explicit ModRM memory operand (or moffs)
	str    bool  // string instruction with implicit rsi/rdi operand
	vsib   bool
	base   int8
	index  int8
	scale  uint8
	disp   int64
	disp8  bool // displacement is 8-bit: EVEX scales it by N
	dispOK bool // displacement is final (EVEX N known or not needed)
	size   int  // memory access size in bytes, 0 if unknown
	// deadREX: a REX byte another prefix follows. The CPU ignores it, but
	// no compiler emits one, so a backward search for an instruction
	// boundary takes it for a misreading.
	deadREX bool
}

// Immediate kinds of the legacy opcode maps.
const (
	imNone  = iota
	im8     // 1 byte
	imZ     // 2 with 0x66, else 4
	im16    // 2 bytes
	im16_8  // ENTER: 3 bytes
	imMoffs // 8 bytes, 4 with 0x67
	imV     // MOV r, imm: 8 with REX.W, else Z
	imGrp3  // F6/F7: imm only for /0 and /1
	imSSE4a // 0F 78: EXTRQ/INSERTQ (66, F2) carry two imm8, VMREAD none
	imBad   // invalid in 64-bit mode
)

// Per-opcode properties: bit 7 = has ModRM, low bits = immediate kind.
const hasModRM = 0x80

var (
	tab1  [256]uint8 // one-byte map
	tab0F [256]uint8 // 0F map
)

// opRange gives the opcodes lo..hi one property byte.
type opRange struct {
	lo, hi uint8
	props  uint8
}

// props1 and props0F fill tab1 (after its ALU blocks) and tab0F in order,
// so a later range overrides an earlier one; opcodes listed nowhere are 0:
// no ModRM, no immediate.
var (
	props1 = [...]opRange{
		{0x26, 0x26, imBad}, {0x2e, 0x2e, imBad}, {0x36, 0x36, imBad}, {0x3e, 0x3e, imBad}, // prefixes, never reached
		{0x0f, 0x0f, imBad}, // escape, handled separately
		{0x60, 0x62, imBad},
		{0x63, 0x63, hasModRM},
		{0x68, 0x68, imZ},
		{0x69, 0x69, hasModRM | imZ},
		{0x6a, 0x6a, im8},
		{0x6b, 0x6b, hasModRM | im8},
		{0x70, 0x7f, im8},
		{0x80, 0x80, hasModRM | im8},
		{0x81, 0x81, hasModRM | imZ},
		{0x82, 0x82, imBad},
		{0x83, 0x83, hasModRM | im8},
		{0x84, 0x8f, hasModRM},
		{0x9a, 0x9a, imBad},
		{0xa0, 0xa3, imMoffs},
		{0xa8, 0xa8, im8},
		{0xa9, 0xa9, imZ},
		{0xb0, 0xb7, im8},
		{0xb8, 0xbf, imV},
		{0xc0, 0xc1, hasModRM | im8},
		{0xc2, 0xc2, im16},
		{0xc4, 0xc5, imBad}, // VEX, handled separately
		{0xc6, 0xc6, hasModRM | im8},
		{0xc7, 0xc7, hasModRM | imZ},
		{0xc8, 0xc8, im16_8},
		{0xca, 0xca, im16},
		{0xcd, 0xcd, im8},
		{0xce, 0xce, imBad},
		{0xd0, 0xd3, hasModRM},
		{0xd4, 0xd6, imBad},
		{0xd8, 0xdf, hasModRM},
		{0xe0, 0xe7, im8},
		{0xe8, 0xe9, imZ}, // rel32 (0x66 handled in immediate)
		{0xea, 0xea, imBad},
		{0xeb, 0xeb, im8},
		{0xf6, 0xf7, hasModRM | imGrp3},
		{0xfe, 0xff, hasModRM},
	}
	props0F = [...]opRange{
		{0x00, 0x03, hasModRM},
		{0x04, 0x04, imBad},
		{0x0a, 0x0a, imBad},
		{0x0c, 0x0c, imBad},
		{0x0d, 0x0d, hasModRM},
		{0x0f, 0x0f, hasModRM | im8}, // 3DNow!: opcode suffix byte
		{0x10, 0x23, hasModRM},
		{0x24, 0x27, imBad},
		{0x28, 0x2f, hasModRM},
		{0x36, 0x36, imBad},
		{0x38, 0x3f, imBad}, // 38/3A escapes handled separately
		{0x40, 0x6f, hasModRM},
		{0x70, 0x73, hasModRM | im8},
		{0x74, 0x76, hasModRM},
		{0x78, 0x78, hasModRM | imSSE4a},
		{0x79, 0x79, hasModRM},
		{0x7a, 0x7b, imBad},
		{0x7c, 0x7f, hasModRM},
		{0x80, 0x8f, imZ}, // jcc rel32
		{0x90, 0x9f, hasModRM},
		{0xa3, 0xa3, hasModRM},
		{0xa4, 0xa4, hasModRM | im8},
		{0xa5, 0xa5, hasModRM},
		{0xa6, 0xa7, imBad},
		{0xab, 0xab, hasModRM},
		{0xac, 0xac, hasModRM | im8},
		{0xad, 0xb9, hasModRM},
		{0xba, 0xba, hasModRM | im8},
		{0xbb, 0xc1, hasModRM},
		{0xc2, 0xc2, hasModRM | im8},
		{0xc3, 0xc3, hasModRM},
		{0xc4, 0xc6, hasModRM | im8},
		{0xc7, 0xc7, hasModRM},
		{0xd0, 0xff, hasModRM},
	}
)

func init() {
	// One-byte map, ALU blocks 00-3F: x0-x3 ModRM, x4 imm8, x5 immz, x6-x7
	// invalid in 64-bit mode.
	for b := uint8(0); b < 0x40; b += 8 {
		fill(&tab1, opRange{b, b + 3, hasModRM})
		tab1[b+4], tab1[b+5], tab1[b+6], tab1[b+7] = im8, imZ, imBad, imBad
	}
	for _, r := range props1 {
		fill(&tab1, r)
	}
	for _, r := range props0F {
		fill(&tab0F, r)
	}
}

// fill gives the opcodes of r their properties in t.
func fill(t *[256]uint8, r opRange) {
	for i := int(r.lo); i <= int(r.hi); i++ {
		t[i] = r.props
	}
}

// decode decodes the first instruction in b. It reports false for invalid,
// unsupported or truncated encodings.
func (x *insn) decode(b []byte) bool {
	*x = insn{base: regNone, index: regNone, dispOK: true}
	b = b[:min(len(b), 15)]
	// The prefixes, inline: a call here would cost every decode.
	var rex, rep byte
	lock := false
	i := 0
prefixes:
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case c == 0x26 || c == 0x2e || c == 0x36 || c == 0x3e || c == 0x64 || c == 0x65:
			x.seg = c
		case c == 0x66:
			x.has66 = true
		case c == 0x67:
			x.addr32 = true
		case c == 0xf0:
			lock = true
		case c == 0xf2 || c == 0xf3:
			rep = c
		case c&0xf0 == 0x40:
			x.deadREX = x.deadREX || rex != 0
			rex = c
			continue // a REX byte counts only if the opcode follows it
		default:
			break prefixes
		}
		x.deadREX = x.deadREX || rex != 0
		rex = 0
	}
	if i >= len(b) {
		return false
	}
	c := b[i]
	switch {
	case c == 0xc4 || c == 0xc5 || c == 0x62:
		// VEX/EVEX forbid 66/F2/F3/LOCK/REX prefixes (#UD).
		return !(x.has66 || rep != 0 || lock || rex != 0) && x.decodeVEX(b, i)
	case c == 0xd5: // APX REX2: registers r16-r31 we do not have
		return false
	case c == 0x8f && i+1 < len(b) && b[i+1]&0x38 != 0: // AMD XOP
		return false
	}
	x.w = rex&8 != 0
	x.setPP(rep)
	i++
	x.op = c
	props, ok := tab1[c], true
	if c == 0x0f {
		if i, props, ok = x.escape(b, i); !ok {
			return false
		}
	}
	imm := props &^ hasModRM
	if imm == imBad {
		return false
	}
	if props&hasModRM != 0 {
		if i, ok = x.modRM(b, i, rex&4 != 0, rex&2 != 0, rex&1 != 0); !ok {
			return false
		}
	}
	switch imm {
	case imNone:
	case im8: // the commonest immediate, without a call
		if i++; i > len(b) {
			return false
		}
	default:
		if i, ok = x.immediate(b, i, imm); !ok {
			return false
		}
	}
	x.n = i
	x.implicitOperands(rex)
	x.legacySize()
	return true
}

// setPP sets the mandatory prefix from the last F2/F3 (rep) and 0x66.
func (x *insn) setPP(rep byte) {
	switch rep {
	case 0xf3:
		x.pp = 2
	case 0xf2:
		x.pp = 3
	default:
		if x.has66 {
			x.pp = 1
		}
	}
}

// escape reads the opcode after 0F at b[i], through the 38 and 3A escapes;
// it sets mapSel and op and returns the opcode's properties.
func (x *insn) escape(b []byte, i int) (int, uint8, bool) {
	if i >= len(b) {
		return 0, 0, false
	}
	c := b[i]
	i++
	var props uint8
	switch c {
	case 0x38:
		x.mapSel = map38
		props = hasModRM
	case 0x3a:
		x.mapSel = map3A
		props = hasModRM | im8
	default:
		x.mapSel = map0F
		x.op = c
		return i, tab0F[c], true
	}
	if i >= len(b) {
		return 0, 0, false
	}
	x.op = b[i]
	return i + 1, props, true
}

// immediate skips the immediate of kind imm at b[i] (a moffs is the memory
// operand's address) and returns the instruction's end.
func (x *insn) immediate(b []byte, i int, imm uint8) (int, bool) {
	c := x.op
	switch imm {
	case im8:
		i++
	case imZ:
		if x.has66 && !(x.mapSel == map1 && (c == 0xe8 || c == 0xe9)) && x.mapSel != map0F {
			i += 2
		} else {
			i += 4
		}
	case im16:
		i += 2
	case im16_8:
		i += 3
	case imMoffs:
		n := 8
		if x.addr32 {
			n = 4
		}
		if i+n > len(b) {
			return 0, false
		}
		var v uint64
		for k := n - 1; k >= 0; k-- {
			v = v<<8 | uint64(b[i+k])
		}
		x.mem = true
		x.disp = int64(v)
		i += n
	case imV:
		switch {
		case x.w:
			i += 8
		case x.has66:
			i += 2
		default:
			i += 4
		}
	case imGrp3:
		if x.regOp <= 1 {
			if c == 0xf6 {
				i++
			} else if x.has66 {
				i += 2
			} else {
				i += 4
			}
		}
	case imSSE4a:
		if x.pp == 1 || x.pp == 3 {
			i += 2
		}
	}
	return i, i <= len(b)
}

// implicitOperands sets the register an opcode embeds (push, xchg, bswap,
// ...) and the implicit memory operand of string instructions.
func (x *insn) implicitOperands(rex byte) {
	c := x.op
	if !x.modrm {
		x.rm = c & 7
		if rex&1 != 0 {
			x.rm |= 8
		}
	}
	if x.mapSel == map1 {
		switch c {
		case 0xa4, 0xa5, 0xa6, 0xa7, 0xac, 0xad: // MOVS, CMPS, LODS read [rsi]
			x.str = true
			x.base = 6
		case 0xaa, 0xab, 0xae, 0xaf: // STOS, SCAS use es:[rdi]
			x.str = true
			x.base = 7
		}
	}
}

// modRM parses ModRM, SIB and displacement starting at b[i].
func (x *insn) modRM(b []byte, i int, r, xb, bb bool) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	m := b[i]
	i++
	x.modrm = true
	x.mod = m >> 6
	x.regOp = (m >> 3) & 7
	x.reg = x.regOp
	if r {
		x.reg |= 8
	}
	x.rm = m & 7
	if bb {
		x.rm |= 8
	}
	if x.mod == 3 {
		return i, true
	}
	x.mem = true
	dispLen := 0
	switch x.mod {
	case 1:
		dispLen = 1
	case 2:
		dispLen = 4
	}
	switch {
	case m&7 == 4:
		if i >= len(b) {
			return 0, false
		}
		s := b[i]
		i++
		x.scale = 1 << (s >> 6)
		idx := (s >> 3) & 7
		if xb {
			idx |= 8
		}
		if idx != 4 {
			x.index = int8(idx)
		}
		base := s & 7
		if base == 5 && x.mod == 0 {
			dispLen = 4
		} else {
			if bb {
				base |= 8
			}
			x.base = int8(base)
		}
	case m&7 == 5 && x.mod == 0:
		x.base = regRIP
		dispLen = 4
	default:
		x.base = int8(x.rm)
	}
	if i+dispLen > len(b) {
		return 0, false
	}
	switch dispLen {
	case 1:
		x.disp = int64(int8(b[i]))
		x.disp8 = true
	case 4:
		x.disp = int64(int32(uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 | uint32(b[i+3])<<24))
	}
	return i + dispLen, true
}

// Register extensions of a VEX/EVEX prefix, as vexPrefix returns them: its
// inverted R, X, B and EVEX R' bits (7-4) shifted down by 4 and set when they
// extend. One byte, not a struct of bools, which the compiler returned
// through a stack slot that stalled the load of the next field.
const (
	extR2 = 1 << iota // EVEX R'
	extB
	extX
	extR
)

// decodeVEX decodes a VEX (C4/C5) or EVEX (62) instruction whose prefix is at
// b[i].
func (x *insn) decodeVEX(b []byte, i int) bool {
	i, ext, lcode, ok := x.vexPrefix(b, i)
	if !ok || i >= len(b) {
		return false
	}
	x.op = b[i]
	i++
	x.vl = 16 << lcode
	if x.enc == encVEX && x.mapSel == map0F && x.op == 0x77 { // vzeroupper/vzeroall
		x.n = i
		return true
	}
	if i, ok = x.modRM(b, i, ext&extR != 0, ext&extX != 0, ext&extB != 0); !ok {
		return false
	}
	if ext&extR2 != 0 {
		x.reg |= 16
	}
	if x.enc == encEVEX && x.mod == 3 && ext&extX != 0 {
		x.rm |= 16 // EVEX.X extends a register rm to zmm16-31
	}
	if x.isVSIB() {
		// VSIB needs memory with a SIB byte; its index is a vector register
		// (SIB.index | X<<3 | V'<<4), so the GPR index decoded above is wrong.
		x.vsib = true
		if x.mod == 3 {
			return false
		}
	}
	if x.mapSel == map3A || x.mapSel == map0F && (x.op >= 0x70 && x.op <= 0x73 || x.op >= 0xc2 && x.op <= 0xc6) {
		i++
	}
	if i > len(b) {
		return false
	}
	x.n = i
	if !x.mem {
		return true
	}
	if x.enc == encEVEX && x.vl == 64*2 { // L'L = 11 is reserved with memory
		return false
	}
	n := x.tupleN() // the operand's size, and EVEX's disp8 scale
	if x.enc == encEVEX && x.bcst && !x.bcstOK() {
		return false
	}
	x.size = n
	if x.enc == encEVEX && x.disp8 {
		if n == 0 {
			x.dispOK = false
		} else {
			x.disp *= int64(n)
		}
	}
	return true
}

// vexPrefix decodes the VEX or EVEX prefix at b[i] into enc, mapSel, w,
// vvvv, pp and bcst. It returns where the opcode starts, the register
// extensions (ext*) and the vector length code.
func (x *insn) vexPrefix(b []byte, i int) (next int, ext, lcode uint8, ok bool) {
	switch b[i] {
	case 0xc5:
		if i+1 >= len(b) {
			return 0, 0, 0, false
		}
		p := b[i+1]
		x.enc = encVEX
		x.vvvv = (^p >> 3) & 15
		x.pp = p & 3
		x.mapSel = map0F
		return i + 2, (^p >> 4) & extR, (p >> 2) & 1, true
	case 0xc4:
		if i+2 >= len(b) {
			return 0, 0, 0, false
		}
		p1, p2 := b[i+1], b[i+2]
		x.enc = encVEX
		x.mapSel = p1 & 0x1f
		if x.mapSel < map0F || x.mapSel > map3A {
			return 0, 0, 0, false
		}
		x.w = p2&0x80 != 0
		x.vvvv = (^p2 >> 3) & 15
		x.pp = p2 & 3
		return i + 3, (^p1 >> 4) & (extR | extX | extB), (p2 >> 2) & 1, true
	}
	// 0x62
	if i+3 >= len(b) {
		return 0, 0, 0, false
	}
	p0, p1, p2 := b[i+1], b[i+2], b[i+3]
	// Bits that must be fixed outside APX; APX reuses them to reach r16-r31.
	if p0&0x08 != 0 || p1&0x04 == 0 {
		return 0, 0, 0, false
	}
	x.enc = encEVEX
	x.mapSel = p0 & 7
	switch x.mapSel {
	case map0F, map38, map3A, mapFP5, mapFP6:
	default:
		return 0, 0, 0, false
	}
	x.w = p1&0x80 != 0
	x.vvvv = (^p1 >> 3) & 15
	x.pp = p1 & 3
	x.bcst = p2&0x10 != 0
	if p2&0x08 == 0 { // EVEX.V'
		x.vvvv |= 16
	}
	return i + 4, (^p0 >> 4) & (extR | extX | extB | extR2), (p2 >> 5) & 3, true
}

// isVSIB reports gathers/scatters, whose index is a vector register.
func (x *insn) isVSIB() bool {
	if x.mapSel != map38 || x.pp != 1 {
		return false
	}
	switch x.op {
	case 0x90, 0x91, 0x92, 0x93:
		return true
	case 0xa0, 0xa1, 0xa2, 0xa3, 0xc6, 0xc7:
		return x.enc == encEVEX
	}
	return false
}

// access reports whether the memory operand is really accessed: LEA and the
// hint-NOP space (including C2's `nopw 0x0(%rax,%rax,1)` padding) are not.
func (x *insn) access() bool {
	if x.str {
		return true
	}
	if !x.mem {
		return false
	}
	if x.enc != encLegacy {
		return true
	}
	switch x.mapSel {
	case map1:
		return x.op != 0x8d
	case map0F:
		switch {
		case x.op == 0x18:
			return x.regOp < 4 // prefetch; /4-/7 are NOPs
		case x.op >= 0x19 && x.op <= 0x1f:
			return false // NOP, BND*, CET hints
		}
	}
	return true
}
