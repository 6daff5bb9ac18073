package heapwalk

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"
)

var (
	fuzzOnce  sync.Once
	fuzzScene *scene
)

// FuzzWalk garbles a synthetic heap, its classes and the JVM's C-heap
// structures (flags, class loaders, the heap's bounds) with the fuzzer's
// writes, and walks it: the walk must end, within its caps, without a
// panic, and with rows that add up.
//
//	go test ./heapwalk -run '^$' -fuzz FuzzWalk -fuzztime 60s
func FuzzWalk(f *testing.F) {
	fuzzOnce.Do(func() { fuzzScene = buildScene(f, "jdk17", true, true) })
	sc := fuzzScene
	s := sc.s
	// Seeds: a klass word, a layout helper, an array length, a CLD link,
	// an oop map, a mirror's size.
	rec := func(region byte, off uint32, n byte, v uint64) []byte {
		b := []byte{region}
		b = binary.LittleEndian.AppendUint32(b, off)
		b = append(b, n)
		return binary.LittleEndian.AppendUint64(b, v)
	}
	f.Add(rec(0, 8, 4, 0xdeadbeef))
	f.Add(rec(1, uint32(s.f("Klass::_layout_helper")), 4, 0x80ff0003))
	f.Add(rec(0, uint32(sc.table-heapLo+s.hdr), 4, 0x7fffffff))
	f.Add(append(rec(2, 0, 8, nativeLo), rec(1, 0x300, 8, metaLo+0x4000)...))
	f.Add(rec(1, uint32(s.size("InstanceKlass")+64), 8, 0xffff_fff0_0000_000c))
	f.Add(rec(0, uint32(s.mirrors[sc.app]-heapLo+mirrorSizeOff), 4, 0x1000_0000))
	f.Fuzz(func(t *testing.T, data []byte) {
		type saved struct {
			a uint64
			b []byte
		}
		var undo []saved
		regions := [][2]uint64{{heapLo, s.heapTop}, {metaLo, s.metaTop}, {nativeLo, s.nativeTop}}
		for len(data) >= 14 && len(undo) < 64 {
			r := regions[int(data[0])%len(regions)]
			a := r[0] + uint64(binary.LittleEndian.Uint32(data[1:]))%(r[1]-r[0])
			n := int(data[5]%8) + 1
			old := make([]byte, n)
			s.m.read(old, a)
			undo = append(undo, saved{a, old})
			s.m.write(a, data[6:6+n])
			data = data[14:]
		}
		defer func() {
			for i := len(undo) - 1; i >= 0; i-- {
				s.m.write(undo[i].a, undo[i].b)
			}
		}()
		l, err := NewLayout(s.tab, s.m, Options{})
		if err != nil {
			return
		}
		cfg := Config{MaxObjects: 50_000, MaxQueue: 20_000, MaxChains: 1000, MaxRows: 1000, MaxRuns: 1000,
			MaxPages: 1000, MaxBitmap: 1 << 20, MaxKlasses: 1000, MaxCLDs: 100, MaxClasses: 1000,
			CacheBytes: 1 << 20, MinSize: 4096, OnObject: func(Object) {}, FieldName: sc.names,
			Roots: []Root{{Addr: sc.onlyRoot, Hop: "root", Rank: 1}}}
		start := time.Now()
		res, err := Walk(context.Background(), l, s.m, cfg)
		if err != nil {
			return
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("walk took %v", d)
		}
		st := res.Stats
		var sum uint64
		for i, ro := range res.Rows {
			sum += ro.Count
			if len(ro.Sample) > 8 || ro.Count == 0 {
				t.Errorf("row %d: %d objects, sample %d", i, ro.Count, len(ro.Sample))
			}
			if h := res.Hops(ro.Chain); len(h) > 64 {
				t.Errorf("chain of %d hops", len(h))
			}
			res.Name(i)
		}
		if int64(sum) != st.Objects || st.Objects > cfg.MaxObjects || st.Chains > cfg.MaxChains+1 ||
			st.Klasses > cfg.MaxKlasses || st.CLDs > cfg.MaxCLDs || st.Runs > cfg.MaxRuns {
			t.Errorf("stats %+v, rows hold %d", st, sum)
		}
		for _, a := range []uint64{heapLo, sc.table, s.heapTop - 8, sc.onlyRoot} {
			res.Lookup(a)
			res.LookupClass(a, sc.item)
		}
	})
}
