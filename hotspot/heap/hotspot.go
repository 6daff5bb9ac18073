package heap

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// CompressedOops is HotSpot's own statement of its heap placement and oop
// encoding: the line printed by VM.info and by -Xlog:gc+heap+coops (debug
// level in JDK 17 and 25), e.g.
//
//	Heap address: 0x0000000080000000, size: 2048 MB, Compressed Oops mode: 32-bit
//	Heap address: 0x0000000700000000, size: 4096 MB, Compressed Oops mode: Zero based, Oop shift amount: 3
//	Heap address: 0x0000001001000000, size: 31744 MB, Compressed Oops mode: Non-zero disjoint base: 0x0000001000000000, Oop shift amount: 3
//	Heap address: 0x0000000900200000, size: 2048 MB, Compressed Oops mode: Non-zero based: 0x0000000900000000, Oop shift amount: 3
//
// (CompressedOops::print_mode). The line is absent without compressed oops.
type CompressedOops struct {
	HeapStart uint64
	// HeapMB is the heap size in MiB, truncated by HotSpot.
	HeapMB uint64
	Mode   RefMode
	Base   uint64
	Shift  uint
	// Line is the line as found (without any log decorations).
	Line string
}

var (
	coopsRE = regexp.MustCompile(`Heap address: (0x[0-9a-fA-F]+), size: (\d+) MB, Compressed Oops mode: ([^:,\n]+)(?:: (0x[0-9a-fA-F]+))?(?:, Oop shift amount: (\d+))?`)
	klassRE = regexp.MustCompile(`Narrow klass base: (0x[0-9a-fA-F]+), Narrow klass shift: (\d+)`)
	jvmRE   = regexp.MustCompile(`(?m)^# Java VM: (.*)$`)
)

// hotspotModes maps CompressedOops::mode_to_string to RefMode.
var hotspotModes = map[string]RefMode{
	"32-bit":                 RefsUnscaled,
	"Zero based":             RefsZeroBased,
	"Non-zero disjoint base": RefsDisjointBase,
	"Non-zero based":         RefsHeapBased,
}

// ErrNoCompressedOops means the text has no compressed-oops line.
var ErrNoCompressedOops = errors.New("no compressed oops line")

// ParseCompressedOops finds and parses the compressed-oops line anywhere in
// text (VM.info output, or a JVM's -Xlog:gc+heap+coops output).
func ParseCompressedOops(text string) (CompressedOops, error) {
	m := coopsRE.FindStringSubmatch(text)
	if m == nil {
		return CompressedOops{}, ErrNoCompressedOops
	}
	c := CompressedOops{Line: m[0]}
	var err error
	if c.HeapStart, err = strconv.ParseUint(m[1][2:], 16, 64); err != nil {
		return c, fmt.Errorf("parse compressed oops line: heap address %s: %w", m[1], err)
	}
	if c.HeapMB, err = strconv.ParseUint(m[2], 10, 64); err != nil {
		return c, fmt.Errorf("parse compressed oops line: size %s: %w", m[2], err)
	}
	mode, ok := hotspotModes[strings.TrimSpace(m[3])]
	if !ok {
		return c, fmt.Errorf("parse compressed oops line: unknown mode %q", m[3])
	}
	c.Mode = mode
	if m[4] != "" {
		if c.Base, err = strconv.ParseUint(m[4][2:], 16, 64); err != nil {
			return c, fmt.Errorf("parse compressed oops line: base %s: %w", m[4], err)
		}
	}
	if m[5] != "" {
		s, err := strconv.ParseUint(m[5], 10, 8)
		if err != nil || s > 4 {
			return c, fmt.Errorf("parse compressed oops line: shift %q out of range", m[5])
		}
		c.Shift = uint(s)
	}
	// The printed mode must agree with the printed base and shift.
	if want := modeFor(c.Base, c.Shift); want != c.Mode {
		return c, fmt.Errorf("parse compressed oops line: mode %q with base %#x shift %d", m[3], c.Base, c.Shift)
	}
	return c, nil
}

