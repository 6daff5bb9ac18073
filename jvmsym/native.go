package jvmsym

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// NativeFrame is a native code location. String formats it the way perf
// names samples, dso`symbol: "libjvm.so`G1ParScanThreadState::trim_queue_to_threshold",
// or "libjvm.so+0x1234" when no symbol covers the address.
type NativeFrame struct {
	Lib  string // base name of the mapped file, e.g. "libjvm.so"
	Func string // demangled function name without parameters; "" if unknown
	// Off is ip minus the start of Func; without Func it is the ELF virtual
	// address of ip, which addr2line and objdump take.
	Off uint64
}

// String formats the frame as Lib`Func, or Lib+0xOff without a function.
func (f NativeFrame) String() string {
	if f.Func == "" {
		return f.Lib + "+0x" + strconv.FormatUint(f.Off, 16)
	}
	return f.Lib + "`" + f.Func
}

// mapping is one line of /proc/PID/maps.
type mapping struct {
	start, end, off uint64
	dev             string
	inode           uint64
	path            string

	loaded bool     // syms was tried
	syms   *elfSyms // nil when the file is not a readable ELF file
}

// fileBacked tells a mapping of a file apart from anonymous memory, the
// heap, the stack, [vdso] and friends.
func (m *mapping) fileBacked() bool {
	return m.inode != 0 && strings.HasPrefix(m.path, "/")
}

// sameAs tells whether m maps what o did, so its symbols carry over a reread.
func (m *mapping) sameAs(o *mapping) bool {
	return m.start == o.start && m.end == o.end && m.off == o.off &&
		m.dev == o.dev && m.inode == o.inode && m.path == o.path
}

// mapsRereadInterval limits rereading /proc/PID/maps on misses: samples in
// code that is not mapped (stale or garbage ips) would otherwise reread it
// for every lookup.
const mapsRereadInterval = time.Second

// Native resolves native instruction addresses of one process to library
// and function names. It is safe for concurrent use.
type Native struct {
	pid  int
	proc string           // procfs mount point, replaced in tests
	now  func() time.Time // replaced in tests

	mu     sync.Mutex
	maps   []*mapping // sorted by start
	readAt time.Time  // zero before the first read
}

// NewNative returns a symbolizer for process pid (as seen from our PID
// namespace). Nothing is read until the first Lookup.
func NewNative(pid int) *Native {
	return &Native{pid: pid, proc: "/proc", now: time.Now}
}

// Lookup names the native code at ip. ok is false when ip is not in a
// mapped ELF file (JIT code and other anonymous memory included). A mapped
// file without a symbol for ip gives its Lib with an empty Func.
func (n *Native) Lookup(ip uint64) (NativeFrame, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m := n.find(ip)
	if m == nil && (n.readAt.IsZero() || n.now().Sub(n.readAt) >= mapsRereadInterval) {
		// A reread error leaves the old maps, which are the best we have.
		_ = n.readMaps()
		m = n.find(ip)
	}
	if m == nil || !m.fileBacked() {
		return NativeFrame{}, false
	}
	if !m.loaded {
		m.loaded = true
		m.syms, _ = n.openSyms(m)
	}
	if m.syms == nil {
		return NativeFrame{}, false
	}
	addr, ok := m.syms.vaddr(ip - m.start + m.off)
	if !ok {
		return NativeFrame{}, false
	}
	lib := CutName(filepath.Base(strings.TrimSuffix(m.path, " (deleted)")))
	name, start, ok := m.syms.lookup(addr)
	if !ok {
		return NativeFrame{Lib: lib, Off: addr}, true
	}
	return NativeFrame{Lib: lib, Func: name, Off: addr - start}, true
}

// find returns the mapping containing ip.
func (n *Native) find(ip uint64) *mapping {
	i := sort.Search(len(n.maps), func(i int) bool { return n.maps[i].end > ip })
	if i == len(n.maps) || n.maps[i].start > ip {
		return nil
	}
	return n.maps[i]
}

// readMaps rereads the process's mappings, keeping the symbols of those
// that did not change.
func (n *Native) readMaps() error {
	n.readAt = n.now()
	ms, err := procfs.Maps(n.proc, n.pid)
	if err != nil {
		return fmt.Errorf("read maps: %w", err)
	}
	maps := fromProcfs(ms)
	old := n.maps
	for _, m := range maps {
		i := sort.Search(len(old), func(i int) bool { return old[i].start >= m.start })
		if i < len(old) && old[i].sameAs(m) {
			m.loaded, m.syms = old[i].loaded, old[i].syms
		}
	}
	n.maps = maps
	return nil
}

// openSyms loads the symbols of a mapped file. The path is the target's to
// choose: elfsafe opens the very file mapped (map_files), or the path
// inside the process's root with no symlinks, and reads a regular file
// only, its symbol tables within caps.
func (n *Native) openSyms(m *mapping) (*elfSyms, error) {
	f, err := elfsafe.OpenMapped(n.proc, n.pid, m.start, m.end, m.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return cachedELFSyms(f)
}

// maxMapsPathBytes bounds the bytes of the paths kept of a process's
// maps: the target chooses them (up to 4 KiB each, in 65,530 mappings).
const maxMapsPathBytes = 16 << 20

// parseMaps parses /proc/PID/maps text with procfs, sorted by address.
func parseMaps(r io.Reader) ([]*mapping, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read maps: %w", err)
	}
	ms, err := procfs.ParseMaps(data)
	if err != nil {
		return nil, err
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Start < ms[j].Start })
	return fromProcfs(ms), nil
}

// fromProcfs keeps what Native needs of the mappings, their paths within
// maxMapsPathBytes in all (past it, a mapping is named by address only).
func fromProcfs(ms []procfs.Mapping) []*mapping {
	maps := make([]*mapping, len(ms))
	pathBytes := 0
	for i, pm := range ms {
		m := &mapping{start: pm.Start, end: pm.End, off: pm.Offset,
			dev: fmt.Sprintf("%02x:%02x", pm.Major, pm.Minor), inode: pm.Inode, path: pm.Path}
		if pathBytes += len(m.path); pathBytes > maxMapsPathBytes {
			m.path = ""
		}
		maps[i] = m
	}
	return maps
}
