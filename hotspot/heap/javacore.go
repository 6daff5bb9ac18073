package heap

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// JavacoreError is a malformed javacore line: its 1-based number, the tag
// and the field that could not be read.
type JavacoreError struct {
	Line  int
	Tag   string
	Field string
	Err   error
}

func (e *JavacoreError) Error() string {
	return fmt.Sprintf("javacore line %d: %s: %s: %v", e.Line, e.Tag, e.Field, e.Err)
}

func (e *JavacoreError) Unwrap() error { return e.Err }

// Javacore is what a javacore says about the Java heap.
type Javacore struct {
	// Regions are the 1STHEAPREGION lines, named "<space>/<region name>"
	// as printed (e.g. "Generational/Nursery Region").
	Regions []Range
	// Spaces are the 1STHEAPSPACE names (e.g. "Generational").
	Spaces []string
	// Version is the 1CIJ9VMVERSION (or 1CIVMVERSION) line's text.
	Version string
	// Arch is the platform named in the VM version ("amd64", "s390x", ...).
	Arch string
	// Compressed is true, false, or unknown (nil) as the javacore states it:
	// "Compressed References" in the VM version, or -X[no]compressedrefs.
	Compressed *bool
	// Shift is the compressed-references shift when the text states it
	// (-XXgc:forcedShiftingCompressionAmount=N among the user args, or a
	// verbose GC compressedRefsShift attribute); ShiftStated says whether.
	Shift       uint
	ShiftStated bool
	// Args are the 2CIUSERARG values.
	Args []string
}

var (
	archRE       = regexp.MustCompile(`Linux (\S+)-64-Bit`)
	forcedRE     = regexp.MustCompile(`forcedShiftingCompressionAmount=(\d+)`)
	verboseRE    = regexp.MustCompile(`name="compressedRefsShift" value="(0x[0-9a-fA-F]+|\d+)"`)
	regionFields = []string{"id", "start", "end", "size"}
)

// ParseJavacoreHeap reads the heap lines of an OpenJ9 javacore (the
// MEMINFO section's "1STHEAPTYPE Object Memory" block) and the header lines
// that say how references are encoded. Bare 1STHEAPREGION lines, as quoted
// in bug reports, are accepted too. A malformed 1STHEAPREGION line is a
// *JavacoreError naming the line and field.
//
//	1STHEAPSPACE   0x00007FD4F4151E00         --                 --                 --         Generational
//	1STHEAPREGION  0x000003FFA4081E10 0x00000000E0000000 0x00000000E0600000 0x0000000000600000 Generational/Tenured Region
func ParseJavacoreHeap(text string) (Javacore, error) {
	var jc Javacore
	for n, raw := range strings.Split(text, "\n") {
		line := strings.TrimRight(raw, "\r")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch tag := f[0]; tag {
		case "1STHEAPSPACE":
			if len(f) >= 6 {
				jc.Spaces = append(jc.Spaces, strings.Join(f[5:], " "))
			}
		case "1STHEAPREGION":
			r, err := parseRegion(n+1, f)
			if err != nil {
				return jc, err
			}
			jc.Regions = append(jc.Regions, r)
		case "1CIJ9VMVERSION", "1CIVMVERSION":
			jc.Version = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), tag))
			if m := archRE.FindStringSubmatch(line); m != nil {
				jc.Arch = m[1]
			}
			if strings.Contains(line, "Compressed References") {
				jc.Compressed = ptr(true)
			} else if strings.Contains(line, "-64-Bit") && jc.Compressed == nil {
				// The version names compressed references when they are on.
				jc.Compressed = ptr(false)
			}
		case "2CIUSERARG":
			if len(f) < 2 {
				continue
			}
			arg := f[1]
			jc.Args = append(jc.Args, arg)
			switch {
			case arg == "-Xcompressedrefs":
				jc.Compressed = ptr(true)
			case arg == "-Xnocompressedrefs":
				jc.Compressed = ptr(false)
			}
			if m := forcedRE.FindStringSubmatch(arg); m != nil {
				s, err := strconv.ParseUint(m[1], 10, 8)
				if err != nil || s > 4 {
					return jc, &JavacoreError{Line: n + 1, Tag: tag, Field: "forcedShiftingCompressionAmount", Err: fmt.Errorf("%q is not a shift 0-4", m[1])}
				}
				jc.Shift, jc.ShiftStated = uint(s), true
			}
		}
		if m := verboseRE.FindStringSubmatch(line); m != nil && !jc.ShiftStated {
			s, err := strconv.ParseUint(m[1], 0, 8)
			if err != nil || s > 4 {
				return jc, &JavacoreError{Line: n + 1, Tag: "compressedRefsShift", Field: "value", Err: fmt.Errorf("%q is not a shift 0-4", m[1])}
			}
			jc.Shift, jc.ShiftStated = uint(s), true
		}
	}
	if len(jc.Regions) == 0 {
		return jc, fmt.Errorf("parse javacore: no 1STHEAPREGION lines")
	}
	return jc, nil
}

