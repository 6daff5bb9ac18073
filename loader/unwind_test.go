package loader

import (
	"encoding/binary"
	"testing"
	"time"
)

// The unwinding variant loads (bounded loops, no bpf_loop), and a
// process without a code cache gets its samples with no frames and
// the reason.
func TestUnwindVariantLoads(t *testing.T) {
	start := time.Now()
	s := openOrSkip(t, Config{Source: Decode, Freq: 1000, Unwind: true})
	t.Logf("unwinding variant loaded and attached in %v", time.Since(start))
	if !s.Unwinding() {
		t.Fatal("Unwinding() = false")
	}
	samples := collect(t, s, 20, func(stop <-chan struct{}) {
		x := 0
		for {
			select {
			case <-stop:
				return
			default:
			}
			for i := 0; i < 1e6; i++ {
				x += i
			}
		}
	})
	if len(samples) < 20 {
		t.Fatalf("got %d samples, want 20", len(samples))
	}
	for _, smp := range samples {
		if smp.Stack == nil || len(smp.Stack.Frames) != 0 || smp.Stack.End != UnwindNoInfo {
			t.Fatalf("sample without a code cache: stack %+v, want none ended by %d", smp.Stack, UnwindNoInfo)
		}
	}
	if err := s.SetUnwind(1, nil, CodeLayout{}); err == nil {
		t.Error("SetUnwind with no heaps succeeded")
	}
}

// The default program's samples carry no stack.
func TestDefaultHasNoStack(t *testing.T) {
	s := openOrSkip(t, Config{Source: Decode, Freq: 1000})
	if s.Unwinding() {
		t.Fatal("default program says it unwinds")
	}
	if err := s.SetUnwind(1, []CodeHeap{{}}, CodeLayout{}); err == nil {
		t.Error("SetUnwind on the default program succeeded")
	}
}

// An unwinding variant's record holds the sample and then only the
// frames walked; a record shorter than its nframes says keeps what it
// holds, one without the stack header has no stack.
func TestParseStackVariableLength(t *testing.T) {
	rec := func(n, held int, end uint16) []byte {
		b := make([]byte, unwindHeadSize+held*unwindFrameSize)
		binary.LittleEndian.PutUint16(b[offNframes:], uint16(n))
		binary.LittleEndian.PutUint16(b[offUwEnd:], end)
		for i := range held {
			f := b[unwindHeadSize+i*unwindFrameSize:]
			binary.LittleEndian.PutUint64(f, uint64(0x1000*(i+1))|FrameSized)
			binary.LittleEndian.PutUint64(f[8:], uint64(i))
			binary.LittleEndian.PutUint64(f[16:], uint64(100+i))
		}
		return b
	}
	for _, c := range []struct {
		n, held, want int
		end           uint16
	}{
		{0, 0, 0, UnwindNoInfo},
		{3, 3, 3, UnwindEntry},
		{MaxUnwindFrames, MaxUnwindFrames, MaxUnwindFrames, UnwindDepth},
		{5, 2, 2, UnwindEntry}, // cut short
		{MaxUnwindFrames + 7, MaxUnwindFrames + 7, MaxUnwindFrames, UnwindDepth}, // more than the program writes
	} {
		var s Sample
		parseStack(rec(c.n, c.held, c.end), &s)
		if s.Stack == nil || len(s.Stack.Frames) != c.want || s.Stack.End != c.end {
			t.Fatalf("nframes %d, %d held: stack %+v, want %d frames ended by %d", c.n, c.held, s.Stack, c.want, c.end)
		}
		for i, f := range s.Stack.Frames {
			if f.Blob != uint64(0x1000*(i+1))|FrameSized || f.A != uint64(i) || f.B != uint64(100+i) {
				t.Fatalf("frame %d = %+v", i, f)
			}
		}
	}
	var s Sample
	parseStack(make([]byte, unwindHeadSize-1), &s)
	if s.Stack != nil {
		t.Errorf("a record without the stack header gave %+v", s.Stack)
	}
	if unwindHeadSize < sampleSize {
		t.Errorf("the unwinding record's head (%d bytes) is shorter than the default sample (%d)", unwindHeadSize, sampleSize)
	}
	if MaxUnwindFrames < 128 {
		t.Errorf("MaxUnwindFrames = %d, want at least 128", MaxUnwindFrames)
	}
}
