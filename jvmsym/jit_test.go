package jvmsym

import (
	"fmt"
	"strings"
	"testing"
)

// hitString renders a lookup compactly: "stub NAME", "m<root> [m<id>@bci ...]"
// with frames innermost first, or "miss".
func hitString(h CodeHit, ok bool) string {
	switch {
	case !ok:
		return "miss"
	case h.Stub != "":
		return "stub " + h.Stub
	}
	var fs []string
	for _, f := range h.Frames {
		fs = append(fs, fmt.Sprintf("m%d@%d", f.Method, f.BCI))
	}
	return fmt.Sprintf("m%d [%s]", h.Method, strings.Join(fs, " "))
}

type pcWant struct {
	pc   uint64
	want string
}

func checkLookups(t *testing.T, c *CodeTable, cases []pcWant) {
	t.Helper()
	for _, tc := range cases {
		if got := hitString(c.Lookup(tc.pc)); got != tc.want {
			t.Errorf("Lookup(%#x) = %s, want %s", tc.pc, got, tc.want)
		}
	}
}

func TestCodeTableLookup(t *testing.T) {
	c := NewCodeTable()
	pcs := []PCFrames{
		// Unsorted on purpose; 0x1020 inlines 3 into 2 into the root 1.
		{PC: 0x1030, Frames: []RawFrame{{2, 7}, {1, 12}}},
		{PC: 0x1010, Frames: []RawFrame{{1, 3}}},
		{PC: 0x1020, Frames: []RawFrame{{3, 0}, {2, 5}, {1, 9}}},
		{PC: 0x2000, Frames: []RawFrame{{9, 9}}}, // outside the blob: ignored
	}
	c.AddCode(0x1000, 0x40, 1, pcs)
	pcs[1].Frames[0].BCI = 99 // the table must hold its own copy
	c.AddCode(0x1100, 0x20, 5, nil)
	c.AddStub(0x2000, 0x100, "Interpreter")

	checkLookups(t, c, []pcWant{
		{0x0fff, "miss"},
		{0x1000, "m1 [m1@3]"}, // pc == start is inside
		{0x1010, "m1 [m1@3]"}, // a descriptor's own pc
		{0x1011, "m1 [m3@0 m2@5 m1@9]"},
		{0x1020, "m1 [m3@0 m2@5 m1@9]"},
		{0x1021, "m1 [m2@7 m1@12]"},
		{0x1030, "m1 [m2@7 m1@12]"},
		{0x1031, "m1 [m1@-1]"}, // past the last descriptor
		{0x103f, "m1 [m1@-1]"},
		{0x1040, "miss"}, // start+size is outside
		{0x1100, "m5 [m5@-1]"},
		{0x111f, "m5 [m5@-1]"},
		{0x1120, "miss"},
		{0x2000, "stub Interpreter"},
		{0x20ff, "stub Interpreter"},
		{0x2100, "miss"},
	})
	if h, _ := c.Lookup(0x1025); h.Start != 0x1000 || h.Size != 0x40 {
		t.Errorf("Lookup(0x1025) blob = %#x+%#x, want 0x1000+0x40", h.Start, h.Size)
	}
}

func TestCodeTableReplaceAndUnload(t *testing.T) {
	c := NewCodeTable()
	c.AddCode(0x1000, 0x100, 1, nil)
	c.AddCode(0x1100, 0x100, 2, nil)
	c.AddCode(0x1200, 0x100, 3, nil)
	// Reuses the tail of 1 and the head of 2 without their unloads seen:
	// both are gone entirely, not just where they overlap.
	c.AddCode(0x10c0, 0x80, 4, []PCFrames{{PC: 0x10d0, Frames: []RawFrame{{4, 1}}}})
	checkLookups(t, c, []pcWant{
		{0x1000, "miss"},
		{0x10bf, "miss"},
		{0x10c0, "m4 [m4@1]"},
		{0x113f, "m4 [m4@-1]"},
		{0x1140, "miss"},
		{0x1200, "m3 [m3@-1]"},
	})

	c.RemoveCode(0x1200)
	c.RemoveCode(0x1234) // not a blob start: nothing happens
	checkLookups(t, c, []pcWant{{0x1200, "miss"}, {0x10c0, "m4 [m4@1]"}})

	// A method blob in an old stub replaces it, too.
	c.AddStub(0x3000, 0x100, "BufferBlob")
	c.AddCode(0x3080, 0x10, 6, nil)
	checkLookups(t, c, []pcWant{{0x3000, "miss"}, {0x3080, "m6 [m6@-1]"}})

	c.RemoveCode(0x10c0)
	if c.Len() != 1 {
		t.Errorf("Len = %d after unloads, want 1", c.Len())
	}
}

