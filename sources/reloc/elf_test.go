package reloc

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/djx-bpf/djx-bpf/bpf"
	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
)

var (
	jdk17Home = testenv.JDK17.Home
	jdk25Home = testenv.JDK25.Home
)

func openLibJVM(t *testing.T, home string) *elfsafe.File {
	t.Helper()
	path := filepath.Join(home, "lib", "server", "libjvm.so")
	f, err := elfsafe.OpenPath(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			t.Skipf("skipping: %s not installed", path)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestGOTSlotsLibJVM(t *testing.T) {
	for _, home := range []string{jdk17Home, jdk25Home} {
		t.Run(filepath.Base(home), func(t *testing.T) {
			f := openLibJVM(t, home)
			slots, err := gotSlots(f, copyImports)
			if err != nil {
				t.Fatal(err)
			}
			got := f.Section(".got")
			if got == nil {
				t.Fatal("no .got")
			}
			for _, imp := range copyImports {
				if len(slots[imp]) == 0 {
					t.Errorf("no GOT slot for %s", imp)
				}
				for _, s := range slots[imp] {
					if s < got.Addr || s+8 > got.Addr+got.Size {
						t.Errorf("%s slot %#x outside .got [%#x, %#x)", imp, s, got.Addr, got.Addr+got.Size)
					}
				}
				t.Logf("%s slots %#x", imp, slots[imp])
			}
			// Versioned names must not match unrelated imports.
			if s := slots["__memcpy_chk"]; len(s) != 0 {
				t.Errorf("unexpected __memcpy_chk slot")
			}
		})
	}
}

func TestUSDTLibJVM(t *testing.T) {
	// Site counts seen in the JDKs installed here; a different build may
	// differ, so only "at least one" is required.
	for _, home := range []string{jdk17Home, jdk25Home} {
		t.Run(filepath.Base(home), func(t *testing.T) {
			f := openLibJVM(t, home)
			begin, end, err := gcProbes(f)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("gc__begin sites %d, gc__end sites %d", len(begin), len(end))
			text := f.Section(".text")
			for _, p := range append(append([]Probe{}, begin...), end...) {
				if p.PC < text.Addr || p.PC >= text.Addr+text.Size {
					t.Errorf("%s at %#x outside .text", p.Name, p.PC)
				}
				if p.Semaphore != 0 {
					t.Errorf("%s has a semaphore %#x", p.Name, p.Semaphore)
				}
				// The uprobe goes on an instruction: HotSpot's SDT
				// sites are a nop (0x90) emitted by the macro.
				b := make([]byte, 1)
				if _, err := text.ReadAt(b, int64(p.PC-text.Addr)); err != nil {
					t.Fatal(err)
				}
				if b[0] != 0x90 {
					t.Errorf("%s at %#x: byte %#x, want nop", p.Name, p.PC, b[0])
				}
				off, _ := fileOffset(f, p.PC)
				if off != p.Offset {
					t.Errorf("%s offset %#x, want %#x", p.Name, p.Offset, off)
				}
				t.Logf("  %s pc %#x off %#x args %q", p.Name, p.PC, p.Offset, p.Args)
			}
		})
	}
}

func TestArgCookie(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"1@%dil", argReg | 14<<8 | 1<<16, true},
		{"-4@%eax 8@%rbx", argReg | 10<<8 | 4<<16, true},
		{"8@%r14", argReg | 1<<8 | 8<<16, true},
		{"1@$1", argConst | 1<<16 | 1<<32, true},
		{"-4@$-1", argConst | 4<<16 | 0xffffffff<<32, true},
		{"", argNone, false},
		{"8@-8(%rbp)", argNone, false},
		{"3@%rax", argNone, false},
		{"8@%xmm0", argNone, false},
	} {
		got, ok := argCookie(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("argCookie(%q) = %#x, %v; want %#x, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseMaps(t *testing.T) {
	data := []byte(`7f0000000000-7f0000250000 r--p 00000000 08:01 123 /usr/lib/jvm/x/lib/server/libjvm.so
7f0000251000-7f0000fa4000 r-xp 00251000 08:01 123 /usr/lib/jvm/x/lib/server/libjvm.so
7f1000000000-7f1000028000 r--p 00000000 08:01 77 /usr/lib/x86_64-linux-gnu/libc.so.6
7f1000028000-7f10001b0000 r-xp 00028000 08:01 77 /usr/lib/x86_64-linux-gnu/libc.so.6
7f2000000000-7f2000001000 rw-p 00000000 00:00 0 
7f3000000000-7f3000001000 r--p 00000000 08:01 78 /opt/with space/libjvm.so
`)
	ms, err := parseMaps(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 6 {
		t.Fatalf("%d mappings, want 6", len(ms))
	}
	if ms[5].path != "/opt/with space/libjvm.so" || ms[4].path != "" {
		t.Errorf("paths %q %q", ms[5].path, ms[4].path)
	}
	m, ok := findLib(ms, "libjvm.so")
	if !ok || m.start != 0x7f0000000000 {
		t.Errorf("findLib = %+v, %v", m, ok)
	}
	c, ok := containing(ms, 0x7f1000030000)
	if !ok || 0x7f1000030000-c.start+c.offset != 0x30000 {
		t.Errorf("containing = %+v, %v", c, ok)
	}
	if _, ok := containing(ms, 0x7f2000000010); ok {
		t.Error("anonymous mapping matched")
	}
}

// fakeMem serves reads from a map of address → 8-byte value.
type fakeMem map[int64]uint64

func (m fakeMem) ReadAt(p []byte, off int64) (int, error) {
	v, ok := m[off]
	if !ok || len(p) != 8 {
		return 0, errors.New("unmapped")
	}
	binary.LittleEndian.PutUint64(p, v)
	return 8, nil
}

// Where fakeMaps loads libjvm.so and libc.
const fakeBase, fakeLibc = 0x7f0000000000, 0x7f1000000000

// fakeMaps are the mappings of a process with the libjvm.so at path loaded
// at fakeBase and a libc at fakeLibc; the first is libjvm's of offset 0.
func fakeMaps(path string) []mapping {
	return []mapping{
		{start: fakeBase, end: fakeBase + 0x250000, path: path},
		{start: fakeBase + 0x251000, end: fakeBase + 0xfa4000, offset: 0x251000, path: path},
		{start: fakeLibc, end: fakeLibc + 0x28000, path: "/lib/libc.so.6"},
		{start: fakeLibc + 0x28000, end: fakeLibc + 0x1b0000, offset: 0x28000, path: "/lib/libc.so.6"},
	}
}

// pointSlots makes mem hold impl in the GOT slots of f's imports, f loaded
// at fakeBase.
func pointSlots(t *testing.T, f *elfsafe.File, mem fakeMem, impl uint64, imports ...string) {
	t.Helper()
	slots, err := gotSlots(f, imports)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range imports {
		for _, s := range slots[imp] {
			mem[int64(fakeBase+s)] = impl
		}
	}
}

func TestResolveCopiesLibJVM(t *testing.T) {
	f := openLibJVM(t, jdk17Home)
	ms := fakeMaps("/jdk/libjvm.so")
	impl := uint64(fakeLibc + 0x9a000)
	mem := fakeMem{}
	pointSlots(t, f, mem, impl, copyImports...)
	targets, err := resolveCopies(f, ms, ms[0], mem)
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) != 1 {
		t.Fatalf("targets %+v, want one shared implementation", targets)
	}
	if tg := targets[0]; tg.Offset != 0x9a000 || tg.Lib != "/lib/libc.so.6" || len(tg.Imports) != 2 {
		t.Errorf("target %+v", tg)
	}

	// Distinct implementations give one target each.
	pointSlots(t, f, mem, impl+0x1000, "memcpy")
	if targets, err := resolveCopies(f, ms, ms[0], mem); err != nil || len(targets) != 2 {
		t.Errorf("distinct: %+v, %v", targets, err)
	}

	// A slot still pointing into libjvm (lazy binding) is ErrGOT.
	pointSlots(t, f, mem, fakeBase+0x252000, "memcpy")
	if _, err := resolveCopies(f, ms, ms[0], mem); !errors.Is(err, ErrGOT) {
		t.Errorf("unbound slot: %v, want ErrGOT", err)
	}
	// An unreadable slot is ErrGOT.
	if _, err := resolveCopies(f, ms, ms[0], fakeMem{}); !errors.Is(err, ErrGOT) {
		t.Errorf("unreadable: %v, want ErrGOT", err)
	}
}

func TestMergeRanges(t *testing.T) {
	got := mergeRanges([]Range{{30, 40}, {10, 20}, {20, 25}, {50, 50}, {35, 45}})
	want := []Range{{10, 25}, {30, 45}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("mergeRanges = %v, want %v", got, want)
	}
}

func TestParseEvent(t *testing.T) {
	b := make([]byte, eventSize)
	le := binary.LittleEndian
	le.PutUint64(b[0:], 1)
	le.PutUint32(b[8:], 2)
	le.PutUint32(b[12:], 3)
	le.PutUint64(b[16:], 4)
	le.PutUint64(b[24:], 5)
	le.PutUint64(b[32:], 6)
	b[40] = byte(GCBegin)
	le.PutUint32(b[44:], uint32(flagFull|flagArgOK))
	var ev Event
	parseEvent(b, &ev)
	want := Event{Kind: GCBegin, Time: 1, PID: 2, TID: 3, Src: 4, Dst: 5, Len: 6, Full: true, FullKnown: true}
	if ev != want {
		t.Errorf("parseEvent = %+v, want %+v", ev, want)
	}
	// A record at an odd address reads the same.
	ev = Event{}
	parseEvent(append([]byte{0}, b...)[1:], &ev)
	if ev != want {
		t.Errorf("unaligned: parseEvent = %+v, want %+v", ev, want)
	}
}

// TestKindsMatchBPF: Kind restates reloc.bpf.c's enum reloc_kind, which
// bpf2go generates.
func TestKindsMatchBPF(t *testing.T) {
	for k, want := range map[Kind]bpf.RelocRelocKind{
		GCBegin: bpf.RelocRelocKindKIND_GC_BEGIN, GCEnd: bpf.RelocRelocKindKIND_GC_END, Copy: bpf.RelocRelocKindKIND_COPY,
	} {
		if uint32(k) != uint32(want) {
			t.Errorf("%v = %d, reloc.bpf.c says %d", k, k, want)
		}
	}
}

// BenchmarkParseEvent: one record per relocation event, allocation-free.
func BenchmarkParseEvent(b *testing.B) {
	rec := make([]byte, eventSize)
	rec[40] = byte(GCBegin)
	var ev Event
	b.ReportAllocs()
	for b.Loop() {
		parseEvent(rec, &ev)
	}
	if n := testing.AllocsPerRun(100, func() { parseEvent(rec, &ev) }); n != 0 {
		b.Errorf("parseEvent allocates %v times per record", n)
	}
}
