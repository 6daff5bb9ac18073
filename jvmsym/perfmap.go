package jvmsym

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
	"github.com/djx-bpf/djx-bpf/safety/safefs"
)

// PerfMap is a /tmp/perf-PID.map, the JIT symbol file that perf reads and
// that JVM agents and other runtimes write. The target writes it: each
// range costs a span and no allocation of its own (names are laid end to
// end in a few large chunks), and what the caps leave out is counted
// (Stats).
type PerfMap struct {
	spans spans[perfName]
	names []string // the kept names, end to end in chunks of nameChunk bytes
	stats PerfMapStats
}

// PerfMapStats counts what a perf map held and what its caps left out, for
// the report.
type PerfMapStats struct {
	Entries   int  // lines with a range, kept
	Dropped   int  // lines past maxPerfEntries, left out
	NamesCut  int  // names cut to maxPerfName bytes
	Truncated bool // the file went on past MaxPerfMap bytes, left unread
}

// perfName is a name in PerfMap.names: at byte off of the chunks laid end
// to end.
type perfName struct{ off, n uint32 }

// nameChunk is the size of a chunk of names: allocated once each, where
// one growing string would be copied again and again.
const nameChunk = 64 << 10

// nameArena lays names end to end in chunks of nameChunk bytes, none
// across two.
type nameArena struct {
	chunks []string
	cur    strings.Builder
}

func (a *nameArena) add(name []byte) perfName {
	if a.cur.Len()+len(name) > nameChunk {
		a.chunks = append(a.chunks, a.cur.String())
		a.cur = strings.Builder{}
	}
	if a.cur.Cap() == 0 {
		a.cur.Grow(nameChunk)
	}
	n := perfName{uint32(len(a.chunks)*nameChunk + a.cur.Len()), uint32(len(name))}
	a.cur.Write(name)
	return n
}

func (a *nameArena) done() []string {
	if a.cur.Len() > 0 {
		a.chunks = append(a.chunks, a.cur.String())
	}
	return slices.Clip(a.chunks)
}

// perfEntry is one line of a perf map; its index in the lines orders it.
type perfEntry struct {
	start, end uint64
	name       perfName
}

// Caps on a perf map. jcmd Compiler.perfmap of a large service lists
// tens of thousands of compiled methods at about 80 bytes a line: a few
// MiB. maxPerfEntries lines of that size fill MaxPerfMap, so the two caps
// agree; each kept line costs about 70 bytes besides its name while the
// map is built and 24 after. No Java method's name comes near maxPerfName.
const (
	MaxPerfMap     = 16 << 20
	maxPerfEntries = 1 << 18
	maxPerfName    = MaxName
	maxPerfLine    = 64 << 10
)

// ParsePerfMap reads a perf map: lines "START SIZE NAME" with START and
// SIZE in hex (a 0x prefix is allowed) and NAME running to the end of the
// line, spaces included. Where entries overlap the later line wins, as
// with perf: runtimes append when they reuse code memory. It reads up to
// MaxPerfMap bytes and keeps up to maxPerfEntries lines, the first ones;
// the lines past that are counted in Stats, not parsed.
func ParsePerfMap(r io.Reader) (*PerfMap, error) {
	return parsePerfMap(r, MaxPerfMap, maxPerfEntries)
}

func parsePerfMap(r io.Reader, maxBytes int64, maxEntries int) (*PerfMap, error) {
	var (
		pm      PerfMap
		entries []perfEntry
		names   nameArena
	)
	cr := &capReader{r: r, left: maxBytes}
	sc := bufio.NewScanner(cr)
	sc.Buffer(make([]byte, 0, 64<<10), maxPerfLine)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if atEOF && cr.cut && len(data) > 0 && bytes.IndexByte(data, '\n') < 0 {
			return len(data), nil, nil // a line cut at the cap
		}
		return bufio.ScanLines(data, atEOF)
	})
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := bytes.TrimRight(sc.Bytes(), "\r")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if len(entries) >= maxEntries {
			pm.stats.Dropped++
			continue
		}
		start, end, name, err := parsePerfLine(line)
		if err != nil {
			return nil, fmt.Errorf("perf map line %d: %w", lineNo, err)
		}
		if end <= start {
			continue
		}
		if len(name) > maxPerfName {
			name = cutName(name, maxPerfName)
			pm.stats.NamesCut++
		}
		entries = append(entries, perfEntry{start: start, end: end, name: names.add(name)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read perf map: %w", err)
	}
	pm.names = names.done()
	pm.stats.Entries = len(entries)
	pm.stats.Truncated = cr.cut
	pm.spans = spans[perfName]{s: paint(entries, func(a, b perfName) bool { return pm.name(a) == pm.name(b) })}
	return &pm, nil
}

// capReader reads up to left bytes of r, and then says whether r had more.
type capReader struct {
	r           io.Reader
	left        int64
	probed, cut bool
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		if !c.probed {
			var probe [1]byte
			n, _ := io.ReadFull(c.r, probe[:])
			c.probed, c.cut = true, n > 0
		}
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

func parsePerfLine(line []byte) (start, end uint64, name []byte, err error) {
	startStr, rest := cutField(line)
	sizeStr, rest := cutField(rest)
	name = bytes.TrimLeft(rest, " \t")
	if len(name) == 0 {
		return 0, 0, nil, fmt.Errorf("want \"START SIZE NAME\", got %q", clipLine(line))
	}
	if start, err = parseHex(startStr); err != nil {
		return 0, 0, nil, fmt.Errorf("bad start: %w", err)
	}
	size, err := parseHex(sizeStr)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("bad size: %w", err)
	}
	if start+size < start {
		return 0, 0, nil, fmt.Errorf("range %#x+%#x overflows", start, size)
	}
	return start, start + size, name, nil
}

