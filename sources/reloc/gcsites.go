package reloc

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/arch/x86/x86asm"

	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
)

// GC copy sites.
//
// HotSpot's Serial, Parallel and G1 collectors copy an object of more than
// 8 words with Copy::aligned_disjoint_words (memcpy: evacuation,
// promotion) or Copy::aligned_conjoint_words (memmove: sliding
// compaction); smaller ones are copied inline (copy_x86.hpp), and djx-bpf
// tracks nothing that small. Both end in a direct call (or tail jump) to
// memcpy@plt / memmove@plt inside the collector's own functions, which
// libjvm.so's .symtab names. A uprobe on each such call instruction sees
// memcpy's arguments in rdi, rsi, rdx, exactly as a uprobe on libc's
// memmove would, but traps only when a collector copies: nothing outside
// GC pauses, and inside a pause only the collector's copies of objects
// larger than 64 bytes, not every memcpy of every thread. The kernel
// emulates call rel32 and jmp rel32, so the probe needs no single-step.
//
// The functions are found by the mangled prefix of their class (and
// method), so templated and cloned variants (copy_unmarked_to_survivor_space
// <true>/<false>, ".constprop.0") match without a demangler. gcCopyFuncs
// lists them for JDK 11 to 25; a JDK that renames them loses a category
// (collector, young/full), and AddJVM then falls back to libc's memmove.

// Phase says which kind of pause runs a copy site.
type Phase string

// Phases of a GC copy site.
const (
	Young Phase = "young" // evacuation / promotion (scavenge)
	Full  Phase = "full"  // full-GC compaction
)

// gcCopyFunc names functions of one collector and phase whose calls of
// memcpy/memmove are object copies; name is "Class" (every method) or
// "Class::method".
type gcCopyFunc struct {
	gc    string
	phase Phase
	name  string
}

var gcCopyFuncs = []gcCopyFunc{
	// Serial young: DefNew copies to survivor or promotes to the old
	// generation (Generation::promote up to JDK 20, TenuredGeneration
	// after), and on promotion failure the heap copies itself.
	{"Serial", Young, "DefNewGeneration"},
	{"Serial", Young, "Generation::promote"},
	{"Serial", Young, "TenuredGeneration::promote"},
	{"Serial", Young, "TenuredGeneration::promote_object"},
	{"Serial", Young, "GenCollectedHeap::handle_failed_promotion"},
	{"Serial", Young, "SerialHeap::handle_failed_promotion"},
	// Serial full: mark-compact (CompactibleSpace::compact through JDK 20,
	// SerialFullGC from 23 with the compaction inlined).
	{"Serial", Full, "CompactibleSpace::compact"},
	{"Serial", Full, "ContiguousSpace::compact"},
	{"Serial", Full, "MarkSweep"},
	{"Serial", Full, "GenMarkSweep"},
	{"Serial", Full, "SerialFullGC"},
	{"Serial", Full, "Compacter"},
	// Parallel young: PSPromotionManager::copy_unmarked_to_survivor_space
	// <promote_immediately>, inlined into the card scan on JDK 25.
	{"Parallel", Young, "PSPromotionManager"},
	{"Parallel", Young, "PSCardTable"},
	{"Parallel", Young, "PSScavenge"},
	// Parallel full: region filling, including shadow regions copied back.
	{"Parallel", Full, "PSParallelCompact"},
	{"Parallel", Full, "MoveAndUpdateClosure"},
	{"Parallel", Full, "MoveAndUpdateShadowClosure"},
	// G1 young and mixed: evacuation (do_copy_to_survivor_space, inlined
	// into the queue trimming).
	{"G1", Young, "G1ParScanThreadState"},
	// G1 full: compaction, and on JDK 21+ humongous objects too.
	{"G1", Full, "G1FullGCCompactTask"},
}

// Collectors whose copy sites AddJVM requires, young and full.
var siteCollectors = []string{"Serial", "Parallel", "G1"}

// mangledPrefixes returns the Itanium-mangled beginnings of the symbols of
// "A::b": "_ZN1A1b" and "_ZNK1A1b" (const methods).
func mangledPrefixes(name string) []string {
	var enc strings.Builder
	for _, part := range strings.Split(name, "::") {
		enc.WriteString(strconv.Itoa(len(part)))
		enc.WriteString(part)
	}
	e := enc.String()
	return []string{"_ZN" + e, "_ZNK" + e}
}

