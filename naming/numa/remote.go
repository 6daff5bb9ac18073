package numa

// Pair is an access from a CPU on node From to a page on node To.
type Pair struct{ From, To int }

// Accounting counts local and remote accesses per node pair. Weights let
// callers sum latency or 1/p-corrected sample counts instead of samples.
type Accounting struct {
	Pairs   map[Pair]uint64
	Local   uint64
	Remote  uint64
	Unknown uint64 // CPU outside the topology, or page node unknown
}

// Add records one access of weight w by cpu to a page on pageNode.
func (a *Accounting) Add(t *Topology, cpu, pageNode int, w uint64) {
	from := t.NodeOfCPU(cpu)
	if from == Unknown || pageNode == Unknown {
		a.Unknown += w
		return
	}
	if a.Pairs == nil {
		a.Pairs = map[Pair]uint64{}
	}
	a.Pairs[Pair{from, pageNode}] += w
	if from == pageNode {
		a.Local += w
	} else {
		a.Remote += w
	}
}

// RemoteShare is Remote / (Local + Remote), 0 when nothing is known.
func (a *Accounting) RemoteShare() float64 {
	if a.Local+a.Remote == 0 {
		return 0
	}
	return float64(a.Remote) / float64(a.Local+a.Remote)
}
