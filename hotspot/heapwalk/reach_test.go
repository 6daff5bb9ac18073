package heapwalk

import (
	"context"
	"strings"
	"testing"
)

// TestWalkReach checks what a row says of the other roots that reach it
// and of the bytes it retains, on a heap whose sharing is known: a list
// whose one item another static holds, and an array two statics hold,
// one of them through a holder object.
func TestWalkReach(t *testing.T) {
	for _, v := range variants {
		t.Run(v.String(), func(t *testing.T) {
			s := newSynthV(t, v)
			_, itemSize := s.fields(0)
			item := s.class("app/Item", 0, itemSize+8, nil, 0)
			nodeF, size := s.fields(2) // next, value
			node := s.class("app/Node", 0, size, nodeF, 0)
			lf, size := s.fields(1)
			list := s.class("app/List", 0, size, lf, 0)
			hf, size := s.fields(1)
			holder := s.class("app/Holder", 0, size, hf, 0)
			longs := s.arrayClass("[J", false, 3)
			app := s.class("App", 0, 16, nil, 4)

			l := s.obj(list)
			var prev, shared uint64
			for i := range 100 {
				n := s.obj(node)
				it := s.obj(item)
				s.ref(n, nodeF[1], it)
				if i == 50 {
					shared = it
				}
				if prev == 0 {
					s.ref(l, lf[0], n)
				} else {
					s.ref(prev, nodeF[0], n)
				}
				prev = n
			}
			h := s.obj(holder)
			big := s.array(longs, 1000)
			s.ref(h, hf[0], big)
			s.setStatic(app, 0, l)
			s.setStatic(app, 1, shared)
			s.setStatic(app, 2, h)
			s.setStatic(app, 3, big)
			lay := s.finish()

			names := func(f FieldRef) string {
				switch {
				case f.Static && f.Klass == app && f.Offset >= classSize:
					return "App." + []string{"list", "shared", "holder", "direct"}[(f.Offset-classSize)/uint32(s.oop)]
				case f.Declaring == node && f.Offset == nodeF[0]:
					return "app.Node.next"
				case f.Declaring == node:
					return "app.Node.value"
				case f.Declaring == list:
					return "app.List.head"
				case f.Declaring == holder:
					return "app.Holder.big"
				}
				return ""
			}
			var large []Object
			res := walkScene(t, &scene{l: lay}, s.m, Config{FieldName: names, MinSize: 4096,
				OnObject: func(o Object) { large = append(large, o) },
				Roots:    []Root{{Addr: l, Hop: "Main.main local #1", Rank: 1, Others: 2}}})
			rows := rowsBy(res)
			row := func(key string) Row {
				r, ok := rows[key]
				if !ok {
					dumpRows(t, res)
					t.Fatalf("no row %q", key)
				}
				return r
			}
			// The list: its own root, main's local, and the two frames
			// main's local stands for.
			for _, k := range []string{"App.list (static) | app.List", "App.list (static) -> app.List.head | app.Node",
				"App.list (static) -> app.List.head -> app.Node.value | app.Item"} {
				if r := row(k); r.OtherRoots != 3 {
					t.Errorf("%s: %d other roots, want 3 (main's local and two frames)", k, r.OtherRoots)
				}
			}
			if r := row("App.shared (static) | app.Item"); r.OtherRoots != 1 || r.Count != 1 {
				t.Errorf("shared item: %d objects, %d other roots, want 1 and 1 (the list)", r.Count, r.OtherRoots)
			}
			// The list retains its nodes and items but the shared one.
			var listBytes uint64
			for _, r := range res.Rows {
				if strings.HasPrefix(res.ChainString(r.Chain), "App.list (static)") {
					listBytes += r.Bytes
				}
			}
			if r := row("App.list (static) | app.List"); r.Retained != listBytes || listBytes == 0 {
				t.Errorf("list retains %d bytes, want %d", r.Retained, listBytes)
			}
			// The array is held by two statics: the holder retains only
			// itself, and the array's own row retains the array.
			hr, ar := row("App.holder (static) | app.Holder"), row("App.direct (static) | long[]")
			if hr.Retained != hr.Bytes || ar.Retained != ar.Bytes || ar.OtherRoots != 1 || hr.OtherRoots != 0 {
				t.Errorf("holder retains %d of its %d bytes (want equal), %d other roots (want 0); array %d of %d, %d other roots (want 1)",
					hr.Retained, hr.Bytes, hr.OtherRoots, ar.Retained, ar.Bytes, ar.OtherRoots)
			}
			if len(large) != 1 || large[0].Addr != big {
				t.Errorf("large objects %+v, want the array", large)
			}
			if res.Stats.CrossCapped || res.Stats.CrossEdges == 0 {
				t.Errorf("cross references: %d edges, capped %v", res.Stats.CrossEdges, res.Stats.CrossCapped)
			}
			// Past the cross references' cap: no retained bytes, and no
			// more other roots than before.
			capped := walkScene(t, &scene{l: lay}, s.m, Config{FieldName: names, MaxCross: 1,
				Roots: []Root{{Addr: l, Hop: "Main.main local #1", Rank: 1}}})
			for _, r := range capped.Rows {
				if r.Retained != 0 || r.OtherRoots > 3 {
					t.Errorf("capped: %s retains %d, %d other roots", capped.ChainString(r.Chain), r.Retained, r.OtherRoots)
				}
			}
			if !capped.Stats.CrossCapped {
				t.Error("MaxCross 1: not capped")
			}
		})
	}
}

