package vmcode

import (
	"errors"
	"fmt"
)

// ErrNotCode means the address is in no live code blob: outside every
// code heap, or in a free block.
var ErrNotCode = errors.New("not in the code cache")

// Kind says what a code blob holds.
type Kind uint8

const (
	KindUnknown     Kind = iota
	KindNMethod          // compiled Java method (or a native method's wrapper)
	KindInterpreter      // the template interpreter
	KindStub             // any other generated code: runtime stubs, adapters, vtables
)

func (k Kind) String() string {
	switch k {
	case KindNMethod:
		return "nmethod"
	case KindInterpreter:
		return "interpreter"
	case KindStub:
		return "stub"
	}
	return "unknown"
}

// Blob is a code blob as the code cache holds it: what a stack unwinder
// needs (bounds, frame size) and, for an nmethod, what compiled it.
type Blob struct {
	Start, End         uint64 // the blob, header included: [Start, End)
	CodeBegin, CodeEnd uint64 // its instructions
	// FrameSize is the fixed frame of its code in bytes, return address
	// included (CodeBlob::_frame_size words); 0 for the interpreter,
	// whose frames vary.
	FrameSize uint64
	// FrameComplete is the offset from CodeBegin where the frame is
	// set up; -1 when unknown.
	FrameComplete int64
	Kind          Kind
	Name          string // CodeBlob::_name: "nmethod", "Interpreter", a stub's name

	// nmethods only
	Method    uint64 // Method*
	CompileID int64
	Level     int    // tier: 1-3 C1, 4 C2 (CompLevel)
	Compiler  string // "c1", "c2", or "" for a native wrapper (level 0)
	EntryBCI  int64  // -1, or the bci an OSR compilation enters at
	State     int64  // nmethod::_state: 0 in use, 1 not entrant
}

// header is a blob's header bytes, as read with its HeapBlock.
type header struct {
	blob Blob
	buf  []byte // the blob's header, nmethod-sized when readable
}

// readBlob reads the blob holding pc.
func (s *Symbolizer) readBlob(r *reader, pc uint64) (header, error) {
	h, err := s.heapOf(r, pc)
	if err != nil {
		return header{}, err
	}
	seg, err := blockStart(r, h, pc)
	if err != nil {
		return header{}, err
	}
	l := s.l
	block := h.Low + seg<<h.Log2SegmentSize
	buf := make([]byte, l.heapBlockSize+l.nmSize)
	n, err := r.prefix(buf, block)
	if err != nil {
		return header{}, err
	}
	if uint64(n) < l.heapBlockSize+l.blobSize {
		return header{}, malformed("code block at %#x is unreadable", block)
	}
	buf = buf[:n]
	if get(buf, l.hbUsed) == 0 {
		return header{}, fmt.Errorf("%w: %#x is in a free block", ErrNotCode, pc)
	}
	blockLen := min(get(buf, l.hbLength), maxBlob) << h.Log2SegmentSize
	if blockLen < l.heapBlockSize+l.blobSize || blockLen > h.End-block {
		return header{}, malformed("code block at %#x of %d bytes", block, blockLen)
	}
	start := block + l.heapBlockSize
	hb := header{buf: buf[l.heapBlockSize:]}
	if err := s.decodeBlob(&hb, start, blockLen-l.heapBlockSize); err != nil {
		return header{}, fmt.Errorf("blob at %#x: %w", start, err)
	}
	if pc >= hb.blob.End {
		return header{}, fmt.Errorf("%w: %#x is past the blob %#x-%#x", ErrNotCode, pc, hb.blob.Start, hb.blob.End)
	}
	if err := s.blobKind(r, &hb); err != nil {
		return header{}, fmt.Errorf("blob at %#x: %w", start, err)
	}
	return hb, nil
}

// decodeBlob checks and decodes the CodeBlob fields of hb.buf, a blob at
// start in a block with room bytes after its header.
func (s *Symbolizer) decodeBlob(hb *header, start, room uint64) error {
	l, buf := s.l, hb.buf
	size := sget(buf, l.blobSizeF)
	if size <= 0 || uint64(size) > room || size > maxBlob {
		return malformed("size %d outside its block's %d bytes", size, room)
	}
	b := Blob{Start: start, End: start + uint64(size), FrameComplete: -1}
	if hs := sget(buf, l.blobHeaderSize); hs <= 0 || hs > size {
		return malformed("header size %d of a %d-byte blob", hs, size)
	}
	b.CodeBegin, b.CodeEnd = get(buf, l.codeBegin), get(buf, l.codeEnd)
	if l.codeIsOffset {
		b.CodeBegin, b.CodeEnd = start+uint64(uint32(b.CodeBegin)), start+uint64(uint32(b.CodeEnd))
	}
	if b.CodeBegin < start || b.CodeEnd < b.CodeBegin || b.CodeEnd > b.End {
		return malformed("code %#x-%#x outside the blob %#x-%#x", b.CodeBegin, b.CodeEnd, start, b.End)
	}
	if fs := sget(buf, l.blobFrameSize); fs > 0 && fs < 1<<20 {
		b.FrameSize = uint64(fs) * 8
	}
	if fc := sget(buf, l.blobFrameComplete); fc >= 0 && uint64(fc) <= b.CodeEnd-b.CodeBegin {
		b.FrameComplete = fc
	}
	hb.blob = b
	return nil
}

// blobKind names the blob and, for an nmethod, decodes what compiled it.
func (s *Symbolizer) blobKind(r *reader, hb *header) error {
	l, b := s.l, &hb.blob
	name, err := s.blobName(r, get(hb.buf, l.blobName))
	if err != nil {
		return err
	}
	b.Name = name
	isNM := name == "nmethod" || name == "native nmethod"
	if l.blobKind.ok() {
		isNM = sget(hb.buf, l.blobKind) == l.kindNmethod
	}
	switch {
	case isNM:
		return s.decodeNMethod(hb)
	case name == "Interpreter":
		b.Kind = KindInterpreter
		b.FrameSize = 0
	default:
		b.Kind = KindStub
	}
	return nil
}

func (s *Symbolizer) decodeNMethod(hb *header) error {
	l, b := s.l, &hb.blob
	if uint64(len(hb.buf)) < l.nmSize || b.End-b.Start < l.nmSize {
		return malformed("nmethod header past its blob")
	}
	b.Kind = KindNMethod
	b.Method = get(hb.buf, l.nmMethod)
	if !plausible(b.Method, 0) || b.Method%8 != 0 {
		return malformed("nmethod's Method* %#x", b.Method)
	}
	b.CompileID = sget(hb.buf, l.nmCompileID)
	b.Level = int(sget(hb.buf, l.nmCompLevel))
	switch {
	case b.Level >= 1 && b.Level <= 3:
		b.Compiler = "c1"
	case b.Level == 4:
		b.Compiler = "c2"
	}
	b.EntryBCI = sget(hb.buf, l.nmEntryBCI)
	b.State = sget(hb.buf, l.nmState)
	return nil
}

// blobName reads a blob's name: a C string in libjvm, cached by address
// since a JVM has a few hundred of them.
func (s *Symbolizer) blobName(r *reader, p uint64) (string, error) {
	if p == 0 {
		return "", nil
	}
	if n, ok := s.names[p]; ok {
		return n, nil
	}
	n, err := r.cstr(p, 128)
	if err != nil {
		return "", fmt.Errorf("read blob name: %w", err)
	}
	if len(s.names) >= maxNames {
		clear(s.names)
	}
	s.names[p] = n
	return n, nil
}

const maxNames = 4096
