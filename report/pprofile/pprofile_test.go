package pprofile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/report"
	"github.com/google/pprof/profile"
)

// testReport is a report with every kind of content: objects with and
// without access paths, one no sample hit, a remainder, native frames and
// placeholders, nested classes and constructors, stack errors and notes.
func testReport() *report.Report {
	r := &report.Report{
		PID: 4242, JVM: "OpenJDK 64-Bit Server VM 17.0.15", Mode: "attach", Event: "decode",
		DurationSec: 10.5, AllocInterval: 256, AllocIntervalMax: 4096, MinSize: 1024,
		Objects: []report.Object{
			{Type: "double[]", Site: "HotArrays.allocCold3:24", AllocPath: []string{"HotArrays.allocCold3:24", "HotArrays.main:64"},
				Objects: 20, Bytes: 20 * 8388624, EstObjects: 20, EstBytes: 20 * 8388624, Samples: 1000, EstSamples: 1000.25},
			{Type: "long[]", Site: "HotArrays.allocHot:12", AllocPath: []string{"HotArrays.allocHot:12", "HotArrays.main:61"},
				Objects: 20, Bytes: 20 * 8388624, EstObjects: 20.5, EstBytes: 20.5 * 8388624, Samples: 7100, EstSamples: 7276.7,
				Accesses: []report.Access{
					{Path: []string{"HotArrays.scanB:40", "HotArrays.run:50", "java.lang.Thread.run:833"}, Samples: 1500},
					{Path: []string{"HotArrays.scanA:31", "HotArrays.run:49", "java.lang.Thread.run:833"}, Samples: 5000},
					{Path: []string{"HotArrays.scanA:31", "HotArrays.run:52", "java.lang.Thread.run:833"}, Samples: 400},
					{Path: []string{"libjvm.so`Copy::conjoint_jlongs_atomic", "[no Java stack: thread without JNIEnv]"}, Samples: 100},
				}},
			{Type: "byte[]", Site: "com.example.Foo$Bar.<init>:3", AllocPath: []string{"com.example.Foo$Bar.<init>:3", "com.example.Foo.lambda$main$0", "com.example.Foo$$Lambda/0x0000000800c03000.run"},
				Objects: 3, Bytes: 3 * 1040, EstObjects: 3.06, EstBytes: 3182.4, Samples: 0, EstSamples: 0},
			// Census objects: two rows of one type and site that only their holders tell apart.
			{Type: "long[]", Site: "[allocated before attach]", Origin: report.OriginCensus,
				Holder:  []string{"RealService.index (static)", "java.util.HashMap.table", "[]", "java.util.HashMap$Node.value"},
				Objects: 32, Bytes: 32 * 65552, EstObjects: 32, EstBytes: 32 * 65552, Samples: 250, EstSamples: 250,
				Accesses: []report.Access{{Path: []string{"RealService.lookup:40", "RealService.main:20"}, Samples: 250}}},
			{Type: "long[]", Site: "[allocated before attach]", Origin: report.OriginCensus,
				Holder:  []string{`RealService.main:54 local #5 (thread "main")`},
				Objects: 1, Bytes: 16 << 20, EstObjects: 1, EstBytes: 16 << 20, Samples: 500, EstSamples: 500,
				Accesses: []report.Access{{Path: []string{"RealService.scan:30", "RealService.main:21"}, Samples: 500}}},
			{Type: "java.lang.Object[]", Site: "[no Java frames]", AllocPath: nil,
				Objects: 1, Bytes: 4096, EstObjects: 1, EstBytes: 4096, Samples: 7, EstSamples: 7,
				Accesses: []report.Access{
					{Path: []string{"libjvm.so+0x1234", "[stack lost]"}, Samples: 5},
				}},
		},
		Stats: report.Stats{
			SampleStats: report.SampleStats{Samples: 9000, WithAddress: 8700, InHeap: 8600, Attributed: 8107},
			AgentStats:  report.AgentStats{AllocsTracked: 44, AllocCallbacks: 50, AllocsBelowMin: 7},
			NamingStats: report.NamingStats{HeapKnown: true},
			RelocStats:  report.RelocStats{GCs: 3},
			StackStats:  report.StackStats{StackSignals: 9000, Stacks: 8800, StackErrors: map[string]uint64{"thread without JNIEnv": 100, "GC active": 3}, SamplesWithStack: 8700},
		},
		Remainder: []report.Access{
			{Where: "outside the heap", Path: []string{"HotArrays.run:48", "java.lang.Thread.run:833"}, Samples: 300},
			{Where: "no data address", Path: []string{"libjvm.so`SpinPause", "[no Java stack: thread without JNIEnv]"}, Samples: 200},
			{Where: "heap (untracked object)", Path: []string{"[stack lost]"}, Samples: 93},
		},
		Notes: []string{"target pid 4242 exited after 10.5s; reporting what was collected", "a <note> & more"},
	}
	r.Finish()
	return r
}

