package heapwalk

import (
	"slices"
	"strings"
)

// result turns the walker's state into a Result.
func (w *walker) result() *Result {
	w.off.res.dropViews()
	res := &Result{Stats: w.stats, chains: w.chains, texts: w.texts, pages: w.pages, OffHeap: w.off.res}
	res.runs = w.finishRuns()
	res.Rows = make([]Row, 0, len(w.rows)-1)
	for _, r := range w.rows[1:] {
		k := w.klassList[r.klass-1]
		res.Rows = append(res.Rows, Row{Chain: ChainID(r.chain), Class: k.name, Klass: k.addr,
			Count: r.count, Bytes: r.bytes, Sample: slices.Clone(r.sample), Recursive: r.recursive})
	}
	w.reach(res)
	res.Stats.Klasses = len(w.klassList)
	res.Stats.Chains = len(w.chains) - 1
	res.Stats.Rows = len(res.Rows)
	res.Stats.Runs = res.runs.n
	res.Stats.BitmapBytes = w.visited.bytes()
	return res
}

// Hops returns a chain's hops, root first.
func (r *Result) Hops(c ChainID) []string {
	var out []string
	for n := uint32(c); n != 0 && int(n) < len(r.chains); n = r.chains[n].parent {
		out = append(out, r.texts[r.chains[n].text])
	}
	slices.Reverse(out)
	return out
}

// ChainString is a chain's hops joined by " -> ":
// "GroundTruth.tree (static) -> java.util.TreeMap.root".
func (r *Result) ChainString(c ChainID) string { return strings.Join(r.Hops(c), " -> ") }

// Name is a row's chain, and for a recursive row its class with "...":
// "GroundTruth.tree (static) -> java.util.TreeMap.root -> java.util.TreeMap$Entry...".
func (r *Result) Name(row int) string {
	ro := r.Rows[row]
	s := r.ChainString(ro.Chain)
	if ro.Recursive {
		s += " -> " + ro.Class + "..."
	}
	return s
}
