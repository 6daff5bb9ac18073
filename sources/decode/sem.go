package decode

// Register semantics for the look-back dependency check. They are
// deliberately approximate in one direction only: the read set of the
// instruction at ip may be too large (it then accepts a look-back candidate
// whose value is not consumed, whose address is still right), but the write
// set of a look-back load must be exact for the whitelisted forms, because it
// decides whether the load clobbered its own address registers.

// addrRegs returns the GPRs the memory operand's address uses.
func (x *insn) addrRegs() uint64 {
	var s uint64
	if x.base >= 0 && x.base < 16 {
		s |= gprBit(uint8(x.base))
	}
	if x.index >= 0 && !x.vsib {
		s |= gprBit(uint8(x.index))
	}
	return s
}

// store reports, best effort, whether the memory operand is written.
func (x *insn) store() bool {
	op, pp := x.op, x.pp
	if x.enc != encLegacy {
		switch x.mapSel {
		case map0F:
			switch op {
			case 0x11, 0x13, 0x17, 0x29, 0x2b, 0xe7:
				return true
			case 0x7f:
				return pp != 0
			case 0x7e, 0xd6:
				return pp == 1
			}
		case map38:
			if pp == 2 && (op>>4 >= 1 && op>>4 <= 3) && op&15 <= 5 {
				return x.enc == encEVEX // VPMOV* down-converting stores
			}
			switch op {
			case 0x2e, 0x2f, 0x8e:
				return x.enc == encVEX
			case 0x8a, 0x8b, 0x63, 0xa0, 0xa1, 0xa2, 0xa3:
				return x.enc == encEVEX
			}
		case map3A:
			switch op {
			case 0x14, 0x15, 0x16, 0x17, 0x19, 0x1b, 0x1d, 0x39, 0x3b:
				return true
			}
		}
		return false
	}
	switch x.mapSel {
	case map1:
		switch {
		case op < 0x40 && op&7 <= 1 && op&0x38 != 0x38: // ALU r/m, r (not CMP)
			return true
		case op == 0x86, op == 0x87, op == 0x88, op == 0x89, op == 0x8c, op == 0x8f,
			op == 0xc6, op == 0xc7, op == 0xa2, op == 0xa3, op == 0xaa, op == 0xab, op == 0xa4, op == 0xa5:
			return true
		case op >= 0x80 && op <= 0x83:
			return x.regOp != 7
		case op == 0xc0, op == 0xc1, op >= 0xd0 && op <= 0xd3:
			return true
		case op == 0xf6, op == 0xf7:
			return x.regOp == 2 || x.regOp == 3
		case op == 0xfe, op == 0xff:
			return x.regOp <= 1
		}
	case map0F:
		switch {
		case op >= 0x90 && op <= 0x9f, op == 0xab, op == 0xb3, op == 0xbb, op == 0xb0, op == 0xb1,
			op == 0xc0, op == 0xc1, op == 0xc3, op == 0x11, op == 0x13, op == 0x17, op == 0x29, op == 0x2b, op == 0xe7:
			return true
		case op == 0xba:
			return x.regOp >= 5
		case op == 0xc7:
			return x.regOp == 1
		case op == 0x7e:
			return pp != 2
		case op == 0x7f:
			return true
		case op == 0xd6:
			return pp == 1
		case op == 0xae:
			return x.regOp == 0 || x.regOp == 3 || x.regOp == 4 || x.regOp == 6
		}
	case map38:
		return op == 0xf1 && pp != 3 // MOVBE m, r
	case map3A:
		return pp == 1 && op >= 0x14 && op <= 0x17
	}
	return false
}

// loadDest returns the registers written by x if x is a load whose memory
// operand is a source and whose form is whitelisted, else ok=false.
func (x *insn) loadDest() (dst uint64, ok bool) {
	if !x.mem || x.str || !x.access() || x.vsib || x.store() {
		return 0, false
	}
	if x.enc != encLegacy {
		return x.vexLoadDest()
	}
	return x.legacyLoadDest()
}

