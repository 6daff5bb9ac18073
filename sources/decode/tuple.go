package decode

// Memory operand sizes for VEX/EVEX instructions. EVEX compresses an 8-bit
// displacement by N (disp = disp8*N), where N follows from the instruction's
// tuple type (SDM vol. 2, 2.7.5, tables 2-34/2-35), the vector length and
// EVEX.b. N equals the memory operand size for every tuple type, so the same
// table gives Result.Size. Only opcodes C2 and HotSpot stubs commonly emit are
// listed; for others N is unknown and a compressed disp8 yields no address.

type tuple uint8

const (
	tUnknown tuple = iota
	tFV            // full vector, broadcast allowed: VL, or element size
	tHV            // half vector, broadcast allowed: VL/2, or 4
	tFVM           // full vector memory: VL
	tHVM           // VL/2
	tQVM           // VL/4
	tOVM           // VL/8
	tT1S           // one element, 4 or 8 by W
	tT1Sbw         // one element, 1 or 2 by W
	tDUP           // MOVDDUP: 8, 32, 64
	tGPR           // general-purpose operand (BMI): 4 or 8 by W
	tF1            // fixed sizes
	tF2
	tF4
	tF8
	tF16
	tF32
)

// tuple returns the tuple type of a VEX/EVEX instruction with a memory
// operand.
func (x *insn) tuple() tuple {
	op, pp := x.op, x.pp
	switch x.mapSel {
	case map0F:
		return tuple0F(op, pp, x.regOp)
	case map38:
		if x.enc == encVEX {
			switch op {
			case 0x2c, 0x2d, 0x2e, 0x2f, 0x8c, 0x8e: // VMASKMOV, VPMASKMOV
				return tFVM
			}
		}
		if pp == 2 && (op>>4 == 1 || op>>4 == 2 || op>>4 == 3) && op&15 <= 5 {
			// VPMOV{,S,US}* down-converting stores: VL/2, /4, /8 by opcode.
			return [...]tuple{tHVM, tQVM, tOVM, tHVM, tQVM, tHVM}[op&15]
		}
		if pp == 2 && op == 0x26 {
			return tFVM // VPTESTNMB/W
		}
		if pp == 2 && op == 0x27 {
			return tFV // VPTESTNMD/Q
		}
		if op >= 0xf0 && op <= 0xf7 {
			return tGPR
		}
		if pp != 1 {
			return tUnknown
		}
		return tuple38(op)
	case map3A:
		if op == 0xf0 {
			return tGPR // RORX
		}
		if pp != 1 {
			return tUnknown
		}
		return tuple3A(op, x.enc == encVEX)
	}
	return tUnknown
}

// tuples0F is the tuple of the 0F opcodes whose tuple depends on neither
// the mandatory prefix nor ModRM.reg; tuple0F handles the others.
var tuples0F = [256]tuple{
	0x13: tF8, 0x17: tF8, 0xd6: tF8,
	0x2a: tT1S, 0x6e: tT1S, // CVTSI2SS/SD, MOVD/Q: integer size by W
	0xc4: tF2,
	0xd1: tF16, 0xd2: tF16, 0xd3: tF16, 0xe1: tF16, 0xe2: tF16, 0xf1: tF16, 0xf2: tF16, 0xf3: tF16, // shift count from xmm/m128
	0x14: tFV, 0x15: tFV, 0x5b: tFV, 0x62: tFV, 0x66: tFV, 0x6a: tFV, 0x6b: tFV, 0x6c: tFV, 0x6d: tFV,
	0x72: tFV, 0x76: tFV, 0xc6: tFV, 0xd4: tFV, 0xdb: tFV, 0xdf: tFV, 0xeb: tFV, 0xef: tFV, 0xf4: tFV,
	0xfa: tFV, 0xfb: tFV, 0xfe: tFV,
	0x28: tFVM, 0x29: tFVM, 0x2b: tFVM, 0x60: tFVM, 0x61: tFVM, 0x63: tFVM, 0x64: tFVM, 0x65: tFVM,
	0x67: tFVM, 0x68: tFVM, 0x69: tFVM, 0x6f: tFVM, 0x71: tFVM, 0x74: tFVM, 0x75: tFVM, 0x7f: tFVM,
	0xd5: tFVM, 0xd8: tFVM, 0xd9: tFVM, 0xda: tFVM, 0xdc: tFVM, 0xdd: tFVM, 0xde: tFVM, 0xe0: tFVM,
	0xe3: tFVM, 0xe4: tFVM, 0xe5: tFVM, 0xe7: tFVM, 0xe8: tFVM, 0xe9: tFVM, 0xea: tFVM, 0xec: tFVM,
	0xed: tFVM, 0xee: tFVM, 0xf0: tFVM, 0xf5: tFVM, 0xf6: tFVM, 0xf8: tFVM, 0xf9: tFVM, 0xfc: tFVM,
	0xfd: tFVM,
}

