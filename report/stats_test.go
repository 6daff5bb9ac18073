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
