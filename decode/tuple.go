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

func tuple0F(op, pp, regOp uint8) tuple {
	scalar := func() tuple { // ss/sd forms by mandatory prefix
		switch pp {
		case 2:
			return tF4
		case 3:
			return tF8
		}
		return tFV
	}
	switch op {
	case 0x10, 0x11:
		if pp >= 2 {
			return scalar()
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
	case 0x13, 0x17:
		return tF8
	case 0x14, 0x15:
		return tFV
	case 0x28, 0x29, 0x2b:
		return tFVM
	case 0x2a:
		return tT1S // CVTSI2SS/SD: source integer size by W
	case 0x2c, 0x2d:
		return scalar()
	case 0x2e, 0x2f:
		if pp == 1 {
			return tF8
		}
		return tF4
	case 0x51, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5c, 0x5d, 0x5e, 0x5f, 0xc2:
		return scalar()
	case 0x5a:
		switch pp {
		case 0:
			return tHV
		case 1:
			return tFV
		}
		return scalar()
	case 0x5b:
		return tFV
	case 0x60, 0x61, 0x63, 0x64, 0x65, 0x67, 0x68, 0x69, 0x74, 0x75, 0x71:
		return tFVM
	case 0x62, 0x66, 0x6a, 0x6b, 0x6c, 0x6d, 0x76, 0x72:
		return tFV
	case 0x6e:
		return tT1S
	case 0x7e:
		if pp == 2 {
			return tF8
		}
		return tT1S
	case 0x6f, 0x7f:
		return tFVM
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
	case 0xc4:
		return tF2
	case 0xc6:
		return tFV
	case 0xd1, 0xd2, 0xd3, 0xe1, 0xe2, 0xf1, 0xf2, 0xf3:
		return tF16 // shift count from xmm/m128
	case 0xd6:
		return tF8
	case 0xd4, 0xdb, 0xdf, 0xeb, 0xef, 0xf4, 0xfa, 0xfb, 0xfe:
		return tFV
	case 0xd5, 0xd8, 0xd9, 0xda, 0xdc, 0xdd, 0xde, 0xe0, 0xe3, 0xe4, 0xe5, 0xe7,
		0xe8, 0xe9, 0xea, 0xec, 0xed, 0xee, 0xf5, 0xf6, 0xf8, 0xf9, 0xfc, 0xfd:
		return tFVM
	case 0xe6:
		if pp == 2 {
			return tHV
		}
		return tFV
	case 0xf0:
		return tFVM // VLDDQU
	}
	return tUnknown
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
	osz := 4
	switch {
	case x.w:
		osz = 8
	case x.has66:
		osz = 2
	}
	op := x.op
	switch x.mapSel {
	case map1:
		switch {
		case op < 0x40 && op&7 <= 3, op >= 0x84 && op <= 0x8b, op >= 0xa0 && op <= 0xa7,
			op >= 0xaa && op <= 0xaf, op == 0xc0, op == 0xc1, op == 0xc6, op == 0xc7,
			op >= 0xd0 && op <= 0xd3, op == 0xf6, op == 0xf7, op == 0xfe, op == 0x80:
			x.size = osz
			if op&1 == 0 { // byte forms have an even opcode here
				x.size = 1
			}
		case op == 0x69, op == 0x6b, op == 0x81, op == 0x83:
			x.size = osz
		case op == 0x63:
			x.size = 4
		case op == 0x8f:
			x.size = 8
		case op == 0xff:
			switch x.regOp {
			case 0, 1:
				x.size = osz
			case 2, 4, 6:
				x.size = 8
			}
		}
	case map0F:
		switch {
		case op >= 0x40 && op <= 0x4f, op == 0xaf, op == 0xb0, op == 0xb1, op == 0xc0, op == 0xc1,
			op == 0xa3, op == 0xab, op == 0xb3, op == 0xbb, op == 0xba, op == 0xbc, op == 0xbd, op == 0xb8:
			x.size = osz
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
	case map38:
		if op == 0xf0 || op == 0xf1 {
			if x.pp == 3 { // CRC32
				x.size = 1
				if op == 0xf1 {
					x.size = osz
				}
			} else {
				x.size = osz // MOVBE
			}
		}
	}
}
