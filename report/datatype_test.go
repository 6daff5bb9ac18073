package report

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// typedSample is a report of small objects (a TreeMap's entries) with data
// types, an instance object's fields and a remainder named by regions.
func typedSample() *Report {
	r := &Report{
		PID: 7, JVM: "OpenJDK 64-Bit Server VM 17.0.15", Mode: "launch", Event: "decode",
		DurationSec: 12, AllocInterval: 256, MinSize: 1024,
		Objects: []Object{
			{Type: "Lookup$Table", Site: "Lookup.<init>:9", AllocPath: []string{"Lookup.<init>:9", "Lookup.main:30"},
				Objects: 1, Bytes: 4096, EstObjects: 1, EstBytes: 4096, Samples: 100, EstSamples: 100,
				Fields:   []FieldShare{{Field: "size", Samples: 10}, {Field: "root", Samples: 60}, {Field: "cache", Samples: 30}},
				Accesses: []Access{{Path: []string{"Lookup.find:20"}, Samples: 100}}},
		},
		DataTypes: []DataType{
			{Type: "java.lang.Long", Field: "value", Samples: 300,
				Accesses: []Access{{Path: []string{"java.util.TreeMap.getEntry:350", "Lookup.find:21"}, Samples: 300}}},
			{Type: "java.util.TreeMap$Entry", Field: "left", Samples: 500,
				Accesses: []Access{
					{Path: []string{"java.util.TreeMap.getEntry:355", "Lookup.find:21"}, Samples: 380},
					{Path: []string{"java.util.TreeMap.getEntry:356", "Lookup.find:21"}, Samples: 120},
				}},
			{Type: "java.util.TreeMap$Entry", Field: "key", Samples: 300},
			{Type: "long[]", Field: "", Samples: 50},
			{Type: "Lookup$Table", Field: "root", Samples: 60},
		},
		Stats: Stats{
			SampleStats: SampleStats{Samples: 2000, WithAddress: 1800, InHeap: 1250, Attributed: 100},
			NamingStats: NamingStats{TypeUnknown: 40, HeapKnown: true},
		},
		Remainder: []Access{
			{Where: WhereUntracked, DataType: "java.util.TreeMap$Entry.left", Path: []string{"java.util.TreeMap.getEntry:355", "Lookup.find:21"}, Samples: 500},
			{Where: WhereUntracked, DataType: "java.util.TreeMap$Entry.key", Path: []string{"java.util.TreeMap.getEntry:355", "Lookup.find:21"}, Samples: 300},
			{Where: WhereUntracked, DataType: "java.lang.Long.value", Path: []string{"java.util.TreeMap.getEntry:350", "Lookup.find:21"}, Samples: 300},
			{Where: WhereUntracked, DataType: "long[]", Path: []string{"Lookup.sum:40"}, Samples: 50},
			{Where: WhereUntracked, Path: []string{"Lookup.find:21"}, Samples: 40},
			{Where: "thread stack", Path: []string{"Lookup.find:22"}, Samples: 300},
			{Where: "mapped file /data/idx/_0.dvd", Path: []string{"Lookup.load:50"}, Samples: 60},
			{Where: WhereUnknown, Path: []string{"libc.so.6`memcpy"}, Samples: 150},
			{Where: WhereNoAddress, Path: []string{"Lookup.main:31"}, Samples: 200},
		},
	}
	r.Finish()
	return r
}

func TestDataTypesOrderSharesAndNamed(t *testing.T) {
	r := typedSample()
	var got []string
	for _, d := range r.DataTypes {
		got = append(got, d.Name())
	}
	// By samples, ties by type then field.
	want := []string{"java.util.TreeMap$Entry.left", "java.lang.Long.value", "java.util.TreeMap$Entry.key", "Lookup$Table.root", "long[]"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("order %q, want %q", got, want)
	}
	if s := r.DataTypes[0].Share; s != 500.0/1250 {
		t.Errorf("share %v, want of in-heap samples %v", s, 500.0/1250)
	}
	if s := r.DataTypes[0].Accesses[0].Share; s != 380.0/500 {
		t.Errorf("access share %v, want of the data type's samples", s)
	}
	fs := r.Objects[0].Fields
	if fs[0].Field != "root" || fs[0].Share != 0.6 || fs[2].Field != "size" {
		t.Errorf("fields %+v, want root (60%%) first, size last", fs)
	}
	// Named: the object's 100, the typed remainder (500+300+300+50), the
	// thread stack 300 and the mapped file 60; not the untyped heap
	// samples, "unknown" or no address.
	if r.Stats.Named != 1610 {
		t.Errorf("named %d, want 1610", r.Stats.Named)
	}
	if s := r.Stats.NamedShare(); s != 1610.0/1800 {
		t.Errorf("named share %v", s)
	}
	// A count the join set stays.
	r.Stats.Named = 1700
	r.Finish()
	if r.Stats.Named != 1700 {
		t.Errorf("Finish replaced the join's named count: %d", r.Stats.Named)
	}
}

