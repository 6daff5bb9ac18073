// Package discover finds the JVMs running on this host from /proc: every
// process that maps HotSpot's libjvm.so or OpenJ9's libj9vm, in any
// container, with what /proc alone tells about it.
package discover

import (
	"fmt"
	"os"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/djx-bpf/djx-bpf/procfs"
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
	p, err := procfs.Inspect(ProcRoot, pid)
	if err != nil || p.Kind == "" {
		return JVM{}, false
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
	return j, true
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
