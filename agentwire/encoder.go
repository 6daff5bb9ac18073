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
	str := func(s string) {
		dst = le.AppendUint32(dst, uint32(len(s)))
		dst = append(dst, s...)
	}
	switch r := rec.(type) {
	case *Hello:
		dst = le.AppendUint32(dst, r.ProtoVersion)
		dst = le.AppendUint32(dst, r.PID)
		dst = le.AppendUint64(dst, r.Interval)
		dst = le.AppendUint64(dst, r.MinSize)
		dst = le.AppendUint64(dst, r.Monotonic)
		str(r.VMName)
		str(r.VMVersion)
		str(r.Mode)
		dst = le.AppendUint32(dst, r.StackSignal)
	case *Method:
		dst = le.AppendUint64(dst, r.ID)
		str(r.ClassSig)
		str(r.Name)
		str(r.Sig)
		str(r.SourceFile)
		dst = le.AppendUint32(dst, uint32(len(r.Lines)))
		for _, l := range r.Lines {
			dst = le.AppendUint64(dst, uint64(l.Start))
			dst = le.AppendUint32(dst, uint32(l.Line))
		}
	case *Alloc:
		dst = le.AppendUint64(dst, r.Time)
		dst = le.AppendUint64(dst, r.Addr)
		dst = le.AppendUint64(dst, r.Size)
		dst = le.AppendUint32(dst, r.TID)
		dst = le.AppendUint32(dst, uint32(len(r.Frames)))
		str(r.TypeSig)
		for _, f := range r.Frames {
			dst = le.AppendUint64(dst, f.Method)
			dst = le.AppendUint64(dst, uint64(f.BCI))
		}
		dst = le.AppendUint64(dst, r.Tag)
	case *Stats:
		dst = le.AppendUint64(dst, r.Callbacks)
		dst = le.AppendUint64(dst, r.BelowMinSize)
		dst = le.AppendUint64(dst, r.Dropped)
		dst = le.AppendUint64(dst, r.StackErrors)
		dst = le.AppendUint64(dst, r.AllocsSent)
		for _, v := range []uint64{r.Frees, r.GCs, r.Reconciles, r.Reconciled,
			r.ReconcileSkipped, r.ReconcileLimited, r.ReconcileNanos,
			r.StackSignals, r.StacksSent, r.StacksDropped, r.CodeSent, r.CodeDropped, r.SignalsChained,
			r.Untagged, r.UntaggedFreed, r.AllocNanos, r.StackNanos, r.CodeNanos, r.WriterCPUNanos,
			r.ProcessCPUNanos, r.Tracked, r.TrackedLive, r.CensusNanos,
			r.ClassesSent, r.ClassesDropped, r.TypesNanos} {
			dst = le.AppendUint64(dst, v)
		}
	case *Bye:
		str(r.Reason)
	case *ErrorRec:
		str(r.Message)
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
		dst = le.AppendUint64(dst, r.Time)
		dst = le.AppendUint32(dst, uint32(len(r.Objects)))
		for _, o := range r.Objects {
			dst = le.AppendUint64(dst, o.Tag)
			dst = le.AppendUint64(dst, o.Addr)
		}
	case *Stack:
		dst = le.AppendUint64(dst, r.Time)
		dst = le.AppendUint32(dst, r.TID)
		dst = le.AppendUint32(dst, uint32(r.Status))
		dst = le.AppendUint64(dst, r.PC)
		dst = appendFrames(dst, r.Frames)
	case *Code:
		dst = le.AppendUint64(dst, r.Time)
		dst = le.AppendUint64(dst, r.Method)
		dst = le.AppendUint64(dst, r.Start)
		dst = le.AppendUint32(dst, r.Size)
		dst = le.AppendUint32(dst, uint32(len(r.PCs)))
		for _, p := range r.PCs {
			dst = le.AppendUint64(dst, p.PC)
			dst = appendFrames(dst, p.Frames)
		}
	case *CodeUnload:
		dst = le.AppendUint64(dst, r.Time)
		dst = le.AppendUint64(dst, r.Method)
		dst = le.AppendUint64(dst, r.Start)
	case *Stub:
		dst = le.AppendUint64(dst, r.Time)
		dst = le.AppendUint64(dst, r.Start)
		dst = le.AppendUint32(dst, r.Size)
		str(r.Name)
	case *CensusStart:
		dst = le.AppendUint64(dst, r.Time)
		dst = le.AppendUint32(dst, uint32(r.Kind))
	case *CensusPath:
		dst = le.AppendUint32(dst, r.ID)
		dst = le.AppendUint32(dst, r.Parent)
		str(r.Hop)
	case *Census:
		for _, v := range []uint64{r.Time, r.Addr, r.Size, r.Tag} {
			dst = le.AppendUint64(dst, v)
		}
		dst = le.AppendUint32(dst, r.Path)
		dst = le.AppendUint32(dst, uint32(r.Kind))
		str(r.TypeSig)
	case *CensusEnd:
		dst = le.AppendUint64(dst, r.Time)
		dst = le.AppendUint32(dst, uint32(r.Kind))
		dst = le.AppendUint32(dst, uint32(r.Status))
		for _, v := range []uint64{r.Objects, r.Bytes, r.HeapObjects, r.HeapBytes, r.HeapWalkNanos, r.HolderWalkNanos,
			r.EmitNanos, r.Paths, r.Reached, r.Unreachable, r.Unplaced} {
			dst = le.AppendUint64(dst, v)
		}
		str(r.Note)
		dst = le.AppendUint64(dst, r.Strays)
		dst = le.AppendUint64(dst, r.HeapWalkPasses)
		dst = le.AppendUint64(dst, r.PauseMaxNanos)
	case *TypesInfo:
		var fl uint32
		if r.OK {
			fl |= 1
		}
		if r.Fields {
			fl |= 2
		}
		dst = le.AppendUint32(dst, fl)
		str(r.Reason)
		dst = le.AppendUint64(dst, r.OopBase)
		dst = le.AppendUint32(dst, r.OopShift)
		dst = le.AppendUint32(dst, r.OopBytes)
		dst = le.AppendUint64(dst, r.KlassBase)
		dst = le.AppendUint32(dst, r.KlassShift)
		dst = le.AppendUint32(dst, r.KlassBytes)
	case *Class:
		dst = le.AppendUint64(dst, r.Time)
		dst = le.AppendUint64(dst, r.Klass)
		dst = le.AppendUint32(dst, r.Narrow)
		str(r.Sig)
		dst = le.AppendUint32(dst, uint32(len(r.Fields)))
		for _, f := range r.Fields {
			dst = le.AppendUint32(dst, f.Offset)
			str(f.Name)
			str(f.Sig)
		}
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
