package join

import (
	"testing"

	"github.com/djx-bpf/djx-bpf/naming/numa"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// A load served by L3 with a HITM snoop and a TLB miss, as PEBS would
// report it (union perf_mem_data_src, include/uapi/linux/perf_event.h):
// mem_op LOAD (0x2) at bit 0, mem_lvl HIT|L3 (0x2|0x40) at bit 5,
// mem_snoop HITM (0x10) at bit 19, mem_dtlb MISS|L2 (0x4|0x10) at bit 26.
const l3HitM = 0x2 | (0x42 << 5) | (0x10 << 19) | (0x14 << 26)

// fakePages puts every page on node 1.
type fakePages struct{}

func (fakePages) Query(pid int, addrs []uint64) ([]int, error) {
	out := make([]int, len(addrs))
	for i := range out {
		out[i] = 1
	}
	return out, nil
}

func TestMemMetricsAndNUMA(t *testing.T) {
	j := exactJVM(1)
	j.numa = &NUMA{topo: numa.NewTopology(map[int]int{0: 0, 1: 1}), pages: numa.NewCache(fakePages{}, numa.DefaultMaxAge)}
	j.OnBatch(batch(100, hello(100), alloc(110, 0x1000_0000, 1<<20, "[J", agentwire.Frame{Method: 7})))
	for i, cpu := range []uint32{0, 0, 1} {
		s := tsample(uint64(1000+i), 0x1000_0000+uint64(i)*4096, 0xA0, 5)
		s.CPU = cpu
		s.Flags = sample.FlagMemOK
		s.DataSrc = l3HitM
		s.Weight = 200 // PERF_SAMPLE_WEIGHT: the latency in cycles
		j.OnSample(s, sample.Hardware)
	}
	j.OnBatch(batch(9000))
	j.Drain(true)
	o := j.Report()[0]
	m := o.Mem
	if m == nil || m.Samples != 3 || m.Latency != 600 || m.Levels["L3"] != 3 || m.HitM != 3 || m.TLBMisses != 3 {
		t.Fatalf("mem metrics %+v", m)
	}
	if a := o.Accesses; len(a) != 1 || a[0].Mem == nil || a[0].Mem.Samples != 3 {
		t.Errorf("access metrics %+v", a)
	}
	if a := o.Accesses[0].NUMA; a == nil || a.Remote != 2 || a.Home[1] != 3 {
		t.Errorf("access numa %+v", a)
	}
	n := o.NUMA
	if n == nil || n.Home[1] != 3 || n.From[0] != 2 || n.From[1] != 1 || n.Remote != 2 {
		t.Fatalf("numa %+v", n)
	}
}
