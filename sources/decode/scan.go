package decode

// maxScan bounds the instructions StoredConst looks at: an allocation's
// header stores follow its TLAB bump within a handful of instructions.
const maxScan = 24

// Scan is how StoredConst ended.
type Scan uint8

const (
	// ScanStopped: no such store before a branch, a write of the base
	// register, an undecodable instruction or the scan's limit.
	ScanStopped Scan = iota
	// ScanFound: the store was found.
	ScanFound
	// ScanShort: the code ended first; more bytes may find it.
	ScanShort
)

// StoredConst scans straight-line code from code[0] for a store of a
// constant of size bytes (4 or 8) to disp(base), as JIT code initialises a
// new object's header, and returns the constant. The constant is the
// store's immediate, or a register that a movabs earlier in the scan
// loaded. The scan stops at a branch, call or return, at an instruction
// that may write base (or that it cannot decode), and after maxScan
// instructions: past those, base may no longer hold the same object.
func StoredConst(code []byte, base int8, disp int64, size int) (uint64, Scan) {
	if base < 0 || base >= 16 || base == 4 {
		return 0, ScanStopped
	}
	var x insn
	var known [16]uint64
	var loaded uint16 // registers holding a movabs constant
	for n := 0; n < maxScan; n++ {
		if len(code) == 0 {
			return 0, ScanShort
		}
		if !x.decode(code) {
			if len(code) < 15 {
				return 0, ScanShort // perhaps an instruction cut short
			}
			return 0, ScanStopped
		}
		b := code[:x.n]
		code = code[x.n:]
		if x.enc == encLegacy && x.mapSel == map1 {
			switch {
			case x.op == 0xc7 && x.modrm && x.regOp == 0 && x.mem && x.index == regNone && int(x.base) == int(base) && x.disp == disp:
				if w := storeWidth(&x); w == size && w <= 4 {
					return le(b[len(b)-4:]), ScanFound
				}
				return 0, ScanStopped
			case x.op == 0x89 && x.mem && x.index == regNone && int(x.base) == int(base) && x.disp == disp:
				if storeWidth(&x) == size && size == 8 && loaded&(1<<x.reg) != 0 {
					return known[x.reg], ScanFound
				}
				return 0, ScanStopped
			case x.op >= 0xb8 && x.op <= 0xbf && x.w:
				known[x.rm], loaded = le(b[len(b)-8:]), loaded|1<<x.rm
				if x.rm == uint8(base) {
					return 0, ScanStopped
				}
				continue
			}
		}
		if branches(&x) || mayWrite(&x, uint8(base)) {
			return 0, ScanStopped
		}
		// A register the instruction may write no longer holds its constant.
		for r := uint8(0); r < 16; r++ {
			if loaded&(1<<r) != 0 && mayWrite(&x, r) {
				loaded &^= 1 << r
			}
		}
	}
	return 0, ScanStopped
}

func le(b []byte) uint64 {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// storeWidth is the operand size of a legacy integer instruction.
func storeWidth(x *insn) int {
	switch {
	case x.w:
		return 8
	case x.has66:
		return 2
	}
	return 4
}

// branches says whether x may transfer control.
func branches(x *insn) bool {
	if x.enc != encLegacy {
		return false
	}
	switch x.mapSel {
	case map1:
		switch {
		case x.op >= 0x70 && x.op <= 0x7f, x.op >= 0xe0 && x.op <= 0xe3,
			x.op == 0xe8, x.op == 0xe9, x.op == 0xeb, x.op == 0xc2, x.op == 0xc3,
			x.op == 0xca, x.op == 0xcb, x.op == 0xcc, x.op == 0xcd, x.op == 0xcf, x.op == 0xf4:
			return true
		case x.op == 0xff && (x.regOp >= 2 && x.regOp <= 5):
			return true
		}
	case map0F:
		return x.op >= 0x80 && x.op <= 0x8f || x.op == 0x05 || x.op == 0x0b || x.op == 0x34
	}
	return false
}

// mayWrite over-approximates whether x writes general register r: wrongly
// saying yes only ends a scan early.
func mayWrite(x *insn, r uint8) bool {
	if x.enc != encLegacy {
		// Vector instructions write vector registers, except these forms
		// that put a result in a general register.
		switch x.mapSel {
		case map0F:
			return x.op == 0x7e || x.op == 0x93 || x.op == 0xd7 || x.op == 0x50 || x.op == 0xc5 || x.op == 0x2c || x.op == 0x2d
		case map3A:
			return x.op >= 0x14 && x.op <= 0x17 || x.op == 0xf0
		case map38:
			return x.op >= 0xf0
		}
		return false
	}
	if x.str || x.mapSel == map0F && (x.op == 0xa2 || x.op == 0x31 || x.op == 0xb0 || x.op == 0xb1 || x.op == 0xc7 || x.op >= 0xc8 && x.op <= 0xcf) {
		return true // string ops, cpuid, rdtsc, cmpxchg, bswap: implicit registers
	}
	if x.mapSel == map1 {
		switch {
		case x.op == 0x98, x.op == 0x99, (x.op == 0xf6 || x.op == 0xf7) && x.regOp >= 4: // cbw/cwd, mul/div
			return true
		case x.op >= 0x50 && x.op <= 0x57, x.op == 0xc9:
			return r == 4 // push, leave write rsp (and rbp: leave)
		case x.op >= 0x58 && x.op <= 0x5f, x.op >= 0x90 && x.op <= 0x97, x.op >= 0xb0 && x.op <= 0xbf:
			return x.rm == r || x.op >= 0x91 && x.op <= 0x97 && r == 0
		}
		if !x.modrm {
			return false
		}
		switch x.op {
		case 0x88, 0x89, 0x38, 0x39, 0x3a, 0x3b, 0x84, 0x85, 0xc6, 0xc7:
			// stores and compares: write memory, flags, or the rm register
			return x.mod == 3 && x.rm == r && (x.op == 0x88 || x.op == 0x89 || x.op == 0xc6 || x.op == 0xc7)
		case 0x8a, 0x8b, 0x8d, 0x63:
			return x.reg == r
		case 0x80, 0x81, 0x83, 0xc0, 0xc1, 0xd0, 0xd1, 0xd2, 0xd3, 0xfe, 0xff, 0xf6, 0xf7, 0x8f:
			return x.mod == 3 && x.rm == r && !(x.op >= 0x80 && x.op <= 0x83 && x.regOp == 7)
		}
		return x.reg == r || x.mod == 3 && x.rm == r
	}
	if x.mapSel == map0F && (x.op == 0x18 || x.op == 0x0d || x.op == 0x1f || x.op == 0xae) {
		return false // prefetch, nop, fences
	}
	return x.reg == r || x.mod == 3 && x.rm == r
}
