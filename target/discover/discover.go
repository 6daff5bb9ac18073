// Package discover finds the JVMs running on this host from /proc: every
// process that maps HotSpot's libjvm.so or OpenJ9's libj9vm, in any
// container, with what /proc alone tells about it.
package discover

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// VM kinds.
const (
	HotSpot = procfs.HotSpot
	OpenJ9  = procfs.OpenJ9
)

// JVM is one Java process as /proc shows it: what procfs.Inspect reads
// (pids, ids, VM kind, agent, namespace), and its user and command line.
type JVM struct {
	procfs.Process
	User    string // user name, or the uid when the host has no such user
	Main    string // main class or -jar file, as given on the command line
	Java    string // the java binary (argv[0])
	Cmdline string `json:"-"` // the whole command line, space-separated
	// Age is how long the process has run (0 if unknown): a JVM attached
	// while it is still starting refuses JVMTI 11 environments.
	Age time.Duration `json:"-"`
}

// ProcRoot is where /proc is read; tests point it at a fake tree.
var ProcRoot = procfs.Mount

// Find lists the JVMs on the host, by pid. Processes that exit or cannot
// be read while it runs are left out: they are not JVMs it could report.
func Find() ([]JVM, error) {
	return new(Finder).Find()
}

// Finder finds the JVMs on the host again and again, as a scan that runs
// for days does: it remembers what it read of each process, so that a
// look at a process seen before reads the link to its executable (and a
// JVM's stat) only, not its status, maps (a JVM's run to thousands of
// lines) and command line.
type Finder struct {
	// Recheck is how long a process found not to be a JVM is believed
	// (default DefaultRecheck): a program may load libjvm late (an
	// embedding launcher), with neither its start time nor its executable
	// changed.
	Recheck time.Duration
	seen    map[int]seenProc
	now     func() time.Time
}

// DefaultRecheck is Finder.Recheck's default.
const DefaultRecheck = time.Minute

// youngProc is the age below which a process found not to be a JVM is
// looked at in full again: the java launcher maps libjvm only after it
// has started.
const youngProc = 10 * time.Second

// seenProc is what a Finder knows of a process: which one it is (its start
// time and executable: a new pid, or an exec, is another process) and
// whether it is a JVM.
type seenProc struct {
	start uint64
	exe   string
	jvm   *JVM // nil: not a JVM
	at    time.Time
}

// Find lists the JVMs on the host, by pid, as the package's Find does.
func (f *Finder) Find() ([]JVM, error) {
	ents, err := os.ReadDir(ProcRoot)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	if f.seen == nil {
		f.seen = make(map[int]seenProc)
	}
	if f.now == nil {
		f.now = time.Now
	}
	recheck := f.Recheck
	if recheck <= 0 {
		recheck = DefaultRecheck
	}
	now := f.now()
	self := os.Getpid()
	live := make(map[int]bool, len(ents))
	var out []JVM
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		live[pid] = true
		exe, _ := os.Readlink(procfs.Dir(ProcRoot, pid) + "/exe")
		p, ok := f.seen[pid]
		if ok && p.exe == exe && p.jvm == nil && now.Sub(p.at) < recheck {
			// Its stat is not read: a pid taken again by the same
			// program is believed no JVM as the last one was.
			continue
		}
		start, alive := startOf(pid)
		if !alive {
			continue // gone, or a zombie
		}
		if ok && p.exe == exe && p.jvm != nil && p.start == start {
			j := *p.jvm
			j.Age = procfs.Age(ProcRoot, start)
			out = append(out, j)
			continue
		}
		j, isJVM, err := inspect(pid)
		switch {
		case errors.Is(err, procfs.ErrNoProcess):
			delete(f.seen, pid)
		case isJVM:
			f.seen[pid] = seenProc{start: start, exe: exe, jvm: &j, at: now}
			out = append(out, j)
		case procfs.Age(ProcRoot, start) >= youngProc:
			// Not a JVM, or not one it may read (its maps refused):
			// believed until Recheck, as it was read.
			f.seen[pid] = seenProc{start: start, exe: exe, at: now}
		default:
			delete(f.seen, pid)
		}
	}
	for pid := range f.seen {
		if !live[pid] {
			delete(f.seen, pid)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].PID < out[b].PID })
	return out, nil
}

// startOf is pid's start time; ok is false when pid is gone or a zombie.
func startOf(pid int) (start uint64, ok bool) {
	data, err := procfs.Read(ProcRoot, pid, "stat")
	if err != nil {
		return 0, false
	}
	if i := bytes.LastIndexByte(data, ')'); i >= 0 && i+2 < len(data) {
		if st := data[i+2]; st == 'Z' || st == 'X' {
			return 0, false
		}
	}
	start, err = procfs.ParseStartTime(data)
	return start, err == nil
}

// Inspect reads what /proc says about pid; ok is false when pid is not a
// JVM (or is gone).
func Inspect(pid int) (JVM, bool) {
	j, ok, err := inspect(pid)
	return j, ok && err == nil
}

// inspect is Inspect, which tells a process that is not a JVM (isJVM
// false, err nil) from one it could not read.
func inspect(pid int) (_ JVM, isJVM bool, _ error) {
	p, err := procfs.Inspect(ProcRoot, pid)
	if err != nil || p.Kind == "" {
		return JVM{}, false, err
	}
	j := JVM{Process: p, Age: procfs.Age(ProcRoot, p.Start)}
	j.User = strconv.Itoa(j.UID)
	if u, err := user.LookupId(j.User); err == nil {
		j.User = u.Username
	}
	if args, err := procfs.Cmdline(ProcRoot, pid); err == nil {
		if len(args) > 0 {
			j.Java = args[0]
		}
		j.Main = MainOf(args)
		j.Cmdline = strings.Join(args, " ")
	}
	return j, true, nil
}

// optsWithValue are java launcher options whose value is the next argument.
var optsWithValue = map[string]bool{
	"-cp": true, "-classpath": true, "--class-path": true, "-p": true, "--module-path": true,
	"--add-modules": true, "--add-opens": true, "--add-exports": true, "--add-reads": true,
	"--limit-modules": true, "--upgrade-module-path": true, "--patch-module": true,
}

// MainOf names what a java command line runs: the main class, "-jar
// FILE", or "-m MODULE"; "" when it cannot tell (an embedding launcher).
func MainOf(args []string) string {
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-jar" && i+1 < len(args):
			return "-jar " + args[i+1]
		case (a == "-m" || a == "--module") && i+1 < len(args):
			return "-m " + args[i+1]
		case optsWithValue[a]:
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return a
		}
	}
	return ""
}
