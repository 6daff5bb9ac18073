package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/report/pprofile"
	"github.com/djx-bpf/djx-bpf/safety/safefs"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata: the fixture profiles and the golden outputs")

// fixtureReport is the synthetic profile behind testdata/fixture*.pb.gz
// (made by TestReportFixtures with -update): the HotArrays demo's objects
// with access paths, a remainder and stack statistics. Instance 2 is another
// JVM of the same service: other counts, one path and one object more.
func fixtureReport(instance int) *report.Report {
	r := &report.Report{
		PID: 4242, JVM: "OpenJDK 64-Bit Server VM 17.0.15+6-Debian-1deb12u1", Mode: "attach", Event: "decode",
		DurationSec: 8, AllocInterval: 256, MinSize: 1024,
		Objects: []report.Object{
			{Type: "long[]", Site: "HotArrays.allocHot:12", AllocPath: []string{"HotArrays.allocHot:12", "HotArrays.main:61"},
				Objects: 15, Bytes: 15 * 8388624, EstObjects: 15, EstBytes: 15 * 8388624, Samples: 10238, EstSamples: 10238,
				Accesses: []report.Access{
					{Path: []string{"HotArrays.scanA:31", "HotArrays.run:49", "java.lang.Thread.run:833"}, Samples: 8000},
					{Path: []string{"HotArrays.scanB:40", "HotArrays.run:50", "java.lang.Thread.run:833"}, Samples: 2000},
					{Path: []string{"libjvm.so`Copy::conjoint_jlongs_atomic", "[no Java stack: thread without JNIEnv]"}, Samples: 200},
					{Path: []string{"HotArrays.scanA:31", "[stack lost]"}, Samples: 38},
				}},
			{Type: "long[]", Site: "HotArrays.allocCold1:16", AllocPath: []string{"HotArrays.allocCold1:16", "HotArrays.main:62"},
				Objects: 15, Bytes: 15 * 8388624, EstObjects: 15, EstBytes: 15 * 8388624, Samples: 1776, EstSamples: 1776,
				Accesses: []report.Access{{Path: []string{"HotArrays.scanCold:44", "HotArrays.run:51", "java.lang.Thread.run:833"}, Samples: 1776}}},
			{Type: "double[]", Site: "HotArrays.allocCold3:24", AllocPath: []string{"HotArrays.allocCold3:24", "HotArrays.main:64"},
				Objects: 15, Bytes: 15 * 8388624, EstObjects: 15, EstBytes: 15 * 8388624, Samples: 1006, EstSamples: 1006},
			{Type: "byte[]", Site: "HotArrays.<clinit>:8", AllocPath: []string{"HotArrays.<clinit>:8"},
				Objects: 3, Bytes: 3 * 1040, EstObjects: 3.06, EstBytes: 3182.4},
		},
		Stats: report.Stats{
			SampleStats: report.SampleStats{Samples: 15758, WithAddress: 15332, InHeap: 15174, Attributed: 13020},
			AgentStats:  report.AgentStats{AllocsTracked: 48, AllocCallbacks: 575, AllocsBelowMin: 499},
			NamingStats: report.NamingStats{HeapKnown: true},
			RelocStats:  report.RelocStats{GCs: 2, Relocations: 4},
			StackStats:  report.StackStats{StackSignals: 15758, Stacks: 15500, StacksJava: 15200, SamplesWithStack: 15400, SamplesJavaStack: 15100, StackErrors: map[string]uint64{"thread without JNIEnv": 300}},
		},
		Remainder: []report.Access{
			{Where: "heap (untracked object)", DataType: "long[]", Path: []string{"HotArrays.scanA:31", "HotArrays.run:49", "java.lang.Thread.run:833"}, Samples: 2154},
			{Where: "thread stack", Path: []string{"libjvm.so`SpinPause", "[no Java stack: thread without JNIEnv]"}, Samples: 158},
			{Where: "no data address", Path: []string{"HotArrays.run:48", "java.lang.Thread.run:833"}, Samples: 426},
		},
		DataTypes: []report.DataType{
			{Type: "long[]", Samples: 10238 + 1776 + 2154, Accesses: []report.Access{
				{Path: []string{"HotArrays.scanA:31", "HotArrays.run:49", "java.lang.Thread.run:833"}, Samples: 10154},
				{Path: []string{"HotArrays.scanCold:44", "HotArrays.run:51", "java.lang.Thread.run:833"}, Samples: 1776}}},
			{Type: "double[]", Samples: 1006},
		},
		Notes: []string{"target pid 4242 still running; profiled for 8.0s"},
	}
	if instance == 2 {
		r.PID = 5151
		r.DurationSec = 6
		r.Notes = []string{"target pid 5151 still running; profiled for 6.0s"}
		r.Objects[0].Accesses[0].Samples = 6000
		r.Objects[0].Accesses = append(r.Objects[0].Accesses, report.Access{Path: []string{"HotArrays.scanC:47", "HotArrays.run:53", "java.lang.Thread.run:833"}, Samples: 500})
		r.Objects[0].Samples = 8738
		r.Objects[0].EstSamples = 8738
		r.Objects = append(r.Objects, report.Object{Type: "int[]", Site: "HotArrays.allocExtra:30", AllocPath: []string{"HotArrays.allocExtra:30", "HotArrays.main:66"},
			Objects: 2, Bytes: 2 * 4112, EstObjects: 2, EstBytes: 2 * 4112, Samples: 90, EstSamples: 91.5,
			Accesses: []report.Access{{Path: []string{"HotArrays.extra:70"}, Samples: 90}}})
		r.Stats.Samples, r.Stats.WithAddress, r.Stats.InHeap, r.Stats.Attributed = 14348, 13922, 13764, 11610
		r.DataTypes[0].Samples, r.DataTypes[0].Accesses[0].Samples = 8738+1776+2154, 6000+2154
		r.DataTypes = append(r.DataTypes, report.DataType{Type: "int[]", Samples: 90})
		r.Stats.StackSignals, r.Stats.Stacks, r.Stats.StacksJava, r.Stats.SamplesWithStack, r.Stats.SamplesJavaStack = 14348, 14100, 13800, 14000, 13700
	}
	r.Finish()
	return r
}

