package agentwire

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Encoder writes an agent stream; the C agent is the production writer, this
// one serves tests and fakes. Records accumulate with Add until Flush writes
// them as one batch.
type Encoder struct {
	w       io.Writer
	payload []byte
	n       uint32
}

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{w: w} }

// Add appends rec to the pending batch.
func (e *Encoder) Add(rec Record) error {
	p, err := AppendRecord(e.payload, rec)
	if err != nil {
		return err
	}
	e.payload = p
	e.n++
	return nil
}

// Flush writes the pending records as one batch, even when there are none.
func (e *Encoder) Flush(watermark uint64) error {
	if len(e.payload) > MaxPayload {
		return fmt.Errorf("agent encoder: batch of %d bytes exceeds %d", len(e.payload), MaxPayload)
	}
	buf := make([]byte, HeaderLen, HeaderLen+len(e.payload))
	binary.LittleEndian.PutUint32(buf[0:], Magic)
	binary.LittleEndian.PutUint16(buf[4:], Version)
	binary.LittleEndian.PutUint32(buf[8:], uint32(len(e.payload)))
	binary.LittleEndian.PutUint32(buf[12:], e.n)
	binary.LittleEndian.PutUint64(buf[16:], watermark)
	buf = append(buf, e.payload...)
	e.payload, e.n = e.payload[:0], 0
	if _, err := e.w.Write(buf); err != nil {
		return fmt.Errorf("agent encoder: %w", err)
	}
	return nil
}

// WriteBatch adds b's records and flushes them with b's watermark.
func (e *Encoder) WriteBatch(b *Batch) error {
	for _, r := range b.Records {
		if err := e.Add(r); err != nil {
			return err
		}
	}
	return e.Flush(b.Watermark)
}

// AppendRecord appends the encoding of rec (header and body) to dst.
func AppendRecord(dst []byte, rec Record) ([]byte, error) {
	le := binary.LittleEndian
	start := len(dst)
	dst = le.AppendUint32(dst, 0) // body_len, patched below
	dst = le.AppendUint16(dst, uint16(rec.Type()))
	dst = le.AppendUint16(dst, 0)
	switch r := rec.(type) {
	case *Hello:
		dst = appendHello(dst, r)
	case *Method:
		dst = appendMethod(dst, r)
	case *Alloc:
		dst = appendAlloc(dst, r)
	case *AllocRaw:
		dst = appendAllocRaw(dst, r)
	case *Stats:
		dst = appendStats(dst, r)
	case *Bye:
		dst = appendStr(dst, r.Reason)
	case *ErrorRec:
		dst = appendStr(dst, r.Message)
	case *Interval:
		dst = le.AppendUint64(dst, r.Time)
		dst = le.AppendUint64(dst, r.Interval)
	case *Free:
		dst = le.AppendUint64(dst, r.Time)
		dst = le.AppendUint64(dst, r.Tag)
	case *GCStart:
		dst = le.AppendUint64(dst, r.Time)
	case *GCFinish:
		dst = le.AppendUint64(dst, r.Time)
	case *Reconcile:
		dst = appendReconcile(dst, r)
	case *Stack:
		dst = appendStack(dst, r)
	case *Code:
		dst = appendCode(dst, r)
	case *CodeUnload:
		dst = le.AppendUint64(dst, r.Time)
		dst = le.AppendUint64(dst, r.Method)
		dst = le.AppendUint64(dst, r.Start)
	case *Stub:
		dst = appendStub(dst, r)
	case *CensusStart:
		dst = le.AppendUint64(dst, r.Time)
		dst = le.AppendUint32(dst, uint32(r.Kind))
	case *CensusPath:
		dst = le.AppendUint32(dst, r.ID)
		dst = le.AppendUint32(dst, r.Parent)
		dst = appendStr(dst, r.Hop)
	case *Census:
		dst = appendCensus(dst, r)
	case *CensusEnd:
		dst = appendCensusEnd(dst, r)
	case *TypesInfo:
		dst = appendTypesInfo(dst, r)
	case *Class:
		dst = appendClass(dst, r)
	case *Root:
		dst = appendU64s(dst, r.Time, r.Addr)
		dst = le.AppendUint32(dst, uint32(r.Kind))
		dst = le.AppendUint32(dst, r.Rank)
		dst = le.AppendUint32(dst, r.Reach)
		dst = appendStr(dst, r.Hop)
	case *RootsEnd:
		dst = appendRootsEnd(dst, r)
	case *Unknown:
		dst = append(dst, r.Body...)
	default:
		return dst[:start], fmt.Errorf("agent encoder: unsupported record %T", rec)
	}
	blen := len(dst) - start - RecHeaderLen
	if blen > math.MaxUint32 {
		return dst[:start], fmt.Errorf("agent encoder: %v record of %d bytes", rec.Type(), blen)
	}
	le.PutUint32(dst[start:], uint32(blen))
	return dst, nil
}

