package jvmsym

import (
	"bytes"
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"weak"

	"github.com/ianlancetaylor/demangle"

	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
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

// rawSym is a function symbol as read, before aliases are resolved.
type rawSym struct {
	value, size uint64
	bind        elf.SymBind
	name        string
}

// symOrder sorts symbols by address and ranks aliases at one address: the
// one with the largest size, then the most visible binding, then the
// shortest name; the last rules only make the choice stable.
func symOrder(a, b rawSym) int {
	if c := cmp.Compare(a.value, b.value); c != 0 {
		return c
	}
	if c := cmp.Compare(b.size, a.size); c != 0 {
		return c
	}
	rank := func(s rawSym) int {
		switch s.bind {
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
	if c := cmp.Compare(len(a.name), len(b.name)); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

// loadELFSyms reads the PT_LOAD segments and the function symbols of .symtab
// and .dynsym (a stripped library still has the latter). The tables are
// read within elfsafe's caps and decoded in place, so only the function
// symbols kept cost memory.
func loadELFSyms(ef *elfsafe.File) (*elfSyms, error) {
	es := &elfSyms{demangled: make(map[int]string)}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			es.loads = append(es.loads, p.ProgHeader)
		}
	}
	var all []rawSym
	for _, typ := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
		tab, err := ef.Symbols(typ)
		if errors.Is(err, elf.ErrNoSymbols) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read symbols: %w", err)
		}
		all = slices.Grow(all, tab.Len()) // libjvm.so's tens of thousands, not grown one doubling at a time
		for i := 1; i < tab.Len(); i++ {
			s := tab.At(i)
			t := elf.ST_TYPE(s.Info)
			// STT_LOOS is STT_GNU_IFUNC, the resolvers of e.g. memcpy.
			if (t == elf.STT_FUNC || t == elf.STT_LOOS) && s.Section != elf.SHN_UNDEF && s.Value != 0 {
				name := s.Name
				if at := bytes.IndexByte(name, '@'); at > 0 {
					name = name[:at] // "memcpy@@GLIBC_2.14"
				}
				all = append(all, rawSym{value: s.Value, size: s.Size, bind: elf.ST_BIND(s.Info), name: string(name)})
			}
		}
	}
	slices.SortFunc(all, symOrder)
	es.syms = make([]elfSym, 0, len(all))
	for i, s := range all {
		if i > 0 && all[i-1].value == s.value {
			continue // an alias; the first one ranks best
		}
		end := s.value + s.size
		next := uint64(0)
		for _, n := range all[i+1:] {
			if n.value != s.value {
				next = n.value
				break
			}
		}
		// Like perf, a symbol without a size extends to the next one; a
		// sized one is cut where the next begins so that lookups can take
		// the last symbol starting at or before an address.
		if s.size == 0 || (next != 0 && end > next) {
			end = next
		}
		if end > s.value {
			es.syms = append(es.syms, elfSym{start: s.value, end: end, name: s.name})
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
		name = CutName(demangle.Filter(es.syms[i].name, demangle.NoParams, demangle.NoEnclosingParams))
		es.demangled[i] = name
	}
	return name, es.syms[i].start, true
}

// symCache shares symbol tables between processes mapping the same library
// (every JVM maps libjvm.so). Entries are weak so that tables go once no
// Native uses them.
var symCache = struct {
	sync.Mutex
	m map[elfsafe.Key]weak.Pointer[elfSyms]
}{m: make(map[elfsafe.Key]weak.Pointer[elfSyms])}

// cachedELFSyms returns the symbol table of ef, from the cache when
// possible.
func cachedELFSyms(ef *elfsafe.File) (*elfSyms, error) {
	key := ef.Key()
	symCache.Lock()
	wp, ok := symCache.m[key]
	symCache.Unlock()
	if ok {
		if es := wp.Value(); es != nil {
			return es, nil
		}
	}
	es, err := loadELFSyms(ef)
	if err != nil {
		return nil, err
	}
	wp = weak.Make(es)
	symCache.Lock()
	symCache.m[key] = wp
	symCache.Unlock()
	runtime.AddCleanup(es, func(key elfsafe.Key) {
		symCache.Lock()
		if symCache.m[key] == wp {
			delete(symCache.m, key)
		}
		symCache.Unlock()
	}, key)
	return es, nil
}
