package agent

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/naming/bpfstack"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// After the loader's 'A' the agent walks each sampled allocation's stack
// itself (unwind.c) and sends ALLOC_RAW: every one of AllocSite's second
// phase after it took the command is raw, its frames name allocBig or
// allocKib at the site's line, then phase, then main (bpfstack, from the
// JVM's memory), ended at the thread's entry, and STATS counts them without
// fallbacks. Before 'A' the allocations are GetStackTrace's.
func TestAgentRawStacks(t *testing.T) {
	bigLine, kibLine := siteLine(t, "big"), siteLine(t, "kib")
	for _, j := range availableJDKs(t) {
		t.Run(j.name, func(t *testing.T) {
			v := startJVM(t, j, "interval=4096,minsize=1024", true, "site", "500", "0")
			var s stream
			s.add(t, v.until(v.ready()))
			if len(s.raw) != 0 || len(s.allocs) == 0 {
				t.Fatalf("before 'A': %d ALLOC_RAW, %d ALLOC; want ALLOCs only", len(s.raw), len(s.allocs))
			}
			if _, err := v.conn.Write([]byte{agentwire.CommandRawStacks}); err != nil {
				t.Fatal(err)
			}
			// The writer thread takes it between its rounds: phases until
			// the first ALLOC_RAW, then one more.
			for i := 0; len(s.raw) == 0 && i < 20; i++ {
				time.Sleep(100 * time.Millisecond)
				v.send("again")
				s.add(t, v.until(v.ready()))
			}
			s.raw = nil
			before := len(s.allocs)
			v.send("again")
			s.add(t, v.until(v.ready()))
			r, err := bpfstack.Open(v.cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				fmt.Sprintf("AllocSite.allocBig:%d", bigLine): "",
				fmt.Sprintf("AllocSite.allocKib:%d", kibLine): "",
			}
			whole := 0
			for _, a := range s.raw {
				st := &sample.Stack{End: uint16(a.End)}
				for _, f := range a.Frames {
					st.Frames = append(st.Frames, sample.RawFrame{Blob: f.Blob, A: f.A, B: f.B})
				}
				p := r.Resolve(st, bpfstack.Sample{Calls: true})
				var names []string
				for _, f := range p.Frames {
					names = append(names, f.String())
				}
				// The sites' arrays, and phase's own Object[] that keep them.
				rest := names
				if _, site := want[first(names)]; site {
					rest = names[1:]
				} else if a.TypeSig != "[Ljava/lang/Object;" {
					rest = nil
				}
				if len(rest) == 2 && strings.HasPrefix(rest[0], "AllocSite.phase:") &&
					strings.HasPrefix(rest[1], "AllocSite.main:") && p.Missing == "" && a.Size >= 1024 {
					whole++
				} else if whole < 3 {
					t.Logf("ALLOC_RAW of %d bytes: %v (%s)", a.Size, names, p.Missing)
				}
			}
			v.finish(t, &s)
			t.Logf("%s: after 'A' %d ALLOC_RAW (%d with the whole known stack), %d ALLOC; STATS raw %d, fallbacks %d",
				j.name, len(s.raw), whole, len(s.allocs)-before, s.stats.RawStacks, s.stats.RawFallbacks)
			if len(s.raw) < 100 || whole != len(s.raw) || len(s.allocs) != before {
				t.Errorf("after 'A': %d ALLOC_RAW, %d of them whole, and %d ALLOCs; want all raw and whole", len(s.raw), whole, len(s.allocs)-before)
			}
			if st := s.stats; st == nil || st.RawStacks < uint64(len(s.raw)) || st.RawFallbacks != 0 {
				t.Errorf("STATS %+v, %d ALLOC_RAW received", s.stats, len(s.raw))
			}
			if len(s.errs) > 0 {
				t.Errorf("ERROR records: %q", s.errs)
			}
		})
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
