package htmlreport

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/report"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.html")

// sampleReport is a synthetic profile of a service with n objects: arrays
// allocated by the service, data structures a heap walk found (holder
// chains, fields, retained bytes), access paths of a few frames, data
// types, a remainder in three regions, stack statistics, costs and notes.
func sampleReport(pid, n int) *report.Report {
	r := &report.Report{
		PID: pid, JVM: "OpenJDK 64-Bit Server VM 17.0.15+6-Debian-1deb12u1", Mode: "attach", Event: "decode",
		DurationSec: 10, AllocInterval: 256, MinSize: 1024,
		Stats: report.Stats{
			SampleStats: report.SampleStats{Samples: 0, WithAddress: 0, InHeap: 0},
			AgentStats:  report.AgentStats{AllocsTracked: 310, AllocCallbacks: 4100, AllocsBelowMin: 3790},
			NamingStats: report.NamingStats{HeapKnown: true},
			StackStats:  report.StackStats{StackSignals: 9000, Stacks: 8900, StacksJava: 8800, SamplesWithStack: 8800, SamplesJavaStack: 8700},
			CostStats:   report.CostStats{CostJVMCPUMs: 19800, CostAllocMs: 41, CostStackMs: 22, CostCodeMs: 9, CostWriterMs: 12, CostBPFMs: 31, CostDjxCPUMs: 260},
			CensusStats: report.CensusStats{WalkMs: 412, WalkObjects: 1_240_000, WalkBytes: 96 << 20, WalkStructures: 5120, WalkRoots: 41, RootsPauseMs: 3.1},
		},
		Notes: []string{fmt.Sprintf("target pid %d still running; profiled for 10.0s", pid)},
	}
	callers := [][]string{
		{"com.example.api.Handler.serve:88", "com.example.api.Server.dispatch:141", "java.lang.Thread.run:833"},
		{"com.example.batch.Indexer.reindex:52", "com.example.batch.Job.run:30", "java.util.concurrent.ThreadPoolExecutor.runWorker:1136", "java.lang.Thread.run:833"},
	}
	var attributed uint64
	for i := range n {
		samples := uint64(24000 / (i + 1) / (i + 1))
		o := report.Object{Samples: samples, EstSamples: float64(samples), Objects: 1, EstObjects: 1}
		if i%3 == 1 {
			o.Type, o.Site, o.Origin = fmt.Sprintf("com.example.cache.Lru$Node%d", i), "[allocated before attach]", report.OriginStructure
			o.Holder = []string{fmt.Sprintf("com.example.cache.Registry.caches%d (static)", i), "java.util.HashMap.table", "[]", "com.example.cache.Lru.head"}
			o.Objects, o.EstObjects, o.Bytes, o.RetainedBytes, o.OtherRoots = 40000, 40000, 40000*48, 40000*112, 1
			o.Fields = []report.FieldShare{{Field: "next", Samples: samples * 3 / 4}, {Field: "value", Samples: samples - samples*3/4}}
		} else {
			o.Type, o.Site = []string{"long[]", "byte[]", "java.lang.Object[]"}[i%3], fmt.Sprintf("com.example.store.Table.grow:%d", 100+i)
			o.AllocPath, o.Origin, o.Bytes = []string{o.Site, "com.example.store.Table.<init>:40", "com.example.Main.main:12"}, report.OriginAllocation, uint64(8<<20)>>(i%5)
		}
		for k, c := range callers {
			leaf := fmt.Sprintf("com.example.store.Table.scan%d:%d", i, 200+k)
			share := samples * uint64(2-k) / 4
			o.Accesses = append(o.Accesses, report.Access{Path: append([]string{leaf}, c...), Samples: share})
		}
		o.Accesses = append(o.Accesses, report.Access{Path: []string{"libjvm.so`Copy::conjoint_jlongs_atomic", "[no Java stack: thread without JNIEnv]"}, Samples: samples - samples*2/4 - samples/4})
		attributed += samples
		r.Objects = append(r.Objects, o)
	}
	r.Remainder = []report.Access{
		{Where: report.WhereUntracked, DataType: "java.util.HashMap$Node.key", Path: callers[0], Samples: 900},
		{Where: "thread stack", Path: callers[1], Samples: 300},
		{Where: report.WhereNoAddress, Path: []string{"com.example.api.Handler.parse:60", "java.lang.Thread.run:833"}, Samples: 150},
	}
	r.DataTypes = []report.DataType{
		{Type: "long[]", Samples: attributed * 2 / 3, Accesses: []report.Access{{Path: callers[0], Samples: attributed * 2 / 3}}},
		{Type: "java.util.HashMap$Node", Field: "key", Samples: 900, Accesses: []report.Access{{Path: callers[0], Samples: 900}}},
		{Type: "com.example.cache.Lru$Node1", Field: "next", Samples: attributed / 3},
	}
	r.Stats.Attributed = attributed
	r.Stats.InHeap = attributed + 900
	r.Stats.WithAddress = r.Stats.InHeap + 300
	r.Stats.Samples = r.Stats.WithAddress + 150
	r.Finish()
	return r
}

