// Command djx-bpf is an object-centric memory profiler for the JVM.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/safety/termsafe"
)

const usage = `djx-bpf: object-centric memory profiler for the JVM (eBPF)

Usage:
  djx-bpf profile --pid PID [flags]       profile a running JVM
  djx-bpf profile [flags] -- java ARGS... launch a JVM and profile it until it exits
  djx-bpf report [flags] FILE...          merge saved profiles and print them
  djx-bpf scan [flags]                    profile every JVM on this host at once
  djx-bpf list                            list the JVMs on this host
  djx-bpf heap --pid PID                  print a JVM's heap geometry
  djx-bpf events                          list the sample sources (--event) of this machine
  djx-bpf version

Run 'djx-bpf profile -h' or 'djx-bpf report -h' for the flags.
`

func main() {
	// One P: the loader is a few goroutines handing batches to each other,
	// and with more Ps each hand-off wakes an idle thread. Measured on a
	// 10 s attach profile: 0.41-0.44 CPU-s with GOMAXPROCS=2, 0.28-0.34
	// with 1. The environment variable still wins.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	// DJX_BPF_CPUPROFILE=FILE writes a Go CPU profile of djx-bpf itself,
	// for measuring what the loader costs (go tool pprof FILE).
	if path := os.Getenv("DJX_BPF_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				code := run(os.Args[1:])
				pprof.StopCPUProfile()
				f.Close()
				exit(code)
			}
			f.Close()
		}
	}
	exit(run(os.Args[1:]))
}

// exit ends djx-bpf's memory readers first: those for files share its
// file table, and would keep the agent's socket and the BPF links open.
func exit(code int) {
	targetmem.Shutdown()
	os.Exit(code)
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	switch args[0] {
	case "profile":
		return cmdProfile(args[1:])
	case "events":
		return cmdEvents(args[1:])
	case "list":
		return cmdList(args[1:])
	case "scan":
		return cmdScan(args[1:])
	case "heap":
		return cmdHeap(args[1:])
	case "report":
		return cmdReport(args[1:], os.Stdout, os.Stderr)
	case "version", "--version":
		fmt.Println("djx-bpf", version)
		return 0
	case "help", "-h", "--help":
		fmt.Print(usage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "djx-bpf: unknown command %q\n\n%s", args[0], usage)
	return 2
}

var version = "dev"

// eprintf prints a message, usually to standard error, with its string and
// error arguments escaped (termsafe): an error may quote what a target
// controls, a class name, a maps path or an attach reply, and none of it
// may reach root's terminal as a control sequence.
func eprintf(w io.Writer, format string, args ...any) {
	safe := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case error: // errors.Join's lines, on one line
			safe[i] = termsafe.String(strings.ReplaceAll(v.Error(), "\n", "; "))
		case string:
			safe[i] = termsafe.String(v)
		case fmt.Stringer:
			safe[i] = termsafe.String(v.String())
		default:
			safe[i] = a
		}
	}
	fmt.Fprintf(w, format, safe...)
}

// jsonSafe writes through write with termsafe's JSONWriter: JSON, and the
// HTML page whose target text is JSON, then print no control character
// that encoding/json leaves raw (DEL, C1, bidirectional controls).
func jsonSafe(w io.Writer, write func(io.Writer) error) error {
	jw := termsafe.NewJSONWriter(w)
	if err := write(jw); err != nil {
		return err
	}
	return jw.Flush()
}