func appendHello(dst []byte, r *Hello) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, r.ProtoVersion)
	dst = le.AppendUint32(dst, r.PID)
	dst = le.AppendUint64(dst, r.Interval)
	dst = le.AppendUint64(dst, r.MinSize)
	dst = le.AppendUint64(dst, r.Monotonic)
	dst = appendStr(dst, r.VMName)
	dst = appendStr(dst, r.VMVersion)
	dst = appendStr(dst, r.Mode)
	return le.AppendUint32(dst, r.StackSignal)
}

func appendMethod(dst []byte, r *Method) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint64(dst, r.ID)
	dst = appendStr(dst, r.ClassSig)
	dst = appendStr(dst, r.Name)
	dst = appendStr(dst, r.Sig)
	dst = appendStr(dst, r.SourceFile)
	dst = le.AppendUint32(dst, uint32(len(r.Lines)))
	for _, l := range r.Lines {
		dst = le.AppendUint64(dst, uint64(l.Start))
		dst = le.AppendUint32(dst, uint32(l.Line))
	}
	return dst
}

func appendAlloc(dst []byte, r *Alloc) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint64(dst, r.Time)
	dst = le.AppendUint64(dst, r.Addr)
	dst = le.AppendUint64(dst, r.Size)
	dst = le.AppendUint32(dst, r.TID)
	// The frame count comes before the type, the frames after it.
	dst = le.AppendUint32(dst, uint32(len(r.Frames)))
	dst = appendStr(dst, r.TypeSig)
	for _, f := range r.Frames {
		dst = le.AppendUint64(dst, f.Method)
		dst = le.AppendUint64(dst, uint64(f.BCI))
	}
	return le.AppendUint64(dst, r.Tag)
}

func appendAllocRaw(dst []byte, r *AllocRaw) []byte {
	le := binary.LittleEndian
	dst = appendU64s(dst, r.Time, r.Addr, r.Size)
	dst = le.AppendUint32(dst, r.TID)
	dst = le.AppendUint32(dst, uint32(len(r.Frames)))
	dst = le.AppendUint32(dst, r.End)
	dst = appendStr(dst, r.TypeSig)
	for _, f := range r.Frames {
		dst = appendU64s(dst, f.Blob, f.A, f.B)
	}
	return le.AppendUint64(dst, r.Tag)
}

func appendStats(dst []byte, r *Stats) []byte {
	return appendU64s(dst, r.Callbacks, r.BelowMinSize, r.Dropped, r.StackErrors, r.AllocsSent,
		r.Frees, r.GCs, r.Reconciles, r.Reconciled,
		r.ReconcileSkipped, r.ReconcileLimited, r.ReconcileNanos,
		r.StackSignals, r.StacksSent, r.StacksDropped, r.CodeSent, r.CodeDropped, r.SignalsChained,
		r.Untagged, r.UntaggedFreed, r.AllocNanos, r.StackNanos, r.CodeNanos, r.WriterCPUNanos,
		r.ProcessCPUNanos, r.Tracked, r.TrackedLive, r.CensusNanos,
		r.ClassesSent, r.ClassesDropped, r.TypesNanos, r.RawStacks, r.RawFallbacks)
}

func appendReconcile(dst []byte, r *Reconcile) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint64(dst, r.Time)
	dst = le.AppendUint32(dst, uint32(len(r.Objects)))
	for _, o := range r.Objects {
		dst = le.AppendUint64(dst, o.Tag)
		dst = le.AppendUint64(dst, o.Addr)
	}
	return dst
}

func appendStack(dst []byte, r *Stack) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint64(dst, r.Time)
	dst = le.AppendUint32(dst, r.TID)
	dst = le.AppendUint32(dst, uint32(r.Status))
	dst = le.AppendUint64(dst, r.PC)
	return appendFrames(dst, r.Frames)
}

