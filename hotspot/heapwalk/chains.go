package heapwalk

import (
	"strconv"
)

// ChainID names a holder chain in a Result; 0 is the empty chain.
type ChainID uint32

// chainNode is one chain: its parent chain plus one hop.
type chainNode struct {
	parent uint32
	text   uint32 // what the hop says
	fold   uint32 // what makes two hops the same, for folding
	depth  uint32
}

// hop is one kind of step from an object to another: a root, a field
// of a class, the elements of an array class.
type hop struct {
	text, fold uint32
	from       uint32 // the klass (index) whose objects take it; 0 for a root or a static
}

// edge is a hop taken from one chain; the objects it reaches get the
// chain it extends to (ext), or the parent's own when they are of the
// class the hop starts from (a linked list's next node).
type edge struct {
	chain, hop uint32
	ext        uint32
	hasExt     bool
	// A one-entry cache of the row its last object went to.
	rowKlass uint32
	row      uint32
}

// Edge ids share a queue entry with a heap offset (see walker.push).
const (
	edgeBits = 29
	maxEdges = 1<<edgeBits - 1
)

// intern returns the id of a text, keeping one copy of each.
func (w *walker) intern(s string) uint32 {
	if id, ok := w.textIdx[s]; ok {
		return id
	}
	id := uint32(len(w.texts))
	w.texts = append(w.texts, s)
	w.textIdx[s] = id
	return id
}

// hopOf interns a hop.
func (w *walker) hopOf(text, fold string, from uint32) uint32 {
	if len(w.hops) >= w.cfg.MaxHops && w.cappedHop != 0 {
		// Past the cap every new hop is one, so that a forged heap's
		// fields and statics cannot grow the tables without end.
		ti, ok1 := w.textIdx[text]
		fi, ok2 := w.textIdx[fold]
		if id, ok := w.hopIdx[[3]uint32{ti, fi, from}]; ok1 && ok2 && ok {
			return id
		}
		w.stats.HopsCapped++
		return w.cappedHop
	}
	key := [3]uint32{w.intern(text), w.intern(fold), from}
	if id, ok := w.hopIdx[key]; ok {
		return id
	}
	id := uint32(len(w.hops))
	w.hops = append(w.hops, hop{key[0], key[1], from})
	w.hopIdx[key] = id
	return id
}

// edgeOf interns the edge (chain, hop); false when the edges are at
// their cap.
func (w *walker) edgeOf(chain, h uint32) (uint32, bool) {
	key := uint64(chain)<<32 | uint64(h)
	if id, ok := w.edgeIdx[key]; ok {
		return id, true
	}
	if len(w.edges) >= min(w.cfg.MaxEdges, maxEdges) {
		return 0, false
	}
	id := uint32(len(w.edges))
	w.edges = append(w.edges, edge{chain: chain, hop: h})
	w.edgeIdx[key] = id
	return id, true
}

// childChain is the chain of an object of klass k reached over edge e:
// the parent's chain when k is the class the hop starts from (a
// recursive link: next, left, right, parent), else the parent's chain
// extended by the hop.
func (w *walker) childChain(e *edge, k *klass) (uint32, bool) {
	if w.hops[e.hop].from == k.idx {
		return e.chain, true
	}
	if !e.hasExt {
		e.ext = w.extend(e.chain, e.hop)
		e.hasExt = true
	}
	return e.ext, false
}

// extend returns chain c followed by hop h. A hop already on c folds
// back to where c first took it, so a cycle through several classes
// adds no chain; past the depth or the count cap, c itself.
func (w *walker) extend(c, h uint32) uint32 {
	hp := w.hops[h]
	for n := c; n != 0; n = w.chains[n].parent {
		if w.chains[n].fold == hp.fold {
			return n
		}
	}
	if int(w.chains[c].depth) >= w.cfg.MaxDepth {
		w.stats.DepthCapped++
		return c
	}
	key := uint64(c)<<32 | uint64(hp.fold)
	if id, ok := w.chainIdx[key]; ok {
		return id
	}
	if len(w.chains) > w.cfg.MaxChains {
		w.stats.ChainsCapped++
		return c
	}
	id := uint32(len(w.chains))
	w.chains = append(w.chains, chainNode{parent: c, text: hp.text, fold: hp.fold, depth: w.chains[c].depth + 1})
	root := id
	if c != 0 {
		root = w.chainRoot[c]
	}
	w.chainRoot = append(w.chainRoot, root)
	w.chainIdx[key] = id
	return id
}