// vexLoadDest is loadDest of a VEX/EVEX load: a vector register unless the
// opcode writes a GPR or the flags.
func (x *insn) vexLoadDest() (uint64, bool) {
	op := x.op
	reg := gprBit(x.reg)
	switch x.mapSel {
	case map0F:
		switch op {
		case 0xae, 0x50, 0xd7, 0xc5, 0x77:
			return 0, false
		case 0x2c, 0x2d:
			return reg, true
		case 0x2e, 0x2f:
			return flagsBit, true
		}
	case map38:
		switch op {
		case 0x17:
			return flagsBit, true
		case 0xf2:
			return reg | flagsBit, true // ANDN
		case 0xf3:
			return gprBit(x.vvvv) | flagsBit, true // BLSR/BLSMSK/BLSI
		case 0xf5, 0xf7:
			return reg, true
		case 0xf6:
			return reg | gprBit(x.vvvv), true // MULX
		case 0xf0, 0xf1, 0xf4:
			return 0, false
		}
	case map3A:
		if op == 0xf0 {
			return reg, true // RORX
		}
	}
	return vecBit(x.reg), true
}

// legacyLoadDest is loadDest of a legacy load.
func (x *insn) legacyLoadDest() (uint64, bool) {
	op, pp := x.op, x.pp
	reg := gprBit(x.reg)
	vreg := vecBit(x.reg)
	switch x.mapSel {
	case map1:
		switch op {
		case 0x8a, 0x8b, 0x63:
			return reg, true
		case 0x02, 0x03, 0x0a, 0x0b, 0x12, 0x13, 0x1a, 0x1b, 0x22, 0x23, 0x2a, 0x2b, 0x32, 0x33,
			0x69, 0x6b:
			return reg | flagsBit, true
		case 0x38, 0x39, 0x3a, 0x3b, 0x84, 0x85:
			return flagsBit, true
		case 0x80, 0x81, 0x83:
			if x.regOp == 7 {
				return flagsBit, true
			}
		case 0xf6, 0xf7:
			if x.regOp == 0 {
				return flagsBit, true
			}
		}
	case map0F:
		switch {
		case op == 0xb6, op == 0xb7, op == 0xbe, op == 0xbf, op >= 0x40 && op <= 0x4f:
			return reg, true
		case op == 0xaf, op == 0xbc, op == 0xbd, op == 0xb8 && pp == 2:
			return reg | flagsBit, true
		case op == 0x2c, op == 0x2d:
			return reg, true
		case op == 0x2e, op == 0x2f:
			return flagsBit, true
		case op == 0x10, op == 0x12, op == 0x14, op == 0x15, op == 0x16, op == 0x28,
			op >= 0x51 && op <= 0x5f, op == 0xc2, op == 0xc6:
			return vreg, true
		case op == 0x2a && pp >= 2:
			return vreg, true
		case pp == 1 && (op >= 0x60 && op <= 0x6f || op >= 0x74 && op <= 0x76 ||
			op >= 0xd1 && op <= 0xfe && op != 0xd6 && op != 0xd7 && op != 0xe7 && op != 0xf7):
			return vreg, true
		case op == 0x6f && pp == 2, op == 0x7e && pp == 2, op == 0x70:
			return vreg, true
		}
	case map38:
		switch {
		case op == 0xf0 && pp != 3, op == 0xf0 && pp == 3, op == 0xf1 && pp == 3:
			return reg, true // MOVBE r, m; CRC32
		case op == 0x17 && pp == 1:
			return flagsBit, true
		case pp == 1 && op <= 0x41:
			return vreg, true
		}
	case map3A:
		switch {
		case pp == 1 && (op >= 0x08 && op <= 0x0f || op >= 0x20 && op <= 0x22 || op >= 0x40 && op <= 0x42 || op == 0x44):
			return vreg, true
		}
	}
	return 0, false
}

// reads returns an over-approximation of the registers x reads.
func (x *insn) reads() uint64 {
	var s uint64
	if x.mem {
		s |= x.addrRegs()
	}
	if x.enc != encLegacy {
		s |= vecBit(x.vvvv) | gprBit(x.vvvv) | vecBit(x.reg) | gprBit(x.reg)
		if x.modrm && x.mod == 3 {
			s |= vecBit(x.rm) | gprBit(x.rm)
		}
		return s
	}
	if x.modrm {
		s |= x.modrmReads()
	}
	return s | x.implicitReads()
}

