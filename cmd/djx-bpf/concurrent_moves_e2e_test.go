package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/report"
)

// Objects a concurrent collector moves are followed: MovedHot's hot
// arrays sit in pages and regions of garbage, so ZGC relocates them outside
// any pause and memmove; the agent's rescans after each of its pauses find
// them again, up to a cycle late, and the samples on a new copy wait for
// the rescan that finds it. G1 moves them in its pauses, and young GCs come
// often enough that the agent skips rescans: objects found elsewhere by a
// later one must not have been taken for dead meanwhile. Launched at the
// defaults, nearly all in-heap samples land on the hot arrays.
// A hot array is known by its type and size however it was named: the
// allocation budget raises the sampling interval past 256 KiB at once, so
// some are named by the census after a GC or by the heap walk, not by
// their site. The spacers of that size are dead before the first load.
func TestConcurrentMovesFollowed(t *testing.T) {
	setup(t)
	// bar: the least share, in percent, of in-heap samples on the hot
	// arrays, with the host shared by another package's tests. The rest
	// are mostly samples on a copy before its rescan (ZGC), or on
	// MovedHot's other data (Shenandoah: the array of hot arrays, below
	// the min size, and its garbage).
	const bar = 90
	type run struct{ jdk, gc string }
	runs := []run{{"jdk17", "Z"}, {"jdk17", "Shenandoah"}, {"jdk17", "G1"}}
	if _, ok := jdks()["temurin25"]; ok {
		runs = append(runs, run{"temurin25", "Z"}, run{"temurin25", "Shenandoah"})
	}
	for _, rn := range runs {
		t.Run(rn.jdk+"/"+rn.gc, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "r.json")
			r := runJSON(t, out, []string{"profile", "--format", "json", "-o", out, "--",
				filepath.Join(jdks()[rn.jdk], "bin", "java"), "-XX:+Use" + rn.gc + "GC", "-Xmx512m", "-cp", classDir, "MovedHot", "6"})
			s := r.Stats
			var hot uint64
			for _, o := range r.Objects {
				if isHotArray(o) {
					hot += o.Samples
				}
			}
			t.Logf("%s/%s: in heap %d, attributed %d, on the hot arrays %d (%.1f%%); gcs %d, moves found by rescans %d, verified %d, samples charged after a later rescan %d; notes %q",
				rn.jdk, rn.gc, s.InHeap, s.Attributed, hot, pct(hot, s.InHeap), s.GCs, s.MovesMissed, s.MovesVerified, s.MovedLate, r.Notes)
			if s.InHeap < 500 {
				t.Fatalf("only %d samples in the heap", s.InHeap)
			}
			if hot*100 < s.InHeap*bar {
				t.Errorf("%d of %d in-heap samples on the hot arrays, want %d%%", hot, s.InHeap, bar)
			}
			for _, n := range r.Notes {
				if strings.Contains(n, "relocation tracking off") {
					t.Errorf("note %q", n)
				}
			}
		})
	}
}

// isHotArray says whether a row holds MovedHot's hot arrays only: long[]s
// of 1<<15 elements (a 16-byte header), from the hot site or from no site
// the agent sampled (MovedHot.main's spacers are the only other arrays of
// that size, and main's own site names them).
func isHotArray(o report.Object) bool {
	const size = 8<<15 + 16
	if o.Type != "long[]" || o.Objects == 0 || o.Bytes != o.Objects*size {
		return false
	}
	return strings.HasPrefix(o.Site, "MovedHot.allocHot:") || o.Origin != "allocation"
}