// clipLine is at most the first 80 bytes of a line, for an error.
func clipLine(line []byte) []byte { return line[:min(len(line), 80)] }

// cutField splits off the first blank-separated field of s.
func cutField[S string | []byte](s S) (field, rest S) {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	s = s[i:]
	for i = 0; i < len(s); i++ {
		if s[i] == ' ' || s[i] == '\t' {
			return s[:i], s[i:]
		}
	}
	return s, s[len(s):]
}

func parseHex(s []byte) (uint64, error) {
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		s = s[2:]
	}
	if len(s) == 0 || len(s) > 16 {
		return 0, fmt.Errorf("%q is not a 64-bit hex number", clipLine(s))
	}
	var v uint64
	for _, c := range s {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, fmt.Errorf("%q is not a 64-bit hex number", clipLine(s))
		}
		v = v<<4 | uint64(c)
	}
	return v, nil
}

// paint flattens overlapping entries into disjoint ranges where the latest
// entry covering each address wins, in O(n log n): a sweep over the range
// boundaries with a heap of the entries open at each (by index: the
// latest on top). same says whether two names are equal, so that
// adjacent ranges of one name are merged.
func paint(entries []perfEntry, same func(a, b perfName) bool) []span[perfName] {
	byStart := make([]uint32, len(entries))
	for i := range byStart {
		byStart[i] = uint32(i)
	}
	slices.SortFunc(byStart, func(a, b uint32) int { return cmp.Compare(entries[a].start, entries[b].start) })
	bounds := make([]uint64, 0, 2*len(entries))
	for _, e := range entries {
		bounds = append(bounds, e.start, e.end)
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)

	out := make([]span[perfName], 0, len(entries))
	var open latestFirst
	next := 0
	for i := 0; i+1 < len(bounds); i++ {
		lo, hi := bounds[i], bounds[i+1]
		for next < len(byStart) && entries[byStart[next]].start <= lo {
			open.push(byStart[next])
			next++
		}
		for len(open) > 0 && entries[open[0]].end <= lo {
			open.pop()
		}
		if len(open) == 0 {
			continue
		}
		// No boundary lies inside (lo, hi), so the top covers all of it.
		top := entries[open[0]].name
		if n := len(out); n > 0 && out[n-1].end == lo && same(out[n-1].v, top) {
			out[n-1].end = hi
			continue
		}
		out = append(out, span[perfName]{lo, hi, top})
	}
	if cap(out) > len(out)+len(out)/8 { // kept for the session: no slack
		out = slices.Clone(out)
	}
	return out
}

// latestFirst is a max-heap of indices of perf map entries: the latest
// line on top. Hand-written: container/heap would box every index.
type latestFirst []uint32

func (h *latestFirst) push(i uint32) {
	*h = append(*h, i)
	s := *h
	for k := len(s) - 1; k > 0; {
		p := (k - 1) / 2
		if s[p] >= s[k] {
			break
		}
		s[p], s[k] = s[k], s[p]
		k = p
	}
}

func (h *latestFirst) pop() {
	s := *h
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for k := 0; ; {
		c := 2*k + 1
		if c >= n {
			break
		}
		if c+1 < n && s[c+1] > s[c] {
			c++
		}
		if s[k] >= s[c] {
			break
		}
		s[k], s[c] = s[c], s[k]
		k = c
	}
	*h = s
}

// LoadPerfMap reads the perf map of a process: hostPID is its PID in our
// namespace, nsPID the one it knows itself by and names the file with; the
// file is read through /proc/hostPID/root so that containers work. The
// process owns that file: it is opened inside its root with no symlinks,
// must be a regular file (a FIFO would block the open, /dev/zero never
// end), and is read up to MaxPerfMap (Stats says what was left out).
func LoadPerfMap(hostPID, nsPID int) (*PerfMap, error) {
	// A /tmp on FUSE would stall the open itself.
	if err := procfs.CheckPath(procfs.Mount, hostPID, "/tmp/perf-"+strconv.Itoa(nsPID)+".map"); err != nil {
		return nil, fmt.Errorf("open perf map: %w", err)
	}
	if err := targetmem.FilesHung(procfs.Mount, hostPID); err != nil {
		return nil, fmt.Errorf("open perf map: %w", err)
	}
	pm, err := loadPerfMap(filepath.Join("/proc", strconv.Itoa(hostPID), "root"), nsPID)
	if errors.Is(err, targetmem.ErrHung) {
		targetmem.MarkFilesHung(procfs.Mount, hostPID, err)
	}
	return pm, err
}

func loadPerfMap(root string, nsPID int) (*PerfMap, error) {
	f, err := safefs.Open(root, "/tmp/perf-"+strconv.Itoa(nsPID)+".map")
	if err != nil {
		return nil, fmt.Errorf("open perf map: %w", err)
	}
	defer f.Close()
	pm, err := ParsePerfMap(f)
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
	return p.name(sp.v), true
}

func (p *PerfMap) name(n perfName) string {
	c := p.names[n.off/nameChunk]
	return c[n.off%nameChunk:][:n.n]
}

// Stats counts what the map held and what its caps left out; a nil map
// (none could be read) has none.
func (p *PerfMap) Stats() PerfMapStats {
	if p == nil {
		return PerfMapStats{}
	}
	return p.stats
}

// size is what the map keeps, in bytes.
func (p *PerfMap) size() int {
	return cap(p.spans.s)*int(unsafe.Sizeof(span[perfName]{})) + len(p.names)*nameChunk
}

// Len is the number of disjoint ranges after overlaps are resolved.
func (p *PerfMap) Len() int { return len(p.spans.s) }
