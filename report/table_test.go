package report

import (
	"bytes"
	"strings"
	"testing"
)

func TestTableGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, sample(), TableOptions{Top: 20, AccessTop: 3, Depth: 4}); err != nil {
		t.Fatal(err)
	}
	golden(t, "table.golden", b.Bytes())
}

func TestTableTop(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, sample(), TableOptions{Top: 1}); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b.Bytes(), []byte("allocCold3")) {
		t.Errorf("--top 1 shows the second object:\n%s", b.Bytes())
	}
}

// Hardware sources and --numa add columns and a NUMA section; decode
// reports (sample()) have neither.
func TestTableMemAndNUMAColumns(t *testing.T) {
	r := sample()
	hot := &r.Objects[0]
	hot.Mem = &MemMetrics{Samples: 7000, Latency: 7000 * 180, Levels: map[string]uint64{"L3": 2000, "local DRAM": 4000, "remote DRAM": 1000}, TLBMisses: 700, HitM: 12, Remote: 1000}
	hot.NUMA = &NUMAMetrics{Home: map[int]uint64{0: 5000, 1: 2000}, From: map[int]uint64{0: 3500, 1: 3500}, Remote: 3500}
	hot.Accesses[0].Mem = &MemMetrics{Samples: 5000, Latency: 5000 * 200, Levels: map[string]uint64{"local DRAM": 5000}}
	hot.Accesses[0].NUMA = &NUMAMetrics{Home: map[int]uint64{0: 5000}, From: map[int]uint64{1: 5000}, Remote: 5000}
	var b bytes.Buffer
	if err := WriteTable(&b, r, TableOptions{Top: 20, AccessTop: 3, Depth: 2}); err != nil {
		t.Fatal(err)
	}
	golden(t, "table_mem.golden", b.Bytes())
}

// The stats line says how many samples borrowed their callers, when some did.
func TestTableSaysBorrowedCallers(t *testing.T) {
	r := &Report{Stats: Stats{SampleStats: SampleStats{Samples: 200}, StackStats: StackStats{StackSignals: 50, Stacks: 50, SamplesWithStack: 50, SamplesJavaStack: 48, SamplesStackBorrowed: 120}}}
	var b bytes.Buffer
	if err := WriteTable(&b, r, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := "callers borrowed from their thread's last stack 120 (60.0%)"; !strings.Contains(b.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, b.String())
	}
}

// A census row shows its holder chain, cut to --depth hops, where an
// allocation site would be, and the header says what the census did.
func TestTableCensusRow(t *testing.T) {
	r := &Report{PID: 1, Mode: "attach", Event: "decode", MinSize: 1024,
		Objects: []Object{{Type: "long[]", Site: "[allocated before attach]", Origin: OriginCensus,
			Holder:  []string{"RealService.index (static)", "java.util.HashMap.table", "[]", "java.util.HashMap$Node.value"},
			Objects: 32, Bytes: 2 << 20, Samples: 10,
			Accesses: []Access{{Path: []string{"RealService.lookup:40"}, Samples: 10}}}},
		Stats: Stats{SampleStats: SampleStats{Samples: 10, Attributed: 10}, CensusStats: CensusStats{CensusObjects: 32, CensusPauseMs: 12.4, CensusHolders: "all"}}}
	r.Finish()
	var b bytes.Buffer
	if err := WriteTable(&b, r, TableOptions{Top: 5, AccessTop: 3, Depth: 2}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"census 32 objects (with holders), pause 12 ms", "… → [] → java.util.HashMap$Node.value",
		"#1 long[] [allocated before attach], held by RealService.index (static) → java.util.HashMap.table → [] → java.util.HashMap$Node.value"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "RealService.index (static) → java.util.HashMap.table → [] → java.util.HashMap$Node.value  ") {
		t.Errorf("the table's row is not cut to --depth:\n%s", out)
	}
}

// A scan's JVM is not charged the shared sampler's cost: its cost line
// says where that cost is instead of showing a zero.
func TestCostLineShared(t *testing.T) {
	for _, shared := range []bool{false, true} {
		r := sample()
		r.Stats.CostJVMCPUMs, r.Stats.CostAllocMs, r.Stats.CostBPFMs, r.Stats.CostShared = 1000, 5, 3, shared
		var b bytes.Buffer
		if err := WriteTable(&b, r, TableOptions{Top: 5}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if got := strings.Contains(out, "BPF 0.30%"); got == shared {
			t.Errorf("shared %v: BPF figure shown %v:\n%s", shared, got, out)
		}
		if got := strings.Contains(out, "shared by the scan's JVMs"); got != shared {
			t.Errorf("shared %v: shared wording %v:\n%s", shared, got, out)
		}
	}
}

// A heap walk's data structure is a row named by its holder chain, and the
// first line says what the walk found and that it paused nothing.
func TestTableStructureRow(t *testing.T) {
	r := &Report{PID: 1, Mode: "attach", Event: "decode", MinSize: 1024,
		Objects: []Object{{Type: "java.util.TreeMap$Entry", Site: "[allocated before attach]", Origin: OriginStructure,
			Holder:  []string{"Service.tree (static)", "java.util.TreeMap.root"},
			Objects: 200000, Bytes: 8000000, Samples: 10, OtherRoots: 1, RetainedBytes: 24000000,
			Accesses: []Access{{Path: []string{"Service.serve:61"}, Samples: 10}}}},
		Stats: Stats{SampleStats: SampleStats{Samples: 10, Attributed: 10},
			CensusStats: CensusStats{WalkObjects: 1808688, WalkMs: 312, WalkStructures: 1046}}}
	r.Finish()
	var b bytes.Buffer
	if err := WriteTable(&b, r, TableOptions{Top: 5, AccessTop: 3, Depth: 2}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"heap walk 1.8M objects in 312 ms (1046 data structures), no pause", "Service.tree (static) → java.util.TreeMap.root (+1 root)",
		"7.6MiB, retains 22.9MiB",
		"#1 java.util.TreeMap$Entry [allocated before attach], held by Service.tree (static) → java.util.TreeMap.root"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// What a cap on what a target names cut is said under the table, as perf
// and async-profiler say what their stack caps cut; a run that cut
// nothing says nothing.
func TestTableSaysWhatCapsCut(t *testing.T) {
	r := &Report{PID: 1, Mode: "attach", Event: "decode"}
	var b strings.Builder
	if err := WriteTable(&b, r, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "caps cut") {
		t.Errorf("nothing cut, yet:\n%s", b.String())
	}
	r.Stats.CapsCut = map[string]uint64{"access paths cut at 512 frames": 3, "frames not named past the time budget for reading the JVM": 1024}
	b.Reset()
	if err := WriteTable(&b, r, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "caps cut: frames not named past the time budget for reading the JVM 1024, access paths cut at 512 frames 3\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, b.String())
	}
}