// gcFuncPrefixes are the mangled prefixes of gcCopyFuncs, index for index.
var gcFuncPrefixes = func() [][]string {
	ps := make([][]string, len(gcCopyFuncs))
	for i, g := range gcCopyFuncs {
		ps[i] = mangledPrefixes(g.name)
	}
	return ps
}()

// matchGCFunc returns the entry of gcCopyFuncs that a mangled symbol
// belongs to. The length before each component makes a prefix match whole
// components only.
func matchGCFunc(sym string) (gcCopyFunc, bool) {
	if !strings.HasPrefix(sym, "_ZN") {
		return gcCopyFunc{}, false
	}
	for i, ps := range gcFuncPrefixes {
		for _, p := range ps {
			if strings.HasPrefix(sym, p) {
				return gcCopyFuncs[i], true
			}
		}
	}
	return gcCopyFunc{}, false
}

// Site is a call of memcpy or memmove inside a collector's copy function.
type Site struct {
	GC     string // "Serial", "Parallel" or "G1"
	Phase  Phase
	Func   string // mangled symbol
	Callee string // "memcpy" or "memmove"
	Tail   bool   // a tail jump rather than a call
	// Addr is the instruction's link-time address; Offset its file
	// offset, where the uprobe goes.
	Addr, Offset uint64
}

// ErrNoSymtab means libjvm.so has no .symtab (stripped), so the collectors'
// copy functions cannot be found and copies are caught in libc's memmove.
var ErrNoSymtab = errors.New("libjvm.so has no symbol table (stripped)")

// ErrNoSites means libjvm.so's symbols lack the copy sites of a collector
// (an unknown JDK version), so copies are caught in libc's memmove.
var ErrNoSites = errors.New("libjvm.so has no GC copy sites for some collectors")

// copySlots maps the addresses of libjvm's GOT slots for memcpy/memmove
// to the import's name.
func copySlots(f *elfsafe.File) (map[uint64]string, error) {
	slots, err := gotSlots(f, copyImports)
	if err != nil {
		return nil, err
	}
	bySlot := map[uint64]string{}
	for name, ss := range slots {
		for _, s := range ss {
			bySlot[s] = name
		}
	}
	return bySlot, nil
}

// copyStubs maps the addresses of libjvm's PLT stubs that jump through the
// GOT slots of memcpy/memmove to the import's name. Each stub (in .plt,
// .plt.sec or .plt.got) is a jmp *slot(%rip), possibly after endbr64 or
// with a bnd prefix; the stub's address is its 16- or 8-byte entry start.
func copyStubs(f *elfsafe.File, bySlot map[uint64]string) (map[uint64]string, error) {
	stubs := map[uint64]string{}
	for _, sec := range f.Sections {
		if sec.Name != ".plt" && sec.Name != ".plt.sec" && sec.Name != ".plt.got" {
			continue
		}
		data, err := f.DataMax(sec, maxSmallSection)
		if err != nil {
			return nil, err
		}
		entry := sec.Entsize
		if entry == 0 {
			entry = 16
		}
		for off := 0; off < len(data); {
			inst, err := x86asm.Decode(data[off:], 64)
			if err != nil {
				off++
				continue
			}
			pc := sec.Addr + uint64(off)
			if inst.Op == x86asm.JMP {
				if m, ok := inst.Args[0].(x86asm.Mem); ok && m.Base == x86asm.RIP && m.Index == 0 {
					slot := pc + uint64(inst.Len) + uint64(m.Disp)
					if name, ok := bySlot[slot]; ok {
						start := sec.Addr + (pc-sec.Addr)/entry*entry
						stubs[start] = name
					}
				}
			}
			off += inst.Len
		}
	}
	return stubs, nil
}

// gcFunc is a function symbol of a collector's copy path.
type gcFunc struct {
	name        string
	value, size uint64
	g           gcCopyFunc
}

