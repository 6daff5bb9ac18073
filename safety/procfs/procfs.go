// Package procfs reads what /proc says about a process: its status, start
// time, command line and environment, memory maps, threads and
// namespaces, and which JVM it runs. It is the one reader of these files
// for attach and discover.
//
// The kernel writes every file under /proc/PID, but much of what they hold
// is the target's to choose (its name, argv, environ, the names of the
// files it maps): the parsers take them as hostile input, and every read
// stops at MaxRead. The root of /proc is a parameter so that tests can
// hand a fake tree.
package procfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Mount is where /proc is mounted.
const Mount = "/proc"

// MaxRead caps one read of a /proc file. A JVM's maps are a few MiB at
// most (vm.max_map_count lines of at most a path each), argv and environ
// far less.
const MaxRead = 64 << 20

var (
	// ErrNoProcess means the pid does not exist or the process exited.
	ErrNoProcess = errors.New("no such process")
	// ErrTooLarge means a /proc file held more than MaxRead bytes.
	ErrTooLarge = errors.New("/proc file exceeds its size cap")
)

// VM kinds, as Process.Kind names them ("" for no JVM).
const (
	HotSpot = "HotSpot"
	OpenJ9  = "OpenJ9"
)

// agentLib is the file name of djx-bpf's agent library (channel.libName).
const agentLib = "libdjxagent.so"

// Process is what /proc tells about one process that attach and discover
// both need.
type Process struct {
	PID   int    // pid in the namespace of the /proc read; used for signals and /proc
	NSPID int    // pid in its own (innermost) pid namespace; names its files (== PID outside containers)
	UID   int    // effective uid
	GID   int    // effective gid
	Kind  string // HotSpot or OpenJ9; "" when it maps no JVM
	// AgentLoaded: a djx-bpf agent library is mapped (loaded by an earlier
	// or running profile).
	AgentLoaded bool
	Container   bool // in another pid namespace than the /proc read
	// Start is the start time in clock ticks since boot (field 22 of
	// /proc/PID/stat); with the pid it names the process uniquely, which
	// guards against using a recycled pid. 0 if unknown.
	Start uint64 `json:"-"`
}

// Dir is the /proc directory of pid below root.
func Dir(root string, pid int) string {
	return filepath.Join(root, strconv.Itoa(pid))
}

// Inspect reads pid's status, start time and maps below root (Mount, or a
// fake tree). A process that maps no JVM is no error: its Kind is "". It
// fails with ErrNoProcess when pid does not exist or has exited, and when
// pid is a thread of another process.
func Inspect(root string, pid int) (Process, error) {
	if pid <= 0 {
		return Process{}, ErrNoProcess
	}
	st, err := ReadStatus(root, pid)
	if err != nil {
		return Process{}, err
	}
	if st.Tgid != 0 && st.Tgid != pid {
		return Process{}, fmt.Errorf("is a thread of process %d, not a process", st.Tgid)
	}
	if st.State == 'Z' || st.State == 'X' {
		return Process{}, fmt.Errorf("process has exited: %w", ErrNoProcess)
	}
	maps, err := Read(root, pid, "maps")
	if err != nil {
		return Process{}, err
	}
	p := Process{PID: pid, NSPID: st.NSPID, UID: st.UID, GID: st.GID}
	if p.NSPID <= 0 { // kernels before 4.1 have no NSpid line
		p.NSPID = pid
	}
	p.Container = p.NSPID != pid
	p.Kind, p.AgentLoaded = ClassifyMaps(maps)
	if p.Kind == "" {
		// A process whose maps are empty is a kernel thread or has exited.
		if len(maps) == 0 {
			if _, err := os.Stat(Dir(root, pid)); err != nil {
				return Process{}, procErr(err)
			}
		}
		return p, nil
	}
	if p.Start, err = StartTime(root, pid); err != nil {
		return Process{}, err
	}
	return p, nil
}

// Read reads the file name of pid's /proc directory below root, at most
// MaxRead bytes of it.
func Read(root string, pid int, name string) ([]byte, error) {
	f, err := os.Open(filepath.Join(Dir(root, pid), name))
	if err != nil {
		return nil, procErr(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxRead+1))
	if err != nil {
		return nil, procErr(err)
	}
	if len(data) > MaxRead {
		return nil, fmt.Errorf("%s of pid %d: %w (%d bytes)", name, pid, ErrTooLarge, MaxRead)
	}
	return data, nil
}

// procErr maps the errors procfs returns for a vanished process to
// ErrNoProcess.
func procErr(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%w: %w", ErrNoProcess, err)
	}
	return err
}

// Status holds the fields of /proc/PID/status that djx-bpf uses.
type Status struct {
	State    byte
	Tgid     int
	UID, GID int // effective
	NSPID    int // innermost pid namespace's; -1 without an NSpid line
	SigCgt   uint64
	SigIgn   uint64
}

// ReadStatus reads and parses pid's status below root.
func ReadStatus(root string, pid int) (Status, error) {
	data, err := Read(root, pid, "status")
	if err != nil {
		return Status{}, err
	}
	return ParseStatus(data)
}

