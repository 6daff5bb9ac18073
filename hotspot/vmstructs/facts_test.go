package vmstructs

import (
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
)

// The facts below are what the heap walker and the unwinder will rely on,
// read from the fixtures of real JVMs; they hold without root.

func wantField(t *testing.T, tab *Table, name string, off uint64, typ string) {
	t.Helper()
	f, ok := tab.FirstField(name)
	switch {
	case !ok:
		t.Errorf("no field %s", name)
	case f.Static:
		t.Errorf("%s is static, want a field at %d", name, off)
	case f.Offset != off || f.TypeString != typ:
		t.Errorf("%s at %d (%q), want at %d (%q)", name, f.Offset, f.TypeString, off, typ)
	}
}

// wantStatic checks a static field's type and that its address lies in
// libjvm's image (its .data or .bss), a few tens of MiB above the base.
func wantStatic(t *testing.T, tab *Table, name, typ string) {
	t.Helper()
	f, ok := tab.FirstField(name)
	switch {
	case !ok:
		t.Errorf("no static %s", name)
	case !f.Static:
		t.Errorf("%s is a field at %d, want a static", name, f.Offset)
	case f.TypeString != typ:
		t.Errorf("%s is %q, want %q", name, f.TypeString, typ)
	case f.Address < tab.Base || f.Address-tab.Base > 64<<20:
		t.Errorf("%s at %#x, not in libjvm (base %#x)", name, f.Address, tab.Base)
	}
}

func wantAbsent(t *testing.T, tab *Table, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, ok := tab.FirstField(n); ok {
			t.Errorf("%s is there; this JDK should not have it", n)
		}
	}
}

func wantSize(t *testing.T, tab *Table, name string, size uint64, super string) {
	t.Helper()
	ty, ok := tab.Type(name)
	switch {
	case !ok:
		t.Errorf("no type %s", name)
	case ty.Size != size || ty.Superclass != super:
		t.Errorf("type %s: size %d, superclass %q; want %d, %q", name, ty.Size, ty.Superclass, size, super)
	}
}

func wantInt(t *testing.T, tab *Table, name string, v int32) {
	t.Helper()
	if got, ok := tab.IntConst(name); !ok || got != v {
		t.Errorf("int constant %s = %d (%v), want %d", name, got, ok, v)
	}
}

func wantLong(t *testing.T, tab *Table, name string, v uint64) {
	t.Helper()
	if got, ok := tab.LongConst(name); !ok || got != v {
		t.Errorf("long constant %s = %#x (%v), want %#x", name, got, ok, v)
	}
}

// Facts both JDKs share: the object header, the klass's layout helper,
// and the constants that decode them.
func commonFacts(t *testing.T, tab *Table) {
	wantField(t, tab, "oopDesc::_mark", 0, "markWord")
	wantField(t, tab, "oopDesc::_metadata._klass", 8, "Klass*")
	wantField(t, tab, "oopDesc::_metadata._compressed_klass", 8, "narrowKlass")
	wantSize(t, tab, "oopDesc", 16, "")
	wantField(t, tab, "Klass::_layout_helper", 8, "jint")
	wantField(t, tab, "Method::_constMethod", 8, "ConstMethod*")
	wantSize(t, tab, "Method", 88, "Metadata")
	wantField(t, tab, "ConstMethod::_constants", 8, "ConstantPool*")
	wantInt(t, tab, "oopSize", 8)
	wantInt(t, tab, "LogBytesPerWord", 3)
	wantInt(t, tab, "Klass::_lh_array_tag_shift", 30)
	wantInt(t, tab, "Klass::_lh_header_size_shift", 16)
	wantInt(t, tab, "CollectedHeap::G1", 3)
	wantLong(t, tab, "markWord::age_shift", 3)
	wantStatic(t, tab, "Universe::_collectedHeap", "CollectedHeap*")
	wantStatic(t, tab, "CodeCache::_heaps", "GrowableArray<CodeHeap*>*")
	wantStatic(t, tab, "CodeCache::_low_bound", "address")
	wantStatic(t, tab, "CodeCache::_high_bound", "address")
	wantField(t, tab, "GrowableArrayBase::_len", 0, "int")
	wantField(t, tab, "VirtualSpace::_low_boundary", 0, "char*")
	wantField(t, tab, "G1HeapRegionTable::_length", 24, "size_t")
	wantField(t, tab, "ZCollectedHeap::_heap", 192, "ZHeap")
}

