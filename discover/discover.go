// Package discover finds the JVMs running on this host from /proc: every
// process that maps HotSpot's libjvm.so or OpenJ9's libj9vm, in any
// container, with what /proc alone tells about it.
package discover

import (
	"bytes"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// VM kinds.
const (
	HotSpot = "HotSpot"
	OpenJ9  = "OpenJ9"
)

// JVM is one Java process as /proc shows it.
type JVM struct {
	PID     int    // host pid
	NSPID   int    // pid in its own pid namespace (== PID outside containers)
	UID     int    // effective uid
	GID     int    // effective gid
	User    string // user name, or the uid when the host has no such user
	Kind    string // HotSpot or OpenJ9
	Main    string // main class or -jar file, as given on the command line
	Java    string // the java binary (argv[0])
	Cmdline string `json:"-"` // the whole command line, space-separated
	// Age is how long the process has run (0 if unknown): a JVM attached
	// while it is still starting refuses JVMTI 11 environments.
	Age         time.Duration `json:"-"`
	AgentLoaded bool          // a djx-bpf agent library is mapped (loaded by an earlier or running profile)
	Container   bool          // in another pid namespace than ours
}

// ProcRoot is where /proc is read; tests point it at a fake tree.
var ProcRoot = "/proc"

// Find lists the JVMs on the host, by pid. Processes that exit or cannot
// be read while it runs are left out: they are not JVMs it could report.
func Find() ([]JVM, error) {
	ents, err := os.ReadDir(ProcRoot)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	self := os.Getpid()
	var out []JVM
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		j, ok := Inspect(pid)
		if ok {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].PID < out[b].PID })
	return out, nil
}

// Inspect reads what /proc says about pid; ok is false when pid is not a
// JVM (or is gone).
func Inspect(pid int) (JVM, bool) {
	dir := filepath.Join(ProcRoot, strconv.Itoa(pid))
	maps, err := os.ReadFile(filepath.Join(dir, "maps"))
	if err != nil {
		return JVM{}, false
	}
	kind := vmKind(maps)
	if kind == "" {
		return JVM{}, false
	}
	j := JVM{PID: pid, NSPID: pid, Kind: kind, AgentLoaded: bytes.Contains(maps, []byte("libdjxagent.so"))}
	if st, err := os.ReadFile(filepath.Join(dir, "status")); err == nil {
		j.UID, j.GID, j.NSPID = parseStatus(st, pid)
	}
	j.Container = j.NSPID != pid
	j.Age = age(dir)
	j.User = strconv.Itoa(j.UID)
	if u, err := user.LookupId(j.User); err == nil {
		j.User = u.Username
	}
	if cl, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
		args := strings.Split(strings.TrimRight(string(cl), "\x00"), "\x00")
		if len(args) > 0 {
			j.Java = args[0]
		}
		j.Main = MainOf(args)
		j.Cmdline = strings.Join(args, " ")
	}
	return j, true
}

// vmKind classifies a process by the JVM library it maps. OpenJ9 ships a
// libjvm.so too (a redirector in lib/j9vm/), so libj9vm decides first, as
// attach.Inspect does.
func vmKind(maps []byte) string {
	switch {
	case bytes.Contains(maps, []byte("/libj9vm")):
		return OpenJ9
	case bytes.Contains(maps, []byte("/libjvm.so")):
		return HotSpot
	}
	return ""
}

// parseStatus reads the effective uid and gid and the innermost NSpid.
func parseStatus(st []byte, pid int) (uid, gid, nspid int) {
	nspid = pid
	for _, line := range strings.Split(string(st), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "Uid:":
			if len(f) > 2 {
				uid, _ = strconv.Atoi(f[2])
			}
		case "Gid:":
			if len(f) > 2 {
				gid, _ = strconv.Atoi(f[2])
			}
		case "NSpid:":
			if n, err := strconv.Atoi(f[len(f)-1]); err == nil {
				nspid = n
			}
		}
	}
	return uid, gid, nspid
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

// clockTicks is USER_HZ, the unit of /proc/PID/stat's start time; 100 on
// every Linux architecture djx-bpf runs on.
const clockTicks = 100

// age reads how long ago the process started: its start time (field 22 of
// /proc/PID/stat, in clock ticks since boot) against /proc/uptime.
func age(dir string) time.Duration {
	st, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	i := bytes.LastIndexByte(st, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(st[i+1:]))
	if len(f) < 20 {
		return 0
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0
	}
	up, err := os.ReadFile(filepath.Join(ProcRoot, "uptime"))
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
	d := time.Duration(secs*float64(time.Second)) - time.Duration(start)*time.Second/clockTicks
	if d < 0 {
		return 0
	}
	return d
}
