package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func sample() *Report {
	r := &Report{
		PID: 4242, JVM: "OpenJDK 64-Bit Server VM 17.0.15", Mode: "attach", Event: "decode",
		DurationSec: 10, AllocInterval: 256, MinSize: 1024,
		Objects: []Object{
			{Type: "double[]", Site: "HotArrays.allocCold3:24", AllocPath: []string{"HotArrays.allocCold3:24", "HotArrays.main:64"},
				Objects: 20, Bytes: 20 * 8388624, EstObjects: 20, EstBytes: 20 * 8388624, Samples: 1000, EstSamples: 1000},
			{Type: "long[]", Site: "HotArrays.allocHot:12", AllocPath: []string{"HotArrays.allocHot:12", "HotArrays.main:61"},
				Objects: 20, Bytes: 20 * 8388624, EstObjects: 20, EstBytes: 20 * 8388624, Samples: 7000, EstSamples: 7000,
				Accesses: []Access{
					{Path: []string{"HotArrays.scanB:40", "HotArrays.run:50", "java.lang.Thread.run:833"}, Samples: 1500},
					{Path: []string{"HotArrays.scanA:31", "HotArrays.run:49", "java.lang.Thread.run:833"}, Samples: 5000},
					// Another bci on the same first frames: merges when cut to depth 1.
					{Path: []string{"HotArrays.scanA:31", "HotArrays.run:52", "java.lang.Thread.run:833"}, Samples: 400},
					{Path: []string{"libjvm.so`Copy::conjoint_jlongs_atomic", "[no Java stack: thread without JNIEnv]"}, Samples: 100},
				}},
			{Type: "byte[]", Site: "Foo.bar:3", AllocPath: []string{"Foo.bar:3"},
				Objects: 3, Bytes: 3 * 1040, EstObjects: 3.06, EstBytes: 3182.4, Samples: 0, EstSamples: 0},
		},
		Stats: Stats{
			SampleStats: SampleStats{Samples: 9000, WithAddress: 8700, InHeap: 8600, Attributed: 8000},
			AgentStats:  AgentStats{AllocsTracked: 43, AllocCallbacks: 50, AllocsBelowMin: 7},
			NamingStats: NamingStats{HeapKnown: true},
		},
		Remainder: []Access{
			{Where: "outside the heap", Path: []string{"HotArrays.run:48", "java.lang.Thread.run:833"}, Samples: 300},
			{Where: "no data address", Path: []string{"libjvm.so`SpinPause", "[no Java stack: thread without JNIEnv]"}, Samples: 200},
		},
		Notes: []string{"target pid 4242 exited after 10.0s; reporting what was collected"},
	}
	r.Finish()
	return r
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestMergeAccessesByDepth(t *testing.T) {
	r := sample()
	as := MergeAccesses(r.Objects[0].Accesses, 1, r.Objects[0].Samples)
	if len(as) != 3 || as[0].Path[0] != "HotArrays.scanA:31" || as[0].Samples != 5400 {
		t.Fatalf("merged to depth 1: %+v", as)
	}
	if got := as[0].Share; got != 5400.0/7000 {
		t.Errorf("share %v", got)
	}
	var sum uint64
	for _, a := range as {
		sum += a.Samples
	}
	if sum != 7000 {
		t.Errorf("merged paths hold %d samples, want all 7000", sum)
	}
	full := MergeAccesses(r.Objects[0].Accesses, 0, r.Objects[0].Samples)
	if len(full) != 4 || full[0].Samples != 5000 {
		t.Errorf("whole paths: %+v", full)
	}
}

func TestFinishOrdersAndShares(t *testing.T) {
	r := sample()
	if r.Objects[0].Site != "HotArrays.allocHot:12" || r.Objects[2].Site != "Foo.bar:3" {
		t.Fatalf("order: %s, %s, %s", r.Objects[0].Site, r.Objects[1].Site, r.Objects[2].Site)
	}
	if got := r.Objects[0].Share; got != 7000.0/8000 {
		t.Errorf("share %v", got)
	}
}

func TestJSONGoldenAndSchema(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, sample(), 0); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.golden.json", b.Bytes())
	// The documented fields must be there under their names.
	var m struct {
		Objects []map[string]any `json:"objects"`
		Stats   map[string]any   `json:"stats"`
	}
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"type", "site", "alloc_path", "objects", "bytes", "samples", "share"} {
		if _, ok := m.Objects[0][k]; !ok {
			t.Errorf("object lacks %q", k)
		}
	}
	for _, k := range []string{"samples", "with_address", "in_heap", "attributed", "dropped"} {
		if _, ok := m.Stats[k]; !ok {
			t.Errorf("stats lack %q", k)
		}
	}
}