func encode(t testing.TB, reps ...*report.Report) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, Options{}, reps...); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func tables(t testing.TB, r *report.Report) (table, js, folded string) {
	t.Helper()
	var a, b, c bytes.Buffer
	if err := report.WriteTable(&a, r, report.TableOptions{Top: 20, AccessTop: 3, Depth: 4}); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteJSON(&b, r, 0); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteCollapsed(&c, r, report.TableOptions{}); err != nil {
		t.Fatal(err)
	}
	return a.String(), b.String(), c.String()
}

func TestPprofRoundTrip(t *testing.T) {
	want := testReport()
	data := encode(t, want)
	got, err := Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d reports, want 1", len(got))
	}
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", got[0], want)
	}
	wt, wj, wc := tables(t, want)
	gt, gj, gc := tables(t, got[0])
	if gt != wt {
		t.Errorf("table differs:\n--- got\n%s\n--- want\n%s", gt, wt)
	}
	if gj != wj {
		t.Errorf("JSON differs:\n--- got\n%s\n--- want\n%s", gj, wj)
	}
	if gc != wc {
		t.Errorf("collapsed differs:\n--- got\n%s\n--- want\n%s", gc, wc)
	}
	// Uncompressed protobuf reads too.
	p, err := Encode(Options{}, want)
	if err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	if err := p.WriteUncompressed(&raw); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(&raw); err != nil || !reflect.DeepEqual(got[0], want) {
		t.Errorf("uncompressed: %v", err)
	}
}

