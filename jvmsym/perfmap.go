package jvmsym

import (
	"bufio"
	"cmp"
	"container/heap"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/djx-bpf/djx-bpf/safefs"
)

// PerfMap is a /tmp/perf-PID.map, the JIT symbol file that perf reads and
// that JVM agents and other runtimes write.
type PerfMap struct {
	spans spans[string]
}

// perfEntry is one line of a perf map; seq orders the lines.
type perfEntry struct {
	start, end uint64
	seq        int
	name       string
}

// ParsePerfMap reads a perf map: lines "START SIZE NAME" with START and
// SIZE in hex (a 0x prefix is allowed) and NAME running to the end of the
// line, spaces included. Where entries overlap the later line wins, as
// with perf: runtimes append when they reuse code memory.
func ParsePerfMap(r io.Reader) (*PerfMap, error) {
	var entries []perfEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		e, err := parsePerfLine(line)
		if err != nil {
			return nil, fmt.Errorf("perf map line %d: %w", lineNo, err)
		}
		if e.end > e.start {
			e.seq = len(entries)
			entries = append(entries, e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read perf map: %w", err)
	}
	return &PerfMap{spans: spans[string]{s: paint(entries)}}, nil
}

func parsePerfLine(line string) (perfEntry, error) {
	startStr, rest := cutField(line)
	sizeStr, rest := cutField(rest)
	name := strings.TrimLeft(rest, " \t")
	if name == "" {
		return perfEntry{}, fmt.Errorf("want \"START SIZE NAME\", got %q", line)
	}
	start, err := parseHex(startStr)
	if err != nil {
		return perfEntry{}, fmt.Errorf("bad start: %w", err)
	}
	size, err := parseHex(sizeStr)
	if err != nil {
		return perfEntry{}, fmt.Errorf("bad size: %w", err)
	}
	if start+size < start {
		return perfEntry{}, fmt.Errorf("range %#x+%#x overflows", start, size)
	}
	return perfEntry{start: start, end: start + size, name: name}, nil
}

// cutField splits off the first blank-separated field of s.
func cutField(s string) (field, rest string) {
	s = strings.TrimLeft(s, " \t")
	end := strings.IndexAny(s, " \t")
	if end < 0 {
		return s, ""
	}
	return s[:end], s[end:]
}

func parseHex(s string) (uint64, error) {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	return strconv.ParseUint(s, 16, 64)
}

// paint flattens overlapping entries into disjoint ranges where the latest
// entry covering each address wins, in O(n log n): a sweep over the range
// boundaries with a heap of the entries open at each.
func paint(entries []perfEntry) []span[string] {
	byStart := slices.Clone(entries)
	slices.SortFunc(byStart, func(a, b perfEntry) int { return cmp.Compare(a.start, b.start) })
	bounds := make([]uint64, 0, 2*len(entries))
	for _, e := range entries {
		bounds = append(bounds, e.start, e.end)
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)

	var out []span[string]
	var open latestFirst
	next := 0
	for i := 0; i+1 < len(bounds); i++ {
		lo, hi := bounds[i], bounds[i+1]
		for next < len(byStart) && byStart[next].start <= lo {
			heap.Push(&open, byStart[next])
			next++
		}
		for open.Len() > 0 && open[0].end <= lo {
			heap.Pop(&open)
		}
		if open.Len() == 0 {
			continue
		}
		// No boundary lies inside (lo, hi), so the top covers all of it.
		top := open[0]
		if n := len(out); n > 0 && out[n-1].end == lo && out[n-1].v == top.name {
			out[n-1].end = hi
			continue
		}
		out = append(out, span[string]{lo, hi, top.name})
	}
	return out
}

// latestFirst is a heap of perf map entries, the latest line on top.
type latestFirst []perfEntry

func (h latestFirst) Len() int           { return len(h) }
func (h latestFirst) Less(i, j int) bool { return h[i].seq > h[j].seq }
func (h latestFirst) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *latestFirst) Push(x any)        { *h = append(*h, x.(perfEntry)) }
func (h *latestFirst) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// MaxPerfMap caps the perf map read from a target (a long-running JVM's
// is tens of MiB).
const MaxPerfMap = 256 << 20

// LoadPerfMap reads the perf map of a process: hostPID is its PID in our
// namespace, nsPID the one it knows itself by and names the file with; the
// file is read through /proc/hostPID/root so that containers work. The
// process owns that file: it is opened inside its root with no symlinks,
// must be a regular file (a FIFO would block the open, /dev/zero never
// end), and is read up to MaxPerfMap.
func LoadPerfMap(hostPID, nsPID int) (*PerfMap, error) {
	return loadPerfMap(filepath.Join("/proc", strconv.Itoa(hostPID), "root"), nsPID)
}

func loadPerfMap(root string, nsPID int) (*PerfMap, error) {
	f, err := safefs.Open(root, "/tmp/perf-"+strconv.Itoa(nsPID)+".map")
	if err != nil {
		return nil, fmt.Errorf("open perf map: %w", err)
	}
	defer f.Close()
	pm, err := ParsePerfMap(safefs.LimitReader(f, MaxPerfMap))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return pm, nil
}

// Lookup names the code at pc.
func (p *PerfMap) Lookup(pc uint64) (name string, ok bool) {
	sp, ok := p.spans.find(pc)
	if !ok {
		return "", false
	}
	return sp.v, true
}

// Len is the number of disjoint ranges after overlaps are resolved.
func (p *PerfMap) Len() int { return len(p.spans.s) }
