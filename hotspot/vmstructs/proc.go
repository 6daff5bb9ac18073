package vmstructs

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// Open reads the vmStructs of the HotSpot JVM pid, as /proc shows it. It
// needs the right to read the process's memory: root, or the JVM's own
// user where kernel.yama.ptrace_scope allows it.
func Open(pid int) (*Table, error) {
	syms, err := FindSymbols(procfs.Mount, pid)
	if err != nil {
		return nil, err
	}
	t, err := Read(targetmem.Open(pid), syms)
	if err != nil {
		return nil, fmt.Errorf("read vmStructs of pid %d: %w", pid, err)
	}
	return t, nil
}

// FindSymbols finds libjvm.so in the maps of process pid (procfs mounted
// at proc), and the runtime addresses of its exported vmStructs symbols:
// their values in its .dynsym plus its load bias. The library is opened
// through /proc/PID/map_files when possible (elfsafe.OpenMapped), so it is
// the very file mapped.
func FindSymbols(proc string, pid int) (Symbols, error) {
	maps, err := procfs.Read(proc, pid, "maps")
	if err != nil {
		return Symbols{}, fmt.Errorf("read maps of pid %d: %w", pid, err)
	}
	if kind, _ := procfs.ClassifyMaps(maps); kind == procfs.OpenJ9 {
		return Symbols{}, fmt.Errorf("%w: pid %d runs OpenJ9, which has no HotSpot vmStructs", ErrNotHotSpot, pid)
	}
	m, ok := findLibJVM(maps)
	if !ok {
		return Symbols{}, fmt.Errorf("%w: pid %d maps no libjvm.so: not a JVM, or one still starting (try again once it runs)", ErrNotHotSpot, pid)
	}
	ef, err := elfsafe.OpenMapped(proc, pid, m.start, m.end, m.path)
	if err != nil {
		return Symbols{}, fmt.Errorf("open libjvm of pid %d: %w", pid, err)
	}
	defer ef.Close()
	syms, err := symbolsOf(ef, m.start)
	if err != nil {
		return Symbols{}, fmt.Errorf("libjvm %q of pid %d: %w", m.path, pid, err)
	}
	syms.Lib = m.path
	return syms, nil
}

// symbolsOf resolves SymbolNames in ef, mapped at file offset 0 at start.
func symbolsOf(ef *elfsafe.File, start uint64) (Symbols, error) {
	if ef.Class != elf.ELFCLASS64 || ef.FileHeader.Data != elf.ELFDATA2LSB {
		return Symbols{}, fmt.Errorf("%w: a %s %s library; only 64-bit little-endian JVMs are supported", ErrNotHotSpot, ef.Class, ef.FileHeader.Data)
	}
	// The segment holding file offset 0 is mapped at the load bias plus
	// its page-aligned p_vaddr.
	var first *elf.Prog
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && (first == nil || p.Off < first.Off) {
			first = p
		}
	}
	if first == nil || first.Off >= pageSize || first.Vaddr < first.Off || (first.Vaddr-first.Off)%pageSize != 0 {
		return Symbols{}, fmt.Errorf("%w: no loadable segment at file offset 0", ErrNotHotSpot)
	}
	link := first.Vaddr - first.Off
	if start < link {
		return Symbols{}, fmt.Errorf("%w: mapped at %#x, below its first segment's address %#x", ErrNotHotSpot, start, link)
	}
	syms := Symbols{Base: start - link, Addrs: make(map[string]uint64, len(SymbolNames))}

	tab, err := ef.Symbols(elf.SHT_DYNSYM)
	if errors.Is(err, elf.ErrNoSymbols) {
		return Symbols{}, fmt.Errorf("%w: no .dynsym", ErrNotHotSpot)
	}
	if err != nil {
		return Symbols{}, fmt.Errorf("read .dynsym: %w", err)
	}
	want := make(map[string]bool, len(SymbolNames))
	for _, n := range SymbolNames {
		want[n] = true
	}
	for i := 1; i < tab.Len(); i++ {
		s := tab.At(i)
		if elf.ST_TYPE(s.Info) != elf.STT_OBJECT || s.Section == elf.SHN_UNDEF || s.Value == 0 || !want[string(s.Name)] {
			continue
		}
		syms.Addrs[string(s.Name)] = syms.Base + s.Value
	}
	return syms, nil
}

// mapping is the part of a /proc/PID/maps line findLibJVM needs.
type mapping struct {
	start, end uint64
	path       string
}

// findLibJVM returns the mapping of libjvm.so's file offset 0, where its
// ELF header and first segment are. Lines procfs cannot parse are skipped.
func findLibJVM(maps []byte) (mapping, bool) {
	for len(maps) > 0 {
		var line []byte
		line, maps, _ = bytes.Cut(maps, []byte{'\n'})
		m, err := procfs.ParseMapsLine(string(line))
		if err != nil || m.Offset != 0 || m.End <= m.Start || !strings.HasPrefix(m.Path, "/") {
			continue
		}
		if name, _ := elfsafe.MapsPath(m.Path); filepath.Base(name) == "libjvm.so" {
			return mapping{m.Start, m.End, m.Path}, true
		}
	}
	return mapping{}, false
}

// FindStatics finds the runtime addresses of names, static data of
// libjvm.so in process pid that vmStructs does not export, in its .symtab
// (JDK builds such as Temurin's keep it; a stripped library has none).
// A name it does not find is absent from the map.
func FindStatics(proc string, pid int, names []string) (map[string]uint64, error) {
	maps, err := procfs.Read(proc, pid, "maps")
	if err != nil {
		return nil, fmt.Errorf("read maps of pid %d: %w", pid, err)
	}
	m, ok := findLibJVM(maps)
	if !ok {
		return nil, fmt.Errorf("%w: pid %d maps no libjvm.so", ErrNotHotSpot, pid)
	}
	ef, err := elfsafe.OpenMapped(proc, pid, m.start, m.end, m.path)
	if err != nil {
		return nil, fmt.Errorf("open libjvm of pid %d: %w", pid, err)
	}
	defer ef.Close()
	base, err := symbolsOf(ef, m.start)
	if err != nil {
		return nil, fmt.Errorf("libjvm %q of pid %d: %w", m.path, pid, err)
	}
	tab, err := ef.Symbols(elf.SHT_SYMTAB)
	if err != nil {
		return nil, fmt.Errorf("libjvm %q of pid %d: read .symtab: %w", m.path, pid, err)
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	out := make(map[string]uint64, len(names))
	for i := 1; i < tab.Len(); i++ {
		s := tab.At(i)
		if elf.ST_TYPE(s.Info) != elf.STT_OBJECT || s.Section == elf.SHN_UNDEF || s.Value == 0 || !want[string(s.Name)] {
			continue
		}
		out[string(s.Name)] = base.Base + s.Value
	}
	return out, nil
}