// TestWalkRefresh: roots taken before a collection moved their objects
// are replaced, once the statics are walked, by those Refresh gives; and
// left out when it gives none.
func TestWalkRefresh(t *testing.T) {
	s := newSynth(t, "jdk17", true, true)
	_, itemSize := s.fields(0)
	item := s.class("app/Item", 0, itemSize+8, nil, 0)
	longs := s.arrayClass("[J", false, 3)
	s.class("App", 0, 16, nil, 0)
	buf := s.array(longs, 100) // held by main's local only
	other := s.obj(item)       // what the old address holds now
	lay := s.finish()
	sc := &scene{l: lay}
	stale := []Root{{Addr: other, Hop: "Main.main local #1", Rank: 2}}
	named := func(res *Result, class string) bool {
		for _, r := range res.Rows {
			if res.ChainString(r.Chain) == "Main.main local #1" && r.Class == class {
				return true
			}
		}
		return false
	}
	called := false
	res := walkScene(t, sc, s.m, Config{Roots: stale, Refresh: func(context.Context) ([]Root, bool) {
		called = true
		return []Root{{Addr: buf, Hop: "Main.main local #1", Rank: 2}}, true
	}})
	if !called || !res.Stats.RootsRefreshed || !named(res, "long[]") || named(res, "app.Item") {
		t.Errorf("refreshed: called %v, stats say %v, the buffer named %v, the stale object named %v",
			called, res.Stats.RootsRefreshed, named(res, "long[]"), named(res, "app.Item"))
	}
	res = walkScene(t, sc, s.m, Config{Roots: stale, Refresh: func(context.Context) ([]Root, bool) { return nil, true }})
	if named(res, "app.Item") || res.Stats.Roots != 0 {
		t.Errorf("no fresh roots: %d roots taken, the stale object named %v", res.Stats.Roots, named(res, "app.Item"))
	}
	res = walkScene(t, sc, s.m, Config{Roots: stale, Refresh: func(context.Context) ([]Root, bool) { return nil, false }})
	if !named(res, "app.Item") || res.Stats.RootsRefreshed {
		t.Errorf("roots kept: the object at the root named %v, refreshed %v", named(res, "app.Item"), res.Stats.RootsRefreshed)
	}
}
