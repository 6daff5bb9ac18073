package vmstructs

import (
	"errors"
	"testing"
)

// FuzzRead reads tables from garbled memory: the input is the memory at
// imgBase, the symbols' words first (as image lays them out), and nothing
// else is mapped. Read must fail with ErrMalformed or return a table
// within its caps, and never panic.
func FuzzRead(f *testing.F) {
	f.Add(smallTables().image().buf)
	f.Add(tables{}.image().buf)
	// A slice of JDK 17's real table, laid out afresh.
	if fx, err := loadFixtureFile("jdk17"); err == nil {
		if tab, err := Read(fx, fx.symbols()); err == nil {
			var tb tables
			tb.fields = tab.Fields()[:40]
			tb.types = tab.Types()[:40]
			for n, v := range tab.IntConsts() {
				if len(tb.ints) < 20 {
					tb.ints = append(tb.ints, named[int32]{n, v})
				}
			}
			for n, v := range tab.LongConsts() {
				if len(tb.longs) < 20 {
					tb.longs = append(tb.longs, named[uint64]{n, v})
				}
			}
			tb.release = tab.Release
			f.Add(tb.image().buf)
		}
	}
	syms := imageSymbols()
	f.Fuzz(func(t *testing.T, data []byte) {
		if min := 8 * len(SymbolNames); len(data) < min {
			data = append(data, make([]byte, min-len(data))...)
		}
		tab, err := Read(&fixture{Segments: []segment{{imgBase, data}}}, syms)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error without ErrMalformed: %v", err)
			}
			return
		}
		if tab.Stats.Bytes > MaxRead {
			t.Fatalf("read %d bytes", tab.Stats.Bytes)
		}
		if n := len(tab.Fields()) + len(tab.Types()) + len(tab.IntConsts()) + len(tab.LongConsts()); n > 4*MaxEntries {
			t.Fatalf("%d entries", n)
		}
		for _, fl := range tab.Fields() {
			if len(fl.Type) >= MaxString || len(fl.Name) >= MaxString || len(fl.TypeString) >= MaxString {
				t.Fatalf("a name over MaxString: %q", fl.Name)
			}
			if g, ok := tab.Field(fl.Type, fl.Name); !ok || g != fl {
				t.Fatalf("Field(%q, %q) = %+v %v, want %+v", fl.Type, fl.Name, g, ok, fl)
			}
		}
		_ = tab.Major()
	})
}
