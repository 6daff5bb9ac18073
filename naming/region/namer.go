package region

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// ReloadInterval is the least time between two re-reads of a live
// target's maps and threads: a miss re-reads at most 4 times a second,
// and misses in between are answered "unknown" at once. A re-read that
// leaves the address unmapped (a stray decoded address) doubles the
// wait, up to maxReloadWait: each one reads three files per thread.
const ReloadInterval = 250 * time.Millisecond

const maxReloadWait = 8 * time.Second

const (
	// maxMapsBytes caps the /proc/PID/maps read (a JVM with 100k threads
	// prints ~20 MiB).
	maxMapsBytes = 64 << 20
	// maxTasks caps the threads read per reload (two small reads each).
	maxTasks = 1 << 15
)

// Namer names the data addresses of a live process. It is not safe for
// concurrent use: one goroutine (the join) calls Name.
type Namer struct {
	pid  int
	text JVMText
	m    *Map
	last time.Time
	wait time.Duration // least time from last to the next re-read on a miss
	now  func() time.Time
	// hints are stack pointers learned from samples, carried over a
	// reload (the threads running at a reload have no syscall sp).
	hints map[uint32]uint64
	stats Stats
}

// Stats counts a Namer's work.
type Stats struct {
	Lookups, Misses, Reloads, Learned uint64
}

// New reads pid's maps and threads and builds its Map.
func New(pid int, text JVMText) (*Namer, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("region: bad pid %d", pid)
	}
	n := &Namer{pid: pid, text: text, now: time.Now, wait: ReloadInterval, hints: map[uint32]uint64{}}
	if err := n.Reload(); err != nil {
		return nil, err
	}
	return n, nil
}

// SetText replaces the JVM's texts (a fresh VM.info after the metaspace or
// code cache grew, say) and rebuilds the Map now.
func (n *Namer) SetText(text JVMText) error {
	n.text = text
	return n.Reload()
}

// Map is the current snapshot.
func (n *Namer) Map() *Map { return n.m }

// Stats returns the counters.
func (n *Namer) Stats() Stats { return n.stats }

// Reload re-reads the maps and threads now, whatever the rate limit.
func (n *Namer) Reload() error {
	n.last = n.now()
	maps, err := readCapped(fmt.Sprintf("/proc/%d/maps", n.pid), maxMapsBytes)
	if err != nil {
		return fmt.Errorf("region: %w", err)
	}
	tasks := readTasks(n.pid)
	for i, t := range tasks {
		if t.SP == 0 {
			tasks[i].SP = n.hints[t.TID]
		}
	}
	n.m = Build(maps, n.text, tasks, uint32(n.pid))
	n.stats.Reloads++
	return nil
}

// Name returns the region of the data address addr sampled on thread
// tid, whose stack pointer was rsp (0: not known). The mapping that holds
// rsp becomes tid's stack. An address no mapping holds re-reads the maps
// (at most every ReloadInterval) and is looked up again.
//
// It allocates nothing, except the first time it learns a thread's stack.
func (n *Namer) Name(addr uint64, tid uint32, rsp uint64) Region {
	n.stats.Lookups++
	m := n.m
	i := m.find(addr)
	if i < 0 {
		n.stats.Misses++
		if t := n.now(); t.Sub(n.last) >= max(n.wait, ReloadInterval) {
			if n.Reload() == nil {
				m = n.m
				i = m.find(addr)
			}
			n.last = t
			if i < 0 {
				n.wait = min(2*max(n.wait, ReloadInterval), maxReloadWait)
			} else {
				n.wait = ReloadInterval
			}
		}
		if i < 0 {
			return m.regions[0]
		}
	}
	if rsp != 0 && tid != 0 {
		mi := m.mapIdx[i]
		if rsp >= m.mstart[mi] && rsp < m.mend[mi] {
			// addr is in the mapping of the sampling thread's sp.
			if m.mend[mi]-m.mstart[mi] > maxStackMapping {
				if addr+redZone >= rsp && addr-rsp < maxStackMapping && m.stackable(i) {
					return n.stackOf(m, tid)
				}
			} else if r := m.regions[m.reg[i]]; r.TID != tid && m.stackable(i) {
				n.learn(m, i, tid, rsp)
			}
		} else if j := m.find(rsp); j >= 0 {
			mj := m.mapIdx[j]
			if r := m.regions[m.reg[j]]; r.TID != tid && m.stackable(j) && m.mend[mj]-m.mstart[mj] <= maxStackMapping {
				n.learn(m, j, tid, rsp)
			}
		}
	}
	return m.regions[m.reg[i]]
}

// A mapping larger than maxStackMapping that holds a stack pointer is a
// stack the kernel merged with neighbouring anonymous memory (a direct
// buffer, say): only addresses from just below the stack pointer (its red
// zone) up to maxStackMapping above it are taken for the stack.
const (
	maxStackMapping = 16 << 20
	redZone         = 128
)

// stackOf is tid's stack region, named as learn names it.
func (n *Namer) stackOf(m *Map, tid uint32) Region {
	if _, ok := m.names[tid]; !ok && len(m.names) < maxClaims {
		m.names[tid] = readComm(n.pid, tid)
	}
	return m.regions[m.owned(tid)]
}

func (n *Namer) learn(m *Map, i int, tid uint32, rsp uint64) {
	if _, ok := m.names[tid]; !ok && len(m.names) < maxClaims {
		m.names[tid] = readComm(n.pid, tid)
	}
	m.learn(i, tid)
	if len(n.hints) < maxTasks {
		n.hints[tid] = rsp
	}
	n.stats.Learned++
}

// readTasks lists /proc/PID/task: each thread's comm and, when it is
// blocked, its stack pointer from /proc/PID/task/TID/syscall (which needs
// ptrace access: root has it). These are the kernel's files, never a path
// the target names.
func readTasks(pid int) []Task {
	d, err := os.Open(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(maxTasks)
	out := make([]Task, 0, len(names))
	for _, s := range names {
		tid, err := strconv.ParseUint(s, 10, 32)
		if err != nil || tid == 0 {
			continue
		}
		t := Task{TID: uint32(tid), Comm: readComm(pid, uint32(tid))}
		if b, err := readCapped(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, tid), 512); err == nil {
			t.SP, _ = ParseSyscallSP(b)
		}
		if b, err := readCapped(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid), 4096); err == nil {
			t.NSTID = parseNSpid(b)
		}
		out = append(out, t)
	}
	return out
}

func readComm(pid int, tid uint32) string {
	b, err := readCapped(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid), 64)
	if err != nil {
		return ""
	}
	if len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	return b
}

// readCapped reads at most limit bytes of a /proc file.
func readCapped(path string, limit int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit))
	return string(b), err
}

// parseNSpid returns the innermost TID of a status file's "NSpid:" line.
func parseNSpid(status string) uint32 {
	for _, l := range strings.Split(status, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "NSpid:" {
			n, err := strconv.ParseUint(f[len(f)-1], 10, 32)
			if err == nil {
				return uint32(n)
			}
		}
	}
	return 0
}
