package agentwire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// ErrCorrupt is matched (errors.Is) by every error that reports malformed
// input, as opposed to I/O errors of the underlying reader.
var ErrCorrupt = errors.New("corrupt agent stream")

// FormatError describes malformed input. Batch and Record count from 0;
// Record is -1 for errors in the batch header.
type FormatError struct {
	Batch  int
	Record int
	Msg    string
}

func (e *FormatError) Error() string {
	if e.Record < 0 {
		return fmt.Sprintf("agent stream: batch %d: %s", e.Batch, e.Msg)
	}
	return fmt.Sprintf("agent stream: batch %d: record %d: %s", e.Batch, e.Record, e.Msg)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *FormatError) Is(target error) bool { return target == ErrCorrupt }

// Reader decodes batches from an agent stream.
type Reader struct {
	r     *bufio.Reader
	batch int
	buf   []byte
	d     dec
}

// maxReadPayload caps a batch read: the agent's buffer is 4 MiB
// (DJX_BUF_CAP), and a batch decodes to several times its size, so a larger
// one from a hostile target would only cost the loader memory.
const maxReadPayload = min(MaxPayload, 8<<20)

// NewReader returns a Reader that reads the stream from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next batch. It returns io.EOF when the stream ends
// cleanly at a batch boundary, an error wrapping io.ErrUnexpectedEOF when it
// ends inside a batch, and a *FormatError for malformed input.
func (r *Reader) Next() (*Batch, error) {
	n := r.batch
	var hdr [HeaderLen]byte
	if _, err := io.ReadFull(r.r, hdr[:]); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("agent stream: batch %d: header: %w", n, err)
	}
	ferr := func(format string, a ...any) error {
		return &FormatError{Batch: n, Record: -1, Msg: fmt.Sprintf(format, a...)}
	}
	if m := binary.LittleEndian.Uint32(hdr[0:]); m != Magic {
		return nil, ferr("bad magic %#08x", m)
	}
	if v := binary.LittleEndian.Uint16(hdr[4:]); v != Version {
		return nil, ferr("unsupported version %d", v)
	}
	// hdr[6:8] are flags: none defined yet, ignored.
	plen := binary.LittleEndian.Uint32(hdr[8:])
	nrec := binary.LittleEndian.Uint32(hdr[12:])
	if plen > maxReadPayload {
		return nil, ferr("payload of %d bytes exceeds %d", plen, maxReadPayload)
	}
	if uint64(nrec)*RecHeaderLen > uint64(plen) {
		return nil, ferr("%d records cannot fit in %d bytes", nrec, plen)
	}
	if cap(r.buf) < int(plen) {
		r.buf = make([]byte, plen)
	}
	payload := r.buf[:plen]
	if _, err := io.ReadFull(r.r, payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("agent stream: batch %d: payload: %w", n, err)
	}
	b := &Batch{
		Watermark: binary.LittleEndian.Uint64(hdr[16:]),
		Records:   make([]Record, 0, nrec),
	}
	r.d.strCut, r.d.listCut = 0, 0
	for i := 0; i < int(nrec); i++ {
		if len(payload) < RecHeaderLen {
			return nil, &FormatError{n, i, fmt.Sprintf("truncated record header (%d bytes left)", len(payload))}
		}
		blen := binary.LittleEndian.Uint32(payload)
		typ := RecordType(binary.LittleEndian.Uint16(payload[4:]))
		payload = payload[RecHeaderLen:]
		if uint64(blen) > uint64(len(payload)) {
			return nil, &FormatError{n, i, fmt.Sprintf("%v body of %d bytes overruns payload (%d left)", typ, blen, len(payload))}
		}
		rec, err := r.d.decodeRecord(typ, payload[:blen])
		if err != nil {
			return nil, &FormatError{n, i, err.Error()}
		}
		b.Records = append(b.Records, rec)
		payload = payload[blen:]
	}
	if len(payload) != 0 {
		return nil, ferr("%d bytes after the last of %d records", len(payload), nrec)
	}
	b.StringsCut, b.ListsCut = r.d.strCut, r.d.listCut
	r.batch++
	return b, nil
}