func tuple0F(op, pp, regOp uint8) tuple {
	switch op {
	case 0x10, 0x11:
		if pp >= 2 {
			return scalarTuple(pp)
		}
		return tFVM
	case 0x12:
		switch pp {
		case 2:
			return tFVM // MOVSLDUP
		case 3:
			return tDUP // MOVDDUP
		}
		return tF8
	case 0x16:
		if pp == 2 {
			return tFVM // MOVSHDUP
		}
		return tF8
	case 0x2c, 0x2d, 0x51, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5c, 0x5d, 0x5e, 0x5f, 0xc2:
		return scalarTuple(pp)
	case 0x2e, 0x2f:
		if pp == 1 {
			return tF8
		}
		return tF4
	case 0x5a:
		switch pp {
		case 0:
			return tHV
		case 1:
			return tFV
		}
		return scalarTuple(pp)
	case 0x7e:
		if pp == 2 {
			return tF8
		}
		return tT1S
	case 0x70:
		if pp == 1 {
			return tFV
		}
		return tFVM
	case 0x73:
		if regOp == 3 || regOp == 7 {
			return tFVM // PSRLDQ/PSLLDQ
		}
		return tFV
	case 0xe6:
		if pp == 2 {
			return tHV
		}
		return tFV
	}
	return tuples0F[op]
}

// scalarTuple is the tuple of an instruction whose F3 and F2 forms are
// scalar (ss, sd) and whose others are packed.
func scalarTuple(pp uint8) tuple {
	switch pp {
	case 2:
		return tF4
	case 3:
		return tF8
	}
	return tFV
}

func tuple38(op uint8) tuple {
	switch {
	case op >= 0x96 && op <= 0x9f, op >= 0xa6 && op <= 0xaf, op >= 0xb6 && op <= 0xbf:
		if op&0xf >= 8 && op&1 == 1 {
			return tT1S // scalar FMA
		}
		return tFV
	}
	switch op {
	case 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b,
		0x0e, 0x0f, 0x10, 0x11, 0x12, 0x17, 0x1c, 0x1d, 0x26, 0x2a, 0x38, 0x3a,
		0x3c, 0x3e, 0x66, 0x75, 0x7d, 0x8d, 0xcf, 0xdc, 0xdd, 0xde, 0xdf:
		return tFVM
	case 0x0c, 0x0d, 0x14, 0x15, 0x16, 0x1e, 0x1f, 0x27, 0x28, 0x29, 0x2b, 0x2c,
		0x36, 0x37, 0x39, 0x3b, 0x3d, 0x3f, 0x40, 0x44, 0x45, 0x46, 0x47, 0x4c,
		0x4e, 0x64, 0x65, 0x76, 0x77, 0x7e, 0x7f, 0xb4, 0xb5, 0xc4, 0xc8, 0xca, 0xcc:
		return tFV
	case 0x13, 0x20, 0x23, 0x25, 0x30, 0x33, 0x35:
		return tHVM
	case 0x21, 0x24, 0x31, 0x34:
		return tQVM
	case 0x22, 0x32:
		return tOVM
	case 0x18, 0x58:
		return tF4
	case 0x19, 0x59:
		return tF8
	case 0x1a, 0x5a:
		return tF16
	case 0x1b, 0x5b:
		return tF32
	case 0x2d, 0x4d, 0x4f, 0x88, 0x89, 0x8a, 0x8b, 0xcb, 0xcd:
		return tT1S
	case 0x62, 0x63:
		return tT1Sbw
	case 0x78:
		return tF1
	case 0x79:
		return tF2
	}
	return tUnknown
}

func tuple3A(op uint8, vex bool) tuple {
	switch op {
	case 0x00, 0x01, 0x03, 0x04, 0x05, 0x08, 0x09, 0x1e, 0x1f, 0x23, 0x25, 0x26,
		0x43, 0x50, 0x54, 0x56, 0x66, 0x71, 0x73, 0xce, 0xcf:
		return tFV
	case 0x02, 0x06, 0x0c, 0x0d, 0x0e, 0x0f, 0x3e, 0x3f, 0x40, 0x41, 0x42, 0x44,
		0x46, 0x4a, 0x4b, 0x4c, 0x70, 0x72, 0xdf:
		return tFVM
	case 0x0a:
		if vex {
			return tF4 // VROUNDSS is W-ignored
		}
		return tT1S
	case 0x0b:
		if vex {
			return tF8
		}
		return tT1S
	case 0x27, 0x51, 0x55, 0x57, 0x67:
		return tT1S
	case 0x14, 0x20:
		return tF1
	case 0x15:
		return tF2
	case 0x16, 0x22:
		return tT1S
	case 0x17, 0x21:
		return tF4
	case 0x18, 0x19, 0x38, 0x39:
		return tF16
	case 0x1a, 0x1b, 0x3a, 0x3b:
		return tF32
	case 0x1d:
		return tHVM
	}
	return tUnknown
}