// ParseStatus parses /proc/PID/status; it fails without Uid and Gid lines.
func ParseStatus(data []byte) (Status, error) {
	st := Status{UID: -1, GID: -1, NSPID: -1}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 {
			continue
		}
		var err error
		switch key {
		case "State":
			st.State = f[0][0]
		case "Tgid":
			st.Tgid, err = strconv.Atoi(f[0])
		case "Uid", "Gid":
			// Real, effective, saved, filesystem: HotSpot compares the peer
			// and the trigger file with its effective ids.
			if len(f) < 2 {
				return st, fmt.Errorf("status %s: %q", key, val)
			}
			var id int
			id, err = strconv.Atoi(f[1])
			if key == "Uid" {
				st.UID = id
			} else {
				st.GID = id
			}
		case "NSpid":
			// One pid per nested pid namespace, innermost last.
			st.NSPID, err = strconv.Atoi(f[len(f)-1])
		case "SigCgt":
			st.SigCgt, err = strconv.ParseUint(f[0], 16, 64)
		case "SigIgn":
			st.SigIgn, err = strconv.ParseUint(f[0], 16, 64)
		}
		if err != nil {
			return st, fmt.Errorf("status %s: %w", key, err)
		}
	}
	if st.UID < 0 || st.GID < 0 {
		return st, errors.New("status: no Uid/Gid lines")
	}
	return st, nil
}

// Handles reports whether the process catches or ignores sig, i.e. whether
// sending it cannot invoke the default action (SIGQUIT: terminate + core).
func (s Status) Handles(sig syscall.Signal) bool {
	if sig < 1 || sig > 64 {
		return false
	}
	bit := uint64(1) << (uint(sig) - 1)
	return s.SigCgt&bit != 0 || s.SigIgn&bit != 0
}

// StartTime returns field 22 of pid's /proc/PID/stat below root, the start
// time in clock ticks since boot.
func StartTime(root string, pid int) (uint64, error) {
	data, err := Read(root, pid, "stat")
	if err != nil {
		return 0, err
	}
	return ParseStartTime(data)
}

// ParseStartTime returns field 22 of /proc/PID/stat.
func ParseStartTime(data []byte) (uint64, error) {
	// comm (field 2) may contain spaces and parentheses; it ends at the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, errors.New("stat: no command name")
	}
	f := strings.Fields(string(data[i+1:]))
	const idx = 22 - 3 // fields after comm start with field 3 (state)
	if len(f) <= idx {
		return 0, errors.New("stat: too few fields")
	}
	return strconv.ParseUint(f[idx], 10, 64)
}

// ClockTicks is USER_HZ, the unit of /proc/PID/stat's start time; 100 on
// every Linux architecture djx-bpf runs on.
const ClockTicks = 100

// Age is how long ago a process that started at start (clock ticks since
// boot) started, by root's uptime; 0 if unknown.
func Age(root string, start uint64) time.Duration {
	up, err := os.ReadFile(filepath.Join(root, "uptime"))
	if err != nil {
		return 0
	}
	uf := strings.Fields(string(up))
	if len(uf) == 0 {
		return 0
	}
	secs, err := strconv.ParseFloat(uf[0], 64)
	if err != nil {
		return 0
	}
	d := time.Duration(secs*float64(time.Second)) - time.Duration(start)*time.Second/ClockTicks
	if d < 0 {
		return 0
	}
	return d
}

// ClassifyMaps names the JVM a process runs from its /proc/PID/maps
// (HotSpot, OpenJ9 or "") and says whether it maps djx-bpf's agent.
// HotSpot maps libjvm.so; OpenJ9 maps libj9vm*.so and also ships a
// libjvm.so (a redirector in lib/j9vm/), so libj9vm decides.
func ClassifyMaps(data []byte) (kind string, agent bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		i := strings.IndexByte(line, '/')
		if i < 0 {
			continue
		}
		path := strings.TrimSuffix(line[i:], " (deleted)")
		base := filepath.Base(path)
		switch {
		case strings.HasPrefix(base, "libj9vm") && strings.HasSuffix(base, ".so"):
			kind = OpenJ9
		case base == "libjvm.so" && kind == "":
			kind = HotSpot
		}
		if strings.Contains(path, agentLib) {
			agent = true
		}
	}
	return kind, agent
}

// Cmdline reads pid's argv below root.
func Cmdline(root string, pid int) ([]string, error) {
	data, err := Read(root, pid, "cmdline")
	if err != nil {
		return nil, err
	}
	return SplitNUL(data), nil
}

// SplitNUL splits a NUL-terminated list (cmdline, environ).
func SplitNUL(data []byte) []string {
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
}

// ThreadIDs maps the ids pid's threads have in its own pid namespace (what
// gettid returns there) to their ids as root shows them. Threads that exit
// while it reads, and tasks without an NSpid line (kernels before 4.1),
// are left out.
func ThreadIDs(root string, pid int) (map[uint32]uint32, error) {
	dir := filepath.Join(Dir(root, pid), "task")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list threads of pid %d: %w", pid, procErr(err))
	}
	m := make(map[uint32]uint32, len(entries))
	for _, e := range entries {
		host, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			continue
		}
		data, err := Read(filepath.Join(root, strconv.Itoa(pid), "task"), int(host), "status")
		if err != nil {
			continue // exited meanwhile
		}
		st, err := ParseStatus(data)
		if err != nil || st.NSPID <= 0 {
			continue
		}
		m[uint32(st.NSPID)] = uint32(host)
	}
	return m, nil
}

// RootMapped reports whether uid 0 outside is uid 0 in pid's user
// namespace (an identity line "0 0 N" in its uid_map), so that a file root
// creates is root's there too. Without user namespaces it is true.
func RootMapped(root string, pid int) bool {
	data, err := Read(root, pid, "uid_map")
	if err != nil {
		return true // no user namespaces: one uid space
	}
	for _, line := range strings.Split(string(data), "\n") {
		var in, out, n uint64
		if _, err := fmt.Sscan(line, &in, &out, &n); err == nil && in == 0 && out == 0 && n > 0 {
			return true
		}
	}
	return false
}
