package join

import (
	"github.com/djx-bpf/djx-bpf/naming/numa"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/pmu"
)

// addMem counts sample p's data source and latency into m (allocated on
// first use).
func (j *JVM) addMem(m *report.MemMetrics, p *pending) *report.MemMetrics {
	if m == nil {
		m = &report.MemMetrics{}
	}
	m.Samples++
	m.Latency += pmu.DecodeWeight(p.weight, j.weightStruct).Latency
	d := pmu.DecodeDataSrc(p.dataSrc)
	level := string(d.Level)
	if level == "" {
		level = "unknown"
	}
	if m.Levels == nil {
		m.Levels = make(map[string]uint64)
	}
	m.Levels[level]++
	if d.TLBMiss {
		m.TLBMisses++
	}
	if d.SnoopHitM {
		m.HitM++
	}
	if d.Remote {
		m.Remote++
	}
	return m
}

// NUMA finds the node of each sampled page (move_pages, cached per
// page) and of each sampling CPU.
type NUMA struct {
	topo  *numa.Topology
	pages *numa.Cache
}

// NewNUMA reads the topology and prepares the page lookups for --numa.
func NewNUMA() (*NUMA, error) {
	topo, err := numa.LoadTopology("/")
	if err != nil {
		return nil, err
	}
	return &NUMA{topo: topo, pages: numa.NewCache(numa.MovePages{}, numa.DefaultMaxAge)}, nil
}

// place finds the node holding sample p's page (numa.Unknown if it cannot
// be read) and the node of the CPU that took it.
func (n *NUMA) place(pid int, p *pending) (node, from int) {
	node, err := n.pages.Node(pid, p.addr)
	if err != nil {
		node = numa.Unknown
	}
	return node, n.topo.NodeOfCPU(int(p.cpu))
}

// count adds one sample whose page is on node, taken on a CPU of node from.
func count(m *report.NUMAMetrics, node, from int) *report.NUMAMetrics {
	if m == nil {
		m = &report.NUMAMetrics{Home: make(map[int]uint64), From: make(map[int]uint64)}
	}
	if node == numa.Unknown {
		m.Unknown++
		return m
	}
	m.Home[node]++
	m.From[from]++
	if from != node && from != numa.Unknown {
		m.Remote++
	}
	return m
}

// charge is what one sample adds to the memory and NUMA figures of each
// thing it is charged to; its NUMA placement is looked up once.
type charge struct {
	p          *pending
	numa       bool
	node, from int
}

func (j *JVM) chargeOf(p *pending) charge {
	c := charge{p: p}
	if j.numa != nil {
		c.numa = true
		c.node, c.from = j.numa.place(j.pid, p)
	}
	return c
}

// charge adds c to the figures mem and nm.
func (j *JVM) charge(c charge, mem **report.MemMetrics, nm **report.NUMAMetrics) {
	if c.p.memOK {
		*mem = j.addMem(*mem, c.p)
	}
	if c.numa {
		*nm = count(*nm, c.node, c.from)
	}
}
