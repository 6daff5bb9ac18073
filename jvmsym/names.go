package jvmsym

import (
	"unicode/utf8"
)

// MaxName is the bytes kept of a name a target controls (a class, method,
// signature or symbol name): longer ones are cut and end in NameCut. No
// real name comes near it; the JVM allows 65,535 bytes, and root keeps
// every name of every frame it names.
const MaxName = 1 << 10

// NameCut ends a name cut to MaxName bytes.
const NameCut = "…"

// CutName returns s, or s cut to MaxName bytes (NameCut included) at a
// character boundary when it is longer.
func CutName(s string) string {
	if len(s) <= MaxName {
		return s
	}
	return string(AppendCut(nil, []byte(s[:MaxName+1])))
}

// AppendCut appends to dst the name b, cut to MaxName bytes, NameCut
// included, when longer.
func AppendCut(dst, b []byte) []byte {
	if len(b) <= MaxName {
		return append(dst, b...)
	}
	return append(append(dst, cutName(b, MaxName-len(NameCut))...), NameCut...)
}

// Names interns the names of frames: a name repeated across samples and
// paths is kept once, and known by a small id. It holds at most its
// budget of bytes; past it, new names are all NamesFull, counted in
// Refused. Not safe for concurrent use.
type Names struct {
	ids     map[string]uint32
	names   []string // by id-1
	bytes   int
	max     int
	refused uint64
	full    uint32
}

// NamesFull stands for a name that came past a Names' byte budget.
const NamesFull = "[frame name not kept: names past the budget]"

// nameOverhead estimates what a name costs besides its bytes: its map
// entry and its slot.
const nameOverhead = 64

// NewNames returns an interner of at most maxBytes.
func NewNames(maxBytes int) *Names {
	n := &Names{ids: make(map[string]uint32), max: maxBytes}
	n.full = n.add(NamesFull)
	return n
}

func (n *Names) add(s string) uint32 {
	n.names = append(n.names, s)
	id := uint32(len(n.names))
	n.ids[s] = id
	n.bytes += len(s) + nameOverhead
	return id
}

// Intern returns the id of name b, cut to MaxName bytes; b is copied
// only the first time it is seen.
func (n *Names) Intern(b []byte) uint32 {
	if len(b) > MaxName {
		b = AppendCut(nil, b)
	}
	if id, ok := n.ids[string(b)]; ok {
		return id
	}
	if n.bytes+len(b)+nameOverhead > n.max {
		n.refused++
		return n.full
	}
	return n.add(string(b))
}

// InternString is Intern of a string.
func (n *Names) InternString(s string) uint32 {
	if len(s) <= MaxName {
		if id, ok := n.ids[s]; ok {
			return id
		}
	}
	return n.Intern([]byte(s))
}

// Name is the name of id; "" for 0 or an id it did not give.
func (n *Names) Name(id uint32) string {
	if id == 0 || int(id) > len(n.names) {
		return ""
	}
	return n.names[id-1]
}

// Len is the number of names kept.
func (n *Names) Len() int { return len(n.names) }

// Bytes estimates what the names kept hold.
func (n *Names) Bytes() int { return n.bytes }

// Refused counts the names that came past the budget.
func (n *Names) Refused() uint64 { return n.refused }

// cutName cuts name to at most max bytes, not inside a UTF-8 sequence.
func cutName(name []byte, max int) []byte {
	name = name[:max]
	for i := len(name) - 1; i >= 0 && i >= len(name)-utf8.UTFMax; i-- {
		if utf8.RuneStart(name[i]) {
			if !utf8.FullRune(name[i:]) {
				name = name[:i]
			}
			break
		}
	}
	return name
}
