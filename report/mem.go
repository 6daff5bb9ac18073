package report

// MemMetrics are what a hardware address-sampling source (PEBS, IBS) says
// about the sampled accesses: latency, the level that served them, TLB
// misses and HITM snoops. Absent for decode and page faults.
type MemMetrics struct {
	Samples uint64 `json:"samples"`        // samples that carried a data source or latency
	Latency uint64 `json:"latency_cycles"` // summed load latency
	// Levels counts samples by the level that served them ("L1", "L3",
	// "local DRAM", "remote DRAM", ...; "unknown" when not said).
	Levels    map[string]uint64 `json:"levels,omitempty"`
	TLBMisses uint64            `json:"tlb_misses,omitempty"`
	HitM      uint64            `json:"hitm,omitempty"`   // modified line in another core's cache: sharing
	Remote    uint64            `json:"remote,omitempty"` // served by another NUMA node or socket
}

// Add sums o into m.
func (m *MemMetrics) Add(o *MemMetrics) {
	if o == nil {
		return
	}
	m.Samples += o.Samples
	m.Latency += o.Latency
	m.TLBMisses += o.TLBMisses
	m.HitM += o.HitM
	m.Remote += o.Remote
	for k, v := range o.Levels {
		if m.Levels == nil {
			m.Levels = make(map[string]uint64)
		}
		m.Levels[k] += v
	}
}

// DRAM is the number of samples served from memory, local or remote.
func (m *MemMetrics) DRAM() uint64 {
	return m.Levels["local DRAM"] + m.Levels["remote DRAM"] + m.Levels["PMEM"] + m.Levels["CXL"]
}

// NUMAMetrics place an object's sampled pages on NUMA nodes (move_pages)
// and its accesses on the nodes of the CPUs that made them.
type NUMAMetrics struct {
	// Samples whose page node is known, by the node holding the page and
	// by the node of the CPU that sampled them.
	Home    map[int]uint64 `json:"home"`
	From    map[int]uint64 `json:"from"`
	Remote  uint64         `json:"remote"`  // samples whose CPU is on another node than the page
	Unknown uint64         `json:"unknown"` // page node unknown (not present, no permission)
}

// Add sums o into n.
func (n *NUMAMetrics) Add(o *NUMAMetrics) {
	if o == nil {
		return
	}
	if n.Home == nil {
		n.Home = make(map[int]uint64)
	}
	if n.From == nil {
		n.From = make(map[int]uint64)
	}
	for k, v := range o.Home {
		n.Home[k] += v
	}
	for k, v := range o.From {
		n.From[k] += v
	}
	n.Remote += o.Remote
	n.Unknown += o.Unknown
}

// SumMem returns a plus b: a itself, allocated when nil and b is not; b is
// never aliased, so merging leaves its inputs unchanged.
func SumMem(a, b *MemMetrics) *MemMetrics {
	if b == nil {
		return a
	}
	if a == nil {
		a = &MemMetrics{}
	}
	a.Add(b)
	return a
}

// SumNUMA is SumMem for NUMA placement.
func SumNUMA(a, b *NUMAMetrics) *NUMAMetrics {
	if b == nil {
		return a
	}
	if a == nil {
		a = &NUMAMetrics{}
	}
	a.Add(b)
	return a
}
