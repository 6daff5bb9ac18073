package reloc

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
)

// copyImports are the functions whose GOT slots in libjvm.so lead to the
// copy implementation: HotSpot's Copy:: routines end in memmove (conjoint,
// e.g. compaction) or memcpy (disjoint, e.g. evacuation).
var copyImports = []string{"memmove", "memcpy"}

// gotSlots returns the link-time addresses of libjvm's GOT slots for the
// named imports: R_X86_64_JUMP_SLOT in .rela.plt and R_X86_64_GLOB_DAT in
// .rela.dyn (a function whose address is taken). Versioned names
// ("memcpy@GLIBC_2.14") match their base name. An import may have both.
func gotSlots(f *elfsafe.File, names []string) (map[string][]uint64, error) {
	if f.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("machine %s: only x86-64 is supported", f.Machine)
	}
	syms, err := f.Symbols(elf.SHT_DYNSYM)
	if err != nil {
		return nil, fmt.Errorf("read dynamic symbols: %w", err)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	slots := map[string][]uint64{}
	for _, s := range f.Sections {
		if s.Type != elf.SHT_RELA {
			continue
		}
		data, err := f.Data(s)
		if err != nil {
			return nil, err
		}
		for off := 0; off+24 <= len(data); off += 24 {
			r, info := f.ByteOrder.Uint64(data[off:]), f.ByteOrder.Uint64(data[off+8:])
			typ := elf.R_X86_64(elf.R_TYPE64(info))
			if typ != elf.R_X86_64_JMP_SLOT && typ != elf.R_X86_64_GLOB_DAT {
				continue
			}
			idx := int(elf.R_SYM64(info))
			if idx < 1 || idx >= syms.Len() {
				continue
			}
			name, _, _ := bytes.Cut(syms.At(idx).Name, []byte("@"))
			if want[string(name)] {
				slots[string(name)] = append(slots[string(name)], r)
			}
		}
	}
	return slots, nil
}

// fileOffset converts a link-time virtual address to a file offset through
// the PT_LOAD segment that maps it; uprobes are placed by file offset.
func fileOffset(f *elfsafe.File, vaddr uint64) (uint64, error) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && vaddr >= p.Vaddr && vaddr < p.Vaddr+p.Filesz {
			return vaddr - p.Vaddr + p.Off, nil
		}
	}
	return 0, fmt.Errorf("address %#x in no loadable segment", vaddr)
}

// firstLoadVaddr is the page-aligned p_vaddr of the first PT_LOAD: the
// mapping of file offset 0 starts at load base + this.
func firstLoadVaddr(f *elfsafe.File) (uint64, error) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			align := p.Align
			if align < 4096 {
				align = 4096
			}
			return p.Vaddr &^ (align - 1), nil
		}
	}
	return 0, errors.New("no loadable segment")
}

// Probe is one USDT site from .note.stapsdt.
type Probe struct {
	Provider, Name string
	// PC is the site's link-time address, adjusted for prelink by
	// .stapsdt.base; Offset is its file offset, where the uprobe goes.
	PC, Offset uint64
	// Semaphore is the file offset of the probe's enable counter, 0 if
	// none (HotSpot's have none, design.md).
	Semaphore uint64
	Args      string // e.g. "1@%dil"
}

// maxSmallSection caps the sections that are small in any real libjvm.so
// and are decoded byte by byte: .note.stapsdt (about 50 KiB) and the PLTs
// (about 20 KiB).
const maxSmallSection = 4 << 20

// ntStapsdt is the note type of SystemTap SDT probe descriptors.
const ntStapsdt = 3

