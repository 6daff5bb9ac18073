package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/report"
)

// Allocation stacks walked by the agent itself (ALLOC_RAW, the default
// with BPF stacks) against JVMTI GetStackTrace's (--stacks agent), on
// AllocPaths, launched: each of its three sites is reached by one known
// path, in compiled code, through 20 recursive frames, and through a
// native method (java.lang.reflect.Array's frames above it, whichever the
// JIT left). With either, at least 95% of the tracked objects of each site
// have its whole known path; the walked ones are most of the default
// run's (those before the loader's 'A' are GetStackTrace's), with at most
// 2% of walks falling back, and none of the agent run's (JDK 17: the
// comparison; JDK 25: the walk alone).
func TestAllocStacksGroundTruth(t *testing.T) {
	setupBuild(t)
	t.Parallel() // shares and names, with margins for a busy host: beside one other test (-parallel)
	at := func(method, marker string) string {
		return fmt.Sprintf("AllocPaths.%s:%d", method, markerLine(t, "AllocPaths.java", marker))
	}
	deep := make([]string, 20)
	for i := range deep {
		deep[i] = at("deep", "DEEP")
	}
	known := map[string][]string{
		"long[] A": {at("makeA", "SITE-A"), at("loopA", "CALL-A"), at("run", "RUN-A"), at("main", "MAIN")},
		"byte[]": slices.Concat([]string{at("makeB", "SITE-B"), at("deep", "CALL-B")}, deep,
			[]string{at("loopB", "LOOP-B"), at("run", "RUN-B"), at("main", "MAIN")}),
		"long[] C": {at("makeC", "SITE-C"), at("loopC", "CALL-C"), at("run", "RUN-C"), at("main", "MAIN")},
	}
	for name, home := range jdks() {
		modes := []string{"auto", "agent"}
		if name != "jdk17" {
			modes = modes[:1]
		}
		for _, stacks := range modes {
			t.Run(name+"/"+stacks, func(t *testing.T) {
				parallel(t)
				out := filepath.Join(t.TempDir(), "r.json")
				code, stdout, stderr := djx(t, "profile", "--stacks", stacks, "--format", "json", "-o", out, "--",
					filepath.Join(home, "bin", "java"), "-Xmx512m", "-cp", classDir, "AllocPaths", "4")
				if code != 0 {
					t.Fatalf("profile exited %d:\n%s\n%s", code, stdout, stderr)
				}
				r := readReport(t, out)
				s := r.Stats
				whole, total := map[string]uint64{}, map[string]uint64{}
				for _, o := range r.Objects {
					if o.Origin != report.OriginAllocation {
						continue
					}
					k := allocPathsSite(o)
					if k == "" {
						continue
					}
					total[k] += o.Objects
					path := o.AllocPath
					for k == "long[] C" && len(path) > 0 && strings.HasPrefix(path[0], "java.lang.reflect.Array.") {
						path = path[1:]
					}
					if slices.Equal(path, known[k]) {
						whole[k] += o.Objects
					} else if o.Objects > 2 {
						t.Logf("%s: %d objects at %v", k, o.Objects, o.AllocPath)
					}
				}
				t.Logf("tracked %d, walked by the agent %d, fell back %d; whole known paths: %v of %v",
					s.AllocsTracked, s.AllocRawStacks, s.AllocRawFallbacks, whole, total)
				for k := range known {
					if total[k] < 20 || 100*whole[k] < 95*total[k] {
						t.Errorf("%s: %d of %d tracked objects have the whole known path %v, want 95%% of at least 20",
							k, whole[k], total[k], known[k])
					}
				}
				if stacks == "agent" && s.AllocRawStacks != 0 {
					t.Errorf("--stacks agent: %d allocation stacks walked by the agent, want GetStackTrace's only", s.AllocRawStacks)
				}
				if stacks == "auto" && s.SamplesBPFStack > 0 && (2*s.AllocRawStacks < s.AllocsTracked || 50*s.AllocRawFallbacks > s.AllocRawStacks) {
					t.Errorf("BPF stacks: %d of %d tracked allocations walked by the agent, %d walks fell back; want most walked, at most 2%% falling back",
						s.AllocRawStacks, s.AllocsTracked, s.AllocRawFallbacks)
				}
			})
		}
	}
}

// allocPathsSite says which of AllocPaths' sites o is ("" none): by its
// type and the method its path starts in.
func allocPathsSite(o report.Object) string {
	if len(o.AllocPath) == 0 {
		return ""
	}
	switch top := o.AllocPath[0]; {
	case o.Type == "long[]" && strings.HasPrefix(top, "AllocPaths.makeA:"):
		return "long[] A"
	case o.Type == "byte[]" && strings.HasPrefix(top, "AllocPaths.makeB:"):
		return "byte[]"
	case o.Type == "long[]" && strings.HasPrefix(top, "java.lang.reflect.Array."):
		return "long[] C"
	}
	return ""
}
