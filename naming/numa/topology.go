// Package numa answers the two NUMA questions of the profiler: which node
// holds a sampled page (move_pages(2) status query, batched and cached) and
// which node a sampling CPU belongs to (sysfs topology), and counts local
// vs remote accesses per node pair.
package numa

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Unknown is the node of a page that is not mapped or not present, or of a
// CPU outside the topology.
const Unknown = -1

// Topology maps CPUs to nodes and holds the node distance table.
type Topology struct {
	Nodes    []int // online nodes, ascending
	cpuNode  map[int]int
	distance map[[2]int]int
}

// NewTopology builds a topology from a CPU → node map (fakes, tests);
// distances are 10 locally and 20 remotely, as a two-level SLIT.
func NewTopology(cpuNode map[int]int) *Topology {
	t := &Topology{cpuNode: map[int]int{}, distance: map[[2]int]int{}}
	seen := map[int]bool{}
	for c, n := range cpuNode {
		t.cpuNode[c] = n
		if !seen[n] {
			seen[n] = true
			t.Nodes = append(t.Nodes, n)
		}
	}
	sort.Ints(t.Nodes)
	for _, a := range t.Nodes {
		for _, b := range t.Nodes {
			d := 20
			if a == b {
				d = 10
			}
			t.distance[[2]int{a, b}] = d
		}
	}
	return t
}

// LoadTopology reads root/sys/devices/system/node: the online nodes, each
// node's cpulist and distance row. root is "/" for the running machine. A
// kernel without NUMA support (no node directory) is one node 0 holding
// every CPU in root/sys/devices/system/cpu/online.
func LoadTopology(root string) (*Topology, error) {
	dir := filepath.Join(root, "sys/devices/system/node")
	nodes, err := onlineNodes(dir)
	if errors.Is(err, fs.ErrNotExist) {
		b, err := os.ReadFile(filepath.Join(root, "sys/devices/system/cpu/online"))
		if err != nil {
			return nil, fmt.Errorf("read online cpus: %w", err)
		}
		cpus, err := ParseCPUList(string(b))
		if err != nil {
			return nil, fmt.Errorf("parse online cpus: %w", err)
		}
		m := map[int]int{}
		for _, c := range cpus {
			m[c] = 0
		}
		return NewTopology(m), nil
	}
	if err != nil {
		return nil, err
	}
	t := &Topology{Nodes: nodes, cpuNode: map[int]int{}, distance: map[[2]int]int{}}
	for _, n := range nodes {
		nd := filepath.Join(dir, "node"+strconv.Itoa(n))
		b, err := os.ReadFile(filepath.Join(nd, "cpulist"))
		if err != nil {
			return nil, fmt.Errorf("read cpus of node %d: %w", n, err)
		}
		if s := strings.TrimSpace(string(b)); s != "" { // memory-only nodes have no CPUs
			cpus, err := ParseCPUList(s)
			if err != nil {
				return nil, fmt.Errorf("parse cpus of node %d: %w", n, err)
			}
			for _, c := range cpus {
				t.cpuNode[c] = n
			}
		}
		b, err = os.ReadFile(filepath.Join(nd, "distance"))
		if err != nil {
			continue // distances are informative only
		}
		// The row lists distances to the online nodes in ascending order.
		for i, f := range strings.Fields(string(b)) {
			d, err := strconv.Atoi(f)
			if err != nil || i >= len(nodes) {
				return nil, fmt.Errorf("parse distance row of node %d: %q", n, strings.TrimSpace(string(b)))
			}
			t.distance[[2]int{n, nodes[i]}] = d
		}
	}
	return t, nil
}

func onlineNodes(dir string) ([]int, error) {
	if b, err := os.ReadFile(filepath.Join(dir, "online")); err == nil {
		nodes, err := ParseCPUList(string(b))
		if err != nil {
			return nil, fmt.Errorf("parse online nodes: %w", err)
		}
		return nodes, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list numa nodes: %w", err)
	}
	var nodes []int
	for _, e := range ents {
		if n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "node")); err == nil && strings.HasPrefix(e.Name(), "node") {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("no node directories in %s", dir)
	}
	sort.Ints(nodes)
	return nodes, nil
}

// NodeOfCPU returns the node of cpu, or Unknown.
func (t *Topology) NodeOfCPU(cpu int) int {
	if n, ok := t.cpuNode[cpu]; ok {
		return n
	}
	return Unknown
}

// CPUs returns the CPUs of node n, ascending.
func (t *Topology) CPUs(n int) []int {
	var out []int
	for c, cn := range t.cpuNode {
		if cn == n {
			out = append(out, c)
		}
	}
	sort.Ints(out)
	return out
}

// Distance returns the SLIT distance from node a to b (10 = local), or
// Unknown when not published.
func (t *Topology) Distance(a, b int) int {
	if d, ok := t.distance[[2]int{a, b}]; ok {
		return d
	}
	return Unknown
}

// ParseCPUList parses the kernel's list format ("0-3,8,10-11").
func ParseCPUList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("bad list element %q: %w", part, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("bad list range %q: %w", part, err)
			}
		}
		if b < a || a < 0 {
			return nil, fmt.Errorf("bad list range %q", part)
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out, nil
}