func TestEmptyReport(t *testing.T) {
	r := &Report{PID: 1, Mode: "launch", Event: "decode"}
	r.Finish()
	var b bytes.Buffer
	if err := WriteTable(&b, r, TableOptions{Top: 20}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b.Bytes(), []byte("no samples hit a tracked object")) {
		t.Errorf("empty table:\n%s", b.Bytes())
	}
	b.Reset()
	if err := WriteJSON(&b, r, 20); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b.Bytes(), []byte(`"objects": []`)) {
		t.Errorf("empty JSON must have an empty objects list:\n%s", b.Bytes())
	}
}

func TestScanOutput(t *testing.T) {
	a := sample()
	b := sample()
	b.PID = 5151
	b.Objects = b.Objects[1:2]
	b.Objects[0].Samples, b.Objects[0].Share = 9000, 1
	sc := &Scan{Event: "decode", DurationSec: 10, JVMs: []*Report{b, a},
		Skipped: []SkippedJVM{{PID: 77, Main: "Legacy", Reason: "attach refused: -XX:+DisableAttachMechanism"}},
		Stats:   ScanStats{Discovered: 3, Profiled: 2, CostBPFMs: 120, CostDjxCPUMs: 900}}
	a.Stats.CostShared, b.Stats.CostShared = true, true
	sc.Finish()
	if sc.JVMs[0].PID != 4242 {
		t.Fatalf("JVMs not ordered by pid: %d", sc.JVMs[0].PID)
	}
	var b1, b2 bytes.Buffer
	if err := WriteScanTable(&b1, sc, TableOptions{Top: 5}); err != nil {
		t.Fatal(err)
	}
	golden(t, "scan.golden", b1.Bytes())
	if err := WriteScanJSON(&b2, sc, 0); err != nil {
		t.Fatal(err)
	}
	var back Scan
	if err := json.Unmarshal(b2.Bytes(), &back); err != nil || len(back.JVMs) != 2 || back.JVMs[1].PID != 5151 || back.Skipped[0].PID != 77 {
		t.Fatalf("scan JSON: %v %+v", err, back)
	}
}

// TestAccessOrder: more samples first, then by where, then by path frame
// by frame (a path before its own extensions).
func TestAccessOrder(t *testing.T) {
	as := []Access{
		{Where: "", Path: []string{"b"}, Samples: 2},
		{Where: "", Path: []string{"a", "b"}, Samples: 2},
		{Where: "heap", Path: []string{"a"}, Samples: 2},
		{Where: "", Path: []string{"a"}, Samples: 2},
		{Where: "", Path: []string{"z"}, Samples: 5},
	}
	finishAccesses(as, 13)
	var got []string
	for _, a := range as {
		got = append(got, a.Where+":"+strings.Join(a.Path, ";"))
	}
	want := []string{":z", ":a", ":a;b", ":b", "heap:a"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("order %q, want %q", got, want)
	}
	if as[0].Share != 5.0/13 {
		t.Errorf("share %v, want 5/13", as[0].Share)
	}
}