func TestTableDataTypesAndRegions(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, typedSample(), TableOptions{Top: 20, AccessTop: 1, Depth: 4}); err != nil {
		t.Fatal(err)
	}
	golden(t, "table_types.golden", b.Bytes())
	out := b.String()
	for _, want := range []string{
		"data types (share of in-heap samples; named 89.4% of samples with an address):",
		"│ 5 │ long[]                  │ []    │      50 │  4.0% │",
		"#1 java.util.TreeMap$Entry.left\n    76.0%    380  java.util.TreeMap.getEntry:355 <- Lookup.find:21\n  ... 1 more paths\n",
		"  fields: root 60.0%, cache 30.0%, size 10.0%\n",
		"  heap (untracked object): 1190 samples (59.5%)\n      25.0%    500  [java.util.TreeMap$Entry.left] java.util.TreeMap.getEntry:355 <- Lookup.find:21\n    ... 4 more paths\n",
		"  mapped file /data/idx/_0.dvd: 60 samples (3.0%)\n",
		"named 1610 (89.4% of samples with an address: by an object, a data type or a region), in heap of unknown type 40\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Regions by samples: heap, thread stack, no data address, unknown, the file.
	order := []string{"  heap (untracked object):", "  thread stack:", "  no data address:", "  unknown:", "  mapped file"}
	at := 0
	for _, s := range order {
		i := strings.Index(out[at:], s)
		if i < 0 {
			t.Fatalf("region %q missing or out of order:\n%s", s, out)
		}
		at += i
	}
	// --top cuts data types and regions.
	b.Reset()
	WriteTable(&b, typedSample(), TableOptions{Top: 2, AccessTop: 1})
	if !strings.Contains(b.String(), "3 more data types (--format json lists them)") || !strings.Contains(b.String(), "  ... 3 more regions, 410 samples\n") {
		t.Errorf("--top 2:\n%s", b.String())
	}
}

func TestMergeDataTypesFieldsAndNamed(t *testing.T) {
	a, b := typedSample(), typedSample()
	b.PID = 8
	b.DataTypes = append(b.DataTypes, DataType{Type: "java.util.HashMap$Node", Field: "next", Samples: 5})
	b.Objects[0].Fields = append(b.Objects[0].Fields, FieldShare{Field: "modCount", Samples: 0})
	b.Finish()
	old := sample() // a report from before data types: no named count
	old.Stats.Named = 0
	m := Merge(a, b, old)
	if len(m.DataTypes) != 6 {
		t.Fatalf("data types %d, want 6: %+v", len(m.DataTypes), m.DataTypes)
	}
	d := m.DataTypes[0]
	if d.Name() != "java.util.TreeMap$Entry.left" || d.Samples != 1000 || len(d.Accesses) != 2 || d.Accesses[0].Samples != 760 {
		t.Errorf("merged %+v", d)
	}
	inHeap := a.Stats.InHeap + b.Stats.InHeap + old.Stats.InHeap
	if d.Share != 1000/float64(inHeap) {
		t.Errorf("merged share %v, want of the summed in-heap samples", d.Share)
	}
	var tbl *Object
	for i := range m.Objects {
		if m.Objects[i].Type == "Lookup$Table" {
			tbl = &m.Objects[i]
		}
	}
	if tbl == nil || len(tbl.Fields) != 4 || tbl.Fields[0] != (FieldShare{Field: "root", Samples: 120, Share: 0.6}) {
		t.Errorf("merged fields %+v", tbl)
	}
	if m.Stats.TypeUnknown != 80 {
		t.Errorf("type unknown %d, want 80", m.Stats.TypeUnknown)
	}
	// 1610 each, and the old report's attributed samples.
	if want := 2*1610 + old.Stats.Attributed; m.Stats.Named != want {
		t.Errorf("named %d, want %d", m.Stats.Named, want)
	}
	// The remainder keeps the data type in its key: the two typed paths
	// at getEntry:355 stay apart, each doubled.
	var left, key uint64
	for _, x := range m.Remainder {
		switch x.DataType {
		case "java.util.TreeMap$Entry.left":
			left += x.Samples
		case "java.util.TreeMap$Entry.key":
			key += x.Samples
		}
	}
	if left != 1000 || key != 600 {
		t.Errorf("typed remainder left %d key %d", left, key)
	}
	// Inputs unchanged, and one report merges into an equal copy.
	if !reflect.DeepEqual(a, typedSample()) {
		t.Error("Merge changed its input")
	}
	if one := Merge(typedSample()); !reflect.DeepEqual(one.DataTypes, a.DataTypes) || !reflect.DeepEqual(one.Objects, a.Objects) || !reflect.DeepEqual(one.Stats, a.Stats) {
		t.Error("one report does not merge into an equal copy")
	}
}