// fieldEdge is the edge of k's i-th oop field from chain.
func (w *walker) fieldEdge(k *klass, i int, chain uint32) (uint32, bool) {
	if k.edges[i] != 0 && k.edgeChain[i] == chain {
		return k.edges[i], true
	}
	if k.hops[i] == 0 {
		off := k.oops[i]
		d := w.declaring(k, off)
		text := ""
		if w.cfg.FieldName != nil {
			text = w.cfg.FieldName(FieldRef{Klass: k.addr, Declaring: d.addr, Class: d.name, Offset: off})
		}
		if text == "" {
			text = d.name + "+" + strconv.Itoa(int(off))
		}
		k.hops[i] = w.hopOf(text, text, k.idx)
	}
	e, ok := w.edgeOf(chain, k.hops[i])
	if ok {
		k.edgeChain[i], k.edges[i] = chain, e
	}
	return e, ok
}

// arrayEdge is the edge of the elements of the object array class k
// from chain: every index is one hop, "[]".
func (w *walker) arrayEdge(k *klass, chain uint32) (uint32, bool) {
	if k.arrEdge != 0 && k.arrChain == chain {
		return k.arrEdge, true
	}
	if k.arrHop == 0 {
		// Arrays of different classes are different hops, so that
		// Map → Node[] → List → Object[] does not fold at the second [].
		k.arrHop = w.hopOf("[]", "[]"+k.name, k.idx)
	}
	e, ok := w.edgeOf(chain, k.arrHop)
	if ok {
		k.arrChain, k.arrEdge = chain, e
	}
	return e, ok
}

// staticEdge is the edge of the static field at off in the mirror of
// class mk (nil: a mirror whose class is unknown): a root.
func (w *walker) staticEdge(mk *klass, off uint32) (uint32, bool) {
	if mk == nil {
		return w.edgeOf(0, w.hopOf("(statics of an unknown class)", "(statics of an unknown class)", 0))
	}
	h, ok := mk.statics[off]
	if !ok {
		text := ""
		if w.cfg.FieldName != nil {
			text = w.cfg.FieldName(FieldRef{Klass: mk.addr, Declaring: mk.addr, Class: mk.name, Offset: off, Static: true})
		}
		if text == "" {
			text = mk.name + "+" + strconv.Itoa(int(off))
		}
		text += " (static)"
		h = w.hopOf(text, text, 0)
		if mk.statics == nil {
			mk.statics = make(map[uint32]uint32)
		}
		mk.statics[off] = h
	}
	return w.edgeOf(0, h)
}

// rowOf is the row of objects of klass k on chain.
func (w *walker) rowOf(e *edge, chain uint32, k *klass) uint32 {
	if e.rowKlass == k.idx && e.row != 0 && w.rows[e.row].chain == chain {
		return e.row
	}
	if k.hasRow && k.rowChain == chain {
		e.rowKlass, e.row = k.idx, k.row
		return k.row
	}
	key := uint64(chain)<<32 | uint64(k.idx)
	id, ok := w.rowIdx[key]
	if !ok {
		if len(w.rows) > w.cfg.MaxRows {
			// Past the cap, one row per class holds the rest.
			w.stats.RowsCapped++
			chain = w.cappedChain
			key = uint64(chain)<<32 | uint64(k.idx)
			id, ok = w.rowIdx[key]
		}
		if !ok {
			id = uint32(len(w.rows))
			w.rows = append(w.rows, rowRec{chain: chain, klass: k.idx, lastRun: -1})
			w.rowIdx[key] = id
		}
	}
	k.rowChain, k.row, k.hasRow = chain, id, true
	e.rowKlass, e.row = k.idx, id
	return id
}

// rowRec is a row while the walk fills it.
type rowRec struct {
	chain, klass uint32
	count, bytes uint64
	sample       []uint64
	recursive    bool
	lastRun      int64 // its latest lookup run (a runStore handle), which its next object may extend
}
