package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/report"
)

// DirectBuf reads a 64 MiB direct ByteBuffer held by DirectBuf.slab (4 of
// 5 reads) and an 8 MiB long[]: attached at the defaults, the buffer's
// memory is an off-heap row of java.nio.DirectByteBuffer held by the
// static, and the top off-heap row, with most of the samples that have an
// address.
func TestOffHeapDirectBuffer(t *testing.T) {
	setup(t)
	for _, jdk := range []string{"jdk17", "temurin25"} {
		home, ok := jdks()[jdk]
		if !ok {
			continue
		}
		t.Run(jdk, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "r.json")
			j := startJVM(t, home, nil, "-main=DirectBuf", "0")
			time.Sleep(time.Second)
			code, _, stderr := djx(t, "profile", "--pid", fmt.Sprint(j.cmd.Process.Pid), "--duration", "8s", "--format", "json", "-o", out)
			if code != 0 {
				t.Fatalf("profile exited %d:\n%s", code, stderr)
			}
			r := readReport(t, out)
			logStats(t, r)
			var top *report.Object
			var offHeap uint64
			for i := range r.Objects {
				o := &r.Objects[i]
				if o.Origin != report.OriginOffHeap {
					continue
				}
				offHeap += o.Samples
				t.Logf("off-heap row %s held by %s: %d samples, %d bytes, site %s", o.Type, report.HolderText(o.Holder, 0), o.Samples, o.Bytes, o.Site)
				if top == nil || o.Samples > top.Samples {
					top = o
				}
			}
			if top == nil {
				t.Fatalf("no off-heap row; off-heap samples %d", r.Stats.OffHeapSamples)
			}
			if top.Type != "java.nio.DirectByteBuffer" || len(top.Holder) == 0 || !strings.Contains(top.Holder[0], "DirectBuf.slab") ||
				top.Bytes != 64<<20 || top.Site != "[off-heap]" {
				t.Errorf("top off-heap row %s held by %v, %d bytes, site %q; want java.nio.DirectByteBuffer held by DirectBuf.slab, 64 MiB",
					top.Type, top.Holder, top.Bytes, top.Site)
			}
			share := float64(top.Samples) / float64(max(r.Stats.WithAddress, 1))
			t.Logf("buffer row: %d of %d samples with an address (%.1f%%), %d of all %d", top.Samples, r.Stats.WithAddress, 100*share, top.Samples, r.Stats.Samples)
			if share < 0.4 {
				t.Errorf("the buffer's row has %.1f%% of the samples with an address, want 40%%", 100*share)
			}
		})
	}
}
