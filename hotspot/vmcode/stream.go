package vmcode

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrMalformed means the target's memory did not decode: a table or
// stream is truncated, out of range or inconsistent. The JVM may have
// freed or reused it since the pc was taken, or the memory is forged.
var ErrMalformed = errors.New("malformed code metadata")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Caps on what decoding a target's tables may cost.
const (
	// MaxInlineDepth caps an inlining chain; C2's MaxInlineLevel is 15
	// by default, and its hard limit far below this.
	MaxInlineDepth = 64
	// maxLinePairs caps the entries decoded from one line number table:
	// there is at most one per bytecode, and a method has at most 64 KiB.
	maxLinePairs = 1 << 16
)

// stream decodes HotSpot's CompressedReadStream (UNSIGNED5, the Pack200
// encoding: bytes below 192 end a number, at most 5 bytes) from buf.
// Every read is bounded by buf, so a forged stream ends in an error.
type stream struct {
	buf []byte
	pos int
	x   byte // excluded bytes: 1 from JDK 20 on, where 0 never occurs
}

func (s *stream) byte() (byte, error) {
	if s.pos < 0 || s.pos >= len(s.buf) {
		return 0, malformed("stream read past its end at %d", s.pos)
	}
	b := s.buf[s.pos]
	s.pos++
	return b, nil
}

// uint reads one UNSIGNED5 number.
func (s *stream) uint() (uint32, error) {
	const lgH, L = 6, 192 // L as a raw byte: the same for x 0 and 1
	var sum uint32
	for i := 0; i < 5; i++ {
		b, err := s.byte()
		if err != nil {
			return 0, err
		}
		if b < s.x {
			return 0, malformed("excluded byte %#x in stream", b)
		}
		sum += uint32(b-s.x) << (lgH * i)
		if b < L {
			return sum, nil
		}
	}
	return sum, nil
}

// sint reads a signed number, zigzag-encoded as HotSpot's read_signed_int.
func (s *stream) sint() (int32, error) {
	v, err := s.uint()
	return int32(v>>1) ^ -int32(v&1), err
}

// linePair is one entry of a method's line number table.
type linePair struct {
	bci, line int32
}

// decodeLines decodes HotSpot's CompressedLineNumberReadStream from buf
// (the bytes after a method's bytecodes): a 0 byte ends it, 0xFF escapes
// two signed deltas, any other byte packs a bci delta (high 5 bits) and a
// line delta (low 3 bits).
func decodeLines(buf []byte, x byte) ([]linePair, error) {
	s := stream{buf: buf, x: x}
	var out []linePair
	var bci, line int32
	for len(out) < maxLinePairs {
		b, err := s.byte()
		if err != nil {
			return nil, fmt.Errorf("line number table: %w", err)
		}
		switch b {
		case 0:
			return out, nil
		case 0xFF:
			db, err1 := s.sint()
			dl, err2 := s.sint()
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("line number table: %w", err)
			}
			bci += db
			line += dl
		default:
			bci += int32(b >> 3)
			line += int32(b & 7)
		}
		out = append(out, linePair{bci, line})
	}
	return nil, malformed("line number table of more than %d entries", maxLinePairs)
}

// lineOf is HotSpot's Method::line_number_from_bci: the exact bci's line,
// else the line of the greatest bci below it; -1 when none (as HotSpot),
// which callers show as no line.
func lineOf(pairs []linePair, bci int32) int32 {
	if bci == -1 { // SynchronizationEntryBCI
		bci = 0
	}
	bestBCI, bestLine := int32(0), int32(-1)
	for _, p := range pairs {
		if p.bci == bci {
			return p.line
		}
		if p.bci < bci && p.bci >= bestBCI {
			bestBCI, bestLine = p.bci, p.line
		}
	}
	return bestLine
}

// pcDescs is an nmethod's PcDesc table as read: stride bytes per entry,
// the pc offset and scope decode offset as int32 at off and scope.
type pcDescs struct {
	buf        []byte
	stride     int
	off, scope int
}

// len is the number of entries, 0 when the layout cannot be read: a
// forged vmStructs table may place either int32 past an entry's end.
func (p pcDescs) len() int {
	if !p.readable() {
		return 0
	}
	return len(p.buf) / p.stride
}

// readable says whether both int32s lie inside an entry of stride bytes.
func (p pcDescs) readable() bool {
	return p.stride >= 8 && p.off >= 0 && p.scope >= 0 && p.off+4 <= p.stride && p.scope+4 <= p.stride
}

// at reads entry i, which must be below len().
func (p pcDescs) at(i int) (pcOff, scope int32) {
	e := p.buf[i*p.stride:]
	return int32(binary.LittleEndian.Uint32(e[p.off:])), int32(binary.LittleEndian.Uint32(e[p.scope:]))
}

// find returns the scope decode offset of the PcDesc for pc offset off,
// as HotSpot's approximate find_pc_desc: the first PcDesc at or after
// off (a return address has one exactly; a pc inside straight-line code
// is described by the next safepoint). The table is sorted in a sane
// nmethod; a forged one only makes the binary search pick a wrong entry.
func (p pcDescs) find(off int32) (scope int32, found bool) {
	lo, hi := 0, p.len()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if o, _ := p.at(m); o < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo >= p.len() {
		return 0, false
	}
	_, scope = p.at(lo)
	return scope, true
}

// rawFrame is one scope of an nmethod: the index of its Method* in the
// nmethod's metadata (1-based; 0 is null) and its bci.
type rawFrame struct {
	metaIndex uint32
	bci       int32
}

// decodeScopes follows the ScopeDesc chain at offset from scopes (the
// nmethod's scopes data), innermost first: each scope starts with its
// sender's decode offset (0 ends the chain, DebugInformationRecorder's
// serialized_null), its method's metadata index and its bci + 1
// (InvocationEntryBci is -1).
func decodeScopes(scopes []byte, offset int32, x byte) ([]rawFrame, error) {
	var out []rawFrame
	for offset != 0 {
		if len(out) == MaxInlineDepth {
			return nil, malformed("inlining chain deeper than %d (a loop?)", MaxInlineDepth)
		}
		if offset < 0 || int(offset) >= len(scopes) {
			return nil, malformed("scope decode offset %d outside scopes data of %d bytes", offset, len(scopes))
		}
		s := stream{buf: scopes, pos: int(offset), x: x}
		sender, err1 := s.uint()
		meta, err2 := s.uint()
		bci, err3 := s.uint()
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("scope at %d: %w", offset, err)
		}
		out = append(out, rawFrame{metaIndex: meta, bci: int32(bci) - 1})
		offset = int32(sender)
	}
	return out, nil
}