func TestFactsJDK17(t *testing.T) {
	tab := fixtureTable(t, "jdk17")
	if tab.Release != "17.0.15+6-Debian-1deb12u1" || tab.Major() != 17 {
		t.Errorf("release %q (major %d)", tab.Release, tab.Major())
	}
	commonFacts(t, tab)
	wantField(t, tab, "InstanceKlass::_constants", 232, "ConstantPool*")
	wantSize(t, tab, "Klass", 208, "Metadata")
	wantSize(t, tab, "InstanceKlass", 464, "Klass")
	// JDK 17 keeps the compressed oops and klass encodings in structs.
	wantStatic(t, tab, "CompressedOops::_narrow_oop._base", "address")
	wantStatic(t, tab, "CompressedOops::_narrow_oop._shift", "int")
	wantStatic(t, tab, "CompressedKlassPointers::_narrow_klass._base", "address")
	wantAbsent(t, tab, "CompressedOops::_base", "CompressedKlassPointers::_base")
	// Code: nmethod derives from CompiledMethod, which holds the Method*.
	wantSize(t, tab, "nmethod", 352, "CompiledMethod")
	wantSize(t, tab, "CodeBlob", 104, "")
	wantField(t, tab, "CompiledMethod::_method", 112, "Method*")
	wantField(t, tab, "CodeBlob::_name", 96, "const char*")
	wantField(t, tab, "CodeBlob::_code_begin", 32, "address")
	wantField(t, tab, "nmethod::_entry_bci", 192, "int")
	wantField(t, tab, "nmethod::_verified_entry_point", 224, "address")
	wantField(t, tab, "CodeHeap::_memory", 8, "VirtualSpace")
	wantField(t, tab, "CodeHeap::_log2_segment_size", 256, "int")
	// Heap: G1's region classes have no G1 prefix yet.
	wantField(t, tab, "CollectedHeap::_reserved", 32, "MemRegion")
	wantField(t, tab, "G1CollectedHeap::_hrm", 304, "HeapRegionManager")
	wantField(t, tab, "HeapRegionManager::_regions", 96, "G1HeapRegionTable")
	wantField(t, tab, "HeapRegion::_bottom", 0, "HeapWord* const")
	wantField(t, tab, "HeapRegion::_top", 16, "HeapWord* volatile")
	wantStatic(t, tab, "HeapRegion::GrainBytes", "size_t")
	wantSize(t, tab, "HeapRegion", 296, "")
	wantAbsent(t, tab, "G1HeapRegion::_bottom")
	wantInt(t, tab, "HeapRegionType::StartsHumongousTag", 12)
	wantField(t, tab, "JavaThread::_anchor", 656, "JavaFrameAnchor")
	wantField(t, tab, "JavaFrameAnchor::_last_Java_pc", 8, "address")
}