func TestCodeTableNestedStubs(t *testing.T) {
	c := NewCodeTable()
	c.AddStub(0x1000, 0x100, "StubRoutines (1)")
	c.AddStub(0x1040, 0x20, "StubRoutines::call_stub")
	c.AddStub(0x1000, 0x10, "StubRoutines::catch_exception")
	checkLookups(t, c, []pcWant{
		{0x1000, "stub StubRoutines::catch_exception"},
		{0x1010, "stub StubRoutines (1)"},
		{0x1040, "stub StubRoutines::call_stub"},
		{0x105f, "stub StubRoutines::call_stub"},
		{0x1060, "stub StubRoutines (1)"},
		{0x10ff, "stub StubRoutines (1)"},
		{0x1100, "miss"},
	})
}

func TestCodeTableEdgeCases(t *testing.T) {
	c := NewCodeTable()
	c.AddCode(0x1000, 0, 1, nil)                  // empty
	c.AddStub(^uint64(0)-4, 0x10, "wraps around") // overflows
	if c.Len() != 0 {
		t.Errorf("Len = %d, want 0", c.Len())
	}
	c.AddStub(0x2000, 0x10, "")
	checkLookups(t, c, []pcWant{{0x2000, "stub stub"}})
	c.AddCode(0x1000, 0x10, 1, []PCFrames{{PC: 0x1008}, {PC: 0x1004, Frames: []RawFrame{{2, 4}}}, {PC: 0x1004, Frames: []RawFrame{{3, 3}}}})
	checkLookups(t, c, []pcWant{
		{0x1004, "m1 [m2@4]"},  // of duplicates the first one reported
		{0x1006, "m1 [m1@-1]"}, // a descriptor without frames
	})
}

func TestCodeTableLookupAllocs(t *testing.T) {
	c := NewCodeTable()
	for i := range uint64(1000) {
		c.AddCode(0x10000+i*0x100, 0x80, i, []PCFrames{{PC: 0x10000 + i*0x100 + 0x40, Frames: []RawFrame{{i, 1}}}})
	}
	var sink CodeHit
	if n := testing.AllocsPerRun(100, func() { sink, _ = c.Lookup(0x10000 + 500*0x100 + 0x20) }); n != 0 {
		t.Errorf("Lookup allocates %v times", n)
	}
	if sink.Method != 500 || sink.Frames[0].BCI != 1 {
		t.Errorf("Lookup = %+v", sink)
	}
}

func BenchmarkCodeTableLookup(b *testing.B) {
	c := NewCodeTable()
	for i := range uint64(50000) {
		c.AddCode(0x10000+i*0x400, 0x300, i, []PCFrames{{PC: 0x10000 + i*0x400 + 0x100, Frames: []RawFrame{{i, 1}}}, {PC: 0x10000 + i*0x400 + 0x200, Frames: []RawFrame{{i, 2}}}})
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		c.Lookup(0x10000 + uint64(i%50000)*0x400 + 0x180)
	}
}

func TestResolveAll(t *testing.T) {
	tab := NewTable()
	tab.Add(1, Method{ClassSig: "Ljava/util/HashMap;", Name: "putVal", Lines: []LineEntry{{0, 620}, {8, 624}}})
	tab.Add(2, Method{ClassSig: "Ljava/util/HashMap;", Name: "newNode", Lines: []LineEntry{{0, 1799}}})
	c := NewCodeTable()
	c.AddCode(0x1000, 0x100, 1, []PCFrames{{PC: 0x1010, Frames: []RawFrame{{2, 0}, {1, 9}}}})
	h, _ := c.Lookup(0x100c)
	var got []string
	for _, f := range tab.ResolveAll(h.Frames) {
		got = append(got, f.String())
	}
	want := "java.util.HashMap.newNode:1799 java.util.HashMap.putVal:624"
	if s := strings.Join(got, " "); s != want {
		t.Errorf("ResolveAll = %s, want %s", s, want)
	}
	buf := tab.AppendResolved(make([]Frame, 0, 4), []RawFrame{{7, -1}})
	if len(buf) != 1 || buf[0].String() != "[unknown].0x7" {
		t.Errorf("AppendResolved = %v", buf)
	}
}
