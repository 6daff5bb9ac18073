package jvmsym

import (
	"fmt"
	"testing"
)

// BenchmarkCodeLookup: the JIT code table's pc → compiled method and
// inlined frames lookup that every sample in compiled code pays, at 1k,
// 50k and 500k compiled methods (a large service has tens of thousands),
// 90% hits spread over the table.
func BenchmarkCodeLookup(b *testing.B) {
	for _, n := range []uint64{1_000, 50_000, 500_000} {
		b.Run(fmt.Sprintf("methods=%d", n), func(b *testing.B) {
			c := NewCodeTable()
			for i := range n {
				c.AddCode(0x10000+i*0x400, 0x300, i, []PCFrames{
					{PC: 0x10000 + i*0x400 + 0x100, Frames: []RawFrame{{i, 1}}},
					{PC: 0x10000 + i*0x400 + 0x200, Frames: []RawFrame{{i + 1, 7}, {i, 2}}},
				})
			}
			hits := 0
			b.ReportAllocs()
			for i := uint64(0); b.Loop(); i++ {
				k := (i * 2654435761) % n
				if _, ok := c.Lookup(0x10000 + k*0x400 + 0x180 + (i%10)*0x40); ok {
					hits++
				}
			}
			if hits == 0 {
				b.Fatal("no hits")
			}
		})
	}
}

// BenchmarkResolve: (method, bci) → Class.method:line, as the report does
// for every frame of every path.
func BenchmarkResolve(b *testing.B) {
	tab := NewTable()
	for i := range uint64(10_000) {
		lines := make([]LineEntry, 20)
		for k := range lines {
			lines[k] = LineEntry{Start: int64(k * 8), Line: int32(100 + k)}
		}
		tab.Add(i, Method{ClassSig: "Lcom/example/Service$Inner;", Name: "handle", Sig: "(I)V", Lines: lines})
	}
	b.ReportAllocs()
	for i := uint64(0); b.Loop(); i++ {
		tab.Resolve(i%10_000, int64(i%160))
	}
}
