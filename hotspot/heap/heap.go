// Package heap extracts the Java heap's address ranges from the output of
// the `GC.heap_info` diagnostic command, so that sampled data addresses can
// be classified as Java heap or not.
//
// The format is not a stable interface; it differs per collector and JDK
// release. Parsed and tested forms (testdata/, from java 17 and 25):
//
//	G1          " garbage-first heap   total ..., used ... [start, end)"
//	Parallel    " PSYoungGen ... [start, committed, reserved)", "ParOldGen ...", spaces
//	Serial      "def new generation"/"tenured generation" (17), "DefNew"/"Tenured" (25)
//	Shenandoah  "Reserved region:" followed by " - [start, end)"
//	Epsilon     "Allocation space:" followed by " space ... [bottom, top, end)"
//	ZGC         "ZHeap used ..., capacity ..., max capacity ...": no addresses
package heap

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Range is a half-open address range [Start, End).
type Range struct {
	Start, End uint64
	Name       string
}

// Info is what GC.heap_info says about the heap.
type Info struct {
	// GC is the collector: "G1", "Parallel", "Serial", "Shenandoah",
	// "Epsilon" or "Z".
	GC string
	// Ranges are the reserved ranges of the heap (per generation where the
	// collector has fixed generations). Contains consults only these.
	Ranges []Range
	// Spaces are the committed spaces inside the generations (eden,
	// survivors, old), from bottom to end, named "<generation>/<space>".
	// They move as the heap resizes; use them for reporting, not filtering.
	Spaces []Range
	// RegionSize is G1's region size in bytes (its " region size 1024K"
	// line), 0 for other collectors. Objects of at least half of it are
	// humongous: G1 never moves them.
	RegionSize uint64
	// Partial is true when Ranges may not cover every heap address:
	// ZGC prints no addresses at all (its heap is a large virtual
	// reservation, with multi-mapped views in JDK 17's non-generational ZGC),
	// so Ranges is empty; Epsilon prints only its current allocation space,
	// which grows up to -Xmx. Callers must get the heap bounds elsewhere
	// (e.g. /proc/PID/maps or the agent) in these cases.
	Partial bool
	// Text is the input, kept for diagnostics.
	Text string
}

// ErrUnknownFormat means the text names no collector this package knows.
var ErrUnknownFormat = errors.New("unrecognized GC.heap_info output")

// Contains reports whether addr lies in one of the reserved heap ranges.
func (i Info) Contains(addr uint64) bool {
	for _, r := range i.Ranges {
		if addr >= r.Start && addr < r.End {
			return true
		}
	}
	return false
}

var (
	// The bracketed address list: "[0x1, 0x2)" or "[0x1,0x2,0x3)".
	bracketRE = regexp.MustCompile(`\[(0x[0-9a-fA-F]+(?:\s*,\s*0x[0-9a-fA-F]+)+)\s*\)`)
	addrRE    = regexp.MustCompile(`0x[0-9a-fA-F]+`)
)

// generations maps a generation header (the line's leading words) to the
// collector that prints it.
var generations = []struct{ prefix, gc string }{
	{"garbage-first heap", "G1"},
	{"PSYoungGen", "Parallel"},
	{"ParOldGen", "Parallel"},
	{"def new generation", "Serial"},
	{"tenured generation", "Serial"},
	{"DefNew", "Serial"},
	{"Tenured", "Serial"},
}