// gcFuncs reads the collectors' copy functions from .symtab without
// materializing its 57-70k names: the time AddJVM spends here is time the
// JVM's GCs go unobserved. Aliases (one address, several names) are
// returned once.
func gcFuncs(f *elfsafe.File) ([]gcFunc, error) {
	syms, err := f.Symbols(elf.SHT_SYMTAB)
	if errors.Is(err, elf.ErrNoSymbols) {
		return nil, ErrNoSymtab
	}
	if err != nil {
		return nil, fmt.Errorf("read .symtab: %w", err)
	}
	zn := []byte("_ZN")
	seen := map[uint64]bool{}
	var out []gcFunc
	for i := 1; i < syms.Len(); i++ {
		s := syms.At(i)
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Size == 0 || !bytes.HasPrefix(s.Name, zn) || seen[s.Value] {
			continue
		}
		sym := string(s.Name)
		g, ok := matchGCFunc(sym)
		if !ok {
			continue
		}
		seen[s.Value] = true
		out = append(out, gcFunc{sym, s.Value, s.Size, g})
	}
	if len(out) == 0 && syms.Len() <= 1 {
		return nil, ErrNoSymtab
	}
	return out, nil
}

// gcCopySites disassembles the collectors' copy functions of libjvm.so (f)
// and returns their calls of memcpy/memmove, through the PLT (call/jmp
// rel32 to a stub) or through the GOT directly (call/jmp *slot(%rip), as
// -fno-plt builds emit), sorted by address. Functions without a byte
// sequence that could be such a call are not disassembled.
func gcCopySites(f *elfsafe.File) ([]Site, error) {
	funcs, err := gcFuncs(f)
	if err != nil {
		return nil, err
	}
	bySlot, err := copySlots(f)
	if err != nil {
		return nil, err
	}
	stubs, err := copyStubs(f, bySlot)
	if err != nil {
		return nil, err
	}
	text := f.Section(".text")
	if text == nil {
		return nil, errors.New("libjvm.so has no .text")
	}
	// Functions are read from .text one by one; their sizes are the
	// symbol table's to say, so in all no more than .text is read.
	if err := f.Check(text); err != nil {
		return nil, err
	}
	budget := text.Size
	// target returns the copy function a call/jmp at pc reaches, if any.
	target := func(inst x86asm.Inst, next uint64) string {
		switch a := inst.Args[0].(type) {
		case x86asm.Rel:
			return stubs[next+uint64(int64(a))]
		case x86asm.Mem:
			if a.Base == x86asm.RIP && a.Index == 0 {
				return bySlot[next+uint64(a.Disp)]
			}
		}
		return ""
	}
	var sites []Site
	for _, fn := range funcs {
		if fn.value < text.Addr || fn.size > text.Size || fn.value-text.Addr > text.Size-fn.size {
			continue
		}
		if fn.size > budget {
			return nil, fmt.Errorf("copy functions overlap: more than .text's %d bytes to read: %w", text.Size, elfsafe.ErrTooLarge)
		}
		budget -= fn.size
		code := make([]byte, fn.size)
		if _, err := text.ReadAt(code, int64(fn.value-text.Addr)); err != nil {
			return nil, fmt.Errorf("read %s: %w", fn.name, err)
		}
		if !mayCallCopy(code, fn.value, stubs, bySlot) {
			continue
		}
		for off := 0; off < len(code); {
			inst, err := x86asm.Decode(code[off:], 64)
			if err != nil {
				off++
				continue
			}
			pc := fn.value + uint64(off)
			if inst.Op == x86asm.CALL || inst.Op == x86asm.JMP {
				if callee := target(inst, pc+uint64(inst.Len)); callee != "" {
					fo, err := fileOffset(f, pc)
					if err != nil {
						return nil, fmt.Errorf("%s: %w", fn.name, err)
					}
					sites = append(sites, Site{GC: fn.g.gc, Phase: fn.g.phase, Func: fn.name, Callee: callee,
						Tail: inst.Op == x86asm.JMP, Addr: pc, Offset: fo})
				}
			}
			off += inst.Len
		}
	}
	sort.Slice(sites, func(i, j int) bool { return sites[i].Addr < sites[j].Addr })
	return sites, nil
}

