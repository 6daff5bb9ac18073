package heapwalk

// Retained bytes, by chain: the walk's chains form a tree (each chain
// extends its parent by one hop), and the cross references between
// roots add edges to it. A chain dominates another when every path from
// the roots to it passes through it; what it retains is its own bytes
// and those of the chains it dominates. Sharing inside one root is not
// seen (the walk keeps only references across roots), so an object two
// chains of one root hold counts under the first that reached it.

// retained returns each chain's retained bytes.
func (w *walker) retained(res *Result, edges [][2]uint32) []uint64 {
	n := len(w.chains)
	// Successors and predecessors, as compressed lists: the tree's
	// edges, then the cross references.
	succ := newAdj(n, len(edges)+n)
	pred := newAdj(n, len(edges)+n)
	for c := 1; c < n; c++ {
		succ.count(w.chains[c].parent)
		pred.count(uint32(c))
	}
	for _, e := range edges {
		succ.count(e[0])
		pred.count(e[1])
	}
	succ.start()
	pred.start()
	for c := 1; c < n; c++ {
		p := w.chains[c].parent
		succ.add(p, uint32(c))
		pred.add(uint32(c), p)
	}
	for _, e := range edges {
		succ.add(e[0], e[1])
		pred.add(e[1], e[0])
	}
	order := postorder(succ, n)
	idom := dominators(pred, order, n)
	bytes := make([]uint64, n)
	for _, r := range res.Rows {
		bytes[r.Chain] += r.Bytes
	}
	for _, c := range order { // children before their dominators
		if c != 0 && idom[c] >= 0 {
			bytes[idom[c]] += bytes[c]
		}
	}
	return bytes
}

// adj is an adjacency list in compressed form.
type adj struct {
	at  []int32 // node i's neighbours are to[at[i]:at[i+1]]
	to  []uint32
	pos []int32
}

func newAdj(n, m int) *adj {
	return &adj{at: make([]int32, n+1), to: make([]uint32, 0, m), pos: make([]int32, n)}
}

func (a *adj) count(v uint32) { a.at[v+1]++ }

func (a *adj) start() {
	for i := 1; i < len(a.at); i++ {
		a.at[i] += a.at[i-1]
	}
	a.to = a.to[:a.at[len(a.at)-1]]
	copy(a.pos, a.at)
}

func (a *adj) add(v, u uint32) {
	a.to[a.pos[v]] = u
	a.pos[v]++
}

func (a *adj) of(v uint32) []uint32 { return a.to[a.at[v]:a.at[v+1]] }

// postorder lists the nodes reachable from 0 in depth-first postorder.
func postorder(succ *adj, n int) []uint32 {
	out := make([]uint32, 0, n)
	seen := make([]bool, n)
	type frame struct {
		v uint32
		i int32
	}
	stack := []frame{{0, 0}}
	seen[0] = true
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		next := succ.of(f.v)
		if int(f.i) < len(next) {
			u := next[f.i]
			f.i++
			if !seen[u] {
				seen[u] = true
				stack = append(stack, frame{u, 0})
			}
			continue
		}
		out = append(out, f.v)
		stack = stack[:len(stack)-1]
	}
	return out
}

// dominators computes each node's immediate dominator (-1: unreachable)
// by Cooper, Harvey and Kennedy's iteration over reverse postorder.
func dominators(pred *adj, post []uint32, n int) []int32 {
	num := make([]int32, n) // postorder number + 1; 0: unreachable
	for i, v := range post {
		num[v] = int32(i + 1)
	}
	idom := make([]int32, n)
	for i := range idom {
		idom[i] = -1
	}
	idom[0] = 0
	intersect := func(a, b int32) int32 {
		for a != b {
			for num[a] < num[b] {
				a = idom[a]
			}
			for num[b] < num[a] {
				b = idom[b]
			}
		}
		return a
	}
	for changed := true; changed; {
		changed = false
		for i := len(post) - 1; i >= 0; i-- { // reverse postorder
			v := post[i]
			if v == 0 {
				continue
			}
			d := int32(-1)
			for _, p := range pred.of(v) {
				if idom[p] < 0 {
					continue
				}
				if d < 0 {
					d = int32(p)
				} else {
					d = intersect(int32(p), d)
				}
			}
			if d >= 0 && idom[v] != d {
				idom[v] = d
				changed = true
			}
		}
	}
	return idom
}