func TestFactsJDK25(t *testing.T) {
	tab := fixtureTable(t, "jdk25")
	if tab.Release != "25.0.3+9-LTS" || tab.Major() != 25 {
		t.Errorf("release %q (major %d)", tab.Release, tab.Major())
	}
	commonFacts(t, tab)
	wantField(t, tab, "InstanceKlass::_constants", 224, "ConstantPool*")
	wantSize(t, tab, "Klass", 200, "Metadata")
	wantSize(t, tab, "InstanceKlass", 472, "Klass")
	// The encodings are plain statics, no longer a struct's members.
	wantStatic(t, tab, "CompressedOops::_base", "address")
	wantStatic(t, tab, "CompressedOops::_shift", "int")
	wantStatic(t, tab, "CompressedKlassPointers::_base", "address")
	wantAbsent(t, tab, "CompressedOops::_narrow_oop._base", "CompressedKlassPointers::_narrow_klass._base")
	// Code: CompiledMethod is gone; nmethod holds the Method*.
	wantSize(t, tab, "nmethod", 224, "CodeBlob")
	wantSize(t, tab, "CodeBlob", 64, "")
	wantField(t, tab, "nmethod::_method", 80, "Method*")
	wantAbsent(t, tab, "CompiledMethod::_method", "CodeBlob::_code_begin")
	wantField(t, tab, "CodeBlob::_name", 8, "const char*")
	wantField(t, tab, "CodeBlob::_code_offset", 36, "int")
	wantField(t, tab, "nmethod::_entry_bci", 156, "int")
	wantField(t, tab, "CodeHeap::_memory", 0, "VirtualSpace")
	wantField(t, tab, "CodeHeap::_log2_segment_size", 248, "int")
	// Heap: G1's region classes took the G1 prefix.
	wantField(t, tab, "CollectedHeap::_reserved", 48, "MemRegion")
	wantField(t, tab, "G1CollectedHeap::_hrm", 408, "G1HeapRegionManager")
	wantField(t, tab, "G1HeapRegionManager::_regions", 88, "G1HeapRegionTable")
	wantField(t, tab, "G1HeapRegion::_bottom", 0, "HeapWord* const")
	wantField(t, tab, "G1HeapRegion::_top", 16, "HeapWord* volatile")
	wantStatic(t, tab, "G1HeapRegion::GrainBytes", "size_t")
	wantSize(t, tab, "G1HeapRegion", 144, "")
	wantAbsent(t, tab, "HeapRegion::_bottom")
	wantInt(t, tab, "G1HeapRegionType::StartsHumongousTag", 4)
	wantField(t, tab, "JavaFrameAnchor::_last_Java_pc", 8, "address")
	// A type whose name holds "::": the field splits at the last one.
	if f, ok := tab.FirstField("Deoptimization::UnrollBlock::_size_of_deoptimized_frame"); !ok || f.Type != "Deoptimization::UnrollBlock" {
		t.Errorf("Deoptimization::UnrollBlock::_size_of_deoptimized_frame: %+v %v", f, ok)
	}
}

// heapNeeds is what a heap walker would ask of any JDK from 17 on, with
// the names that changed between them as alternatives.
var heapNeeds = []Need{
	NeedField("oopDesc::_metadata._compressed_klass"),
	NeedField("Klass::_layout_helper"),
	NeedField("InstanceKlass::_constants"),
	NeedStatic("Universe::_collectedHeap"),
	NeedStatic("CompressedOops::_base", "CompressedOops::_narrow_oop._base"),
	NeedStatic("CompressedOops::_shift", "CompressedOops::_narrow_oop._shift"),
	NeedStatic("CompressedKlassPointers::_base", "CompressedKlassPointers::_narrow_klass._base"),
	NeedField("G1HeapRegion::_bottom", "HeapRegion::_bottom"),
	NeedStatic("G1HeapRegion::GrainBytes", "HeapRegion::GrainBytes"),
	NeedType("G1HeapRegion", "HeapRegion"),
	NeedField("nmethod::_method", "CompiledMethod::_method"),
	NeedStatic("CodeCache::_heaps"),
	NeedInt("Klass::_lh_array_tag_shift"),
	NeedLong("markWord::age_shift"),
}

