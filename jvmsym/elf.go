package jvmsym

import (
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"weak"

	"github.com/ianlancetaylor/demangle"
)

// elfSym is one function symbol; end is exclusive.
type elfSym struct {
	start, end uint64
	name       string // raw, possibly mangled
}

// elfSyms is the function symbol table of one ELF file.
type elfSyms struct {
	loads []elf.ProgHeader // PT_LOAD segments
	syms  []elfSym         // sorted by start, non-overlapping

	mu        sync.Mutex
	demangled map[int]string // by index in syms
}

// symOrder sorts symbols by address and ranks aliases at one address: the
// one with the largest size, then the most visible binding, then the
// shortest name; the last rules only make the choice stable.
func symOrder(a, b elf.Symbol) int {
	if c := cmp.Compare(a.Value, b.Value); c != 0 {
		return c
	}
	if c := cmp.Compare(b.Size, a.Size); c != 0 {
		return c
	}
	rank := func(s elf.Symbol) int {
		switch elf.ST_BIND(s.Info) {
		case elf.STB_GLOBAL:
			return 0
		case elf.STB_WEAK:
			return 1
		}
		return 2
	}
	if c := cmp.Compare(rank(a), rank(b)); c != 0 {
		return c
	}
	if c := cmp.Compare(len(a.Name), len(b.Name)); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// loadELFSyms reads the PT_LOAD segments and the function symbols of .symtab
// and .dynsym (a stripped library still has the latter).
func loadELFSyms(f *os.File) (*elfSyms, error) {
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, fmt.Errorf("parse elf: %w", err)
	}
	defer ef.Close()
	es := &elfSyms{demangled: make(map[int]string)}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			es.loads = append(es.loads, p.ProgHeader)
		}
	}
	var all []elf.Symbol
	for _, read := range []func() ([]elf.Symbol, error){ef.Symbols, ef.DynamicSymbols} {
		syms, err := read()
		if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return nil, fmt.Errorf("read symbols: %w", err)
		}
		for _, s := range syms {
			t := elf.ST_TYPE(s.Info)
			// STT_LOOS is STT_GNU_IFUNC, the resolvers of e.g. memcpy.
			if (t == elf.STT_FUNC || t == elf.STT_LOOS) && s.Section != elf.SHN_UNDEF && s.Value != 0 {
				if at := strings.IndexByte(s.Name, '@'); at > 0 {
					s.Name = s.Name[:at] // "memcpy@@GLIBC_2.14"
				}
				all = append(all, s)
			}
		}
	}
	slices.SortFunc(all, symOrder)
	for i, s := range all {
		if i > 0 && all[i-1].Value == s.Value {
			continue // an alias; the first one ranks best
		}
		end := s.Value + s.Size
		next := uint64(0)
		for _, n := range all[i+1:] {
			if n.Value != s.Value {
				next = n.Value
				break
			}
		}
		// Like perf, a symbol without a size extends to the next one; a
		// sized one is cut where the next begins so that lookups can take
		// the last symbol starting at or before an address.
		if s.Size == 0 || (next != 0 && end > next) {
			end = next
		}
		if end > s.Value {
			es.syms = append(es.syms, elfSym{start: s.Value, end: end, name: s.Name})
		}
	}
	return es, nil
}

// vaddr converts a file offset to the link-time virtual address through the
// PT_LOAD segment containing it; segments need not have offset == vaddr.
func (es *elfSyms) vaddr(off uint64) (uint64, bool) {
	for _, p := range es.loads {
		if off >= p.Off && off-p.Off < p.Filesz {
			return off - p.Off + p.Vaddr, true
		}
	}
	return 0, false
}

// lookup finds the function containing the virtual address addr and returns
// its demangled name and start.
func (es *elfSyms) lookup(addr uint64) (name string, start uint64, ok bool) {
	i := sort.Search(len(es.syms), func(i int) bool { return es.syms[i].start > addr }) - 1
	if i < 0 || addr >= es.syms[i].end {
		return "", 0, false
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	name, ok = es.demangled[i]
	if !ok {
		// Without parameters, as pprof does, but with template arguments:
		// they tell HotSpot's closure-specialized GC loops apart.
		name = demangle.Filter(es.syms[i].name, demangle.NoParams, demangle.NoEnclosingParams)
		es.demangled[i] = name
	}
	return name, es.syms[i].start, true
}

// fileKey identifies file contents: a replaced file gets a new inode, and
// one rewritten in place a new size or mtime.
type fileKey struct {
	dev, ino, size uint64
	mtime          int64
}

// symCache shares symbol tables between processes mapping the same library
// (every JVM maps libjvm.so). Entries are weak so that tables go once no
// Native uses them.
var symCache = struct {
	sync.Mutex
	m map[fileKey]weak.Pointer[elfSyms]
}{m: make(map[fileKey]weak.Pointer[elfSyms])}

// openELFSyms returns the symbol table of an open file, from the cache when
// possible.
func openELFSyms(f *os.File) (*elfSyms, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return loadELFSyms(f)
	}
	key := fileKey{dev: st.Dev, ino: st.Ino, size: uint64(st.Size), mtime: fi.ModTime().UnixNano()}
	symCache.Lock()
	wp, ok := symCache.m[key]
	symCache.Unlock()
	if ok {
		if es := wp.Value(); es != nil {
			return es, nil
		}
	}
	es, err := loadELFSyms(f)
	if err != nil {
		return nil, err
	}
	wp = weak.Make(es)
	symCache.Lock()
	symCache.m[key] = wp
	symCache.Unlock()
	runtime.AddCleanup(es, func(key fileKey) {
		symCache.Lock()
		if symCache.m[key] == wp {
			delete(symCache.m, key)
		}
		symCache.Unlock()
	}, key)
	return es, nil
}
