package pmu

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// TestLiveProber opens real events on CPU 0: decode (cpu-clock) must open
// wherever perf events work; a raw event on a machine without a cpu PMU
// must fail with ENOENT. No fd may leak either way.
func TestLiveProber(t *testing.T) {
	m, err := Live()
	if err != nil {
		t.Skipf("detect: %v", err)
	}
	if err := m.privilegeError(); err != nil {
		t.Skipf("unprivileged: %v", err)
	}
	before := countFDs(t)
	dec, err := m.Resolve(NameDecode)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	for i := 0; i < 50; i++ {
		if err := (LiveProber{}).Probe(dec); err != nil {
			t.Fatalf("probe decode: %v", err)
		}
	}
	if m.PMUs["cpu"] == nil && m.PMUs["cpu_core"] == nil {
		raw := Event{Name: "r01d1", Attr: newAttr(unix.PERF_TYPE_RAW, 0x1d1)}
		raw.Attr.Sample = 10007
		for i := 0; i < 50; i++ {
			if err := (LiveProber{}).Probe(raw); !errors.Is(err, unix.ENOENT) {
				t.Fatalf("raw event without cpu PMU: %v", err)
			}
		}
		// A leader that fails must not leak; one that opens must be closed.
		grp := dec
		l := dec.Attr
		grp.Leader = &l
		if err := (LiveProber{}).Probe(grp); err != nil {
			t.Fatalf("group probe: %v", err)
		}
		grp.Attr = raw.Attr
		if err := (LiveProber{}).Probe(grp); err == nil {
			t.Fatal("raw member opened")
		}
	}
	if after := countFDs(t); after != before {
		t.Errorf("fds %d → %d: leak", before, after)
	}
}

// TestLiveCatalog prints the catalog of this machine (go test -v) and
// checks that decode and page-faults are available here.
func TestLiveCatalog(t *testing.T) {
	m, err := Live()
	if err != nil {
		t.Skipf("detect: %v", err)
	}
	if err := m.privilegeError(); err != nil {
		t.Skipf("unprivileged: %v", err)
	}
	for _, e := range m.Catalog() {
		state := "available"
		if !e.Available {
			state = "unavailable: " + e.Reason
		}
		t.Logf("%-34s %-8s %s", e.Name, e.Kind, state)
		if e.Event.Attr.Size != 0 {
			t.Logf("%34s attr: %s", "", DescribeAttr(&e.Event.Attr))
		}
		if (e.Name == NameDecode || e.Name == NamePageFaults) && !e.Available {
			t.Errorf("%s unavailable: %s", e.Name, e.Reason)
		}
	}
	ev, why := m.Auto()
	t.Logf("auto → %s: %s", ev.Name, why)
}
