package numa

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Querier returns the node of each page address of process pid, Unknown
// where the page is not mapped or not present. A fake makes multi-node
// logic testable on one node.
type Querier interface {
	Query(pid int, addrs []uint64) ([]int, error)
}

// MovePages queries with move_pages(2) in status mode (nodes == NULL): the
// kernel moves nothing and writes each page's node, or -EFAULT (not
// mapped) / -ENOENT (not present, e.g. never touched) into status.
type MovePages struct {
	// Batch is the number of pages per syscall; 0 means 1024.
	Batch int
}

// ErrPermission is wrapped when the caller may not inspect pid's pages.
var ErrPermission = errors.New("not permitted to query page nodes")

// Query implements Querier.
func (q MovePages) Query(pid int, addrs []uint64) ([]int, error) {
	batch := q.Batch
	if batch <= 0 {
		batch = 1024
	}
	out := make([]int, len(addrs))
	pages := make([]uintptr, min(batch, len(addrs)))
	status := make([]int32, len(pages))
	for start := 0; start < len(addrs); start += batch {
		n := min(batch, len(addrs)-start)
		for i := 0; i < n; i++ {
			pages[i] = uintptr(addrs[start+i])
		}
		_, _, errno := unix.Syscall6(unix.SYS_MOVE_PAGES, uintptr(pid), uintptr(n),
			uintptr(unsafe.Pointer(&pages[0])), 0, uintptr(unsafe.Pointer(&status[0])), 0)
		runtime.KeepAlive(pages)
		runtime.KeepAlive(status)
		if errno != 0 {
			if errno == unix.EPERM || errno == unix.EACCES {
				return nil, fmt.Errorf("move_pages status query of pid %d: %w: %w (needs CAP_SYS_NICE or the same user)", pid, ErrPermission, errno)
			}
			return nil, fmt.Errorf("move_pages status query of pid %d: %w", pid, errno)
		}
		for i := 0; i < n; i++ {
			if status[i] < 0 {
				out[start+i] = Unknown
			} else {
				out[start+i] = int(status[i])
			}
		}
	}
	return out, nil
}

// DefaultMaxAge is how long a page's node is trusted. Pages migrate (NUMA
// balancing moves pages after its scan, every 1 s to 60 s per task;
// migrate_pages and memory tiering do too): a shorter age notices moves
// sooner but costs a syscall per page per age; a longer one trusts stale
// nodes. 5 s keeps the query rate to a few per hot page per minute.
const DefaultMaxAge = 5 * time.Second

// Cache remembers the node of each (pid, page) for MaxAge and queries the
// misses of one lookup in a single batched call. It is safe for
// concurrent use.
type Cache struct {
	q        Querier
	maxAge   time.Duration
	pageMask uint64
	// MaxEntries bounds memory; when exceeded, expired entries are
	// dropped, then everything if still too many.
	MaxEntries int
	// Now is the clock; tests replace it.
	Now func() time.Time

	mu      sync.Mutex
	entries map[pageKey]cached
}

type pageKey struct {
	pid  int
	page uint64
}

type cached struct {
	node int
	at   time.Time
}

// NewCache returns a cache over q; maxAge <= 0 means DefaultMaxAge.
func NewCache(q Querier, maxAge time.Duration) *Cache {
	if maxAge <= 0 {
		maxAge = DefaultMaxAge
	}
	return &Cache{q: q, maxAge: maxAge, pageMask: ^uint64(os.Getpagesize() - 1), MaxEntries: 1 << 20,
		Now: time.Now, entries: map[pageKey]cached{}}
}

// Nodes returns the node of the page of each address of pid (Unknown for
// pages not mapped or not present). Unknown results are not cached: a
// sampled page is usually present by the next lookup.
func (c *Cache) Nodes(pid int, addrs []uint64) ([]int, error) {
	out := make([]int, len(addrs))
	now := c.Now()
	var missIdx []int
	var missPages []uint64
	index := map[uint64]int{} // page → position in missPages
	c.mu.Lock()
	for i, a := range addrs {
		p := a & c.pageMask
		if e, ok := c.entries[pageKey{pid, p}]; ok && now.Sub(e.at) < c.maxAge {
			out[i] = e.node
			continue
		}
		missIdx = append(missIdx, i)
		if _, ok := index[p]; !ok {
			index[p] = len(missPages)
			missPages = append(missPages, p)
		}
	}
	c.mu.Unlock()
	if len(missPages) == 0 {
		return out, nil
	}
	nodes, err := c.q.Query(pid, missPages)
	if err != nil {
		return nil, err
	}
	if len(nodes) != len(missPages) {
		return nil, fmt.Errorf("page node query of pid %d returned %d results for %d pages", pid, len(nodes), len(missPages))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, i := range missIdx {
		out[i] = nodes[index[addrs[i]&c.pageMask]]
	}
	for j, p := range missPages {
		if nodes[j] != Unknown {
			c.entries[pageKey{pid, p}] = cached{nodes[j], now}
		}
	}
	c.trim(now)
	return out, nil
}

// Node returns the node of the page holding addr in pid.
func (c *Cache) Node(pid int, addr uint64) (int, error) {
	n, err := c.Nodes(pid, []uint64{addr})
	if err != nil {
		return Unknown, err
	}
	return n[0], nil
}

// Forget drops every entry of pid (it exited, or its heap was unmapped).
func (c *Cache) Forget(pid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		if k.pid == pid {
			delete(c.entries, k)
		}
	}
}

// Len returns the number of cached pages.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

func (c *Cache) trim(now time.Time) {
	if c.MaxEntries <= 0 || len(c.entries) <= c.MaxEntries {
		return
	}
	for k, e := range c.entries {
		if now.Sub(e.at) >= c.maxAge {
			delete(c.entries, k)
		}
	}
	if len(c.entries) > c.MaxEntries {
		clear(c.entries)
	}
}