// tupleN returns N (= memory operand size) or 0 if unknown.
func (x *insn) tupleN() int {
	vl := x.vl
	b := x.enc == encEVEX && x.bcst
	esz := 4
	if x.w {
		esz = 8
	}
	switch x.tuple() {
	case tFV:
		if b {
			return esz
		}
		return vl
	case tHV:
		if b {
			return 4
		}
		return vl / 2
	case tFVM:
		return vl
	case tHVM:
		return vl / 2
	case tQVM:
		return vl / 4
	case tOVM:
		return vl / 8
	case tT1S, tGPR:
		return esz
	case tT1Sbw:
		if x.w {
			return 2
		}
		return 1
	case tDUP:
		if vl == 16 {
			return 8
		}
		return vl
	case tF1:
		return 1
	case tF2:
		return 2
	case tF4:
		return 4
	case tF8:
		return 8
	case tF16:
		return 16
	case tF32:
		return 32
	}
	return 0
}

// bcstOK reports whether EVEX.b may be set with a memory operand, i.e. the
// tuple is a broadcasting one. Anything else is an encoding we do not trust.
func (x *insn) bcstOK() bool {
	switch x.tuple() {
	case tFV, tHV:
		return true
	}
	return false
}

// legacySize sets the access size for common legacy instructions.
func (x *insn) legacySize() {
	if !x.mem && !x.str {
		return
	}
	switch x.mapSel {
	case map1:
		x.legacySize1()
	case map0F:
		x.legacySize0F()
	case map38:
		x.legacySize38()
	}
}

// legacySize38 is legacySize for the 0F 38 map: MOVBE and CRC32.
func (x *insn) legacySize38() {
	switch op := x.op; {
	case op != 0xf0 && op != 0xf1:
	case x.pp != 3:
		x.size = x.opSize() // MOVBE
	case op == 0xf1: // CRC32
		x.size = x.opSize()
	default:
		x.size = 1
	}
}

// opSize is the operand size by REX.W and 0x66.
func (x *insn) opSize() int {
	switch {
	case x.w:
		return 8
	case x.has66:
		return 2
	}
	return 4
}

// legacySize1 is legacySize for the one-byte map.
func (x *insn) legacySize1() {
	op := x.op
	switch {
	case op < 0x40 && op&7 <= 3, op >= 0x84 && op <= 0x8b, op >= 0xa0 && op <= 0xa7,
		op >= 0xaa && op <= 0xaf, op == 0xc0, op == 0xc1, op == 0xc6, op == 0xc7,
		op >= 0xd0 && op <= 0xd3, op == 0xf6, op == 0xf7, op == 0xfe, op == 0x80:
		x.size = x.opSize()
		if op&1 == 0 { // byte forms have an even opcode here
			x.size = 1
		}
	case op == 0x69, op == 0x6b, op == 0x81, op == 0x83:
		x.size = x.opSize()
	case op == 0x63:
		x.size = 4
	case op == 0x8f:
		x.size = 8
	case op == 0xff:
		switch x.regOp {
		case 0, 1:
			x.size = x.opSize()
		case 2, 4, 6:
			x.size = 8
		}
	}
}

// legacySize0F is legacySize for the 0F map.
func (x *insn) legacySize0F() {
	op := x.op
	switch {
	case op >= 0x40 && op <= 0x4f, op == 0xaf, op == 0xb0, op == 0xb1, op == 0xc0, op == 0xc1,
		op == 0xa3, op == 0xab, op == 0xb3, op == 0xbb, op == 0xba, op == 0xbc, op == 0xbd, op == 0xb8:
		x.size = x.opSize()
		if op == 0xb0 || op == 0xc0 {
			x.size = 1
		}
	case op >= 0x90 && op <= 0x9f, op == 0xb6, op == 0xbe:
		x.size = 1
	case op == 0xb7, op == 0xbf:
		x.size = 2
	case op == 0xc3:
		x.size = 4
		if x.w {
			x.size = 8
		}
	case op == 0x10, op == 0x11, op >= 0x51 && op <= 0x5f && op != 0x5a && op != 0x5b:
		x.size = [...]int{16, 16, 4, 8}[x.pp]
	case op == 0x28, op == 0x29, op == 0x2b, op == 0x6f && x.pp != 0, op == 0x7f && x.pp != 0, op == 0xe7 && x.pp == 1:
		x.size = 16
	case op == 0x12, op == 0x13, op == 0x16, op == 0x17, op == 0xd6:
		x.size = 8
	case op == 0x2e, op == 0x2f:
		x.size = 4
		if x.pp == 1 {
			x.size = 8
		}
	case op == 0x6e, op == 0x7e:
		switch {
		case x.pp == 2 && op == 0x7e:
			x.size = 8
		case x.pp == 1:
			x.size = 4
			if x.w {
				x.size = 8
			}
		}
	case op == 0x2a && x.pp >= 2:
		x.size = 4
		if x.w {
			x.size = 8
		}
	case op == 0x2c, op == 0x2d:
		x.size = [...]int{0, 0, 4, 8}[x.pp]
	case x.pp == 1 && (op >= 0x60 && op <= 0x76 || op >= 0xd1 && op <= 0xfe):
		x.size = 16
	}
}