func TestMergeAccessesKeepsDataType(t *testing.T) {
	as := []Access{
		{Where: WhereUntracked, DataType: "a.B.x", Path: []string{"f:1", "g:2"}, Samples: 3},
		{Where: WhereUntracked, DataType: "a.B.y", Path: []string{"f:1", "g:2"}, Samples: 4},
		{Where: WhereUntracked, DataType: "a.B.x", Path: []string{"f:1", "h:3"}, Samples: 5},
	}
	m := MergeAccesses(as, 1, 12)
	if len(m) != 2 || m[0].DataType != "a.B.x" || m[0].Samples != 8 || m[1].DataType != "a.B.y" {
		t.Errorf("merged %+v", m)
	}
}

func TestOldJSONHasNoDataTypes(t *testing.T) {
	// A report written before data types: it reads, and they are empty.
	var b bytes.Buffer
	WriteJSON(&b, sample(), 0)
	js := strings.Replace(b.String(), `"named": 8000,`, "", 1)
	var r Report
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	r.Finish()
	if r.DataTypes != nil || r.Stats.Named != r.Stats.Attributed || r.namesMore() {
		t.Errorf("old report: data types %v, named %d", r.DataTypes, r.Stats.Named)
	}
	var tb bytes.Buffer
	WriteTable(&tb, &r, DefaultTableOptions)
	if strings.Contains(tb.String(), "data types") || strings.Contains(tb.String(), "named ") {
		t.Errorf("old report's table speaks of data types:\n%s", tb.String())
	}
	// New JSON names the fields as documented.
	b.Reset()
	WriteJSON(&b, typedSample(), 0)
	var m struct {
		DataTypes []map[string]any `json:"data_types"`
		Objects   []map[string]any `json:"objects"`
		Remainder []map[string]any `json:"remainder"`
		Stats     map[string]any   `json:"stats"`
	}
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"type", "field", "samples", "share", "accesses"} {
		if _, ok := m.DataTypes[0][k]; !ok {
			t.Errorf("data type lacks %q", k)
		}
	}
	if _, ok := m.Objects[0]["fields"]; !ok {
		t.Error("object lacks fields")
	}
	if m.Remainder[0]["data_type"] != "java.util.TreeMap$Entry.left" {
		t.Errorf("remainder[0] %v", m.Remainder[0])
	}
	for _, k := range []string{"type_unknown", "named"} {
		if _, ok := m.Stats[k]; !ok {
			t.Errorf("stats lack %q", k)
		}
	}
}

func TestCollapsedTypeFrame(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCollapsed(&b, typedSample(), TableOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"[type] java.util.TreeMap$Entry.left;Lookup.find:21;java.util.TreeMap.getEntry:355 500\n",
		"[type] long[];Lookup.sum:40 50\n",
		"[not in a tracked object: heap (untracked object)];Lookup.find:21 40\n",
		"[not in a tracked object: thread stack];Lookup.find:22 300\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("collapsed lacks %q:\n%s", want, b.String())
		}
	}
}

func TestFocusDataTypes(t *testing.T) {
	f := Focus(typedSample(), regexp.MustCompile(`TreeMap\$Entry`))
	if len(f.DataTypes) != 2 || len(f.Objects) != 0 {
		t.Errorf("focus: %d data types, %d objects", len(f.DataTypes), len(f.Objects))
	}
}
