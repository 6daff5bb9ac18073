package vmcode

import (
	"errors"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

// TestLive symbolizes a running Hot JVM of each installed JDK against
// jcmd's code list, javap's line tables and Hot.java's marks (check).
func TestLive(t *testing.T) {
	testenv.Root(t)
	for _, jdk := range testenv.JDKs(t) {
		t.Run(jdk.Name, func(t *testing.T) {
			classes := compileHot(t, jdk)
			pid := startHot(t, jdk, classes)
			tab, err := vmstructs.Open(pid)
			if err != nil {
				t.Fatal(err)
			}
			s, err := New(tab, targetmem.Open(pid))
			if err != nil {
				t.Fatal(err)
			}
			tr := liveTruth(t, jdk, pid, classes)
			start := time.Now()
			pin(t, s, tab, tr, jdk, pid)
			check(t, s, tr, true)
			st := s.Stats()
			t.Logf("%s: %d nmethods checked in %v: %d reads, %d KiB; methods %d hits %d misses, nmethods %d hits %d misses",
				tab.Release, len(tr.Code), time.Since(start).Round(time.Millisecond), st.Reads, st.Bytes>>10, st.MethodHits, st.MethodMisses, st.BlobHits, st.BlobMisses)
		})
	}
}

// TestLiveGone: a symbolizer of a JVM that has exited fails, it does not
// hang or panic.
func TestLiveGone(t *testing.T) {
	testenv.Root(t)
	jdk := testenv.JDKs(t)[0]
	classes := compileHot(t, jdk)
	pid := startHot(t, jdk, classes)
	tab, err := vmstructs.Open(pid)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(tab, targetmem.Open(pid))
	if err != nil {
		t.Fatal(err)
	}
	hs, err := s.Heaps()
	if err != nil || len(hs) == 0 {
		t.Fatalf("heaps %v: %v", hs, err)
	}
	tr := liveTruth(t, jdk, pid, classes)
	killPid(t, pid)
	if _, _, err := s.Frames(tr.Code[0].CodeBegin); !errors.Is(err, ErrGone) {
		t.Fatalf("frames of an exited JVM: %v, want ErrGone", err)
	}
}