// mayCallCopy says whether code (at address base) holds, at any byte, an
// encoding of call/jmp rel32 to a copy stub or call/jmp *slot(%rip) of a
// copy import: only then is it worth disassembling.
func mayCallCopy(code []byte, base uint64, stubs, slots map[uint64]string) bool {
	le := binary.LittleEndian
	for i := 0; i+5 <= len(code); i++ {
		switch {
		case code[i] == 0xe8 || code[i] == 0xe9:
			next := base + uint64(i) + 5
			if stubs[next+uint64(int64(int32(le.Uint32(code[i+1:]))))] != "" {
				return true
			}
		case code[i] == 0xff && i+6 <= len(code) && (code[i+1] == 0x15 || code[i+1] == 0x25):
			next := base + uint64(i) + 6
			if slots[next+uint64(int64(int32(le.Uint32(code[i+2:]))))] != "" {
				return true
			}
		}
	}
	return false
}

// checkSites says which collector and phase has no site: a JDK whose copy
// functions are not in gcCopyFuncs.
func checkSites(sites []Site) error {
	have := map[string]bool{}
	for _, s := range sites {
		have[s.GC+" "+string(s.Phase)] = true
	}
	var missing []string
	for _, gc := range siteCollectors {
		for _, p := range []Phase{Young, Full} {
			if !have[gc+" "+string(p)] {
				missing = append(missing, gc+" "+string(p))
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: none for %s", ErrNoSites, strings.Join(missing, ", "))
	}
	return nil
}

// siteCache keeps the copy sites of each libjvm.so seen, by file identity
// (device, inode, size, modification time of the open file: the same file
// is reached as /usr/lib/jvm/... and through /proc/PID/map_files): finding
// them takes 50-150 ms, during which the JVM's GCs go unobserved, and scan
// attaches many JVMs of one JDK.
var siteCache = &sitesCache{m: map[elfsafe.Key]sitesVal{}}

type sitesVal struct {
	sites []Site
	err   error
}

type sitesCache struct {
	mu sync.Mutex
	m  map[elfsafe.Key]sitesVal
}

// sites returns gcCopySites(f).
func (c *sitesCache) sites(f *elfsafe.File) ([]Site, error) {
	k := f.Key()
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[k]; ok {
		return v.sites, v.err
	}
	s, err := gcCopySites(f)
	c.m[k] = sitesVal{s, err}
	return s, err
}

// CopyProbes describes the copy probes AddJVM attached, for a note: the
// collectors' copy sites, or the libc implementation and why the sites
// were not used.
func (i Info) CopyProbes() string {
	if len(i.Sites) > 0 {
		funcs := map[string]bool{}
		for _, s := range i.Sites {
			funcs[s.Func] = true
		}
		return fmt.Sprintf("%d memcpy/memmove calls in %d copy functions of the Serial, Parallel and G1 collectors in %s (trap only in GC pauses)",
			len(i.Sites), len(funcs), filepath.Base(i.LibJVM))
	}
	if len(i.Copies) == 0 {
		return "none"
	}
	var parts []string
	for _, c := range i.Copies {
		parts = append(parts, fmt.Sprintf("%s+%#x (%s)", c.Lib, c.Offset, strings.Join(c.Imports, "/")))
	}
	s := "libc " + strings.Join(parts, ", ") + ", libjvm's memmove/memcpy: every copy of every thread traps"
	if i.SitesErr != nil {
		s += "; fallback because " + i.SitesErr.Error()
	}
	return s
}

// Prepare finds and caches the copy sites of the libjvm.so at path (as
// this process sees it), so that a later AddJVM of a JVM using it attaches
// at once. In launch mode, call it before starting the JVM: the first
// young GC can come within 0.3 s of the JVM's start, and it moves whatever
// the program built first.
func Prepare(libjvm string) error {
	f, err := elfsafe.OpenPath(libjvm)
	if err != nil {
		return fmt.Errorf("prepare copy sites: %w", err)
	}
	defer f.Close()
	sites, err := siteCache.sites(f)
	if err == nil {
		err = checkSites(sites)
	}
	if err != nil {
		return fmt.Errorf("prepare copy sites of %s: %w", libjvm, err)
	}
	return nil
}

// PrepareJava is Prepare for the libjvm.so of the java launcher at path.
func PrepareJava(java string) error {
	lib, err := jvmsym.LibJVM(java)
	if err != nil {
		return fmt.Errorf("prepare copy sites: %w", err)
	}
	return Prepare(lib)
}