func TestPprofEncodingIsValidAndAddsUp(t *testing.T) {
	r := testReport()
	start := time.Unix(1700000000, 0)
	p, err := Encode(Options{Time: start}, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	if p.TimeNanos != start.UnixNano() || p.DurationNanos != 10_500_000_000 || p.DefaultSampleType != "samples" {
		t.Errorf("time %d, duration %d, default %q", p.TimeNanos, p.DurationNanos, p.DefaultSampleType)
	}
	var sum [numValues]int64
	for _, s := range p.Sample {
		for i, v := range s.Value {
			sum[i] += v
		}
	}
	var wantSamples, wantObjects, wantBytes uint64
	var wantEst float64
	for _, o := range r.Objects {
		wantSamples += o.Samples
		wantObjects += o.Objects
		wantBytes += o.Bytes
		wantEst += o.EstSamples
	}
	for _, a := range r.Remainder {
		wantSamples += a.Samples
	}
	if sum[ValSamples] != int64(wantSamples) || sum[ValAllocObjects] != int64(wantObjects) || sum[ValAllocBytes] != int64(wantBytes) {
		t.Errorf("sums %v, want samples %d, objects %d, bytes %d", sum, wantSamples, wantObjects, wantBytes)
	}
	// Each object's est_samples parts add up to its rounded estimate.
	if want := int64(7277 + 1000 + 7 + 250 + 500); sum[ValEstSamples] != want {
		t.Errorf("est_samples sum %d, want %d", sum[ValEstSamples], want)
	}
	// The hot object's stack: access path, object frame, allocation path.
	var found bool
	for _, s := range p.Sample {
		if s.Value[ValSamples] != 5000 {
			continue
		}
		found = true
		var names []string
		for _, l := range s.Location {
			names = append(names, JoinFrame(l.Line[0].Function.Name, l.Line[0].Line))
		}
		want := "HotArrays.scanA:31 HotArrays.run:49 java.lang.Thread.run:833 [object] long[] @ HotArrays.allocHot:12 HotArrays.allocHot:12 HotArrays.main:61"
		if got := strings.Join(names, " "); got != want {
			t.Errorf("stack %s\nwant %s", got, want)
		}
		if got := s.Location[0].Line[0].Function.Filename; got != "HotArrays.java" {
			t.Errorf("file %q", got)
		}
		if s.NumLabel["pid"][0] != 4242 || s.Label["type"][0] != "long[]" || s.Label["site"][0] != "HotArrays.allocHot:12" || s.Label["event"][0] != "decode" {
			t.Errorf("labels %v %v", s.Label, s.NumLabel)
		}
	}
	if !found {
		t.Error("no sample of 5000")
	}
}

func TestPprofMultiplePIDsInOneFile(t *testing.T) {
	a, b := testReport(), testReport()
	b.PID = 7
	b.Objects[0].Accesses[0].Samples = 6000
	b.Objects[0].Samples = 8100
	b.Finish()
	got, err := Read(bytes.NewReader(encode(t, a, b)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !reflect.DeepEqual(got[0], a) || !reflect.DeepEqual(got[1], b) {
		t.Errorf("got %d reports, or they differ", len(got))
	}
	if err := Write(io.Discard, Options{}, a, a); err == nil || !strings.Contains(err.Error(), "two reports of pid 4242") {
		t.Errorf("same pid twice: %v", err)
	}
}

func TestPprofMergeAddsUp(t *testing.T) {
	a, b := testReport(), testReport()
	b.PID = 7
	b.DurationSec = 5
	// b: one more path on the hot object, one object a does not have.
	b.Objects[0].Accesses = append(b.Objects[0].Accesses, report.Access{Path: []string{"HotArrays.scanC:45"}, Samples: 50})
	b.Objects[0].Samples += 50
	b.Objects = append(b.Objects, report.Object{Type: "int[]", Site: "X.y:1", AllocPath: []string{"X.y:1"}, Objects: 1, Bytes: 2048, EstObjects: 1, EstBytes: 2048, Samples: 10, EstSamples: 10})
	b.Stats.Attributed += 60
	b.Stats.StackErrors = map[string]uint64{"GC active": 1, "not walkable": 2}
	b.Stats.HeapKnown = false
	b.Notes = append(b.Notes, "only in b")
	b.Finish()
	m := report.Merge(a, b)
	hot := find(t, m, "long[]")
	if hot.Samples != 7100+7150 || hot.Bytes != 2*20*8388624 || hot.Objects != 40 || hot.EstSamples != 2*7276.7+50*0 {
		t.Errorf("hot object %+v", hot)
	}
	paths := map[string]uint64{}
	for _, acc := range hot.Accesses {
		paths[strings.Join(acc.Path, ";")] = acc.Samples
	}
	if paths["HotArrays.scanA:31;HotArrays.run:49;java.lang.Thread.run:833"] != 10000 || paths["HotArrays.scanC:45"] != 50 || len(paths) != 5 {
		t.Errorf("paths %v", paths)
	}
	if o := find(t, m, "int[]"); o.Samples != 10 || o.Bytes != 2048 {
		t.Errorf("object of b only: %+v", o)
	}
	if m.Stats.Samples != 18000 || m.Stats.Attributed != 2*8107+60 || m.Stats.HeapKnown {
		t.Errorf("stats %+v", m.Stats)
	}
	if m.Stats.StackErrors["GC active"] != 4 || m.Stats.StackErrors["not walkable"] != 2 || m.Stats.StackErrors["thread without JNIEnv"] != 100 {
		t.Errorf("stack errors %v", m.Stats.StackErrors)
	}
	if a.Stats.StackErrors["GC active"] != 3 {
		t.Error("Merge changed its input")
	}
	if len(m.Remainder) != 3 || m.Remainder[0].Samples != 600 {
		t.Errorf("remainder %+v", m.Remainder)
	}
	if m.PID != 0 || m.DurationSec != 15.5 || m.Mode != "attach" {
		t.Errorf("pid %d, duration %v, mode %q", m.PID, m.DurationSec, m.Mode)
	}
	notes := strings.Join(m.Notes, "\n")
	if !strings.Contains(notes, "merged 2 profiles of 2 JVMs (pids 4242, 7)") || !strings.Contains(notes, "only in b") || strings.Count(notes, "a <note>") != 1 {
		t.Errorf("notes:\n%s", notes)
	}
	// Shares are of the merged totals, objects most sampled first.
	if m.Objects[0].Type != "long[]" || m.Objects[0].Share != float64(hot.Samples)/float64(m.Stats.Attributed) {
		t.Errorf("order or share: %+v", m.Objects[0])
	}
	// Merging one report gives it back.
	if one := report.Merge(testReport()); !reflect.DeepEqual(one, testReport()) {
		t.Errorf("merge of one:\n got %+v\nwant %+v", one, testReport())
	}
	if by := report.MergeByPID([]*report.Report{a, b, a}); len(by) != 2 || by[0].PID != 4242 || by[0].Stats.Samples != 18000 || by[1].PID != 7 {
		t.Errorf("MergeByPID: %d reports", len(by))
	}
}

func find(t *testing.T, r *report.Report, typ string) *report.Object {
	t.Helper()
	for i := range r.Objects {
		if r.Objects[i].Type == typ {
			return &r.Objects[i]
		}
	}
	t.Fatalf("no %s object", typ)
	return nil
}

// A profile merged by pprof itself (pprof -proto a b) keeps both
// metadata comments: reports of different pids stay apart, of one pid merge.
func TestPprofMergedByPprofTool(t *testing.T) {
	a, b := testReport(), testReport()
	b.PID = 7
	b.Finish()
	pa, _ := Encode(Options{}, a)
	pb, _ := Encode(Options{}, b)
	m, err := profile.Merge([]*profile.Profile{pa, pb})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !reflect.DeepEqual(got[0], a) || !reflect.DeepEqual(got[1], b) {
		t.Errorf("different pids: %d reports", len(got))
	}
	c := testReport()
	c.JVM = "another"
	pc, _ := Encode(Options{}, c)
	m, err = profile.Merge([]*profile.Profile{pa, pc})
	if err != nil {
		t.Fatal(err)
	}
	got, err = Decode(m)
	if err != nil {
		t.Fatal(err)
	}
	want := report.Merge(a, c)
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Errorf("same pid:\n got %+v\nwant %+v", got[0], want)
	}
}

func TestPprofReadErrors(t *testing.T) {
	good := encode(t, testReport())
	var heap bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&heap, 0); err != nil {
		t.Fatal(err)
	}
	foreign := func() []byte {
		p, _ := Encode(Options{}, testReport())
		p.Comments = nil
		var b bytes.Buffer
		p.Write(&b)
		return b.Bytes()
	}()
	withComment := func(c string) []byte {
		p, _ := Encode(Options{}, testReport())
		p.Comments = []string{c}
		var b bytes.Buffer
		p.Write(&b)
		return b.Bytes()
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "not a valid pprof profile"},
		{"truncated", good[:len(good)/2], "not a valid pprof profile (truncated or corrupt?): decompressing profile: unexpected EOF"},
		{"random", []byte("\x01\x02 this is not a profile at all \xff\xfe"), "not a valid pprof profile"},
		{"text", []byte("hello, world\n"), "not a valid pprof profile"},
		{"go heap profile", heap.Bytes(), "not a djx-bpf profile: no \"#djx-bpf:report-json\" comment (a pprof from another tool?)"},
		{"no metadata", foreign, "not a djx-bpf profile"},
		{"bad json", withComment(CommentPrefix + "{"), "corrupt djx-bpf metadata"},
		{"newer", withComment(CommentPrefix + `{"version":3,"report":{}}`), "written by a newer djx-bpf (format version 3, this one reads 2)"},
		{"version 0", withComment(CommentPrefix + `{"version":0,"report":{}}`), "corrupt djx-bpf metadata: format version 0"},
		{"other objects", withComment(CommentPrefix + `{"version":1,"report":{"pid":4242}}`), "is not in the metadata of pid 4242"},
		{"other pid", withComment(CommentPrefix + `{"version":1,"report":{"pid":1}}`), "pid 4242 has no djx-bpf metadata"},
	} {
		_, err := Read(bytes.NewReader(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
		if tc.name == "go heap profile" && !errors.Is(err, ErrForeign) {
			t.Errorf("%s: %v is not ErrForeign", tc.name, err)
		}
	}
}

// go tool pprof reads our files and shows the object frames.
func TestGoToolPprof(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool pprof: the go command is not on PATH")
	}
	path := filepath.Join(t.TempDir(), "p.pb.gz")
	if err := os.WriteFile(path, encode(t, testReport()), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		cmd := exec.Command(goTool, append([]string{"tool", "pprof"}, append(args, path)...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go tool pprof %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	top := run("-top")
	for _, want := range []string{"Type: samples", "[object] long[] @ HotArrays.allocHot:12", "[object] double[] @ HotArrays.allocCold3:24",
		"HotArrays.scanA", "[not in a tracked object: heap (untracked object)]"} {
		if !strings.Contains(top, want) {
			t.Errorf("-top lacks %q:\n%s", want, top)
		}
	}
	if strings.Contains(top, "report-json") {
		t.Errorf("-top shows the metadata comment:\n%s", top)
	}
	traces := run("-traces")
	if !strings.Contains(traces, "      5000   HotArrays.scanA\n             HotArrays.run\n             java.lang.Thread.run\n             [object] long[] @ HotArrays.allocHot:12\n             HotArrays.allocHot\n             HotArrays.main\n") {
		t.Errorf("-traces lacks the hot path:\n%s", traces)
	}
	if bytes := run("-top", "-sample_index=alloc_bytes"); !strings.Contains(bytes, "160MB 47.34% 47.34%      160MB 47.34%  [object]") {
		t.Errorf("-sample_index=alloc_bytes:\n%s", bytes)
	}
	// A census object's holder chain stands where an allocation path would.
	if !strings.Contains(traces, "       250   RealService.lookup\n             RealService.main\n             [object] long[] @ [allocated before attach]\n             java.util.HashMap$Node.value\n             []\n             java.util.HashMap.table\n             RealService.index (static)\n             [held by]\n") {
		t.Errorf("-traces lacks the census object's holder chain:\n%s", traces)
	}
	if lines := run("-top", "-lines"); !strings.Contains(lines, "HotArrays.scanA HotArrays.java:31") {
		t.Errorf("-lines:\n%s", lines)
	}
}

func TestPprofSplitFrame(t *testing.T) {
	for frame, want := range map[string]struct {
		name string
		line int64
	}{
		"HotArrays.allocHot:12":                  {"HotArrays.allocHot", 12},
		"java.lang.Thread.run":                   {"java.lang.Thread.run", 0},
		"libjvm.so`Copy::conjoint_jlongs_atomic": {"libjvm.so`Copy::conjoint_jlongs_atomic", 0},
		"a::12":                                  {"a:", 12},
		"x:012":                                  {"x:012", 0},
		"x:0":                                    {"x:0", 0},
		"[object] long[] @ HotArrays.allocHot:12": {"[object] long[] @ HotArrays.allocHot:12", 0},
		":5":            {":5", 0},
		"y:":            {"y:", 0},
		"z:12345678901": {"z:12345678901", 0},
	} {
		name, line := SplitFrame(frame)
		if name != want.name || line != want.line {
			t.Errorf("SplitFrame(%q) = %q, %d", frame, name, line)
		}
		if back := JoinFrame(name, line); back != frame {
			t.Errorf("JoinFrame(SplitFrame(%q)) = %q", frame, back)
		}
	}
	for name, want := range map[string]string{
		"java.lang.Thread.run": "java/lang/Thread.java", "HotArrays.main": "HotArrays.java",
		"com.example.Foo$Bar.<init>": "com/example/Foo.java", "com.example.Foo$$Lambda/0x0000000800c03000.run": "com/example/Foo.java",
		"libjvm.so`SpinPause": "libjvm.so", "libjvm.so+0x1234": "libjvm.so", "[stack lost]": "", "main": "",
	} {
		if got := sourceFile(name); got != want {
			t.Errorf("sourceFile(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestPprofSpread(t *testing.T) {
	for _, tc := range []struct {
		total float64
		w     []uint64
		want  []int64
	}{
		{10, []uint64{1, 1, 1}, []int64{4, 3, 3}},
		{7276.7, []uint64{5000, 1500, 400, 100, 0}, []int64{5198, 1559, 416, 104, 0}},
		{3, []uint64{0, 0}, []int64{0, 3}},
		{0, []uint64{5}, []int64{0}},
		{-1, []uint64{5}, []int64{0}},
		{1e300, []uint64{1, 2}, []int64{3074457345618258433, 6148914691236516865}},
	} {
		got := spread(tc.total, tc.w)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("spread(%v, %v) = %v, want %v", tc.total, tc.w, got, tc.want)
		}
	}
}

// FuzzRead: no input makes Read panic, and whatever it accepts encodes
// and reads back the same.
func FuzzRead(f *testing.F) {
	good := encode(f, testReport())
	f.Add(good)
	f.Add(good[:len(good)/2])
	p, _ := Encode(Options{}, testReport())
	var raw bytes.Buffer
	p.WriteUncompressed(&raw)
	f.Add(raw.Bytes())
	f.Add(raw.Bytes()[:raw.Len()-7])
	huge := testReport() // estimates beyond int64 once hung spread
	huge.Objects[0].EstSamples = 1e300
	huge.Objects[1].EstBytes = 1e300
	f.Add(encode(f, huge))
	f.Add(expansionBomb(f, 100, 50, 0, false)) // 5000 frames in one sample
	f.Add(expansionBomb(f, 100, 50, 0, true))
	f.Add(expansionBomb(f, 3, 2000, 0, true)) // refused before parsing
	f.Add([]byte{})
	f.Add([]byte("hello"))
	f.Add([]byte{0x1f, 0x8b})
	var heap bytes.Buffer
	pprof.Lookup("heap").WriteTo(&heap, 0)
	f.Add(heap.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		reps, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := Write(&b, Options{}, reps...); err != nil {
			return // e.g. a NaN in the metadata
		}
		again, err := Read(&b)
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if len(again) != len(reps) {
			t.Fatalf("%d reports, then %d", len(reps), len(again))
		}
		for i := range reps {
			ta, _, _ := tables(t, reps[i])
			tb, _, _ := tables(t, again[i])
			if ta != tb {
				t.Fatalf("tables differ:\n%s\n%s", ta, tb)
			}
		}
	})
}

// bigReport is a synthetic profile of one instance of a service: samples
// spread over objects × paths, more on the first paths of each object
// (1/(k+1)), paths of 8 frames and allocation paths of 6 drawn from a pool
// of 5000 frames. Instances (pids) have the same objects and paths and
// different counts.
func bigReport(pid, objects, paths int, samples uint64) *report.Report {
	rng := rand.New(rand.NewPCG(1, 1))
	counts := rand.New(rand.NewPCG(uint64(pid), 2))
	r := &report.Report{PID: pid, JVM: "OpenJDK 64-Bit Server VM 17.0.15", Mode: "attach", Event: "decode",
		DurationSec: 60, AllocInterval: 256, MinSize: 1024, Stats: report.Stats{NamingStats: report.NamingStats{HeapKnown: true}}}
	pool := make([]string, 5000)
	for i := range pool {
		pool[i] = fmt.Sprintf("com.example.service.Class%d.method%d:%d", i/20, i%20, 10+rng.IntN(400))
	}
	frames := func(n int) []string {
		f := make([]string, n)
		for i := range f {
			f[i] = pool[rng.IntN(len(pool))]
		}
		return f
	}
	var h float64
	for k := 0; k < paths; k++ {
		h += 1 / float64(k+1)
	}
	perObject := float64(samples) / float64(objects)
	for i := 0; i < objects; i++ {
		scale := 0.5 + counts.Float64()
		o := report.Object{Type: []string{"long[]", "byte[]", "java.lang.Object[]", "char[]"}[i%4],
			AllocPath: frames(6), Objects: uint64(1 + rng.IntN(100)), EstObjects: 1 + rng.Float64()*100}
		o.Site = o.AllocPath[0]
		o.Bytes = o.Objects * 4096
		o.EstBytes = o.EstObjects * 4096
		for k := 0; k < paths; k++ {
			n := uint64(scale * perObject / h / float64(k+1))
			o.Accesses = append(o.Accesses, report.Access{Path: frames(8), Samples: n})
			o.Samples += n
		}
		o.EstSamples = float64(o.Samples) * 1.01
		r.Objects = append(r.Objects, o)
		r.Stats.Samples += o.Samples
		r.Stats.Attributed += o.Samples
	}
	// Top up to exactly samples.
	if total := r.Stats.Samples; total < samples {
		o := &r.Objects[0]
		o.Accesses[0].Samples += samples - total
		o.Samples += samples - total
		r.Stats.Samples, r.Stats.Attributed = samples, samples
	}
	r.Finish()
	return r
}

func TestPprofBigRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("large profile")
	}
	r := bigReport(1, 100, 50, 100000)
	got, err := Read(bytes.NewReader(encode(t, r)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got[0], r) {
		t.Error("large profile round trip differs")
	}
}

// BenchmarkWrite: a profile of 1M samples over 1000 objects × 50 paths.
func BenchmarkWrite(b *testing.B) {
	r := bigReport(1, 1000, 50, 1_000_000)
	var size int
	for b.Loop() {
		var buf bytes.Buffer
		if err := Write(&buf, Options{}, r); err != nil {
			b.Fatal(err)
		}
		size = buf.Len()
	}
	var n uint64
	for _, o := range r.Objects {
		n += o.Samples
	}
	b.ReportMetric(float64(size), "file-bytes")
	b.ReportMetric(float64(n), "samples")
}

func BenchmarkRead(b *testing.B) {
	data := encode(b, bigReport(1, 1000, 50, 1_000_000))
	for b.Loop() {
		if _, err := Read(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(data)), "file-bytes")
}

// BenchmarkMerge10: read and merge 10 such files (of 10 JVMs), as djx-bpf
// report does.
func BenchmarkMerge10(b *testing.B) {
	var files [][]byte
	for i := 0; i < 10; i++ {
		files = append(files, encode(b, bigReport(i+1, 1000, 50, 1_000_000)))
	}
	b.Run("read+merge", func(b *testing.B) {
		for b.Loop() {
			var all []*report.Report
			for _, f := range files {
				reps, err := Read(bytes.NewReader(f))
				if err != nil {
					b.Fatal(err)
				}
				all = append(all, reps...)
			}
			report.Merge(all...)
		}
	})
	var all []*report.Report
	for _, f := range files {
		reps, _ := Read(bytes.NewReader(f))
		all = append(all, reps...)
	}
	b.Run("merge", func(b *testing.B) {
		for b.Loop() {
			report.Merge(all...)
		}
	})
}

// Memory metrics and NUMA placement (hardware sources, --numa) survive the
// round trip: per object in the metadata, per path in numeric labels and
// the latency value.
func TestPprofRoundTripMemNUMA(t *testing.T) {
	want := testReport()
	o := &want.Objects[0]
	o.Mem = &report.MemMetrics{Samples: 10, Latency: 2000, Levels: map[string]uint64{"L3": 4, "local DRAM": 6}, TLBMisses: 2, HitM: 1}
	o.NUMA = &report.NUMAMetrics{Home: map[int]uint64{0: 7, 1: 3}, From: map[int]uint64{0: 10}, Remote: 3, Unknown: 1}
	o.Accesses[0].Mem = &report.MemMetrics{Samples: 5, Latency: 900, Levels: map[string]uint64{"local DRAM": 5}, Remote: 1}
	o.Accesses[0].NUMA = &report.NUMAMetrics{Home: map[int]uint64{1: 3}, From: map[int]uint64{0: 3}, Remote: 3}
	if len(want.Remainder) > 0 {
		want.Remainder[0].Mem = &report.MemMetrics{Samples: 2, Latency: 60, Levels: map[string]uint64{"L1": 2}}
	}
	got, err := Read(bytes.NewReader(encode(t, want)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", got[0].Objects[0], want.Objects[0])
	}
	wt, _, _ := tables(t, want)
	gt, _, _ := tables(t, got[0])
	if gt != wt {
		t.Errorf("table differs:\n--- got\n%s\n--- want\n%s", gt, wt)
	}
}