// ParseHeapInfo parses the output of `jcmd <pid> GC.heap_info` (with or
// without jcmd's "<pid>:" header line).
func ParseHeapInfo(text string) (Info, error) {
	info := Info{Text: text}
	gen := ""         // current generation, for naming spaces
	expectRange := "" // name for the range on the next line (Shenandoah, Epsilon)
	for n, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" {
			continue
		}
		if n == 0 && strings.HasSuffix(line, ":") {
			if _, err := strconv.Atoi(strings.TrimSuffix(line, ":")); err == nil {
				continue // jcmd's "<pid>:" header
			}
		}
		addrs, err := addresses(line)
		if err != nil {
			return info, fmt.Errorf("parse heap info line %d: %w", n+1, err)
		}

		switch {
		case strings.HasPrefix(line, "Shenandoah Heap"):
			info.GC = "Shenandoah"
		case strings.HasPrefix(line, "Epsilon Heap"):
			info.GC, info.Partial = "Epsilon", true
		case strings.HasPrefix(line, "ZHeap"):
			info.GC, info.Partial = "Z", true
		case line == "Reserved region:" && info.GC == "Shenandoah":
			expectRange = "Shenandoah reserved region"
			continue
		case line == "Allocation space:" && info.GC == "Epsilon":
			expectRange = "Epsilon allocation space"
			continue
		}
		if expectRange != "" {
			if len(addrs) >= 2 {
				info.Ranges = append(info.Ranges, Range{Start: addrs[0], End: addrs[len(addrs)-1], Name: expectRange})
			}
			expectRange = ""
			continue
		}
		if rest, ok := strings.CutPrefix(line, "region size "); ok && info.GC == "G1" {
			size, _, _ := strings.Cut(rest, ",")
			v, err := parseKiB(size)
			if err != nil {
				return info, fmt.Errorf("parse heap info line %d: region size: %w", n+1, err)
			}
			info.RegionSize = v
			continue
		}
		if len(addrs) < 2 {
			continue
		}
		if g, ok := generation(line); ok {
			if info.GC != "" && info.GC != g.gc {
				return info, fmt.Errorf("parse heap info line %d: %s generation in %s heap", n+1, g.gc, info.GC)
			}
			info.GC = g.gc
			gen = g.prefix
			// [start, committed end, reserved end) or, for G1, [start, end).
			info.Ranges = append(info.Ranges, Range{Start: addrs[0], End: addrs[len(addrs)-1], Name: g.prefix})
			continue
		}
		if name, ok := spaceName(line); ok && gen != "" {
			// [bottom, top, end) or, for Serial's tenured space in 17,
			// [bottom, top, next block, end).
			info.Spaces = append(info.Spaces, Range{Start: addrs[0], End: addrs[len(addrs)-1], Name: gen + "/" + name})
		}
	}
	return info, info.check()
}

// check rejects a parse that named no collector, holds an empty range, or
// has no range at all where the collector's output should give one.
func (i Info) check() error {
	if i.GC == "" {
		first, _, _ := strings.Cut(strings.TrimSpace(i.Text), "\n")
		return fmt.Errorf("%w: %q", ErrUnknownFormat, first)
	}
	for _, r := range i.Ranges {
		if r.End <= r.Start {
			return fmt.Errorf("parse heap info: %s: empty range [%#x, %#x)", r.Name, r.Start, r.End)
		}
	}
	if len(i.Ranges) == 0 && !i.Partial {
		return fmt.Errorf("parse heap info: %s heap without an address range", i.GC)
	}
	return nil
}

// parseKiB parses HotSpot's "1024K" (and "32M") sizes.
func parseKiB(s string) (uint64, error) {
	mult := uint64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return v * mult, nil
}

func generation(line string) (struct{ prefix, gc string }, bool) {
	for _, g := range generations {
		if strings.HasPrefix(line, g.prefix) && (len(line) == len(g.prefix) || line[len(g.prefix)] == ' ') {
			return g, true
		}
	}
	return struct{ prefix, gc string }{}, false
}

// spaceName returns "eden", "from", "to", "object" or "the" for lines like
// "eden space 16384K, 34% used [...)".
func spaceName(line string) (string, bool) {
	f := strings.Fields(line)
	if len(f) >= 2 && f[1] == "space" {
		return f[0], true
	}
	return "", false
}

// addresses returns the addresses of the line's bracketed list, if any.
func addresses(line string) ([]uint64, error) {
	m := bracketRE.FindString(line)
	if m == "" {
		return nil, nil
	}
	var out []uint64
	for _, s := range addrRE.FindAllString(m, -1) {
		v, err := strconv.ParseUint(s[2:], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("address %s: %w", s, err)
		}
		out = append(out, v)
	}
	return out, nil
}
