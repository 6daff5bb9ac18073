package vmlayout

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
)

// fixture is a JVM's tables as vmstructs recorded them.
func fixture(t *testing.T, jdk string) *vmstructs.Table {
	t.Helper()
	tab, err := vmstructs.ReadFixture(filepath.Join("..", "vmstructs", "testdata", jdk+".json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// mem is a target's memory made of segments; it counts its reads.
type mem struct {
	segs  map[uint64][]byte
	reads int
}

func (m *mem) put(addr uint64, b []byte) {
	if m.segs == nil {
		m.segs = make(map[uint64][]byte)
	}
	m.segs[addr] = b
}

func (m *mem) put64(addr, v uint64) { m.put(addr, binary.LittleEndian.AppendUint64(nil, v)) }
func (m *mem) put32(addr uint64, v uint32) {
	m.put(addr, binary.LittleEndian.AppendUint32(nil, v))
}

// ReadPrefix reads from the one segment holding addr, short at its end.
func (m *mem) ReadPrefix(p []byte, addr uint64) (int, error) {
	m.reads++
	for a, b := range m.segs {
		if addr >= a && addr < a+uint64(len(b)) {
			return copy(p, b[addr-a:]), nil
		}
	}
	return 0, nil
}

// symbol is a Symbol of text laid out as l says.
func symbol(l *Layout, text string) []byte {
	b := make([]byte, l.Symbol.Body+uint64(len(text)))
	binary.LittleEndian.PutUint16(b[l.Symbol.Length:], uint16(len(text)))
	copy(b[l.Symbol.Body:], text)
	return b
}

// The offsets are the ones each JDK's tables give (jdk17.txt, jdk25.txt),
// the Symbol's body found under either of its names.
func TestNew(t *testing.T) {
	for _, jdk := range []string{"jdk17", "jdk25"} {
		t.Run(jdk, func(t *testing.T) {
			tab := fixture(t, jdk)
			l, err := New(tab)
			if err != nil {
				t.Fatal(err)
			}
			want := Layout{Klass: Klass{Name: 24}, Symbol: Symbol{Length: 4, Body: 6}}
			if *l != want {
				t.Errorf("layout %+v, want %+v", *l, want)
			}
			for _, name := range symbolBody {
				if f, ok := tab.FirstField(name); !ok || f.Offset != l.Symbol.Body {
					t.Errorf("%s at %d (found %v), layout says %d", name, f.Offset, ok, l.Symbol.Body)
				}
			}
		})
	}
}

// ReadEncodings finds each JDK's statics under its own names: JDK 17's
// CompressedOops::_narrow_oop._base, JDK 25's CompressedOops::_base.
func TestReadEncodings(t *testing.T) {
	for _, c := range []struct {
		jdk                              string
		oopBase, oopShift, kBase, kShift string
	}{
		{"jdk17", "CompressedOops::_narrow_oop._base", "CompressedOops::_narrow_oop._shift",
			"CompressedKlassPointers::_narrow_klass._base", "CompressedKlassPointers::_narrow_klass._shift"},
		{"jdk25", "CompressedOops::_base", "CompressedOops::_shift", "CompressedKlassPointers::_base", "CompressedKlassPointers::_shift"},
	} {
		t.Run(c.jdk, func(t *testing.T) {
			tab := fixture(t, c.jdk)
			static := func(name string) uint64 {
				f, ok := tab.FirstField(name)
				if !ok || !f.Static || f.Address == 0 {
					t.Fatalf("%s: no static %s", c.jdk, name)
				}
				return f.Address
			}
			m := &mem{}
			m.put64(static(c.oopBase), 0x7f00_0000_0000)
			m.put32(static(c.oopShift), 3)
			m.put64(static(c.kBase), 0x8_0000_0000)
			m.put32(static(c.kShift), 0xffff_ffff) // -1, as JDK 25 leaves it unused
			e, err := ReadEncodings(tab, m)
			if err != nil {
				t.Fatal(err)
			}
			want := Encodings{OopBase: 0x7f00_0000_0000, OopShift: 3, KlassBase: 0x8_0000_0000, KlassShift: -1}
			if e != want {
				t.Errorf("encodings %+v, want %+v", e, want)
			}
			// Without compressed class pointers the klass shift is not read.
			g, err := e.Geometry(tab, true, false, false)
			if err != nil {
				t.Fatal(err)
			}
			if g.OopBase != 0x7f00_0000_0000 || g.OopShift != 3 || g.KlassBase != 0 || g.KlassShift != 0 {
				t.Errorf("geometry %+v", g)
			}
			// With them, it is out of range.
			if _, err := e.Geometry(tab, true, true, false); !errors.Is(err, ErrUnsupported) {
				t.Errorf("klass shift -1 in use: %v, want ErrUnsupported", err)
			}
			// A static the memory lacks is an error, not a zero.
			delete(m.segs, static(c.kBase))
			if _, err := ReadEncodings(tab, m); err == nil || !strings.Contains(err.Error(), "narrow klass base") {
				t.Errorf("unreadable klass base: %v", err)
			}
		})
	}
}

// Compact headers put the narrow klass in the mark word from
// markWord::klass_shift (42 in JDK 25) up; JDK 17 has no such constant,
// and no compact headers.
func TestCompactHeaders(t *testing.T) {
	e := Encodings{OopBase: 0, OopShift: 3, KlassBase: 0x7f00_0000_0000, KlassShift: 10}
	g, err := e.Geometry(fixture(t, "jdk25"), true, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if g.KlassMarkShift != 42 || g.HeaderBytes() != 8 || g.OopBytes() != 4 {
		t.Fatalf("geometry %+v, header %d bytes", g, g.HeaderBytes())
	}
	const narrow = 0x1234
	hdr := make([]byte, 16)
	binary.LittleEndian.PutUint64(hdr, narrow<<42|0x5<<3|1) // an unlocked mark with age bits
	if k := g.DecodeKlass(hdr); k != 0x7f00_0000_0000+narrow<<10 {
		t.Errorf("klass %#x from a compact header", k)
	}
	binary.LittleEndian.PutUint64(hdr, 0x7f12_3456_7000|3) // forwarded
	if k := g.DecodeKlass(hdr); k != 0 {
		t.Errorf("klass %#x from a forwarded header", k)
	}
	if _, err := e.Geometry(fixture(t, "jdk17"), true, true, true); !errors.Is(err, ErrUnsupported) {
		t.Errorf("JDK 17 with compact headers: %v, want ErrUnsupported", err)
	}
	if _, err := e.Geometry(fixture(t, "jdk25"), true, false, true); !errors.Is(err, ErrUnsupported) {
		t.Errorf("compact headers without compressed class pointers: %v, want ErrUnsupported", err)
	}
}

// The header's size and klass word for each combination of encodings.
func TestGeometryDecode(t *testing.T) {
	hdr := make([]byte, 16)
	binary.LittleEndian.PutUint64(hdr, 1)
	binary.LittleEndian.PutUint64(hdr[8:], 0x0000_0abc_0000_0100)
	narrow := Geometry{CompressedOops: true, OopBase: 0x8_0000_0000, OopShift: 3, CompressedClassPointers: true, KlassBase: 0x7f00_0000_0000, KlassShift: 3}
	if k := narrow.DecodeKlass(hdr); k != 0x7f00_0000_0000+0x100<<3 {
		t.Errorf("narrow klass %#x", k)
	}
	if a := narrow.DecodeOop(0x10); a != 0x8_0000_0000+0x80 {
		t.Errorf("narrow oop %#x", a)
	}
	if narrow.DecodeOop(0) != 0 || narrow.HeaderBytes() != 12 {
		t.Errorf("null oop %#x, header %d", narrow.DecodeOop(0), narrow.HeaderBytes())
	}
	full := Geometry{}
	if k := full.DecodeKlass(hdr); k != 0x0000_0abc_0000_0100 {
		t.Errorf("full klass %#x", k)
	}
	if full.DecodeOop(0x7f00_0000_1230) != 0x7f00_0000_1230 || full.HeaderBytes() != 16 || full.OopBytes() != 8 {
		t.Errorf("full geometry: oop %#x, header %d", full.DecodeOop(0x7f00_0000_1230), full.HeaderBytes())
	}
}

// ReadSymbol reads a short name in one read, a long one in two and only
// to its limit, and says the length the Symbol has.
func TestReadSymbol(t *testing.T) {
	for _, jdk := range []string{"jdk17", "jdk25"} {
		t.Run(jdk, func(t *testing.T) {
			l, err := New(fixture(t, jdk))
			if err != nil {
				t.Fatal(err)
			}
			m := &mem{}
			long := strings.Repeat("x", 60000)
			m.put(0x10000, symbol(l, "java/util/HashMap$Node"))
			m.put(0x40000, symbol(l, long))
			m.put(0x80000, symbol(l, long)[:l.Symbol.Body+100]) // memory ends in its text

			text, n, err := l.ReadSymbol(m, 0x10000, 1024, 96)
			if err != nil || string(text) != "java/util/HashMap$Node" || n != len(text) || m.reads != 1 {
				t.Errorf("short name: %q, length %d, %v, %d reads", text, n, err, m.reads)
			}
			m.reads = 0
			text, n, err = l.ReadSymbol(m, 0x40000, 1024, 96)
			if err != nil || !bytes.Equal(text, []byte(long[:1024])) || n != 60000 || m.reads != 2 {
				t.Errorf("long name: %d bytes, length %d, %v, %d reads", len(text), n, err, m.reads)
			}
			// Read without look-ahead, as the heap walk does: the header,
			// then the text.
			m.reads = 0
			text, n, err = l.ReadSymbol(m, 0x10000, 1025, 0)
			if err != nil || string(text) != "java/util/HashMap$Node" || n != len(text) || m.reads != 2 {
				t.Errorf("short name without look-ahead: %q, length %d, %v, %d reads", text, n, err, m.reads)
			}
			if _, _, err := l.ReadSymbol(m, 0x80000, 1024, 96); !errors.Is(err, ErrUnreadable) {
				t.Errorf("text past the memory's end: %v, want ErrUnreadable", err)
			}
			if _, _, err := l.ReadSymbol(m, 0x90000, 1024, 96); !errors.Is(err, ErrUnreadable) {
				t.Errorf("no memory: %v, want ErrUnreadable", err)
			}

			// A Klass names itself by its Symbol* at Klass::_name.
			const klass = 0x7f00_1000_0000
			m.put64(klass+l.Klass.Name, 0x10000)
			text, _, err = l.ReadKlassName(m, klass, 1024, 96)
			if err != nil || string(text) != "java/util/HashMap$Node" {
				t.Errorf("klass name %q, %v", text, err)
			}
			buf := make([]byte, l.Klass.Name+8)
			binary.LittleEndian.PutUint64(buf[l.Klass.Name:], 0x10000)
			if p := l.KlassName(buf); p != 0x10000 {
				t.Errorf("Klass::_name in a read Klass: %#x", p)
			}
			if _, _, err := l.ReadKlassName(m, klass+0x1000, 1024, 96); !errors.Is(err, ErrUnreadable) {
				t.Errorf("unreadable Klass: %v, want ErrUnreadable", err)
			}
		})
	}
}