// maxVersion caps the "# Java VM:" line kept: HotSpot's is under 200
// bytes, and the target writes the reply.
const maxVersion = 256

// cutName cuts s to at most n bytes, at a character's start.
func cutName(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// ParseVMInfo builds a HotSpot Geometry from `jcmd <pid> VM.info` output
// (whole, or trimmed to the header and PROCESS section through its "Heap:"
// block). The reservation and encoding come from the compressed-oops line;
// without it (compressed oops off, or ZGC) references are full and the
// reservation is the span of the "Heap:" block's ranges, if it has any.
// Regions are the generations of the "Heap:" block (see ParseHeapInfo).
func ParseVMInfo(text string) (Geometry, error) {
	g := Geometry{VM: HotSpot}
	if m := jvmRE.FindStringSubmatch(text); m != nil {
		g.Version = cutName(strings.TrimSpace(m[1]), maxVersion)
	}
	if m := klassRE.FindStringSubmatch(text); m != nil {
		base, err := strconv.ParseUint(m[1][2:], 16, 64)
		if err != nil {
			return g, fmt.Errorf("parse vm info: narrow klass base %s: %w", m[1], err)
		}
		shift, err := strconv.ParseUint(m[2], 10, 8)
		if err != nil {
			return g, fmt.Errorf("parse vm info: narrow klass shift %s: %w", m[2], err)
		}
		g.KlassBase, g.KlassShift, g.HasKlass = base, uint(shift), true
	}

	var info Info
	hasHeap := false
	if block, ok := heapBlock(text); ok {
		var err error
		if info, err = ParseHeapInfo(block); err != nil {
			return g, fmt.Errorf("parse vm info: Heap: section: %w", err)
		}
		hasHeap = true
		g.Regions = info.Ranges
	}

	coops, err := ParseCompressedOops(text)
	switch {
	case err == nil:
		g.Mode, g.Base, g.Shift = coops.Mode, coops.Base, coops.Shift
		g.Reserved = Range{Start: coops.HeapStart, End: coops.HeapStart + coops.HeapMB<<20, Name: "heap"}
	case errors.Is(err, ErrNoCompressedOops):
		if g.Version != "" && strings.Contains(g.Version, "compressed oops") {
			return g, fmt.Errorf("parse vm info: VM reports compressed oops but prints no %q line", "Heap address:")
		}
		if g.Version == "" && !strings.Contains(text, "Compressed Oops: Disabled") {
			return g, fmt.Errorf("parse vm info: %w and no statement that compressed oops are disabled", err)
		}
		g.Mode = RefsFull
		if hasHeap && !info.Partial {
			g.Reserved = span(info.Ranges, "heap")
		}
	default:
		return g, fmt.Errorf("parse vm info: %w", err)
	}
	// HotSpot truncates the size to whole MiB; a generation may end up to
	// 1 MiB past it. Widen to cover the generations it printed.
	if g.Reserved.End > g.Reserved.Start {
		for _, r := range g.Regions {
			if r.Start >= g.Reserved.Start && r.End > g.Reserved.End && r.End-g.Reserved.End < 1<<20 {
				g.Reserved.End = r.End
			}
		}
	}
	if err := g.Validate(); err != nil {
		return g, fmt.Errorf("parse vm info: %w", err)
	}
	return g, nil
}

// heapBlock returns the lines after a "Heap:" line up to the next blank line.
func heapBlock(text string) (string, bool) {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "Heap:" {
			continue
		}
		var b strings.Builder
		for _, l := range lines[i+1:] {
			if strings.TrimSpace(l) == "" {
				break
			}
			b.WriteString(l)
			b.WriteByte('\n')
		}
		return b.String(), b.Len() > 0
	}
	return "", false
}