// modrmReads returns the registers a legacy instruction reads through its
// ModRM reg and register rm fields, leaving out those it only writes.
func (x *insn) modrmReads() uint64 {
	op, pp := x.op, x.pp
	intOp := x.mapSel == map1 || x.mapSel == map0F && (op >= 0x40 && op <= 0x4f ||
		op >= 0x90 && op <= 0xbf || op == 0xc0 || op == 0xc1 || op == 0xc7) ||
		x.mapSel == map38 && op >= 0xf0
	set := func(r uint8) uint64 {
		if intOp {
			return gprBit(r)
		}
		return gprBit(r) | vecBit(r)
	}
	regWriteOnly, rmWriteOnly := false, false
	switch x.mapSel {
	case map1:
		switch op {
		case 0x8a, 0x8b, 0x8d, 0x63:
			regWriteOnly = true
		case 0x88, 0x89, 0xc6, 0xc7:
			rmWriteOnly = true
		}
		// Group opcodes use reg as an opcode extension.
		if op >= 0x80 && op <= 0x83 || op == 0x8f || op == 0xc0 || op == 0xc1 || op == 0xc6 ||
			op == 0xc7 || op >= 0xd0 && op <= 0xd3 || op == 0xf6 || op == 0xf7 || op == 0xfe || op == 0xff {
			regWriteOnly = true
		}
	case map0F:
		switch {
		case op == 0xb6, op == 0xb7, op == 0xbe, op == 0xbf, op == 0x10 && pp < 2, op == 0x28,
			op == 0x6f, op == 0x6e, op == 0x2c, op == 0x2d, op == 0xb8, op == 0xbc, op == 0xbd:
			regWriteOnly = true
		case op >= 0x90 && op <= 0x9f:
			rmWriteOnly = true
			regWriteOnly = true
		case op == 0xba || op == 0xae || op == 0x18 || op == 0x0d || op == 0x1f:
			regWriteOnly = true
		}
	}
	var s uint64
	if !regWriteOnly {
		s |= set(x.reg)
	}
	if x.mod == 3 && !rmWriteOnly {
		s |= set(x.rm)
	}
	return s
}

// implicitReads returns the registers and flags a legacy instruction reads
// without naming them in ModRM: the stack pointer, rax, rcx, ...
func (x *insn) implicitReads() uint64 {
	const (
		rax = 1 << 0
		rcx = 1 << 1
		rdx = 1 << 2
		rsp = 1 << 4
		rbp = 1 << 5
		rsi = 1 << 6
		rdi = 1 << 7
	)
	op := x.op
	var s uint64
	switch x.mapSel {
	case map1:
		switch {
		case op >= 0x50 && op <= 0x57:
			s |= gprBit(x.rm) | rsp
		case op >= 0x58 && op <= 0x5f:
			s |= rsp
		case op >= 0x90 && op <= 0x97:
			s |= gprBit(x.rm) | rax
		case op < 0x40 && op&7 >= 4 && op&7 <= 5, op == 0xa8, op == 0xa9, op == 0x98, op == 0x99,
			op == 0xa2, op == 0xa3:
			s |= rax
		case op == 0xf6 || op == 0xf7:
			if x.regOp >= 4 {
				s |= rax | rdx
			}
		case op == 0xd2 || op == 0xd3:
			s |= rcx
		case op >= 0xe0 && op <= 0xe3:
			s |= rcx | flagsBit
		case op == 0x68, op == 0x6a, op == 0x8f, op == 0x9c, op == 0x9d, op == 0xc2, op == 0xc3,
			op == 0xe8, op == 0xc8:
			s |= rsp
		case op == 0xc9:
			s |= rsp | rbp
		case op == 0xff && (x.regOp == 2 || x.regOp == 6):
			s |= rsp
		case x.str:
			s |= rax | rcx | rsi | rdi
		}
		switch {
		case op >= 0x70 && op <= 0x7f, op >= 0x10 && op <= 0x1d && op&7 <= 5, op == 0x9c, op == 0x9f, op == 0xf5:
			s |= flagsBit
		case op >= 0x80 && op <= 0x83 && (x.regOp == 2 || x.regOp == 3):
			s |= flagsBit
		case (op == 0xc0 || op == 0xc1 || op >= 0xd0 && op <= 0xd3) && (x.regOp == 2 || x.regOp == 3):
			s |= flagsBit
		}
	case map0F:
		switch {
		case op >= 0x40 && op <= 0x4f, op >= 0x80 && op <= 0x9f:
			s |= flagsBit
		case op == 0xa5, op == 0xad:
			s |= rcx
		case op == 0xb0, op == 0xb1:
			s |= rax
		case op >= 0xc8 && op <= 0xcf:
			s |= gprBit(x.rm)
		}
	}
	return s
}
