package loader

import (
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
