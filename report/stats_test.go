package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// fillDistinct sets every field of the struct v points to, embedded
// groups included, to a value no other field has, in declaration order:
// the golden JSON then shows each field's name, tag and place.
func fillDistinct(v reflect.Value, n *int) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if v.Type().Field(i).Anonymous && f.Kind() == reflect.Struct {
			fillDistinct(f, n)
			continue
		}
		*n++
		switch f.Kind() {
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(uint64(*n))
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f.SetInt(int64(*n))
		case reflect.Float32, reflect.Float64:
			f.SetFloat(float64(*n) + 0.5)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.String:
			f.SetString(fmt.Sprintf("s%d", *n))
		case reflect.Map:
			m := reflect.MakeMap(f.Type())
			m.SetMapIndex(reflect.ValueOf(fmt.Sprintf("k%d", *n)), reflect.ValueOf(uint64(*n)).Convert(f.Type().Elem()))
			f.Set(m)
		default:
			panic("fillDistinct: no value for " + f.Type().String())
		}
	}
}

// The statistics' JSON, every field set and every field zero, is what
// readers of djx-bpf's reports parse: names, order and omitempty must hold.
func TestStatsJSONGolden(t *testing.T) {
	var full Stats
	n := 0
	fillDistinct(reflect.ValueOf(&full).Elem(), &n)
	var b bytes.Buffer
	for _, s := range []*Stats{&full, {}} {
		out, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		b.Write(out)
		b.WriteByte('\n')
	}
	golden(t, "stats.golden.json", b.Bytes())
}

// Every field must say how it merges, by a rule its kind supports: a
// field added without one would merge by no rule at all.
func TestEveryStatDeclaresItsMerge(t *testing.T) {
	var check func(reflect.Type)
	check = func(st reflect.Type) {
		for i := 0; i < st.NumField(); i++ {
			f := st.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				check(f.Type)
				continue
			}
			d, s := reflect.New(f.Type).Elem(), reflect.New(f.Type).Elem()
			if err := mergeValue(d, s, f.Tag.Get("merge")); err != nil {
				t.Errorf("Stats.%s: %v", f.Name, err)
			}
		}
	}
	check(reflect.TypeFor[Stats]())
}

// Merged maxima are the largest of the runs, not their sum, whichever
// comes first; counters and summed times still add.
func TestMergeKeepsMaxima(t *testing.T) {
	a, b := &Report{PID: 1}, &Report{PID: 1}
	a.Stats.Samples, b.Stats.Samples = 100, 200
	a.Stats.CensusPauseMs, b.Stats.CensusPauseMs = 50, 60
	a.Stats.CensusPauseMaxMs, b.Stats.CensusPauseMaxMs = 30, 40
	a.Stats.LateMaxMs, b.Stats.LateMaxMs = 5, 7
	a.Stats.Late, b.Stats.Late = 2, 3
	a.Stats.CostAllocMs, b.Stats.CostAllocMs = 1.5, 2
	a.Stats.StackErrors = map[string]uint64{"GC active": 1}
	b.Stats.StackErrors = map[string]uint64{"GC active": 2, "thread without JNIEnv": 4}
	for _, m := range []*Report{Merge(a, b), Merge(b, a)} {
		st := &m.Stats
		if st.CensusPauseMaxMs != 40 || st.LateMaxMs != 7 {
			t.Errorf("maxima: census pause %v ms, late %v ms; want 40 and 7", st.CensusPauseMaxMs, st.LateMaxMs)
		}
		if st.Samples != 300 || st.CensusPauseMs != 110 || st.Late != 5 || st.CostAllocMs != 3.5 {
			t.Errorf("sums: samples %d, census pause %v ms, late %d, alloc cost %v ms; want 300, 110, 5, 3.5",
				st.Samples, st.CensusPauseMs, st.Late, st.CostAllocMs)
		}
		if st.StackErrors["GC active"] != 3 || st.StackErrors["thread without JNIEnv"] != 4 {
			t.Errorf("stack errors %v", st.StackErrors)
		}
	}
	if a.Stats.StackErrors["GC active"] != 1 || len(a.Stats.StackErrors) != 1 {
		t.Errorf("Merge changed its input: %v", a.Stats.StackErrors)
	}
}

// A merged guarantee holds only if every run gave it, a merged caveat if
// any run had it, and a setting comes from the first run that set it.
func TestMergeBoolsAndSettings(t *testing.T) {
	var a, b Stats
	a.HeapKnown, b.HeapKnown = true, false
	a.CensusPartial, b.CensusPartial = false, true
	a.CostShared, b.CostShared = true, false
	b.CensusHolders = "all"
	a.Merge(&b)
	if a.HeapKnown || !a.CensusPartial || !a.CostShared || a.CensusHolders != "all" {
		t.Errorf("heap known %v, census partial %v, cost shared %v, holders %q; want false, true, true, all",
			a.HeapKnown, a.CensusPartial, a.CostShared, a.CensusHolders)
	}
	c := Stats{CensusStats: CensusStats{CensusHolders: "off"}}
	c.Merge(&b)
	if c.CensusHolders != "off" {
		t.Errorf("holders %q, want the first run's off", c.CensusHolders)
	}
}
