package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/report"
)

// SegmentTruth reads a 64 MiB FFM native segment from the global arena,
// held by SegmentTruth.table (4 of 5 reads, half through slices of it
// that SegmentTruth.shards keeps), and an 8 MiB long[]: attached at the
// defaults on Temurin 25, the segment's memory is the top off-heap row, of
// jdk.internal.foreign.NativeMemorySegmentImpl held by the static, 64 MiB,
// with at least half of the samples that have an address; the slices have
// no row of their own. JDK 17 has no FFM (final in JDK 22).
func TestOffHeapSegment(t *testing.T) {
	setup(t)
	home, ok := jdks()["temurin25"]
	if !ok {
		t.Skip("FFM segments need JDK 22+: Temurin 25 is not installed (JDK 17 has no FFM)")
	}
	classes := t.TempDir()
	if out, err := exec.Command(filepath.Join(home, "bin", "javac"), "-d", classes, "../../testdata/java/SegmentTruth.java").CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	j := startCmd(t, exec.Command(filepath.Join(home, "bin", "java"), "-Xmx1g", "-cp", classes, "SegmentTruth", "0"))
	time.Sleep(time.Second)
	out := filepath.Join(t.TempDir(), "r.json")
	code, _, stderr := djx(t, "profile", "--pid", fmt.Sprint(j.cmd.Process.Pid), "--duration", "8s", "--format", "json", "-o", out)
	if code != 0 {
		t.Fatalf("profile exited %d:\n%s", code, stderr)
	}
	r := readReport(t, out)
	logStats(t, r)
	var top *report.Object
	var segments []*report.Object
	for i := range r.Objects {
		o := &r.Objects[i]
		if o.Origin != report.OriginOffHeap {
			continue
		}
		t.Logf("off-heap row %s held by %s: %d samples, %d bytes, site %s", o.Type, report.HolderText(o.Holder, 0), o.Samples, o.Bytes, o.Site)
		if strings.HasSuffix(o.Type, "MemorySegmentImpl") {
			segments = append(segments, o)
		}
		if top == nil || o.Samples > top.Samples {
			top = o
		}
	}
	if top == nil {
		t.Fatalf("no off-heap row; off-heap samples %d", r.Stats.OffHeapSamples)
	}
	if top.Type != "jdk.internal.foreign.NativeMemorySegmentImpl" || len(top.Holder) == 0 || !strings.Contains(top.Holder[0], "SegmentTruth.table") ||
		top.Bytes != 64<<20 || top.Site != "[off-heap]" {
		t.Errorf("top off-heap row %s held by %v, %d bytes, site %q; want jdk.internal.foreign.NativeMemorySegmentImpl held by SegmentTruth.table, 64 MiB",
			top.Type, top.Holder, top.Bytes, top.Site)
	}
	if len(segments) != 1 {
		t.Errorf("%d off-heap rows of segments, want 1 (the slices lie within the segment)", len(segments))
	}
	share := float64(top.Samples) / float64(max(r.Stats.WithAddress, 1))
	t.Logf("segment row: %d of %d samples with an address (%.1f%%), %d of all %d", top.Samples, r.Stats.WithAddress, 100*share, top.Samples, r.Stats.Samples)
	if share < 0.5 {
		t.Errorf("the segment's row has %.1f%% of the samples with an address, want 50%%", 100*share)
	}
}