// render writes reps' page and returns it.
func render(t *testing.T, opt Options, reps ...*report.Report) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteReports(&b, reps, opt); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var dataBlock = regexp.MustCompile(`(?s)<script type="application/json" id="djx-data">(.*?)</script>`)

// pageData decodes the JSON block of a rendered page.
func pageData(t *testing.T, html []byte) page {
	t.Helper()
	m := dataBlock.FindSubmatch(html)
	if m == nil {
		t.Fatal("no djx-data script element in the page")
	}
	var p page
	if err := json.Unmarshal(m[1], &p); err != nil {
		t.Fatalf("the data block is not JSON: %v", err)
	}
	return p
}

func TestGolden(t *testing.T) {
	got := render(t, Options{Top: 20}, sampleReport(4242, 6))
	golden := filepath.Join("testdata", "report.golden.html")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./htmlreport -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the page differs from %s (go test ./htmlreport -update rewrites it after a deliberate change)", golden)
	}
}

// hostileReport names an object, a holder hop, a field, a data type, a
// region, a frame and a note with markup and script-breaking text.
func hostileReport() (*report.Report, []string) {
	bad := []string{
		`</script><img src=x onerror=alert(1)>`,
		`<b onmouseover=alert(2)>hop</b>`,
		`<!--<script>alert(3)</script>-->`,
		"]]><svg onload=alert(4)>\u2028\u2029",
		`__proto__`,
		`"'><iframe src=javascript:alert(5)>`,
	}
	r := sampleReport(1, 3)
	r.Objects[0].Type = bad[0]
	r.Objects[1].Holder[1] = bad[1]
	r.Objects[1].Fields[0].Field = bad[5]
	r.Objects[0].Accesses[0].Path[0] = bad[4]
	r.Objects[0].Accesses[1].Path[0] = bad[2]
	r.DataTypes[0].Type = bad[3]
	r.Remainder[1].Where = bad[5]
	r.JVM = bad[1]
	r.Notes = append(r.Notes, bad...)
	r.Finish()
	return r, bad
}

func TestHostileStringsAreEscaped(t *testing.T) {
	r, bad := hostileReport()
	html := render(t, Options{}, r)
	for _, tag := range []string{"<img", "<b ", "<svg", "<iframe", "<!--", "]]>", "\u2028"} {
		if bytes.Contains(html, []byte(tag)) {
			t.Errorf("the page holds %q: target text became markup", tag)
		}
	}
	// Two script elements end, no more: none of the data's "</script>" did.
	if n := bytes.Count(bytes.ToLower(html), []byte("</script>")); n != 2 {
		t.Errorf("%d </script> in the page, want 2 (the data block and the script)", n)
	}
	// And the data survives intact: the script sees the strings as given.
	p := pageData(t, html)
	o := p.Views[0].Objects[0]
	if o.Type != bad[0] || o.Paths[0].Frames[0] != bad[4] {
		t.Errorf("object 1 decoded as type %q, first frame %q; want %q, %q", o.Type, o.Paths[0].Frames[0], bad[0], bad[4])
	}
	if got := p.Views[0].Notes[len(p.Views[0].Notes)-3]; got != bad[3] {
		t.Errorf("note decoded as %q, want %q", got, bad[3])
	}
}

