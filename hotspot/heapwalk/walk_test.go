package heapwalk

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// scene is the synthetic heap of the walk tests, and what it holds.
type scene struct {
	s *synth
	l *Layout

	app, item, node, mapK, list, tree, treeNode, a, b, weak, str uint64
	longs, objs, nodes                                           uint64

	nodeF, treeF, weakF                       []uint32
	table, shared, onlyRoot, onlyWeak, queued uint64
	mapN, listN, treeN, arrN                  int
}

// App's statics, by index.
const (
	stMap = iota
	stList
	stTree
	stCyc
	stTable
	stArr
	stWeak
	stBadKlass
	stHole
	stOutside
	stHuge
	stForged
	stForwarded
	stShared
	nStatics
)

func buildScene(t testing.TB, jdk string, coops, ccp bool) *scene {
	return buildSceneV(t, variant{jdk: jdk, coops: coops, ccp: ccp})
}

func buildSceneV(t testing.TB, v variant) *scene {
	s := newSynthV(t, v)
	sc := &scene{s: s, mapN: 500, listN: 1000, treeN: 127, arrN: 4000} // the array's items span more than one read span (maxSpan)
	_, itemSize := s.fields(0)
	sc.item = s.class("app/Item", 0, itemSize+8, nil, 0)
	sc.str = s.class("java/lang/String", 0, itemSize+8, nil, 0)
	var size uint64
	sc.nodeF, size = s.fields(3) // next, key, value
	sc.node = s.class("app/Node", 0, size, sc.nodeF, 0)
	mf, size := s.fields(1)
	sc.mapK = s.class("app/Map", 0, size, mf, 0)
	lf, size := s.fields(1)
	sc.list = s.class("app/List", 0, size, lf, 0)
	sc.treeF, size = s.fields(4) // left, right, parent, key
	sc.treeNode = s.class("app/TreeNode", 0, size, sc.treeF, 0)
	tf, size := s.fields(1)
	sc.tree = s.class("app/Tree", 0, size, tf, 0)
	af, size := s.fields(1)
	sc.a = s.class("app/A", 0, size, af, 0)
	sc.b = s.class("app/B", 0, size, af, 0)
	// A Reference: its oop maps leave out referent (the first field),
	// as HotSpot's do.
	sc.weakF, size = s.fields(2)
	sc.weak = s.klassStruct("app/Weak", s.objectK, uint32(size), sc.weakF[1:], 3)
	s.mirror(sc.weak, 0)
	sc.longs = s.arrayClass("[J", false, 3)
	sc.objs = s.arrayClass("[Ljava/lang/Object;", true, uint(map[uint64]uint{4: 2, 8: 3}[s.oop]))
	sc.nodes = s.arrayClass("[Lapp/Node;", true, uint(map[uint64]uint{4: 2, 8: 3}[s.oop]))
	sc.app = s.class("App", 0, 16, nil, nStatics)

	// The class App's name, held by its mirror's one reference field.
	s.ref(s.mirrors[sc.app], classNameOff, s.obj(sc.str))

	// A hash map: 64 buckets, nodes chained by next.
	m := s.obj(sc.mapK)
	tab := s.array(sc.nodes, 64)
	s.ref(m, mf[0], tab)
	heads := make([]uint64, 64)
	for i := range sc.mapN {
		n := s.obj(sc.node)
		s.ref(n, sc.nodeF[1], s.obj(sc.item))
		s.ref(n, sc.nodeF[2], s.array(sc.longs, 4))
		s.ref(n, sc.nodeF[0], heads[i%64])
		heads[i%64] = n
	}
	for i, h := range heads {
		s.elem(tab, i, h)
	}
	s.setStatic(sc.app, stMap, m)

	// A linked list.
	l := s.obj(sc.list)
	var prev uint64
	for range sc.listN {
		n := s.obj(sc.node)
		s.ref(n, sc.nodeF[2], s.obj(sc.item))
		if prev == 0 {
			s.ref(l, lf[0], n)
		} else {
			s.ref(prev, sc.nodeF[0], n)
		}
		prev = n
	}
	s.setStatic(sc.app, stList, l)

	// A balanced tree with parent links.
	var build func(parent uint64, n int) uint64
	build = func(parent uint64, n int) uint64 {
		if n == 0 {
			return 0
		}
		t := s.obj(sc.treeNode)
		s.ref(t, sc.treeF[2], parent)
		s.ref(t, sc.treeF[3], s.obj(sc.item))
		s.ref(t, sc.treeF[0], build(t, (n-1)/2))
		s.ref(t, sc.treeF[1], build(t, n-1-(n-1)/2))
		return t
	}
	tr := s.obj(sc.tree)
	s.ref(tr, tf[0], build(0, sc.treeN))
	s.setStatic(sc.app, stTree, tr)

	// A cycle through two classes: A -> B -> A -> ... -> B -> the first A.
	var first, last uint64
	for i := range 10 {
		o := s.obj(map[bool]uint64{true: sc.a, false: sc.b}[i%2 == 0])
		if first == 0 {
			first = o
		} else {
			s.ref(last, af[0], o)
		}
		last = o
	}
	s.ref(last, af[0], first)
	s.setStatic(sc.app, stCyc, first)

	// A large array, for OnObject.
	sc.table = s.array(sc.longs, 200_000)
	s.setStatic(sc.app, stTable, sc.table)

	// An object array with some nulls.
	arr := s.array(sc.objs, sc.arrN)
	for i := range sc.arrN {
		if i%10 != 3 {
			s.elem(arr, i, s.obj(sc.item))
		}
	}
	s.setStatic(sc.app, stArr, arr)

	// A weak reference: its referent is held by nothing else.
	w := s.obj(sc.weak)
	sc.onlyWeak = s.obj(sc.item)
	sc.queued = s.obj(sc.item)
	s.ref(w, sc.weakF[0], sc.onlyWeak)
	s.ref(w, sc.weakF[1], sc.queued)
	s.setStatic(sc.app, stWeak, w)

	// Garbled objects.
	bad := s.obj(sc.item)
	s.setKlassWord(bad, 0x37_0001, 0x7777_0000_0008) // a klass nobody mapped
	s.setStatic(sc.app, stBadKlass, bad)
	s.heapTop = (s.heapTop + 2*4096) &^ 4095 // a page never written
	s.setStatic(sc.app, stHole, s.heapTop-4096+64)
	s.setStatic(sc.app, stOutside, s.heapHi+4096)
	huge := s.array(sc.longs, 1)
	s.m.put32(huge+s.hdr, 0x7fff_ffff)
	s.setStatic(sc.app, stHuge, huge)
	// A forged klass: a layout helper, a name, but its mirror does not
	// point back.
	forged := s.klassMeta(s.size("InstanceKlass"))
	s.m.put32(forged+s.f("Klass::_layout_helper"), 24)
	s.put64(forged+s.f("Klass::_name"), s.symbol("app/Forged"))
	slot := s.native(8)
	s.put64(slot, s.mirrors[sc.item])
	s.put64(forged+s.f("Klass::_java_mirror"), slot)
	fo := s.obj(sc.item)
	s.setKlass(fo, forged)
	s.setStatic(sc.app, stForged, fo)
	fw := s.obj(sc.item)
	s.put64(fw, s.heapTop|3) // forwarded: a GC moves it
	s.setStatic(sc.app, stForwarded, fw)

	sc.shared = s.obj(sc.item)
	s.setStatic(sc.app, stShared, sc.shared)
	sc.onlyRoot = s.obj(sc.item)

	sc.l = s.finish()
	return sc
}

