package numa

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestLoadTopology(t *testing.T) {
	cases := []struct {
		fixture string
		nodes   []int
		cpuNode map[int]int
		dist    map[[2]int]int
	}{
		{"this-vm-1node", []int{0}, map[int]int{0: 0, 1: 0, 2: Unknown}, map[[2]int]int{{0, 0}: 10}},
		{"two-node", []int{0, 1}, map[int]int{0: 0, 3: 0, 4: 1, 7: 1, 8: Unknown}, map[[2]int]int{{0, 1}: 21, {1, 1}: 10}},
		{"four-node", []int{0, 1, 2, 3}, map[int]int{5: 0, 33: 0, 12: 1, 47: 1, 20: 2, 63: 3}, map[[2]int]int{{0, 1}: 12, {1, 2}: 32, {3, 2}: 12}},
		{"cxl-memory-node", []int{0, 1}, map[int]int{0: 0, 3: 0, 4: Unknown}, map[[2]int]int{{0, 1}: 50}},
	}
	for _, c := range cases {
		top, err := LoadTopology(filepath.Join("testdata", c.fixture))
		if err != nil {
			t.Fatalf("%s: %v", c.fixture, err)
		}
		if !reflect.DeepEqual(top.Nodes, c.nodes) {
			t.Errorf("%s: nodes %v", c.fixture, top.Nodes)
		}
		for cpu, n := range c.cpuNode {
			if got := top.NodeOfCPU(cpu); got != n {
				t.Errorf("%s: cpu %d on node %d, want %d", c.fixture, cpu, got, n)
			}
		}
		for p, d := range c.dist {
			if got := top.Distance(p[0], p[1]); got != d {
				t.Errorf("%s: distance %v = %d, want %d", c.fixture, p, got, d)
			}
		}
	}
	top, _ := LoadTopology(filepath.Join("testdata", "four-node"))
	if got := top.CPUs(3); len(got) != 16 || got[0] != 24 || got[15] != 63 {
		t.Errorf("cpus of node 3: %v", got)
	}
	if top.Distance(0, 9) != Unknown {
		t.Error("distance to a missing node known")
	}
}

func TestLoadTopologyNoNUMA(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sys/devices/system/cpu")
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "online"), []byte("0-2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	top, err := LoadTopology(dir)
	if err != nil || !reflect.DeepEqual(top.Nodes, []int{0}) || top.NodeOfCPU(2) != 0 {
		t.Errorf("no-NUMA kernel: %+v %v", top, err)
	}
	if _, err := LoadTopology(t.TempDir()); err == nil {
		t.Error("empty root accepted")
	}
}