func fixture(n int) string { return filepath.Join("testdata", "fixture"+strconv.Itoa(n)+".pb.gz") }

// TestReportFixtures (re)writes the committed fixtures with -update and
// checks that they still hold the synthetic reports.
func TestReportFixtures(t *testing.T) {
	for n := 1; n <= 2; n++ {
		if *updateGolden {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := writeReport(fixtureReport(n), "pprof", report.DefaultTableOptions, fixture(n)); err != nil {
				t.Fatal(err)
			}
		}
		reps, err := readReports(fixture(n))
		if err != nil {
			t.Fatal(err)
		}
		if len(reps) != 1 || !reflect.DeepEqual(reps[0], fixtureReport(n)) {
			t.Errorf("%s does not hold fixtureReport(%d): run go test -run TestReportFixtures -update", fixture(n), n)
		}
	}
}

// runReport runs djx-bpf report and returns its exit status, standard
// output and standard error.
func runReport(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cmdReport(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func reportGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestReport -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestReportGolden(t *testing.T) {
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"report_table.golden", []string{fixture(1)}},
		{"report_collapsed.golden", []string{"--format", "collapsed", fixture(1)}},
		{"report_json.golden", []string{"--format", "json", fixture(1)}},
		{"report_merged_table.golden", []string{"--access-top", "5", fixture(1), fixture(2)}},
		{"report_merged_collapsed.golden", []string{"--format", "collapsed", fixture(1), fixture(2)}},
		{"report_focus_table.golden", []string{"--focus", `^double|Cold1`, fixture(1), fixture(2)}},
	} {
		code, out, errOut := runReport(t, tc.args...)
		if code != 0 || errOut != "" {
			t.Fatalf("report %v: exit %d: %s", tc.args, code, errOut)
		}
		reportGolden(t, tc.golden, out)
	}
}