// names resolves the scene's fields as the agent would.
func (sc *scene) names(f FieldRef) string {
	s := sc.s
	// The walk of a garbled heap (FuzzWalk) asks for any offset.
	pick := func(names []string, i int) string {
		if i < 0 || i >= len(names) {
			return ""
		}
		return names[i]
	}
	if f.Static && f.Klass == sc.app {
		if f.Offset < classSize {
			return ""
		}
		return "App." + pick([]string{"map", "list", "tree", "cyc", "table", "arr", "weak", "badKlass", "hole", "outside",
			"huge", "forged", "forwarded", "shared"}, int((f.Offset-classSize)/uint32(s.oop)))
	}
	switch f.Declaring {
	case sc.node:
		return "app.Node." + pick([]string{"next", "key", "value"}, slices.Index(sc.nodeF, f.Offset))
	case sc.treeNode:
		return "app.TreeNode." + pick([]string{"left", "right", "parent", "key"}, slices.Index(sc.treeF, f.Offset))
	case sc.mapK:
		return "app.Map.table"
	case sc.list:
		return "app.List.head"
	case sc.tree:
		return "app.Tree.root"
	case sc.a, sc.b:
		return f.Class + ".next"
	}
	return ""
}

type variant struct {
	jdk        string
	coops, ccp bool
	compact    bool
}