func TestParseCPUList(t *testing.T) {
	got, err := ParseCPUList("0-2,5,7-8\n")
	if err != nil || !reflect.DeepEqual(got, []int{0, 1, 2, 5, 7, 8}) {
		t.Errorf("%v %v", got, err)
	}
	for _, bad := range []string{"3-1", "a", "1-b", "-1"} {
		if _, err := ParseCPUList(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// fakeQuerier places pages by a map and counts calls.
type fakeQuerier struct {
	node  map[uint64]int
	calls [][]uint64
	err   error
}

func (f *fakeQuerier) Query(pid int, addrs []uint64) ([]int, error) {
	f.calls = append(f.calls, append([]uint64(nil), addrs...))
	if f.err != nil {
		return nil, f.err
	}
	out := make([]int, len(addrs))
	for i, a := range addrs {
		n, ok := f.node[a]
		if !ok {
			n = Unknown
		}
		out[i] = n
	}
	return out, nil
}

func TestCacheBatchAndExpiry(t *testing.T) {
	pg := uint64(os.Getpagesize())
	f := &fakeQuerier{node: map[uint64]int{0x10 * pg: 0, 0x11 * pg: 1}}
	c := NewCache(f, 5*time.Second)
	now := time.Unix(1000, 0)
	c.Now = func() time.Time { return now }

	// Three addresses on two pages plus an unmapped one: one batched call
	// with each page once.
	got, err := c.Nodes(42, []uint64{0x10*pg + 8, 0x11*pg + 100, 0x10*pg + 4000, 0x99 * pg})
	if err != nil || !reflect.DeepEqual(got, []int{0, 1, 0, Unknown}) {
		t.Fatalf("nodes %v %v", got, err)
	}
	if len(f.calls) != 1 || !reflect.DeepEqual(f.calls[0], []uint64{0x10 * pg, 0x11 * pg, 0x99 * pg}) {
		t.Fatalf("calls %v", f.calls)
	}
	if c.Len() != 2 {
		t.Errorf("cached %d pages, want 2 (unknown not cached)", c.Len())
	}
	// Fresh: only the unknown page is asked again.
	now = now.Add(4 * time.Second)
	f.node[0x11*pg] = 0 // migrated, not yet visible
	if n, _ := c.Node(42, 0x11*pg); n != 1 {
		t.Errorf("fresh entry re-queried: %d", n)
	}
	if _, err := c.Nodes(42, []uint64{0x10 * pg, 0x99 * pg}); err != nil || len(f.calls) != 2 || len(f.calls[1]) != 1 {
		t.Errorf("calls %v", f.calls)
	}
	// Expired: the migration is seen.
	now = now.Add(2 * time.Second)
	if n, _ := c.Node(42, 0x11*pg); n != 0 {
		t.Errorf("after expiry node %d, want 0 (migrated)", n)
	}
	// Another pid does not share entries.
	if _, err := c.Node(7, 0x10*pg); err != nil || len(f.calls) != 4 {
		t.Errorf("pid 7 used pid 42's entry: %d calls", len(f.calls))
	}
	c.Forget(42)
	if c.Len() != 1 {
		t.Errorf("after Forget(42): %d", c.Len())
	}
	f.err = unix.ESRCH
	if _, err := c.Node(43, pg); !errors.Is(err, unix.ESRCH) {
		t.Errorf("error not passed through: %v", err)
	}
}

func TestCacheTrim(t *testing.T) {
	pg := uint64(os.Getpagesize())
	f := &fakeQuerier{node: map[uint64]int{}}
	for i := uint64(0); i < 10; i++ {
		f.node[i*pg] = 0
	}
	c := NewCache(f, time.Second)
	c.MaxEntries = 4
	now := time.Unix(0, 0)
	c.Now = func() time.Time { return now }
	_, _ = c.Nodes(1, []uint64{0, pg, 2 * pg})
	now = now.Add(2 * time.Second)
	_, _ = c.Nodes(1, []uint64{3 * pg, 4 * pg})
	if c.Len() != 2 {
		t.Errorf("expired entries kept: %d", c.Len())
	}
	_, _ = c.Nodes(1, []uint64{5 * pg, 6 * pg, 7 * pg})
	if c.Len() != 0 {
		t.Errorf("over the bound with fresh entries: %d, want cleared", c.Len())
	}
}

func TestAccountingTwoNodes(t *testing.T) {
	top := NewTopology(map[int]int{0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1})
	var a Accounting
	for _, s := range []struct{ cpu, node int }{
		{0, 0}, {3, 0}, // local on node 0
		{1, 1}, {2, 1}, {2, 1}, // node 0 CPUs reading node 1 memory
		{5, 1},       // local on node 1
		{7, 0},       // node 1 CPU reading node 0 memory
		{6, Unknown}, // page not present
		{9, 0},       // CPU outside the topology
	} {
		a.Add(top, s.cpu, s.node, 1)
	}
	want := map[Pair]uint64{{0, 0}: 2, {0, 1}: 3, {1, 1}: 1, {1, 0}: 1}
	if !reflect.DeepEqual(a.Pairs, want) || a.Local != 3 || a.Remote != 4 || a.Unknown != 2 {
		t.Errorf("accounting %+v", a)
	}
	if s := a.RemoteShare(); s < 0.571 || s > 0.572 {
		t.Errorf("remote share %f, want 4/7", s)
	}
	var empty Accounting
	if empty.RemoteShare() != 0 {
		t.Error("empty share")
	}
	// Weighted: latency sums.
	var w Accounting
	w.Add(top, 4, 0, 300)
	w.Add(top, 0, 0, 100)
	if w.Remote != 300 || w.RemoteShare() != 0.75 {
		t.Errorf("weighted %+v", w)
	}
}

// TestMovePagesLive queries pages of this test process: touched pages are
// on a node of this machine (node 0 here, a single-node VM); never touched
// pages report ENOENT, i.e. Unknown; unmapped addresses EFAULT → Unknown.
func TestMovePagesLive(t *testing.T) {
	pg := os.Getpagesize()
	const n = 64
	buf, err := unix.Mmap(-1, 0, n*pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	for i := 0; i < n; i += 2 {
		buf[i*pg] = 1 // touch even pages only
	}
	base := uint64(uintptrOf(buf))
	addrs := make([]uint64, n+1)
	for i := 0; i < n; i++ {
		addrs[i] = base + uint64(i*pg) + 17 // not page aligned on purpose
	}
	addrs[n] = 0x1000 // never mapped
	top, err := LoadTopology("/")
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := MovePages{Batch: 7}.Query(os.Getpid(), alignAll(addrs))
	if err != nil {
		if errors.Is(err, unix.ENOSYS) {
			t.Skipf("kernel without move_pages: %v", err)
		}
		t.Fatal(err)
	}
	for i, nd := range nodes[:n] {
		switch {
		case i%2 == 0 && top.Distance(nd, nd) != 10:
			t.Errorf("touched page %d on node %d, not an online node %v", i, nd, top.Nodes)
		case i%2 == 0 && len(top.Nodes) == 1 && nd != 0:
			t.Errorf("touched page %d on node %d, want 0 on this single-node machine", i, nd)
		case i%2 == 1 && nd != Unknown:
			t.Errorf("untouched page %d on node %d, want Unknown (ENOENT)", i, nd)
		}
	}
	if nodes[n] != Unknown {
		t.Errorf("unmapped address on node %d", nodes[n])
	}
	// Through the cache, unaligned addresses.
	c := NewCache(MovePages{}, 0)
	got, err := c.Nodes(os.Getpid(), addrs[:4])
	if err != nil || got[0] != nodes[0] || got[1] != Unknown {
		t.Errorf("cache %v %v", got, err)
	}
}

func alignAll(a []uint64) []uint64 {
	out := make([]uint64, len(a))
	mask := ^uint64(os.Getpagesize() - 1)
	for i, v := range a {
		out[i] = v & mask
	}
	return out
}