// TestCSPAllowsOnlyThePageItself checks that the policy's hashes are
// those of the style and script as the page holds them: a template that
// changed a byte of them would leave the page without its script.
func TestCSPAllowsOnlyThePageItself(t *testing.T) {
	page := string(render(t, Options{}, sampleReport(1, 2)))
	policy := regexp.MustCompile(`http-equiv="Content-Security-Policy" content="([^"]*)"`).FindStringSubmatch(page)
	style := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindStringSubmatch(page)
	script := regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindStringSubmatch(page)
	if policy == nil || style == nil || script == nil {
		t.Fatal("no policy, style or script element in the page")
	}
	p := html.UnescapeString(policy[1]) // as the browser reads the attribute
	for _, want := range []string{"default-src 'none'", "'" + hash(style[1]) + "'", "'" + hash(script[1]) + "'"} {
		if !strings.Contains(p, want) {
			t.Errorf("the policy %q lacks %s", p, want)
		}
	}
}

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(h[:])
}

func TestSeveralJVMs(t *testing.T) {
	p := pageData(t, render(t, Options{}, sampleReport(4242, 3), sampleReport(5151, 4)))
	var labels []string
	for _, v := range p.Views {
		labels = append(labels, v.Label)
	}
	want := []string{"all 2 JVMs, merged", "pid 4242 (OpenJDK 64-Bit Server VM 17.0.15+6-Debian-1deb12u1)", "pid 5151 (OpenJDK 64-Bit Server VM 17.0.15+6-Debian-1deb12u1)"}
	if strings.Join(labels, "|") != strings.Join(want, "|") {
		t.Errorf("views %q, want %q", labels, want)
	}
	if m := p.Views[0]; m.Samples != p.Views[1].Samples+p.Views[2].Samples {
		t.Errorf("the merged view has %d samples, want %d + %d", m.Samples, p.Views[1].Samples, p.Views[2].Samples)
	}
	var b bytes.Buffer
	s := &report.Scan{Event: "decode", DurationSec: 5, JVMs: []*report.Report{sampleReport(7, 2)},
		Skipped: []report.SkippedJVM{{PID: 9, Main: "Foo", Reason: "attach refused"}}}
	if err := WriteScan(&b, s, Options{}); err != nil {
		t.Fatal(err)
	}
	sp := pageData(t, b.Bytes())
	if len(sp.Views) != 1 || sp.Scan == nil || len(sp.Scan.Skipped) != 1 || sp.Scan.Skipped[0] != "pid 9 (Foo): attach refused" {
		t.Errorf("scan page: %d views, scan %+v", len(sp.Views), sp.Scan)
	}
}

func TestTopAndPathCaps(t *testing.T) {
	r := sampleReport(1, 8)
	p := pageData(t, render(t, Options{Top: 5, MaxPaths: 2}, r))
	v := p.Views[0]
	if len(v.Objects) != 5 || v.More != 3 || v.MoreSamples != r.Objects[5].Samples+r.Objects[6].Samples+r.Objects[7].Samples {
		t.Errorf("top 5: %d objects, %d more with %d samples", len(v.Objects), v.More, v.MoreSamples)
	}
	o := v.Objects[0]
	var sum uint64
	for _, p := range o.Paths {
		sum += p.Samples
	}
	if len(o.Paths) != 3 || o.Paths[2].Frames[0] != "[1 more paths]" || sum != o.Samples {
		t.Errorf("object 1's paths capped at 2: %+v (samples %d, want %d)", o.Paths, sum, o.Samples)
	}
	if len(v.Regions) != 3 || v.Regions[0].Where != report.WhereUntracked || v.Regions[0].Samples != 900 {
		t.Errorf("regions %+v", v.Regions)
	}
}