var variants = []variant{
	{"jdk17", true, true, false}, {"jdk17", false, true, false}, {"jdk17", false, false, false},
	{"jdk25", true, true, false}, {"jdk25", false, false, false},
	{"jdk25", true, true, true}, {"jdk25", false, true, true},
}

func (v variant) String() string {
	s := v.jdk + map[bool]string{true: "-coops", false: "-oops"}[v.coops] + map[bool]string{true: "-ccp", false: "-cp"}[v.ccp]
	if v.compact {
		s += "-compact"
	}
	return s
}

func TestLayoutSynthetic(t *testing.T) {
	for _, v := range variants {
		t.Run(v.String(), func(t *testing.T) {
			sc := buildSceneV(t, v)
			l := sc.l
			if l.CompressedOops != v.coops || l.CompressedClassPointers != v.ccp || l.CompactHeaders != v.compact || l.GC != "g1" {
				t.Errorf("layout %+v", l)
			}
			if l.OopSize != sc.s.oop || l.HeaderSize != sc.s.hdr || l.Alignment != 8 {
				t.Errorf("oop %d header %d alignment %d", l.OopSize, l.HeaderSize, l.Alignment)
			}
			if l.OopBase != sc.s.oopBase || l.OopShift != sc.s.oopShift || l.KlassBase != sc.s.klassBase || l.KlassShift != sc.s.klassShift {
				t.Errorf("oop %#x<<%d klass %#x<<%d", l.OopBase, l.OopShift, l.KlassBase, l.KlassShift)
			}
			if len(l.Heap) != 1 || l.Heap[0] != (Range{heapLo, heapLo + heapBytes}) {
				t.Errorf("heap %x", l.Heap)
			}
			n, active, err := l.Collections(sc.s.m)
			if n != 7 || active || err != nil {
				t.Errorf("collections %d %v %v", n, active, err)
			}
		})
	}
}

