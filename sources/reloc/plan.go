package reloc

import (
	"debug/elf"
	"errors"
	"fmt"
	"sort"

	"github.com/djx-bpf/djx-bpf/bpf"
	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// A JVM is tracked in two steps: planJVM works out every uprobe from
// libjvm.so and what the process maps, with no BPF and no privilege, so any
// libjvm.so can be checked in a test; Tracker.attach then opens them.

// plan is what AddJVM probes in one JVM.
type plan struct {
	// info is what AddJVM reports; attach names the Symbol of Copies.
	info Info
	// probes are the uprobes in the order they are attached: the copy
	// probes, then gc__begin's sites, then gc__end's.
	probes []uprobe
}

// uprobe is one uprobe of a plan.
type uprobe struct {
	kind   Kind   // which program: Copy, GCBegin or GCEnd
	offset uint64 // file offset in the file probed
	cookie uint64 // a USDT probe's first argument, as argCookie encodes it
	refCtr uint64 // a USDT probe's semaphore, 0 if none
	// libc is the index in Info.Copies of the libc implementation probed,
	// in the file mapped at libcMap; -1 for a probe in libjvm.so.
	libc    int
	libcMap mapping
	what    string // names the probe in errors
}

// process is what a plan needs of a JVM besides its libjvm.so.
type process struct {
	maps []mapping
	jvm  mapping // libjvm.so's mapping of file offset 0: where it is loaded
	// mem is only read by the libc fallback, for libjvm's GOT slots.
	mem memReader
}

// planJVM works out the probes of a JVM whose libjvm.so is jvm: the
// collectors' copy sites or the libc fallback, as cfg.Copies asks, and
// the GC probes. It fails only when neither copies nor GC epochs can be
// tracked; Info says why a part is missing.
func planJVM(cfg Config, jvm *elfsafe.File, proc process) (plan, error) {
	p := plan{info: Info{LibJVM: proc.jvm.path}}
	info := &p.info
	if cfg.Copies != CopiesLibc {
		info.Sites, info.SitesErr = siteCache.sites(jvm)
		if info.SitesErr == nil {
			info.SitesErr = checkSites(info.Sites)
		}
		if info.SitesErr != nil {
			info.Sites = nil
			if cfg.Copies == CopiesGCSites {
				info.CopyErr = fmt.Errorf("gc copy sites: %w", info.SitesErr)
			}
		}
	}
	if info.Sites == nil && info.CopyErr == nil {
		info.Copies, info.CopyErr = resolveCopies(jvm, proc.maps, proc.jvm, proc.mem)
	}
	info.GCBegin, info.GCEnd, info.GCErr = gcProbes(jvm)
	if info.CopyErr != nil && info.GCErr != nil {
		return p, fmt.Errorf("%s gives neither copies (%w) nor GC epochs (%w)", info.LibJVM, info.CopyErr, info.GCErr)
	}
	copies, err := copyUprobes(cfg, jvm, proc.maps, info)
	if err != nil {
		return p, err
	}
	p.probes = append(copies, gcUprobes(info)...)
	return p, nil
}

// copyUprobes are the copy probes of info: one on each copy site (or, to
// measure them, on each copy function's entry), else one on each libc
// implementation.
func copyUprobes(cfg Config, jvm *elfsafe.File, maps []mapping, info *Info) ([]uprobe, error) {
	var us []uprobe
	if len(info.Sites) > 0 {
		offs, err := siteOffsets(jvm, info.Sites, cfg.entryProbes)
		if err != nil {
			return nil, err
		}
		for _, off := range offs {
			us = append(us, uprobe{kind: Copy, offset: off, libc: -1, what: fmt.Sprintf("uprobe libjvm+%#x", off)})
		}
	}
	for i, c := range info.Copies {
		m, ok := containing(maps, c.Addr)
		if !ok {
			return nil, fmt.Errorf("%s: %#x in no file mapping", c.Lib, c.Addr)
		}
		us = append(us, uprobe{kind: Copy, offset: c.Offset, libc: i, libcMap: m,
			what: fmt.Sprintf("uprobe %s+%#x (%v)", c.Lib, c.Offset, c.Imports)})
	}
	return us, nil
}

// gcUprobes are the USDT probes of info, each with its argument's cookie.
func gcUprobes(info *Info) []uprobe {
	var us []uprobe
	for _, s := range []struct {
		kind   Kind
		probes []Probe
	}{{GCBegin, info.GCBegin}, {GCEnd, info.GCEnd}} {
		for _, p := range s.probes {
			cookie, _ := argCookie(p.Args)
			// HotSpot's probes carry no semaphore (design.md); the kernel
			// increments one if refCtr is set.
			us = append(us, uprobe{kind: s.kind, offset: p.Offset, cookie: cookie, refCtr: p.Semaphore, libc: -1,
				what: fmt.Sprintf("usdt %s:%s at %#x", p.Provider, p.Name, p.Offset)})
		}
	}
	return us
}

// siteOffsets returns the file offsets to probe: the sites, or with
// entries the entries of the functions holding them.
func siteOffsets(f *elfsafe.File, sites []Site, entries bool) ([]uint64, error) {
	if !entries {
		offs := make([]uint64, len(sites))
		for i, s := range sites {
			offs[i] = s.Offset
		}
		return offs, nil
	}
	funcs := map[string]bool{}
	for _, s := range sites {
		funcs[s.Func] = true
	}
	syms, err := f.Symbols(elf.SHT_SYMTAB)
	if err != nil {
		return nil, err
	}
	seen := map[uint64]bool{}
	var offs []uint64
	for i := 1; i < syms.Len(); i++ {
		s := syms.At(i)
		if funcs[string(s.Name)] && !seen[s.Value] {
			seen[s.Value] = true
			off, err := fileOffset(f, s.Value)
			if err != nil {
				return nil, err
			}
			offs = append(offs, off)
		}
	}
	return offs, nil
}

// gcProbes returns the hotspot gc__begin and gc__end sites.
func gcProbes(f *elfsafe.File) (begin, end []Probe, err error) {
	probes, err := usdtProbes(f)
	if err != nil {
		if errors.Is(err, ErrNoUSDT) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%w: %w", ErrNoUSDT, err)
	}
	for _, p := range probes {
		if p.Provider != "hotspot" {
			continue
		}
		switch p.Name {
		case "gc__begin":
			begin = append(begin, p)
		case "gc__end":
			end = append(end, p)
		}
	}
	if len(begin) == 0 || len(end) == 0 {
		return nil, nil, ErrNoUSDT
	}
	return begin, end, nil
}

// readProcess reads the mappings of pid and finds its libjvm.so; its
// memory is read through targetmem, and only if the plan reads it.
func readProcess(pid int) (process, error) {
	data, err := procfs.Read(procfs.Mount, pid, "maps")
	if err != nil {
		return process{}, err
	}
	ms, err := parseMaps(data)
	if err != nil {
		return process{}, err
	}
	jvm, ok := findLib(ms, "libjvm.so")
	if !ok {
		return process{}, ErrNoJVM
	}
	return process{maps: ms, jvm: jvm, mem: targetmem.Open(pid)}, nil
}

// heapFilter is the BPF filter entry of a JVM: copies of at least minLen
// bytes whose source lies in heap, its ranges merged.
func heapFilter(minLen uint64, heap []Range) (bpf.RelocTarget, error) {
	var tg bpf.RelocTarget
	ranges := mergeRanges(heap)
	if len(ranges) == 0 {
		return tg, errors.New("no heap range")
	}
	if len(ranges) > maxRanges {
		return tg, fmt.Errorf("%d heap ranges, at most %d supported", len(ranges), maxRanges)
	}
	tg.MinLen = minLen
	tg.Nranges = uint32(len(ranges))
	for i, r := range ranges {
		tg.Ranges[i].Start, tg.Ranges[i].End = r.Start, r.End
	}
	return tg, nil
}

// mergeRanges sorts the ranges and merges overlapping or adjacent ones
// (Parallel's young and old generations are usually adjacent).
func mergeRanges(in []Range) []Range {
	var rs []Range
	for _, r := range in {
		if r.End > r.Start {
			rs = append(rs, r)
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Start < rs[j].Start })
	var out []Range
	for _, r := range rs {
		if n := len(out); n > 0 && r.Start <= out[n-1].End {
			out[n-1].End = max(out[n-1].End, r.End)
			continue
		}
		out = append(out, r)
	}
	return out
}
