package pprofile

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/report"
	"github.com/google/pprof/profile"
)

// typedReport is testReport with data types, an instance object with
// fields, and a remainder named by data types and regions.
func typedReport() *report.Report {
	r := testReport()
	r.Objects = append(r.Objects, report.Object{Type: "RealService$Index", Site: "RealService.<init>:9", AllocPath: []string{"RealService.<init>:9", "RealService.main:19"},
		Objects: 1, Bytes: 2048, EstObjects: 1, EstBytes: 2048, Samples: 40, EstSamples: 40,
		Fields:   []report.FieldShare{{Field: "root", Samples: 30}, {Field: "size", Samples: 10}},
		Accesses: []report.Access{{Path: []string{"RealService.lookup:41"}, Samples: 40}}})
	r.Stats.Attributed += 40
	r.DataTypes = []report.DataType{
		{Type: "java.util.TreeMap$Entry", Field: "left", Samples: 600, Accesses: []report.Access{{Path: []string{"java.util.TreeMap.getEntry:355", "RealService.lookup:40"}, Samples: 600}}},
		{Type: "long[]", Samples: 7100 + 750 + 20},
		{Type: "RealService$Index", Field: "root", Samples: 30},
	}
	r.Remainder = append(r.Remainder,
		report.Access{Where: report.WhereUntracked, DataType: "java.util.TreeMap$Entry.left", Path: []string{"java.util.TreeMap.getEntry:355", "RealService.lookup:40"}, Samples: 600},
		report.Access{Where: report.WhereUntracked, DataType: "java.util.TreeMap$Entry.key", Path: []string{"java.util.TreeMap.getEntry:355", "RealService.lookup:40"}, Samples: 70},
		report.Access{Where: report.WhereUntracked, DataType: "long[]", Path: []string{"RealService.sum:60"}, Samples: 20,
			Mem: &report.MemMetrics{Samples: 20, Latency: 4000, Levels: map[string]uint64{"L3": 20}}},
		report.Access{Where: "thread stack", Path: []string{"RealService.lookup:42"}, Samples: 33},
	)
	r.Stats.Samples += 723
	r.Stats.WithAddress += 723
	r.Stats.InHeap += 690
	r.Stats.TypeUnknown = 93
	r.Finish()
	return r
}

func TestPprofDataTypesRoundTrip(t *testing.T) {
	want := typedReport()
	p, err := Encode(Options{}, want)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Comments[0], CommentPrefix+`{"version":2,`) {
		t.Errorf("typed remainder written as %.40s, want version 2", p.Comments[0])
	}
	if p, _ := Encode(Options{}, testReport()); !strings.HasPrefix(p.Comments[0], CommentPrefix+`{"version":1,`) {
		t.Errorf("a report without typed paths written as %.40s, want version 1 (older djx-bpf reads it)", p.Comments[0])
	}
	got, err := Read(bytes.NewReader(encode(t, want)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", got[0], want)
	}
	wt, wj, wc := tables(t, want)
	gt, gj, gc := tables(t, got[0])
	if gt != wt || gj != wj || gc != wc {
		t.Errorf("read back prints otherwise:\n--- got\n%s\n--- want\n%s", gt, wt)
	}
	if !strings.Contains(gt, "data types (share of in-heap samples") || !strings.Contains(gc, "[type] java.util.TreeMap$Entry.left;") {
		t.Errorf("table or collapsed stacks lack the data types:\n%s\n%s", gt, gc)
	}
}