// dec reads a record body; the first failure sticks. It counts, across
// bodies, the strings and lists it cut to the package's limits.
type dec struct {
	b       []byte
	bad     bool
	strCut  int
	listCut int
}

func (d *dec) take(n uint64) []byte {
	if d.bad || n > uint64(len(d.b)) {
		d.bad = true
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (d *dec) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (d *dec) str() string {
	n := d.u32()
	v := d.take(uint64(n))
	if len(v) <= MaxString {
		return string(v)
	}
	d.strCut++
	// Cut at the start of a character, so that the marker follows whole
	// ones.
	k := MaxString - len(StringCut)
	for k > 0 && !utf8.RuneStart(v[k]) {
		k--
	}
	return string(v[:k]) + StringCut
}

// keep is how many of n list elements to keep, at most limit; the cut is
// counted.
func (d *dec) keep(n, limit int) int {
	if n > limit {
		d.listCut++
		return limit
	}
	return n
}

// opt64 reads a trailing u64 field that older agents do not send: 0 when
// the body ends before it.
func (d *dec) opt64() uint64 {
	if d.bad || len(d.b) < 8 {
		return 0
	}
	return d.u64()
}

// opt32 is opt64 for a trailing u32.
func (d *dec) opt32() uint32 {
	if d.bad || len(d.b) < 4 {
		return 0
	}
	return d.u32()
}

// frames reads u32 n, n × {u64 jmethodid, u64 bci}; nil when n is 0.
func (d *dec) frames() []Frame {
	return d.frameList(d.count(16))
}

// frameList reads n frames whose size the caller checked, keeping the
// innermost MaxFrames.
func (d *dec) frameList(n int) []Frame {
	if n == 0 {
		return nil
	}
	fs := make([]Frame, d.keep(n, MaxFrames))
	for i := range fs {
		fs[i] = Frame{Method: d.u64(), BCI: int64(d.u64())}
	}
	d.take(uint64(n-len(fs)) * 16)
	return fs
}

// count reads an element count and checks that that many elements of size
// bytes fit in the rest of the body, so a corrupt count allocates nothing.
func (d *dec) count(size int) int {
	n := d.u32()
	if d.bad || uint64(n)*uint64(size) > uint64(len(d.b)) {
		d.bad = true
		return 0
	}
	return int(n)
}

// recordDecoders decodes the body of each record type the package knows;
// the others become Unknown records.
var recordDecoders = [...]func(*dec) Record{
	TypeHello:       decodeHello,
	TypeMethod:      decodeMethod,
	TypeAlloc:       decodeAlloc,
	TypeStats:       decodeStats,
	TypeBye:         func(d *dec) Record { return &Bye{Reason: d.str()} },
	TypeError:       func(d *dec) Record { return &ErrorRec{Message: d.str()} },
	TypeInterval:    func(d *dec) Record { return &Interval{Time: d.u64(), Interval: d.u64()} },
	TypeFree:        func(d *dec) Record { return &Free{Time: d.u64(), Tag: d.u64()} },
	TypeGCStart:     func(d *dec) Record { return &GCStart{Time: d.u64()} },
	TypeGCFinish:    func(d *dec) Record { return &GCFinish{Time: d.u64()} },
	TypeReconcile:   decodeReconcile,
	TypeStack:       decodeStack,
	TypeCode:        decodeCode,
	TypeCodeUnload:  func(d *dec) Record { return &CodeUnload{Time: d.u64(), Method: d.u64(), Start: d.u64()} },
	TypeStub:        func(d *dec) Record { return &Stub{Time: d.u64(), Start: d.u64(), Size: d.u32(), Name: d.str()} },
	TypeCensusStart: func(d *dec) Record { return &CensusStart{Time: d.u64(), Kind: CensusKind(d.u32())} },
	TypeCensusPath:  func(d *dec) Record { return &CensusPath{ID: d.u32(), Parent: d.u32(), Hop: d.str()} },
	TypeCensus:      decodeCensus,
	TypeCensusEnd:   decodeCensusEnd,
	TypeTypesInfo:   decodeTypesInfo,
	TypeClass:       decodeClass,
	TypeRoot:        decodeRoot,
	TypeRootsEnd:    decodeRootsEnd,
	TypeAllocRaw:    decodeAllocRaw,
}

func (d *dec) decodeRecord(typ RecordType, body []byte) (Record, error) {
	d.b, d.bad = body, false
	var decode func(*dec) Record
	if int(typ) < len(recordDecoders) {
		decode = recordDecoders[typ]
	}
	if decode == nil {
		return &Unknown{RecType: typ, Body: append([]byte(nil), body...)}, nil
	}
	rec := decode(d)
	if d.bad {
		return nil, fmt.Errorf("truncated %v", typ)
	}
	// Trailing bytes are fields added by a newer agent: ignored.
	return rec, nil
}

func decodeHello(d *dec) Record {
	h := &Hello{
		ProtoVersion: d.u32(),
		PID:          d.u32(),
		Interval:     d.u64(),
		MinSize:      d.u64(),
		Monotonic:    d.u64(),
		VMName:       d.str(),
		VMVersion:    d.str(),
		Mode:         d.str(),
	}
	h.StackSignal = d.opt32()
	return h
}

func decodeMethod(d *dec) Record {
	m := &Method{ID: d.u64(), ClassSig: d.str(), Name: d.str(), Sig: d.str(), SourceFile: d.str()}
	if n := d.count(12); n > 0 {
		m.Lines = make([]LineEntry, d.keep(n, MaxLines))
		for i := range m.Lines {
			m.Lines[i] = LineEntry{Start: int64(d.u64()), Line: int32(d.u32())}
		}
		d.take(uint64(n-len(m.Lines)) * 12)
	}
	return m
}

func decodeAlloc(d *dec) Record {
	a := &Alloc{Time: d.u64(), Addr: d.u64(), Size: d.u64(), TID: d.u32()}
	// The frame count comes before the type, the frames after it.
	nf := d.u32()
	a.TypeSig = d.str()
	if !d.bad && uint64(nf)*16 > uint64(len(d.b)) {
		d.bad = true
	}
	if !d.bad {
		a.Frames = d.frameList(int(nf))
	}
	a.Tag = d.opt64()
	return a
}

func decodeAllocRaw(d *dec) Record {
	a := &AllocRaw{Time: d.u64(), Addr: d.u64(), Size: d.u64(), TID: d.u32()}
	nf := d.u32()
	a.End = d.u32()
	a.TypeSig = d.str()
	if !d.bad && uint64(nf)*24 > uint64(len(d.b)) {
		d.bad = true
	}
	if !d.bad && nf > 0 {
		a.Frames = make([]RawFrame, d.keep(int(nf), MaxFrames))
		for i := range a.Frames {
			a.Frames[i] = RawFrame{Blob: d.u64(), A: d.u64(), B: d.u64()}
		}
		d.take(uint64(int(nf)-len(a.Frames)) * 24)
	}
	a.Tag = d.u64()
	return a
}

func decodeStats(d *dec) Record {
	return &Stats{Callbacks: d.u64(), BelowMinSize: d.u64(), Dropped: d.u64(), StackErrors: d.u64(), AllocsSent: d.u64(),
		Frees: d.opt64(), GCs: d.opt64(), Reconciles: d.opt64(), Reconciled: d.opt64(),
		ReconcileSkipped: d.opt64(), ReconcileLimited: d.opt64(), ReconcileNanos: d.opt64(),
		StackSignals: d.opt64(), StacksSent: d.opt64(), StacksDropped: d.opt64(),
		CodeSent: d.opt64(), CodeDropped: d.opt64(), SignalsChained: d.opt64(),
		Untagged: d.opt64(), UntaggedFreed: d.opt64(),
		AllocNanos: d.opt64(), StackNanos: d.opt64(), CodeNanos: d.opt64(), WriterCPUNanos: d.opt64(),
		ProcessCPUNanos: d.opt64(), Tracked: d.opt64(), TrackedLive: d.opt64(), CensusNanos: d.opt64(),
		ClassesSent: d.opt64(), ClassesDropped: d.opt64(), TypesNanos: d.opt64(),
		RawStacks: d.opt64(), RawFallbacks: d.opt64()}
}

func decodeReconcile(d *dec) Record {
	r := &Reconcile{Time: d.u64()}
	if n := d.count(16); n > 0 {
		r.Objects = make([]TagAddr, n)
		for i := range r.Objects {
			r.Objects[i] = TagAddr{Tag: d.u64(), Addr: d.u64()}
		}
	}
	return r
}

func decodeStack(d *dec) Record {
	st := &Stack{Time: d.u64(), TID: d.u32(), Status: int32(d.u32()), PC: d.u64()}
	st.Frames = d.frames()
	return st
}

func decodeCode(d *dec) Record {
	c := &Code{Time: d.u64(), Method: d.u64(), Start: d.u64(), Size: d.u32()}
	// Each PC takes at least 12 bytes (u64 pc, u32 nframes).
	if n := d.count(12); n > 0 {
		c.PCs = make([]PCInfo, n)
		for i := range c.PCs {
			c.PCs[i] = PCInfo{PC: d.u64(), Frames: d.frames()}
			if d.bad {
				break
			}
		}
	}
	return c
}

func decodeCensus(d *dec) Record {
	return &Census{Time: d.u64(), Addr: d.u64(), Size: d.u64(), Tag: d.u64(), Path: d.u32(), Kind: CensusKind(d.u32()), TypeSig: d.str()}
}

func decodeCensusEnd(d *dec) Record {
	return &CensusEnd{Time: d.u64(), Kind: CensusKind(d.u32()), Status: CensusStatus(d.u32()),
		Objects: d.u64(), Bytes: d.u64(), HeapObjects: d.u64(), HeapBytes: d.u64(),
		HeapWalkNanos: d.u64(), HolderWalkNanos: d.u64(), EmitNanos: d.u64(),
		Paths: d.u64(), Reached: d.u64(), Unreachable: d.u64(), Unplaced: d.u64(), Note: d.str(), Strays: d.opt64(), HeapWalkPasses: d.opt64(), PauseMaxNanos: d.opt64()}
}

func decodeTypesInfo(d *dec) Record {
	fl := d.u32()
	return &TypesInfo{OK: fl&1 != 0, Fields: fl&2 != 0, Statics: fl&4 != 0, Reason: d.str(),
		OopBase: d.u64(), OopShift: d.u32(), OopBytes: d.u32(),
		KlassBase: d.u64(), KlassShift: d.u32(), KlassBytes: d.u32(), KlassInMark: d.opt32()}
}

func decodeClass(d *dec) Record {
	c := &Class{Time: d.u64(), Klass: d.u64(), Narrow: d.u32(), Sig: d.str()}
	c.Fields = d.fieldList(false)
	if !d.bad && len(d.b) >= 4 { // trailing: older agents send no statics
		c.Statics = d.fieldList(true)
	}
	return c
}

// fieldList reads u32 n, n × {u32 offset, string name, string sig},
// keeping MaxFields; nil when n is 0.
func (d *dec) fieldList(static bool) []Field {
	// Each field takes at least 12 bytes (u32 offset, two string lengths).
	n := d.count(12)
	if n == 0 {
		return nil
	}
	fs := make([]Field, d.keep(n, MaxFields))
	for i := 0; i < n && !d.bad; i++ {
		f := Field{Offset: d.u32(), Name: d.str(), Sig: d.str(), Static: static}
		if i < len(fs) {
			fs[i] = f
		}
	}
	return fs
}

func decodeRoot(d *dec) Record {
	return &Root{Time: d.u64(), Addr: d.u64(), Kind: RootKind(d.u32()), Rank: d.u32(), Reach: d.u32(), Hop: d.str()}
}

func decodeRootsEnd(d *dec) Record {
	return &RootsEnd{Time: d.u64(), Roots: d.u64(), FollowNanos: d.u64(), TagsNanos: d.u64(),
		Status: RootsStatus(d.u32()), Note: d.str(),
		Refs: d.opt64(), Objects: d.opt64(), Threads: d.opt64(), Gone: d.opt64(),
		TagsMaxNanos: d.opt64(), EmitNanos: d.opt64()}
}
