package main

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// testdata/script.txt is hand-written in the format of
// perf script -F comm,pid,tid,ip,sym,dso: one sample of each class, one
// unclassified and one of another process.
func TestClasses(t *testing.T) {
	f, err := os.Open("testdata/script.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms := &symtab{addr: []uint64{0x5000, 0x6000}, name: []string{"sampled_alloc", "on_compiled_load"}}
	res, err := run(f, syms)
	if err != nil {
		t.Fatal(err)
	}
	if res.pid != 4100 || res.total != 9 {
		t.Fatalf("pid %d with %d samples, want 4100 with 9", res.pid, res.total)
	}
	want := map[string]int{
		"JFR: allocation samples":                   1,
		"JFR: thread JFR Thread Samp":               1,
		"JFR: start-up":                             1,
		"djx: agent sampled_alloc":                  1,
		"djx: HotSpot's CompiledMethodLoad records": 1,
		"djx: agent on_compiled_load":               1,
		"djx: writer thread":                        1,
		"djx: census heap walk":                     1,
	}
	if !reflect.DeepEqual(res.classes, want) {
		t.Fatalf("classes %v, want %v", res.classes, want)
	}
	var b strings.Builder
	res.write(&b)
	for _, line := range []string{"5  55.56%  all djx", "2  22.22%  all JFR", "1  11.11%  all JFR start-up"} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("output lacks %q:\n%s", line, b.String())
		}
	}
}

func TestNoSamples(t *testing.T) {
	if _, err := run(strings.NewReader("not perf output\n"), nil); err == nil || !strings.Contains(err.Error(), "perf record -a -g") {
		t.Fatalf("err = %v, want one that says how to record", err)
	}
}