// The flags NewLayout refuses, and the tables it cannot use.
func TestLayoutRefuses(t *testing.T) {
	setFlag := func(s *synth, name string, v uint64) { s.setFlag(name, v) }
	for _, tc := range []struct {
		name, want string
		change     func(s *synth)
	}{
		{"compact headers without compressed class pointers", "compact object headers", func(s *synth) {
			setFlag(s, "UseCompactObjectHeaders", 1)
			setFlag(s, "UseCompressedClassPointers", 0)
		}},
		{"zgc without its globals", "ZGC: read ZGlobalsForVMStructs", func(s *synth) { setFlag(s, "UseZGC", 1) }},
		{"alignment", "ObjectAlignmentInBytes", func(s *synth) {
			arr := s.m.get64(s.static("JVMFlag::flags"))
			s.put64(s.m.get64(arr+4*s.size("JVMFlag")+s.f("JVMFlag::_addr")), 12)
		}},
		{"no heap", "not initialised", func(s *synth) { s.put64(s.static("Universe::_collectedHeap"), 0) }},
		{"no Class offsets", "java.lang.Class", func(s *synth) { s.m.put32(s.static("java_lang_Class::_klass_offset"), 0) }},
		{"flags unreadable", "flag table", func(s *synth) { s.put64(s.static("JVMFlag::flags"), 0x10) }},
		{"endless flags", "flag table", func(s *synth) { s.put64(s.static("JVMFlag::numFlags"), 1<<40) }},
		{"huge heap", "GiB", func(s *synth) {
			h := s.m.get64(s.static("Universe::_collectedHeap"))
			s.put64(h+s.f("CollectedHeap::_reserved")+s.f("MemRegion::_word_size"), 1<<40)
		}},
		{"unaligned heap", "heap range", func(s *synth) {
			h := s.m.get64(s.static("Universe::_collectedHeap"))
			s.put64(h+s.f("CollectedHeap::_reserved")+s.f("MemRegion::_start"), heapLo+3)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSynth(t, "jdk25", true, true)
			tc.change(s)
			_, err := NewLayout(s.tab, s.m, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
	// Options decide where the flag table is silent.
	s := newSynth(t, "jdk17", true, true)
	no := false
	l, err := NewLayout(s.tab, s.m, Options{CompressedOops: &no, Heap: []Range{{heapLo, heapLo + 1<<20}}})
	if err != nil || l.CompressedOops || l.OopSize != 8 || l.Heap[0].End != heapLo+1<<20 {
		t.Errorf("options: %v %+v", err, l)
	}
}

func walkScene(t testing.TB, sc *scene, mem Mem, cfg Config) *Result {
	t.Helper()
	res, err := Walk(context.Background(), sc.l, mem, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestWalkSynthetic(t *testing.T) {
	for _, v := range variants {
		t.Run(v.String(), func(t *testing.T) {
			sc := buildSceneV(t, v)
			var large []Object
			cfg := Config{
				FieldName: sc.names,
				MinSize:   1 << 20,
				OnObject:  func(o Object) { large = append(large, o) },
				Roots: []Root{
					{Addr: sc.shared, Hop: "Main.main local #2", Rank: 1},
					{Addr: sc.onlyRoot, Hop: "Main.main local #1", Rank: 1},
					{Addr: heapLo + heapBytes + 8, Hop: "bogus", Rank: 2},
				},
			}
			res := walkScene(t, sc, sc.s.m, cfg)
			checkScene(t, sc, res, large)
			if t.Failed() {
				dumpRows(t, res)
				t.Logf("%+v", res.Stats)
			}
			// The same walk without vectored reads finds the same.
			res2 := walkScene(t, sc, plainMem{sc.s.m}, Config{FieldName: sc.names, MinSize: 1 << 20, Roots: cfg.Roots})
			if len(res2.Rows) != len(res.Rows) || res2.Stats.Objects != res.Stats.Objects || res2.Stats.Bytes != res.Stats.Bytes {
				t.Errorf("plain reads: %d rows %d objects %d bytes, vectored %d %d %d",
					len(res2.Rows), res2.Stats.Objects, res2.Stats.Bytes, len(res.Rows), res.Stats.Objects, res.Stats.Bytes)
			}
		})
	}
}

func checkScene(t *testing.T, sc *scene, res *Result, large []Object) {
	t.Helper()
	rows := rowsBy(res)
	want := func(key string, count uint64, recursive bool) Row {
		t.Helper()
		r, ok := rows[key]
		if !ok {
			t.Errorf("no row %q", key)
			return r
		}
		if r.Count != count || r.Recursive != recursive {
			t.Errorf("row %q: %d objects (recursive %v), want %d (%v)", key, r.Count, r.Recursive, count, recursive)
		}
		return r
	}
	s := sc.s
	nClasses := uint64(len(s.order))
	want("(loaded classes) | java.lang.Class", nClasses, false)
	want("(loaded classes) -> java.lang.Class+16 | java.lang.String", 1, false)
	want("App.map (static) | app.Map", 1, false)
	want("App.map (static) -> app.Map.table | app.Node[]", 1, false)
	nodes := want("App.map (static) -> app.Map.table -> [] | app.Node", uint64(sc.mapN), true)
	want("App.map (static) -> app.Map.table -> [] -> app.Node.key | app.Item", uint64(sc.mapN), false)
	vals := want("App.map (static) -> app.Map.table -> [] -> app.Node.value | long[]", uint64(sc.mapN), false)
	want("App.list (static) -> app.List.head | app.Node", uint64(sc.listN), true)
	want("App.list (static) -> app.List.head -> app.Node.value | app.Item", uint64(sc.listN), false)
	want("App.tree (static) -> app.Tree.root | app.TreeNode", uint64(sc.treeN), true)
	want("App.tree (static) -> app.Tree.root -> app.TreeNode.key | app.Item", uint64(sc.treeN), false)
	want("App.cyc (static) | app.A", 1, false)
	want("App.cyc (static) -> app.A.next | app.B", 5, false)
	want("App.cyc (static) -> app.A.next -> app.B.next | app.A", 4, false)
	want("App.table (static) | long[]", 1, false)
	want("App.arr (static) -> [] | app.Item", uint64(sc.arrN-sc.arrN/10), false)
	want("App.weak (static) -> app.Weak+"+itoa(uint64(sc.weakF[1]))+" | app.Item", 1, false)
	want("App.shared (static) | app.Item", 1, false)
	want("Main.main local #1 | app.Item", 1, false)

	if i := indexOf(res, nodes); i < 0 {
		t.Error("no map nodes")
	} else if got := res.Name(i); got != "App.map (static) -> app.Map.table -> [] -> app.Node..." {
		t.Errorf("name %q", got)
	}
	if nodes.Bytes != uint64(sc.mapN)*s.sizes[sc.node] {
		t.Errorf("nodes: %d bytes, want %d", nodes.Bytes, uint64(sc.mapN)*s.sizes[sc.node])
	}
	longBytes := (s.arrays[sc.longs].hdr + 32 + 7) &^ 7
	if vals.Bytes != uint64(sc.mapN)*longBytes {
		t.Errorf("values: %d bytes, want %d", vals.Bytes, uint64(sc.mapN)*longBytes)
	}
	for _, ro := range res.Rows {
		if ro.Count == 0 || len(ro.Sample) == 0 || len(ro.Sample) > 8 {
			t.Errorf("row %s %s: %d objects, sample %d", res.ChainString(ro.Chain), ro.Class, ro.Count, len(ro.Sample))
		}
		if strings.Contains(res.ChainString(ro.Chain), "App.weak (static) -> app.Weak+"+itoa(uint64(sc.weakF[0]))) {
			t.Errorf("followed a referent: %s", res.ChainString(ro.Chain))
		}
	}

	// The garbled statics were skipped, each counted.
	st := res.Stats
	if st.Invalid != 3 || st.Unreadable != 1 || st.OutOfHeap != 1 || st.Forwarded != 1 || st.BadRoots != 1 || st.Roots != 2 {
		t.Errorf("invalid %d (want 3), unreadable %d (1), out of heap %d (1), forwarded %d (1), bad roots %d (1), roots %d (2)",
			st.Invalid, st.Unreadable, st.OutOfHeap, st.Forwarded, st.BadRoots, st.Roots)
	}
	var sum, bytes uint64
	for _, ro := range res.Rows {
		sum += ro.Count
		bytes += ro.Bytes
	}
	if int64(sum) != st.Objects || int64(bytes) != st.Bytes {
		t.Errorf("rows hold %d objects %d bytes, stats %d %d", sum, bytes, st.Objects, st.Bytes)
	}
	if st.CLDs != 2 || st.Classes != len(s.order) || st.Mirrors != len(s.order) {
		t.Errorf("%d CLDs, %d classes, %d mirrors; want 2, %d, %d", st.CLDs, st.Classes, st.Mirrors, len(s.order), len(s.order))
	}
	if res.GC.Overlapped || res.GC.Before != 7 {
		t.Errorf("gc %+v", res.GC)
	}

	// The large array went to OnObject, and not into the lookup.
	if len(large) != 1 || large[0].Addr != sc.table || large[0].Class != "long[]" || res.ChainString(large[0].Chain) != "App.table (static)" {
		t.Errorf("large objects %+v", large)
	} else if row, _ := res.Lookup(sc.table + 100); row >= 0 {
		t.Errorf("lookup names the large array: row %d", row)
	}

	// Lookup names every sampled small object, at its start and inside.
	for i, ro := range res.Rows {
		if ro.Class == "long[]" && res.ChainString(ro.Chain) == "App.table (static)" {
			continue
		}
		for _, a := range ro.Sample {
			for _, at := range []uint64{a, a + 8} {
				if got, exact := res.Lookup(at); got != i || !exact {
					t.Errorf("lookup %#x (row %d %s): row %d exact %v", at, i, res.Name(i), got, exact)
				}
			}
		}
	}
	if got, _ := res.Lookup(sc.onlyWeak); got >= 0 {
		t.Errorf("lookup names the weak referent: row %d", got)
	}
	if got, _ := res.Lookup(heapLo - 8); got >= 0 {
		t.Errorf("lookup names an address below the heap: row %d", got)
	}
}

func indexOf(res *Result, r Row) int {
	for i, ro := range res.Rows {
		if ro.Chain == r.Chain && ro.Klass == r.Klass {
			return i
		}
	}
	return -1
}

func itoa(v uint64) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for ; v > 0; v /= 10 {
		b = append([]byte{byte('0' + v%10)}, b...)
	}
	return string(b)
}

// Without a name resolver, hops say class+offset.
func TestWalkUnnamed(t *testing.T) {
	sc := buildScene(t, "jdk17", true, true)
	res := walkScene(t, sc, sc.s.m, Config{})
	rows := rowsBy(res)
	key := "App+" + itoa(uint64(sc.s.staticOff(stMap))) + " (static) -> app.Map+12 -> [] | app.Node"
	if r, ok := rows[key]; !ok || r.Count != uint64(sc.mapN) {
		dumpRows(t, res)
		t.Errorf("no row %q with %d objects", key, sc.mapN)
	}
}

// TestWalkCompactTinyObjects: with compact object headers an Object
// without fields is 8 bytes, its mark word alone, and the next object
// starts 8 bytes after it; the walk visits both.
func TestWalkCompactTinyObjects(t *testing.T) {
	s := newSynthV(t, variant{jdk: "jdk25", coops: true, ccp: true, compact: true})
	_, itemSize := s.fields(0)
	item := s.class("app/Item", 0, itemSize+8, nil, 0)
	app := s.class("App", 0, 16, nil, 2)
	s.heapTop = (s.heapTop + 15) &^ 15 // both in one 16-byte slot
	tiny := s.alloc(s.objectK, 8)
	next := s.obj(item)
	if next != tiny+8 {
		t.Fatalf("objects at %#x and %#x", tiny, next)
	}
	s.setStatic(app, 0, tiny)
	s.setStatic(app, 1, next)
	l := s.finish()
	res := walkScene(t, &scene{l: l}, s.m, Config{})
	got := map[string]uint64{}
	for _, r := range res.Rows {
		got[r.Class] += r.Count
	}
	if got["java.lang.Object"] != 1 || got["app.Item"] != 1 {
		t.Errorf("found %d java.lang.Object, %d app.Item; want 1 each", got["java.lang.Object"], got["app.Item"])
	}
}

// TestWalkShenandoahForwarded: under Shenandoah an object the collector
// evacuated while the JVM runs is forwarded in its mark word; the walk
// reads its copy in its place, named by the chain that reached the old
// one. Other collectors' forwarded objects (a pause moving them) are
// skipped.
func TestWalkShenandoahForwarded(t *testing.T) {
	for _, v := range []variant{{"jdk17", true, true, false}, {"jdk25", true, true, true}} {
		for _, shen := range []bool{true, false} {
			t.Run(fmt.Sprintf("%v/shenandoah=%v", v, shen), func(t *testing.T) {
				s := newSynthV(t, v)
				if shen {
					s.setFlag("UseShenandoahGC", 1)
				}
				_, itemSize := s.fields(0)
				item := s.class("app/Item", 0, itemSize+8, nil, 0)
				app := s.class("App", 0, 16, nil, 1)
				old := s.obj(item)
				copied := s.obj(item)
				s.put64(old, copied|3) // forwarded; with compact headers the klass bits go too
				s.setStatic(app, 0, old)
				l := s.finish()
				if shen != (l.GC == "shenandoah") {
					t.Fatalf("layout says GC %q", l.GC)
				}
				res := walkScene(t, &scene{l: l}, s.m, Config{FieldName: func(f FieldRef) string {
					if f.Static {
						return "App.held"
					}
					return ""
				}})
				r, ok := rowsBy(res)["App.held (static) | app.Item"]
				want := uint64(0)
				if shen {
					want = 1
				}
				if r.Count != want || res.Stats.Forwarded != 1 || res.Stats.ReadForwarded != int64(want) {
					t.Errorf("row %v %+v; forwarded %d, read at the copy %d; want %d", ok, r, res.Stats.Forwarded, res.Stats.ReadForwarded, want)
				}
				if shen && (len(r.Sample) != 1 || r.Sample[0] != copied) {
					t.Errorf("sampled %x, want the copy at %#x", r.Sample, copied)
				}
				// Shenandoah's cycles leave the collection count alone:
				// the forwarded object says one evacuated during the walk.
				if res.GC.Evacuated != shen || res.GC.Overlapped != shen {
					t.Errorf("gc check %+v, want evacuated and overlapped %v", res.GC, shen)
				}
			})
		}
	}
}

// TestWalkCopySame walks each synthetic scene from copied pieces, from
// one piece then spans (a budget of one piece), and one span an object
// (no copy), in batches of 4096 and of 16: the rows (in order), chains,
// samples and lookups are the same.
func TestWalkCopySame(t *testing.T) {
	for _, v := range variants {
		t.Run(v.String(), func(t *testing.T) {
			sc := buildSceneV(t, v)
			for _, batch := range []int{0, 16} {
				walk := func(maxCopy int) *Result {
					return walkScene(t, sc, sc.s.m, Config{FieldName: sc.names, MinSize: 1 << 20, MaxCopy: maxCopy, Batch: batch,
						Roots: []Root{{Addr: sc.shared, Hop: "Main.main local #2", Rank: 1}, {Addr: sc.onlyRoot, Hop: "Main.main local #1", Rank: 1}}})
				}
				want := walk(1)
				if want.Stats.Pieces != 0 {
					t.Fatalf("a budget under a piece copied %d pieces", want.Stats.Pieces)
				}
				for _, maxCopy := range []int{0, pieceSize} {
					got := walk(maxCopy)
					if got.Stats.Pieces == 0 {
						t.Fatalf("MaxCopy %d: no piece copied", maxCopy)
					}
					sameResult(t, fmt.Sprintf("batch %d, MaxCopy %d", batch, maxCopy), got, want)
				}
			}
		})
	}
}

// sameResult compares two walks' rows (with their chains' names), stats
// of what was found, and the lookup of every sampled address.
func sameResult(t *testing.T, what string, got, want *Result) {
	t.Helper()
	if len(got.Rows) != len(want.Rows) {
		t.Fatalf("%s: %d rows, want %d", what, len(got.Rows), len(want.Rows))
	}
	for i, g := range got.Rows {
		w := want.Rows[i]
		if got.Name(i) != want.Name(i) || g.Class != w.Class || g.Count != w.Count || g.Bytes != w.Bytes ||
			g.OtherRoots != w.OtherRoots || g.Retained != w.Retained || !slices.Equal(g.Sample, w.Sample) {
			t.Errorf("%s: row %d is %s | %s %d/%d other %d retained %d, want %s | %s %d/%d other %d retained %d", what, i,
				got.Name(i), g.Class, g.Count, g.Bytes, g.OtherRoots, g.Retained,
				want.Name(i), w.Class, w.Count, w.Bytes, w.OtherRoots, w.Retained)
		}
		for _, a := range w.Sample {
			if r1, e1 := got.Lookup(a); true {
				if r2, e2 := want.Lookup(a); r1 != r2 || e1 != e2 {
					t.Errorf("%s: lookup %#x: row %d %v, want %d %v", what, a, r1, e1, r2, e2)
				}
			}
		}
	}
	gs, ws := got.Stats, want.Stats
	if gs.Objects != ws.Objects || gs.Bytes != ws.Bytes || gs.Invalid != ws.Invalid || gs.Unreadable != ws.Unreadable ||
		gs.Runs != ws.Runs || gs.CrossEdges != ws.CrossEdges || gs.Large != ws.Large || gs.OutOfHeap != ws.OutOfHeap {
		t.Errorf("%s: stats %+v, want %+v", what, gs, ws)
	}
}

// staleCopy is a target whose heap pieces, copied whole, show zeros
// where the objects are, as a piece copied before the JVM allocated them
// would; each object read on its own is there.
type staleCopy struct{ *fakeMem }

func (m staleCopy) ReadVector(dst []byte, spans []Span) (int, error) {
	n, err := m.fakeMem.ReadVector(dst, spans)
	off := 0
	for _, s := range spans {
		if s.Len == pieceSize && s.Addr%pieceSize == 0 && s.Addr >= heapLo && s.Addr < heapLo+heapBytes {
			clear(dst[off : off+s.Len])
		}
		off += s.Len
	}
	return n, err
}

// TestWalkCopyStale: objects whose copy does not parse are read again
// from the target, and the walk finds what a walk without copies does.
func TestWalkCopyStale(t *testing.T) {
	sc := buildSceneV(t, variants[0])
	cfg := Config{FieldName: sc.names, MinSize: 1 << 20}
	want := walkScene(t, sc, sc.s.m, Config{FieldName: sc.names, MinSize: 1 << 20, MaxCopy: 1})
	got := walkScene(t, sc, staleCopy{sc.s.m}, cfg)
	if got.Stats.Pieces == 0 || got.Stats.Reread < got.Stats.Objects/2 {
		t.Fatalf("%d pieces copied, %d of %d objects read again: want pieces, and most objects read again",
			got.Stats.Pieces, got.Stats.Reread, got.Stats.Objects)
	}
	sameResult(t, "stale copies", got, want)
}
