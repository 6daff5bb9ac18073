package reloc

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// mapping is one line of /proc/PID/maps.
type mapping struct {
	start, end, offset uint64
	perms              string
	path               string // as the process sees it; "" for anonymous
}

func parseMaps(data []byte) ([]mapping, error) {
	pm, err := procfs.ParseMaps(data)
	if err != nil {
		return nil, err
	}
	ms := make([]mapping, 0, len(pm))
	for _, p := range pm {
		m := mapping{start: p.Start, end: p.End, offset: p.Offset, perms: p.Perms}
		if strings.HasPrefix(p.Path, "/") {
			m.path = p.Path
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// deleted file counts: map_files still reaches it.
func findLib(ms []mapping, base string) (mapping, bool) {
	for _, m := range ms {
		name, _ := elfsafe.MapsPath(m.path)
		if m.offset == 0 && m.path != "" && filepath.Base(name) == base {
			return m, true
		}
	}
	return mapping{}, false
}

// containing returns the file-backed mapping that holds addr.
func containing(ms []mapping, addr uint64) (mapping, bool) {
	for _, m := range ms {
		if addr >= m.start && addr < m.end && m.path != "" {
			return m, true
		}
	}
	return mapping{}, false
}

// openMapped opens the file of mapping m of process pid the one way a
// target's file is opened: the very file mapped, or its path inside the
// process's root without symlinks; a regular file only, its sections
// capped.
func openMapped(pid int, m mapping) (*elfsafe.File, error) {
	return elfsafe.OpenMapped("/proc", pid, m.start, m.end, m.path)
}

// CopyTarget is one resolved copy implementation: the code that libjvm's
// GOT slots for Imports point to in this process.
type CopyTarget struct {
	Imports []string // e.g. ["memmove", "memcpy"] when both share it
	Addr    uint64   // runtime address in the process
	Lib     string   // library holding it, as the process sees it (libc.so.6)
	Offset  uint64   // file offset in Lib: UprobeOptions.Address
	Symbol  string   // name in Lib's symbol tables, "" if stripped
}

// memReader reads the target's memory; a targetmem.Reader in production,
// a fake in tests.
type memReader interface {
	ReadAt(p []byte, off int64) (int, error)
}

// resolveCopies reads libjvm's GOT slots for memmove/memcpy in the live
// process and maps the implementations to library file offsets. libjvm is
// linked BIND_NOW (design.md), so the slots hold the IFUNC-selected
// implementation from startup on. Imports resolving to the same code share
// one target.
func resolveCopies(jvm *elfsafe.File, ms []mapping, jvmMap mapping, mem memReader) ([]CopyTarget, error) {
	slots, err := gotSlots(jvm, copyImports)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrGOT, err)
	}
	first, err := firstLoadVaddr(jvm)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrGOT, err)
	}
	base := jvmMap.start - first
	var targets []CopyTarget
	for _, imp := range copyImports {
		for _, slot := range slots[imp] {
			var b [8]byte
			if _, err := mem.ReadAt(b[:], int64(base+slot)); err != nil {
				return nil, fmt.Errorf("%w: read %s slot at %#x: %w", ErrGOT, imp, base+slot, err)
			}
			addr := binary.LittleEndian.Uint64(b[:])
			m, ok := containing(ms, addr)
			if !ok {
				return nil, fmt.Errorf("%w: %s slot holds %#x, in no file mapping", ErrGOT, imp, addr)
			}
			if m.path == jvmMap.path {
				// A lazily bound slot still points at libjvm's PLT stub.
				return nil, fmt.Errorf("%w: %s slot holds %#x inside libjvm (not bound yet)", ErrGOT, imp, addr)
			}
			off := addr - m.start + m.offset
			merged := false
			for i := range targets {
				if targets[i].Addr == addr {
					if !contains(targets[i].Imports, imp) {
						targets[i].Imports = append(targets[i].Imports, imp)
					}
					merged = true
				}
			}
			if !merged {
				targets = append(targets, CopyTarget{Imports: []string{imp}, Addr: addr, Lib: m.path, Offset: off})
			}
		}
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("%w: libjvm imports neither memmove nor memcpy", ErrGOT)
	}
	return targets, nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// symbolAt names the function of an ELF file that holds file offset off,
// from .symtab or .dynsym; "" when the file is stripped of it (libc's
// IFUNC implementations are local symbols, absent from .dynsym).
func symbolAt(f *elfsafe.File, off uint64) string {
	for _, typ := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
		syms, err := f.Symbols(typ)
		if err != nil {
			continue
		}
		for i := 1; i < syms.Len(); i++ {
			s := syms.At(i)
			if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Size == 0 {
				continue
			}
			so, err := fileOffset(f, s.Value)
			if err == nil && off >= so && off-so < s.Size {
				return string(s.Name)
			}
		}
	}
	return ""
}
