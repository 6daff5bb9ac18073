package vmcode

import (
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

// chainPC is a pc of a fixture's truth with the three-frame chain.
func chainPC(tb testing.TB, tr *truth) uint64 {
	for _, pc := range tr.ChainPCs {
		return pc
	}
	tb.Fatal("no chain pc")
	return 0
}

// benchFrames measures Frames at pc: cold (a new symbolizer each time:
// segment map, header, debug information and three methods read) and
// warm (the caches hold them; the segment map and header are read again).
// newblob is between: the nmethod's debug information is read again.
func benchFrames(b *testing.B, mk func() *Symbolizer, pc uint64) {
	b.Run("cold", func(b *testing.B) {
		reads := 0
		for b.Loop() {
			s := mk()
			if _, _, err := s.Frames(pc); err != nil {
				b.Fatal(err)
			}
			reads += s.Stats().Reads
		}
		b.ReportMetric(float64(reads)/float64(b.N), "reads/op")
	})
	b.Run("newblob", func(b *testing.B) {
		// A pc of an nmethod not seen yet, its methods known: the
		// common case once a profile runs.
		s := mk()
		if _, _, err := s.Frames(pc); err != nil {
			b.Fatal(err)
		}
		before := s.Stats().Reads
		for b.Loop() {
			s.mu.Lock()
			s.blobs.clear()
			s.mu.Unlock()
			if _, _, err := s.Frames(pc); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(s.Stats().Reads-before)/float64(b.N), "reads/op")
	})
	b.Run("warm", func(b *testing.B) {
		s := mk()
		if _, _, err := s.Frames(pc); err != nil {
			b.Fatal(err)
		}
		before := s.Stats().Reads
		for b.Loop() {
			if _, _, err := s.Frames(pc); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(s.Stats().Reads-before)/float64(b.N), "reads/op")
	})
}

// BenchmarkFixtureFrames is the decoding alone, memory served from the
// JDK 17 fixture.
func BenchmarkFixtureFrames(b *testing.B) {
	s0, fx := fixtureSymbolizer(b, "jdk17")
	benchFrames(b, func() *Symbolizer {
		s := newSymbolizer(s0.l, fx)
		s.bias = s0.bias
		return s
	}, chainPC(b, fx.Truth))
}

// BenchmarkLiveFrames reads a live JDK 17 Hot JVM with process_vm_readv.
func BenchmarkLiveFrames(b *testing.B) {
	testenv.Root(b)
	jdk := testenv.JDKs(b)[0]
	classes := compileHot(b, jdk)
	pid := startHot(b, jdk, classes)
	tab, err := vmstructs.Open(pid)
	if err != nil {
		b.Fatal(err)
	}
	tr := liveTruth(b, jdk, pid, classes)
	s0, err := New(tab, targetmem.Open(pid))
	if err != nil {
		b.Fatal(err)
	}
	pin(b, s0, tab, tr, jdk, pid)
	benchFrames(b, func() *Symbolizer { return newSymbolizer(s0.l, s0.mem) }, chainPC(b, tr))
}