// The data_type label as pprof sees it: parsed back by the pprof library,
// on object samples (the object's type) and typed remainder samples (under
// their [type] root), so that a tag filter selects both.
func TestPprofDataTypeLabel(t *testing.T) {
	r := typedReport()
	p, err := profile.ParseData(encode(t, r))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Sample {
		dt := s.Label[LabelDataType]
		root := s.Location[len(s.Location)-1].Line[0].Function.Name
		switch kind := s.Label["kind"][0]; {
		case kind != KindRemainder:
			if len(dt) != 1 || dt[0] != s.Label["type"][0] {
				t.Errorf("%s sample of %v: data_type %v, want the object's type", kind, s.Label["type"], dt)
			}
		case len(dt) == 1:
			if root != report.TypeFrame(dt[0]) {
				t.Errorf("typed remainder %q ends in %q", dt[0], root)
			}
		default:
			if !strings.HasPrefix(root, "[not in a tracked object: ") || root != report.RemainderFrame(s.Label["where"][0]) {
				t.Errorf("untyped remainder ends in %q", root)
			}
		}
	}
	// As pprof -tagfocus=data_type=RE: keep samples whose label matches.
	focus := func(re string) (samples int64, roots map[string]bool) {
		c := p.Copy()
		rx := regexp.MustCompile(re)
		c.FilterSamplesByTag(func(s *profile.Sample) bool {
			for _, v := range s.Label[LabelDataType] {
				if rx.MatchString(v) {
					return true
				}
			}
			return false
		}, nil)
		roots = make(map[string]bool)
		for _, s := range c.Sample {
			samples += s.Value[ValSamples]
			roots[s.Location[len(s.Location)-1].Line[0].Function.Name] = true
		}
		return samples, roots
	}
	if n, roots := focus(`TreeMap\$Entry`); n != 670 || len(roots) != 2 || !roots["[type] java.util.TreeMap$Entry.left"] || !roots["[type] java.util.TreeMap$Entry.key"] {
		t.Errorf("data_type=TreeMap$Entry: %d samples under %v, want 670 under the two [type] frames", n, roots)
	}
	if n, _ := focus(`^java\.util\.TreeMap\$Entry\.left$`); n != 600 {
		t.Errorf("data_type=...Entry.left: %d samples, want 600", n)
	}
	// long[]: the tracked objects (7100 + 250 + 500) and the untracked 20.
	if n, roots := focus(`^long\[\]$`); n != 7870 || !roots["[type] long[]"] {
		t.Errorf("data_type=long[]: %d samples under %v, want 7870", n, roots)
	}
}

func TestGoToolPprofTagFocusDataType(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool pprof: the go command is not on PATH")
	}
	path := filepath.Join(t.TempDir(), "p.pb.gz")
	if err := os.WriteFile(path, encode(t, typedReport()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(goTool, "tool", "pprof", "-top", `-tagfocus=data_type=TreeMap`, path).Output()
	if err != nil {
		t.Fatalf("go tool pprof: %v\n%s", err, out)
	}
	top := string(out)
	if !strings.Contains(top, "[type] java.util.TreeMap$Entry.left") || strings.Contains(top, "[object]") || strings.Contains(top, "[not in a tracked object") {
		t.Errorf("-tagfocus=data_type=TreeMap:\n%s", top)
	}
	if !strings.Contains(top, "Showing nodes accounting for 670,") {
		t.Errorf("-tagfocus=data_type=TreeMap keeps other than the 670 TreeMap samples:\n%s", top)
	}
}

func TestPprofMergeDataTypes(t *testing.T) {
	a, b := typedReport(), typedReport() // two profiles of one pid
	m := report.Merge(a, b)
	reps, err := Read(bytes.NewReader(encode(t, m)))
	if err != nil {
		t.Fatal(err)
	}
	d := reps[0].DataTypes[0]
	if d.Name() != "long[]" || d.Samples != 2*7870 {
		t.Errorf("merged data type %+v", d)
	}
	if reps[0].Stats.Named != 2*a.Stats.Named || reps[0].Stats.TypeUnknown != 186 {
		t.Errorf("merged named %d, type unknown %d", reps[0].Stats.Named, reps[0].Stats.TypeUnknown)
	}
	var left uint64
	for _, x := range reps[0].Remainder {
		if x.DataType == "java.util.TreeMap$Entry.left" {
			left += x.Samples
		}
	}
	if left != 1200 {
		t.Errorf("merged typed remainder %d, want 1200", left)
	}
}
