package report

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestCollapsedGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCollapsed(&b, sample(), TableOptions{}); err != nil {
		t.Fatal(err)
	}
	golden(t, "collapsed.golden", b.Bytes())
	// Every line is root;...;leaf COUNT and the counts add up to the
	// attributed samples plus the remainder.
	var sum uint64
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		i := strings.LastIndexByte(line, ' ')
		n, err := strconv.ParseUint(line[i+1:], 10, 64)
		if i < 0 || err != nil {
			t.Fatalf("bad line %q", line)
		}
		sum += n
	}
	if sum != 8000+500 {
		t.Errorf("collapsed stacks hold %d samples, want 8500", sum)
	}
}

func TestCollapsedTopDepthAndEscapes(t *testing.T) {
	r := sample()
	r.Objects[0].Accesses = append(r.Objects[0].Accesses, Access{Path: []string{"weird;frame\nname"}, Samples: 1})
	r.Objects[0].Samples++
	var b bytes.Buffer
	if err := WriteCollapsed(&b, r, TableOptions{Top: 1, Depth: 1}); err != nil {
		t.Fatal(err)
	}
	want := `HotArrays.main:61;HotArrays.allocHot:12;[object] long[] @ HotArrays.allocHot:12;HotArrays.scanA:31 5400
HotArrays.main:61;HotArrays.allocHot:12;[object] long[] @ HotArrays.allocHot:12;HotArrays.scanB:40 1500
HotArrays.main:61;HotArrays.allocHot:12;[object] long[] @ HotArrays.allocHot:12;libjvm.so` + "`" + `Copy::conjoint_jlongs_atomic 100
HotArrays.main:61;HotArrays.allocHot:12;[object] long[] @ HotArrays.allocHot:12;weird:frame name 1
[not in a tracked object: outside the heap];HotArrays.run:48 300
[not in a tracked object: no data address];libjvm.so` + "`" + `SpinPause 200
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestFocus(t *testing.T) {
	r := sample()
	f := Focus(r, regexp.MustCompile(`^long\[\]$|allocCold`))
	if len(f.Objects) != 2 || f.Objects[0].Type != "long[]" || f.Objects[1].Site != "HotArrays.allocCold3:24" || f.Remainder != nil {
		t.Errorf("focus on type and site: %+v", f.Objects)
	}
	if len(r.Objects) != 3 || r.Remainder == nil {
		t.Error("Focus changed its input")
	}
	if f := Focus(r, regexp.MustCompile(`Foo\.bar`)); len(f.Objects) != 1 || f.Objects[0].Type != "byte[]" {
		t.Errorf("focus on site: %+v", f.Objects)
	}
	if f := Focus(r, regexp.MustCompile(`nothing`)); len(f.Objects) != 0 {
		t.Errorf("focus on nothing: %+v", f.Objects)
	}
}
