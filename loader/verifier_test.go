package loader

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/djx-bpf/djx-bpf/bpf"
)

// verifierStats is what the kernel's verifier reports for one program
// (LogLevelStats: its last lines).
type verifierStats struct {
	insns int           // processed instructions
	time  time.Duration // "verification time"
}

var (
	reProcessed = regexp.MustCompile(`processed (\d+) insns`)
	reVerifTime = regexp.MustCompile(`verification time (\d+) usec`)
)

// loadVerified loads the programs that Open loads for the decode and
// page-fault sources (the entry program, and the unwinding variant's
// step program) with the verifier's statistics, and returns them by name
// with the whole load's wall time (maps included).
func loadVerified(tb testing.TB, unwind bool) (map[string]verifierStats, time.Duration) {
	tb.Helper()
	load := bpf.LoadDjx
	if unwind {
		load = bpf.LoadDjxUnwind
	}
	spec, err := load()
	if err != nil {
		tb.Fatal(err)
	}
	names := []string{"on_sample"}
	if _, ok := spec.Programs[bpf.DjxUnwindProgUwStep]; ok && unwind {
		names = append(names, bpf.DjxUnwindProgUwStep)
	}
	for name := range spec.Programs {
		keep := false
		for _, n := range names {
			keep = keep || n == name
		}
		if !keep {
			delete(spec.Programs, name)
		}
	}
	start := time.Now()
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats}})
	took := time.Since(start)
	if err != nil {
		tb.Fatalf("load (unwind %v): %v", unwind, err)
	}
	defer coll.Close()
	out := make(map[string]verifierStats)
	for _, name := range names {
		p := coll.Programs[name]
		var st verifierStats
		if m := reProcessed.FindStringSubmatch(p.VerifierLog); m != nil {
			st.insns, _ = strconv.Atoi(m[1])
		}
		if m := reVerifTime.FindStringSubmatch(p.VerifierLog); m != nil {
			us, _ := strconv.Atoi(m[1])
			st.time = time.Duration(us) * time.Microsecond
		}
		if st.insns == 0 {
			tb.Fatalf("%s: no verifier statistics in its log %q", name, p.VerifierLog)
		}
		out[name] = st
	}
	return out, took
}

// The unwinding variant's programs stay small for the verifier: the
// issue asks for at most 0.1 s of verification at start, so the
// processed instructions of all its programs together are bounded here
// (time is the benchmark's: it depends on the machine's load).
func TestUnwindVerifier(t *testing.T) {
	openOrSkip(t, Config{Source: Decode, Freq: 1}) // skips without root or BPF
	total := 0
	var took time.Duration
	for range 3 {
		st, wall := loadVerified(t, true)
		total = 0
		var vt time.Duration
		for name, s := range st {
			t.Logf("%s: %d processed instructions, verified in %v", name, s.insns, s.time)
			total += s.insns
			vt += s.time
		}
		took = max(took, wall)
		t.Logf("unwinding variant: %d processed instructions, verified in %v, loaded in %v", total, vt, wall)
	}
	def, _ := loadVerified(t, false)
	t.Logf("default program: %d processed instructions, verified in %v", def["on_sample"].insns, def["on_sample"].time)
	if total > maxUnwindVerified {
		t.Errorf("the unwinding variant's programs take %d processed instructions, want at most %d", total, maxUnwindVerified)
	}
}

// maxUnwindVerified bounds the unwinding variant's processed
// instructions (entry and step program): about what verifies in 0.1 s on
// this project's 2-CPU guest.
const maxUnwindVerified = 50000

// BenchmarkUnwindVerify loads the unwinding variant's programs (root):
// ns/op is the whole load, maps included; verify-µs and insns are the
// verifier's own figures for the entry and step programs together.
func BenchmarkUnwindVerify(b *testing.B) {
	benchVerify(b, true)
}

// BenchmarkDefaultVerify is the same for the default program.
func BenchmarkDefaultVerify(b *testing.B) {
	benchVerify(b, false)
}

func benchVerify(b *testing.B, unwind bool) {
	if err := Preflight(); err != nil {
		b.Skipf("privileged benchmark skipped: %v", err)
	}
	var vt time.Duration
	insns := 0
	for b.Loop() {
		st, _ := loadVerified(b, unwind)
		insns = 0
		for _, s := range st {
			vt += s.time
			insns += s.insns
		}
	}
	b.ReportMetric(float64(vt.Microseconds())/float64(b.N), "verify-µs/op")
	b.ReportMetric(float64(insns), "insns")
}
