package pmu

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrSyntax is wrapped by errors about an event string that does not parse.
var ErrSyntax = errors.New("bad event syntax")

// term is one name[=value] of a perf event string.
type term struct {
	name  string
	value uint64
	set   bool // value given explicitly
}

func parseTerms(s string) ([]term, error) {
	var out []term
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, val, hasVal := strings.Cut(part, "=")
		t := term{name: strings.TrimSpace(name)}
		if t.name == "" {
			return nil, fmt.Errorf("%w: empty term name in %q", ErrSyntax, part)
		}
		if hasVal {
			v, err := strconv.ParseUint(strings.TrimSpace(val), 0, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: term %q: value %q is not a number (decimal or 0x hex)", ErrSyntax, t.name, val)
			}
			t.value, t.set = v, true
		}
		out = append(out, t)
	}
	return out, nil
}

// configWords are config, config1 and config2 of an attr.
type configWords [3]uint64

func (w *configWords) apply(a *unix.PerfEventAttr) {
	a.Config, a.Ext1, a.Ext2 = w[0], w[1], w[2]
}

// place scatters v into the bit ranges of f, low bits first, as the
// kernel's perf_pmu__format_pack does; v must fit the field.
func (w *configWords) place(f Format, v uint64) error {
	if f.Config > 2 {
		return fmt.Errorf("%w: term %q lives in %s, which this perf_event_attr (VER7, 128 bytes) cannot carry", ErrSyntax, f.Name, configName(f.Config))
	}
	if bits := f.Bits(); bits < 64 && v>>uint(bits) != 0 {
		return fmt.Errorf("%w: value %#x of term %q does not fit %s (%d bits)", ErrSyntax, v, f.Name, f, bits)
	}
	for _, r := range f.Ranges {
		width := r[1] - r[0] + 1
		mask := uint64(1)<<uint(width) - 1
		if width == 64 {
			mask = ^uint64(0)
		}
		w[f.Config] = w[f.Config]&^(mask<<uint(r[0])) | (v&mask)<<uint(r[0])
		v >>= uint(width)
	}
	return nil
}

// extract reads the value of field f back out of its config word w.
func extract(f Format, w uint64) uint64 {
	var v uint64
	shift := 0
	for _, r := range f.Ranges {
		width := r[1] - r[0] + 1
		mask := ^uint64(0)
		if width < 64 {
			mask = uint64(1)<<uint(width) - 1
		}
		v |= (w >> uint(r[0]) & mask) << uint(shift)
		shift += width
	}
	return v
}

// encodeTerms resolves the terms of pmu p into config words, expanding
// event aliases (mem-loads) and applying later terms over earlier ones.
// period is returned when a period=N term is present.
func encodeTerms(p *PMU, terms []term) (w configWords, period uint64, err error) {
	var expanded []term
	for _, t := range terms {
		if _, isFormat := p.Formats[t.name]; !t.set && !isFormat {
			if alias, ok := p.Events[t.name]; ok {
				at, err := parseTerms(alias)
				if err != nil {
					return w, 0, fmt.Errorf("event %s of pmu %s: %w", t.name, p.Name, err)
				}
				expanded = append(expanded, at...)
				continue
			}
		}
		expanded = append(expanded, t)
	}
	final := map[string]uint64{}
	var order []string
	for _, t := range expanded {
		v := t.value
		if !t.set {
			v = 1 // a bare flag term means 1, as in perf
		}
		if _, seen := final[t.name]; !seen {
			order = append(order, t.name)
		}
		final[t.name] = v
	}
	// Whole-word terms first, so field terms can refine them.
	for i, word := range []string{"config", "config1", "config2"} {
		if v, ok := final[word]; ok {
			w[i] = v
		}
	}
	for _, name := range order {
		v := final[name]
		switch name {
		case "config", "config1", "config2":
			continue
		case "period":
			period = v
			continue
		}
		f, ok := p.Formats[name]
		if !ok {
			return w, 0, unknownTerm(p, name)
		}
		if err := w.place(f, v); err != nil {
			return w, 0, fmt.Errorf("pmu %s: %w", p.Name, err)
		}
	}
	return w, period, nil
}

func unknownTerm(p *PMU, name string) error {
	known := p.FormatNames()
	var events []string
	for e := range p.Events {
		events = append(events, e)
	}
	sort.Strings(events)
	msg := fmt.Sprintf("%v: unknown term %q for PMU %s (known: %s", ErrSyntax, name, p.Name, strings.Join(append(known, "config", "config1", "config2", "period"), ", "))
	if len(events) > 0 {
		msg += "; events: " + strings.Join(events, ", ")
	}
	return &syntaxError{msg: msg + ")"}
}

// syntaxError keeps the exact message while still matching ErrSyntax.
type syntaxError struct{ msg string }

func (e *syntaxError) Error() string        { return e.msg }
func (e *syntaxError) Is(target error) bool { return target == ErrSyntax }

// modifiers applies perf's event modifiers: p/pp/ppp (precise_ip), P
// (maximum precision), u (user only), k (kernel only).
func applyModifiers(a *unix.PerfEventAttr, mods string, maxPrecise int) error {
	precise, maxp, user, kernel := 0, false, false, false
	for _, c := range mods {
		switch c {
		case 'p':
			precise++
		case 'P':
			maxp = true
		case 'u':
			user = true
		case 'k':
			kernel = true
		default:
			return fmt.Errorf("%w: unsupported modifier %q in %q (supported: p, pp, ppp, P, u, k)", ErrSyntax, c, mods)
		}
	}
	if precise > 3 {
		return fmt.Errorf("%w: modifier %q: precise level %d above 3", ErrSyntax, mods, precise)
	}
	if maxp {
		precise = maxPrecise
	}
	if precise > 0 {
		setPrecise(a, precise)
	}
	switch {
	case user && kernel:
		a.Bits &^= unix.PerfBitExcludeKernel | unix.PerfBitExcludeUser
	case user:
		a.Bits = a.Bits&^unix.PerfBitExcludeUser | unix.PerfBitExcludeKernel
	case kernel:
		a.Bits = a.Bits&^unix.PerfBitExcludeKernel | unix.PerfBitExcludeUser
	}
	return nil
}

var rawRE = regexp.MustCompile(`^r([0-9a-fA-F]+)(?::([a-zA-Z]*))?$`)