func appendCode(dst []byte, r *Code) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint64(dst, r.Time)
	dst = le.AppendUint64(dst, r.Method)
	dst = le.AppendUint64(dst, r.Start)
	dst = le.AppendUint32(dst, r.Size)
	dst = le.AppendUint32(dst, uint32(len(r.PCs)))
	for _, p := range r.PCs {
		dst = le.AppendUint64(dst, p.PC)
		dst = appendFrames(dst, p.Frames)
	}
	return dst
}

func appendStub(dst []byte, r *Stub) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint64(dst, r.Time)
	dst = le.AppendUint64(dst, r.Start)
	dst = le.AppendUint32(dst, r.Size)
	return appendStr(dst, r.Name)
}

func appendCensus(dst []byte, r *Census) []byte {
	le := binary.LittleEndian
	dst = appendU64s(dst, r.Time, r.Addr, r.Size, r.Tag)
	dst = le.AppendUint32(dst, r.Path)
	dst = le.AppendUint32(dst, uint32(r.Kind))
	return appendStr(dst, r.TypeSig)
}

func appendCensusEnd(dst []byte, r *CensusEnd) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint64(dst, r.Time)
	dst = le.AppendUint32(dst, uint32(r.Kind))
	dst = le.AppendUint32(dst, uint32(r.Status))
	dst = appendU64s(dst, r.Objects, r.Bytes, r.HeapObjects, r.HeapBytes, r.HeapWalkNanos, r.HolderWalkNanos,
		r.EmitNanos, r.Paths, r.Reached, r.Unreachable, r.Unplaced)
	dst = appendStr(dst, r.Note)
	dst = le.AppendUint64(dst, r.Strays)
	dst = le.AppendUint64(dst, r.HeapWalkPasses)
	return le.AppendUint64(dst, r.PauseMaxNanos)
}

func appendTypesInfo(dst []byte, r *TypesInfo) []byte {
	le := binary.LittleEndian
	var fl uint32
	if r.OK {
		fl |= 1
	}
	if r.Fields {
		fl |= 2
	}
	if r.Statics {
		fl |= 4
	}
	dst = le.AppendUint32(dst, fl)
	dst = appendStr(dst, r.Reason)
	dst = le.AppendUint64(dst, r.OopBase)
	dst = le.AppendUint32(dst, r.OopShift)
	dst = le.AppendUint32(dst, r.OopBytes)
	dst = le.AppendUint64(dst, r.KlassBase)
	dst = le.AppendUint32(dst, r.KlassShift)
	dst = le.AppendUint32(dst, r.KlassBytes)
	return le.AppendUint32(dst, r.KlassInMark)
}

func appendClass(dst []byte, r *Class) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint64(dst, r.Time)
	dst = le.AppendUint64(dst, r.Klass)
	dst = le.AppendUint32(dst, r.Narrow)
	dst = appendStr(dst, r.Sig)
	dst = appendFields(dst, r.Fields)
	return appendFields(dst, r.Statics)
}

// appendFields appends u32 n, n × {u32 offset, string name, string sig}.
func appendFields(dst []byte, fs []Field) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, uint32(len(fs)))
	for _, f := range fs {
		dst = le.AppendUint32(dst, f.Offset)
		dst = appendStr(dst, f.Name)
		dst = appendStr(dst, f.Sig)
	}
	return dst
}

func appendRootsEnd(dst []byte, r *RootsEnd) []byte {
	le := binary.LittleEndian
	dst = appendU64s(dst, r.Time, r.Roots, r.FollowNanos, r.TagsNanos)
	dst = le.AppendUint32(dst, uint32(r.Status))
	dst = appendStr(dst, r.Note)
	return appendU64s(dst, r.Refs, r.Objects, r.Threads, r.Gone, r.TagsMaxNanos, r.EmitNanos)
}

// appendStr appends u32 length, then the bytes.
func appendStr(dst []byte, s string) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

// appendU64s appends each of vs: for long runs of fields, where the loop is
// shorter than the calls and no slower.
func appendU64s(dst []byte, vs ...uint64) []byte {
	le := binary.LittleEndian
	for _, v := range vs {
		dst = le.AppendUint64(dst, v)
	}
	return dst
}

// appendFrames appends u32 n, n × {u64 jmethodid, u64 bci}.
func appendFrames(dst []byte, fs []Frame) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, uint32(len(fs)))
	for _, f := range fs {
		dst = le.AppendUint64(dst, f.Method)
		dst = le.AppendUint64(dst, uint64(f.BCI))
	}
	return dst
}