// A profile written by profile -o FILE.pb.gz and read back by report prints
// the same table as the live run, with any table options.
func TestReportSameTableAsLive(t *testing.T) {
	dir := t.TempDir()
	rep := fixtureReport(1)
	path := filepath.Join(dir, "live.pb.gz")
	if err := writeReport(rep, outputFormat("table", false, path), report.DefaultTableOptions, path); err != nil {
		t.Fatal(err)
	}
	for _, opt := range []report.TableOptions{report.DefaultTableOptions, {Top: 1, AccessTop: 0, Depth: 1}, {Top: 0, AccessTop: 10, Depth: 0}} {
		live := filepath.Join(dir, "live.txt")
		if err := writeReport(rep, "table", opt, live); err != nil {
			t.Fatal(err)
		}
		want, _ := os.ReadFile(live)
		code, got, errOut := runReport(t, "--top", strconv.Itoa(opt.Top), "--access-top", strconv.Itoa(opt.AccessTop), "--depth", strconv.Itoa(opt.Depth), path)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if got != string(want) {
			t.Errorf("options %+v: report differs from the live table:\n--- report\n%s\n--- live\n%s", opt, got, want)
		}
	}
	// And the JSON report, when read back, too.
	jpath := filepath.Join(dir, "live.json")
	if err := writeReport(rep, "json", report.TableOptions{}, jpath); err != nil {
		t.Fatal(err)
	}
	jcode, fromJSON, jerr := runReport(t, jpath)
	pcode, fromPprof, perr := runReport(t, path)
	if jcode != 0 || pcode != 0 || fromPprof == "" {
		t.Fatalf("report of the JSON file exited %d (%s), of the pprof file %d (%s), printing %d bytes", jcode, jerr, pcode, perr, len(fromPprof))
	}
	if fromJSON != fromPprof {
		t.Errorf("JSON report reads back as\n%s\nwant\n%s", fromJSON, fromPprof)
	}
}

func TestReportPIDAndMergedPprof(t *testing.T) {
	dir := t.TempDir()
	merged := filepath.Join(dir, "merged.pb.gz")
	if code, _, errOut := runReport(t, "-o", merged, fixture(1), fixture(2)); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// The merged file keeps each JVM's data apart: --pid selects one.
	for n, pid := range map[int]string{1: "4242", 2: "5151"} {
		wcode, want, _ := runReport(t, fixture(n))
		code, got, errOut := runReport(t, "--pid", pid, merged)
		if wcode != 0 || want == "" || code != 0 || got != want {
			t.Errorf("--pid %s of the merged file (exit %d, %s):\n%s\nwant\n%s", pid, code, errOut, got, want)
		}
	}
	// Flags after files, and "--".
	_, before, _ := runReport(t, "--top", "1", "--depth", "1", fixture(1), fixture(2))
	_, after, _ := runReport(t, fixture(1), "--top", "1", fixture(2), "--depth", "1")
	if before != after || !strings.Contains(after, "note: merged 2 profiles") {
		t.Errorf("flags after files:\n%s\nwant\n%s", after, before)
	}
	if code, _, errOut := runReport(t, "--top", "1", "--", fixture(1), "--depth"); code != 1 || !strings.Contains(errOut, "open --depth: no such file") {
		t.Errorf("after --: exit %d, %s", code, errOut)
	}
	_, want, _ := runReport(t, fixture(1), fixture(2))
	if _, got, _ := runReport(t, merged); got != want {
		t.Errorf("merged file:\n%s\nwant\n%s", got, want)
	}
	code, _, errOut := runReport(t, "--pid", "99", merged)
	if code != 1 || errOut != "djx-bpf report: no profile of pid 99 in "+merged+" (they hold pids 4242, 5151)\n" {
		t.Errorf("unknown pid: exit %d, %q", code, errOut)
	}
	// --format table wins over the file name.
	txt := filepath.Join(dir, "table.pb.gz")
	if code, _, _ := runReport(t, "--format", "table", "-o", txt, fixture(1)); code != 0 {
		t.Fatal(code)
	}
	if b, _ := os.ReadFile(txt); !bytes.HasPrefix(b, []byte("djx-bpf: pid 4242")) {
		t.Errorf("--format table -o x.pb.gz wrote %.40q", b)
	}
	if got := outputFormat("table", false, "x.pprof"); got != "pprof" {
		t.Errorf("x.pprof: %s", got)
	}
	if got := outputFormat("json", true, "x.pb.gz"); got != "json" {
		t.Errorf("--format json -o x.pb.gz: %s", got)
	}
}

func TestReportErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, err := os.ReadFile(fixture(1))
	if err != nil {
		t.Fatal(err)
	}
	var heap bytes.Buffer
	pprof.Lookup("heap").WriteTo(&heap, 0)
	truncated := write("truncated.pb.gz", good[:len(good)/2])
	random := write("random.bin", []byte("\x00\x01\x02garbage\xff"))
	foreign := write("heap.pb.gz", heap.Bytes())
	badJSON := write("other.json", []byte(`{"name": "something else"}`))
	missing := filepath.Join(dir, "missing.pb.gz")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{missing}, 1, "djx-bpf report: open " + missing + ": no such file or directory\n"},
		{[]string{dir}, 1, "djx-bpf report: read " + dir + ": is a directory\n"},
		{[]string{fixture(1), truncated}, 1, "djx-bpf report: " + truncated + ": not a valid pprof profile (truncated or corrupt?): decompressing profile: unexpected EOF\n"},
		{[]string{random}, 1, "djx-bpf report: " + random + ": not a valid pprof profile (truncated or corrupt?): parsing profile: unrecognized profile format\n"},
		{[]string{foreign}, 1, "djx-bpf report: " + foreign + ": not a djx-bpf profile: no \"#djx-bpf:report-json\" comment (a pprof from another tool?)\n"},
		{[]string{badJSON}, 1, "djx-bpf report: " + badJSON + ": not a djx-bpf JSON report: no \"pid\" field\n"},
		{[]string{"--format", "svg", fixture(1)}, 2, "djx-bpf report: unknown --format \"svg\": use table, json, collapsed, pprof or html\n"},
		{[]string{"--focus", "(", fixture(1)}, 2, "djx-bpf report: bad --focus: error parsing regexp: missing closing ): `(`\n"},
		{[]string{"--top", "-1", fixture(1)}, 2, "djx-bpf report: --top, --access-top and --depth must be 0 or more\n"},
	} {
		code, out, errOut := runReport(t, tc.args...)
		if code != tc.code || errOut != tc.want || out != "" {
			t.Errorf("report %v: exit %d, stderr %q, stdout %q; want exit %d, %q", tc.args, code, errOut, out, tc.code, tc.want)
		}
	}
	code, _, errOut := runReport(t)
	if code != 2 || !strings.HasPrefix(errOut, "djx-bpf report: give one or more profile files\n") {
		t.Errorf("no files: exit %d, %q", code, errOut)
	}
	// A failed write leaves what was on disk.
	out := write("keep.txt", []byte("keep"))
	if code, _, _ := runReport(t, "-o", out, missing); code != 1 {
		t.Errorf("exit %d", code)
	}
	if b, _ := os.ReadFile(out); string(b) != "keep" {
		t.Errorf("existing output overwritten: %q", b)
	}
}

// TestReadReportsBombs: a JSON report of empty objects and an oversized
// file are refused before decoding, with little memory.
func TestReadReportsBombs(t *testing.T) {
	dir := t.TempDir()
	bomb := filepath.Join(dir, "bomb.json")
	var b bytes.Buffer
	b.WriteString(`{"pid":1,"mode":"attach","stats":{},"objects":[`)
	for i := 0; i < 2<<20; i++ {
		b.WriteString("{},")
	}
	b.WriteString("{}]}")
	os.WriteFile(bomb, b.Bytes(), 0o644)
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, append([]byte("{"), bytes.Repeat([]byte(" "), pprofile.MaxBytes+1)...), 0o644)
	for _, p := range []string{bomb, big} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := readReports(p)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, safefs.ErrTooLarge) {
			t.Errorf("%s: %v, want ErrTooLarge", filepath.Base(p), err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 4*pprofile.MaxBytes {
			t.Errorf("%s: allocated %d MiB", filepath.Base(p), grew>>20)
		}
	}
}

// FuzzReadJSONReport: a JSON report of unknown origin.
func FuzzReadJSONReport(f *testing.F) {
	f.Add([]byte(`{"pid":1,"mode":"attach","stats":{},"objects":[{"type":"[B","samples":3}]}`))
	f.Add([]byte(`{"pid":1,"mode":"attach","stats":{},"objects":[[[[[[[[[[]]]]]]]]]]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		readJSONReport(data)
	})
}