func ptr[T any](v T) *T { return &v }

// parseRegion reads "1STHEAPREGION id start end size name...".
func parseRegion(line int, f []string) (Range, error) {
	bad := func(field string, err error) error {
		return &JavacoreError{Line: line, Tag: "1STHEAPREGION", Field: field, Err: err}
	}
	if len(f) < 6 {
		return Range{}, bad(fieldAt(len(f)), fmt.Errorf("missing: want id, start, end, size and a name, got %d fields", len(f)-1))
	}
	var v [4]uint64
	for i, name := range regionFields {
		s := f[i+1]
		if !strings.HasPrefix(s, "0x") && !strings.HasPrefix(s, "0X") {
			return Range{}, bad(name, fmt.Errorf("%q is not a 0x hex number", s))
		}
		x, err := strconv.ParseUint(s[2:], 16, 64)
		if err != nil {
			return Range{}, bad(name, fmt.Errorf("%q: %w", s, err))
		}
		v[i] = x
	}
	start, end, size := v[1], v[2], v[3]
	if end <= start {
		return Range{}, bad("end", fmt.Errorf("%#x is not above start %#x", end, start))
	}
	if end-start != size {
		return Range{}, bad("size", fmt.Errorf("%#x, but end-start is %#x", size, end-start))
	}
	return Range{Start: start, End: end, Name: strings.Join(f[5:], " ")}, nil
}

func fieldAt(n int) string {
	if n-1 < len(regionFields) {
		return regionFields[max(n-1, 0)]
	}
	return "name"
}

// Geometry turns the javacore's heap lines into a Geometry. The reservation
// is the span of the regions (OpenJ9 places the tenured area at the bottom
// and the nursery at the top of the reserved range). OpenJ9 compressed
// references always have base 0. When the javacore does not state the
// shift, it is derived as the smallest shift the platform supports whose
// 4 GiB << shift covers the heap's top (ShiftDerived is set): this is a
// lower bound, exact for placements made by the top-down policy (see
// Place), but not when allocation fell back to a lower address. Unknown
// compression is assumed on when the top is within 64 GiB (OpenJ9's
// default for heaps up to 57 GB) and the derived shift is marked so.
func (jc Javacore) Geometry() (Geometry, error) {
	g := Geometry{VM: OpenJ9, Version: jc.Version}
	g.Regions = append([]Range(nil), jc.Regions...)
	g.Reserved = span(jc.Regions, "heap")
	top := g.Reserved.End
	compressed := top <= MaxCompressedTop
	if jc.Compressed != nil {
		compressed = *jc.Compressed
	}
	if !compressed {
		g.Mode = RefsFull
		return g, g.Validate()
	}
	switch {
	case jc.ShiftStated:
		g.Shift = jc.Shift
	default:
		s, ok := MinShift(top, ShiftsFor(jc.Arch))
		if !ok {
			return g, fmt.Errorf("javacore heap: top %#x is beyond any compressed-references shift", top)
		}
		g.Shift, g.ShiftDerived = s, true
	}
	g.Mode = modeFor(0, g.Shift)
	if err := g.Validate(); err != nil {
		return g, fmt.Errorf("javacore heap: %w", err)
	}
	return g, nil
}

// ParseJavacore is ParseJavacoreHeap followed by Geometry.
func ParseJavacore(text string) (Geometry, error) {
	jc, err := ParseJavacoreHeap(text)
	if err != nil {
		return Geometry{}, err
	}
	return jc.Geometry()
}
