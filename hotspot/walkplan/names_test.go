package walkplan

import (
	"testing"

	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// TestFieldOffsetOwners: the walk's FieldOffset knows a direct buffer's
// address and capacity and a native segment's min and length (inherited
// fields included, as the agent sends them), and nothing of other classes.
func TestFieldOffsetOwners(t *testing.T) {
	n := newFieldNames()
	n.add(&agentwire.Class{Klass: 1, Sig: "Ljava/nio/DirectByteBuffer;", Fields: []agentwire.Field{
		{Offset: 16, Name: "address", Sig: "J"}, {Offset: 24, Name: "capacity", Sig: "I"},
		{Offset: 32, Name: "att", Sig: "Ljava/lang/Object;"}}})
	n.add(&agentwire.Class{Klass: 2, Sig: "Ljdk/internal/foreign/MappedMemorySegmentImpl;", Fields: []agentwire.Field{
		{Offset: 16, Name: "length", Sig: "J"}, {Offset: 24, Name: "scope", Sig: "Ljdk/internal/foreign/MemorySessionImpl;"},
		{Offset: 32, Name: "min", Sig: "J"}}})
	n.add(&agentwire.Class{Klass: 3, Sig: "LApp;", Fields: []agentwire.Field{{Offset: 16, Name: "min", Sig: "J"}}})
	n.add(&agentwire.Class{Klass: 4, Sig: "Ljdk/internal/foreign/Odd;", Fields: []agentwire.Field{{Offset: 16, Name: "min", Sig: "I"}}})
	for _, c := range []struct {
		klass uint64
		name  string
		off   uint32
		ok    bool
	}{{1, "address", 16, true}, {1, "capacity", 24, true}, {1, "att", 32, true}, {1, "min", 0, false},
		{2, "min", 32, true}, {2, "length", 16, true}, {2, "scope", 0, false},
		{3, "min", 0, false}, {4, "min", 0, false}} {
		if off, ok := n.offset(c.klass, c.name); off != c.off || ok != c.ok {
			t.Errorf("offset(%d, %q) = %d, %v; want %d, %v", c.klass, c.name, off, ok, c.off, c.ok)
		}
	}
}