// usdtProbes parses every SDT note of f. Notes record the .stapsdt.base
// address at link time; if the file was prelinked the section moved and
// every pc moves with it.
func usdtProbes(f *elfsafe.File) ([]Probe, error) {
	sec := f.Section(".note.stapsdt")
	if sec == nil {
		return nil, ErrNoUSDT
	}
	data, err := f.DataMax(sec, maxSmallSection)
	if err != nil {
		return nil, err
	}
	var baseAddr uint64
	haveBase := false
	if b := f.Section(".stapsdt.base"); b != nil {
		baseAddr, haveBase = b.Addr, true
	}
	bo := f.ByteOrder
	var probes []Probe
	for len(data) >= 12 {
		namesz, descsz, typ := bo.Uint32(data), bo.Uint32(data[4:]), bo.Uint32(data[8:])
		nameEnd := 12 + align4(uint64(namesz))
		descEnd := nameEnd + align4(uint64(descsz))
		if descEnd > uint64(len(data)) || nameEnd < 12+uint64(namesz) {
			return nil, fmt.Errorf("truncated note in .note.stapsdt")
		}
		owner := string(bytes.TrimRight(data[12:12+namesz], "\x00"))
		desc := data[nameEnd : nameEnd+uint64(descsz)]
		data = data[descEnd:]
		if owner != "stapsdt" || typ != ntStapsdt {
			continue
		}
		if len(desc) < 24 {
			return nil, fmt.Errorf("short stapsdt note (%d bytes)", len(desc))
		}
		p := Probe{PC: bo.Uint64(desc), Semaphore: bo.Uint64(desc[16:])}
		noteBase := bo.Uint64(desc[8:])
		strs := strings.SplitN(string(desc[24:]), "\x00", 4)
		if len(strs) < 3 {
			return nil, fmt.Errorf("stapsdt note without provider, name and args")
		}
		p.Provider, p.Name, p.Args = strs[0], strs[1], strs[2]
		if haveBase && noteBase != 0 {
			p.PC += baseAddr - noteBase
		}
		if p.Offset, err = fileOffset(f, p.PC); err != nil {
			return nil, fmt.Errorf("probe %s:%s: %w", p.Provider, p.Name, err)
		}
		if p.Semaphore != 0 {
			if p.Semaphore, err = fileOffset(f, p.Semaphore); err != nil {
				return nil, fmt.Errorf("probe %s:%s semaphore: %w", p.Provider, p.Name, err)
			}
		}
		probes = append(probes, p)
	}
	return probes, nil
}

func align4(n uint64) uint64 { return (n + 3) &^ 3 }

// USDT argument kinds, as encoded in the attach cookie for reloc.bpf.c.
const (
	argNone  = 0
	argConst = 1
	argReg   = 2
)

// ptRegs maps x86-64 register names (any width) to their index in the
// kernel's struct pt_regs, in 8-byte words.
var ptRegs = map[string]uint64{}

func init() {
	for i, names := range [][]string{
		{"r15", "r15d", "r15w", "r15b"},
		{"r14", "r14d", "r14w", "r14b"},
		{"r13", "r13d", "r13w", "r13b"},
		{"r12", "r12d", "r12w", "r12b"},
		{"rbp", "ebp", "bp", "bpl"},
		{"rbx", "ebx", "bx", "bl"},
		{"r11", "r11d", "r11w", "r11b"},
		{"r10", "r10d", "r10w", "r10b"},
		{"r9", "r9d", "r9w", "r9b"},
		{"r8", "r8d", "r8w", "r8b"},
		{"rax", "eax", "ax", "al"},
		{"rcx", "ecx", "cx", "cl"},
		{"rdx", "edx", "dx", "dl"},
		{"rsi", "esi", "si", "sil"},
		{"rdi", "edi", "di", "dil"},
	} {
		for _, n := range names {
			ptRegs[n] = uint64(i)
		}
	}
}

// argCookie encodes the first argument of an SDT arg string ("1@%dil",
// "-4@$1") for the BPF program: bits 0-7 kind, 8-15 pt_regs index, 16-23
// size, 32-63 constant. Memory operands ("8@-8(%rbp)") are not supported
// and give argNone; so does an empty string.
func argCookie(args string) (cookie uint64, ok bool) {
	first, _, _ := strings.Cut(strings.TrimSpace(args), " ")
	if first == "" {
		return argNone, false
	}
	sz, op, found := strings.Cut(first, "@")
	if !found {
		return argNone, false
	}
	size, err := strconv.Atoi(strings.TrimPrefix(sz, "-"))
	if err != nil || (size != 1 && size != 2 && size != 4 && size != 8) {
		return argNone, false
	}
	switch {
	case strings.HasPrefix(op, "$"):
		v, err := strconv.ParseInt(op[1:], 0, 64)
		if err != nil {
			return argNone, false
		}
		return argConst | uint64(size)<<16 | uint64(uint32(v))<<32, true
	case strings.HasPrefix(op, "%"):
		idx, known := ptRegs[op[1:]]
		if !known {
			return argNone, false
		}
		return argReg | idx<<8 | uint64(size)<<16, true
	}
	return argNone, false
}