func TestRequire(t *testing.T) {
	for _, jdk := range fixtureJDKs {
		tab := fixtureTable(t, jdk)
		if err := tab.Require(heapNeeds...); err != nil {
			t.Errorf("%s: %v", jdk, err)
		}
	}
	tab := fixtureTable(t, "jdk17")
	err := tab.Require(
		NeedField("Klass::_layout_helper"),
		NeedField("G1HeapRegion::_bottom"),    // a later JDK's name
		NeedField("Universe::_collectedHeap"), // a static, not a field
		NeedStatic("Klass::_layout_helper"),   // a field, not a static
		NeedType("NoSuchType", "NoSuchTypeEither"),
		NeedInt("no_such_int"),
		NeedLong("no_such_long"),
		NeedField("no separator"),
	)
	if !errors.Is(err, ErrMissing) {
		t.Fatalf("Require: %v, want ErrMissing", err)
	}
	for _, want := range []string{"JVM 17.0.15+6-Debian-1deb12u1", "field G1HeapRegion::_bottom,", "field Universe::_collectedHeap,",
		"static Klass::_layout_helper,", "type NoSuchType or NoSuchTypeEither,", "int constant no_such_int,",
		"long constant no_such_long,", "field no separator: this HotSpot release"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Require's error lacks %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "field Klass::_layout_helper,") {
		t.Errorf("Require names an entry the table has: %v", err)
	}
}

// mangle is the Itanium C++ name of the static type::field, "" when the
// name has templates or members (e.g. "_narrow_oop._base").
func mangle(typ, field string) string {
	if strings.ContainsAny(typ+field, "<>.[ *") {
		return ""
	}
	var b strings.Builder
	b.WriteString("_ZN")
	for _, part := range append(strings.Split(typ, "::"), field) {
		b.WriteString(strconv.Itoa(len(part)) + part)
	}
	b.WriteString("E")
	return b.String()
}

// TestStaticsMatchSymtab checks every static's address against libjvm's
// own .symtab, an independent source: the address minus the base Open
// computed must be the symbol's value. It needs the fixture's JDK
// installed (the same build: the .dynsym values must match).
func TestStaticsMatchSymtab(t *testing.T) {
	for _, jdk := range fixtureJDKs {
		t.Run(jdk, func(t *testing.T) {
			fx := loadFixture(t, jdk)
			lib := filepath.Join(filepath.Dir(filepath.Dir(fx.Java)), "lib", "server", "libjvm.so")
			if _, err := os.Stat(lib); err != nil {
				t.Skipf("%s not installed: %v", lib, err)
			}
			ef, err := elfsafe.OpenPath(lib)
			if err != nil {
				t.Fatal(err)
			}
			defer ef.Close()
			vals := map[string]uint64{}
			for _, typ := range []elf.SectionType{elf.SHT_DYNSYM, elf.SHT_SYMTAB} {
				syms, err := ef.Symbols(typ)
				if err != nil {
					t.Skipf("%s: %v", lib, err)
				}
				for i := 1; i < syms.Len(); i++ {
					s := syms.At(i)
					if elf.ST_TYPE(s.Info) == elf.STT_OBJECT {
						vals[string(s.Name)] = s.Value
					}
				}
			}
			for name, addr := range fx.Symbols {
				if vals[name] != addr-fx.Base {
					t.Skipf("%s is another build than the fixture's (%s at %#x, fixture %#x)", lib, name, vals[name], addr-fx.Base)
				}
			}
			tab, err := Read(fx, fx.symbols())
			if err != nil {
				t.Fatal(err)
			}
			var checked, unnamed int
			for _, f := range tab.Fields() {
				m := mangle(f.Type, f.Name)
				if !f.Static || m == "" {
					continue
				}
				v, ok := vals[m]
				if !ok {
					unnamed++
					continue
				}
				checked++
				if f.Address-tab.Base != v {
					t.Errorf("%s::%s at base+%#x, .symtab says %#x", f.Type, f.Name, f.Address-tab.Base, v)
				}
			}
			t.Logf("%d statics match .symtab, %d have no symbol of their plain name", checked, unnamed)
			if checked < 50 {
				t.Errorf("only %d statics checked", checked)
			}
		})
	}
}
