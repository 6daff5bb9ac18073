// Command djxbench measures what djx-bpf costs the JVMs it profiles: it runs
// real Java workloads (H2 running SQL, Xalan transforming XML, Commons Math
// FFTs, all from Debian's packages) and synthetic ones (allocation-heavy,
// GC-heavy, the HotArrays demo) without djx-bpf, attached to by djx-bpf,
// and launched under it, and prints runtime and peak-RSS overhead ratios
// with their spread, with the samples, drops and attribution stats of each
// profile. Results also go to a JSON file for later comparison.
//
// Usage (as root; `make bench` builds everything and runs it):
//
//	djxbench run -bin build/djx-bpf -cp CLASSPATH [-runs 3] [-workloads h2,xalan,...]
//	         [-modes base,attach,launch] [-variants default,freq999,...] [-o results.json]
//	djxbench toggle|switch [-pairs N] [-window 10s] [-variant NAME] ...
//	djxbench irq | show FILE | cmdline WORKLOAD
//
// Each subcommand has its file (run.go, toggle.go, switch.go, irq.go,
// show.go, cmdline.go); windows.go holds what toggle and switch share,
// harness.go the workloads and the processes the harness starts, and
// results.go the results file and run's table.
//
// Every process the harness starts is the leader of a process group of its
// own; on failure, timeout or Ctrl-C the harness kills those groups and no
// other process.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

const usage = `djxbench: what djx-bpf costs the JVMs it profiles (docs/benchmarks.md)

Usage:
  djxbench run [flags]               each workload in separate runs, unprofiled, attached, launched and under JFR
  djxbench toggle [flags]            one JVM per workload, djx-bpf attached for windows between windows without it
  djxbench switch [flags]            one JVM and one profile per workload, its sampling switched on and off
  djxbench walkcost [flags]          the attach census's pause, djx-bpf's CPU and RSS, the app's slowdown, per JDK, GC and heap
  djxbench irq [flags]               what the sampling interrupt alone costs a thread doing random loads
  djxbench show FILE                 print the tables of a results file again
  djxbench scanheld SCAN.json        each JVM of a scan's report: in-heap samples held by a named holder, top row
  djxbench cmdline [flags] WORKLOAD  print a workload's java command line

run, toggle, switch and irq run as root. Run 'djxbench SUBCOMMAND -h' for its flags.
`

func main() {
	os.Exit(dispatch(os.Args[1:]))
}

func dispatch(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:])
	case "toggle":
		return cmdToggle(args[1:])
	case "switch":
		return cmdSwitch(args[1:])
	case "irq":
		return cmdIRQ(args[1:])
	case "walkcost":
		return cmdWalkcost(args[1:])
	case "show":
		return cmdShow(args[1:])
	case "scanheld":
		return cmdScanheld(args[1:])
	case "cmdline":
		return cmdCmdline(args[1:])
	case "help", "-h", "-help", "--help":
		fmt.Print(usage)
		return 0
	}
	if strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(os.Stderr, "djxbench: the subcommand comes before the flags (djxbench run %s ...)\n\n%s", args[0], usage)
		return 2
	}
	fmt.Fprintf(os.Stderr, "djxbench: unknown subcommand %q\n\n%s", args[0], usage)
	return 2
}

// newFlagSet is the flag set of subcommand name, whose usage line shows
// its arguments after the flags and then what it does.
func newFlagSet(name, args, about string) *flag.FlagSet {
	fs := flag.NewFlagSet("djxbench "+name, flag.ContinueOnError)
	fs.Usage = func() {
		flags := 0
		fs.VisitAll(func(*flag.Flag) { flags++ })
		if flags == 0 {
			fmt.Fprintf(fs.Output(), "Usage:\n  djxbench %s%s\n\n%s\n", name, args, about)
			return
		}
		fmt.Fprintf(fs.Output(), "Usage:\n  djxbench %s [flags]%s\n\n%s\n\nFlags:\n", name, args, about)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses a subcommand's flags and wants nargs (0 or 1) arguments
// after them; if it fails, ok is false and code the exit status.
func parse(fs *flag.FlagSet, args []string, nargs int) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() != nargs {
		want := "no arguments"
		if nargs == 1 {
			want = "one argument"
		}
		fmt.Fprintf(fs.Output(), "%s: takes %s after its flags, got %d\n\n", fs.Name(), want, fs.NArg())
		fs.Usage()
		return 2, false
	}
	return 0, true
}

// common are the flags of the subcommands that run workloads.
type common struct {
	bin, java, cp, workloads, djxFlags, jvmFlags, out string
}

// registerJava registers the flags a workload's java command line takes.
func (c *common) registerJava(fs *flag.FlagSet) {
	fs.StringVar(&c.java, "java", "java", "java launcher")
	fs.StringVar(&c.cp, "cp", "", "class path holding bench/java and testdata/java classes and the H2 and Xalan jars")
	fs.StringVar(&c.jvmFlags, "jvm-flags", envStr("BENCH_JVM_FLAGS", ""), "extra JVM flags for every run, e.g. -XX:ParallelGCThreads=1 (env BENCH_JVM_FLAGS)")
}

// register registers the flags of a subcommand that runs workloads, whose
// results go to bench/results/PREFIXTIME.json by default.
func (c *common) register(fs *flag.FlagSet, prefix string) {
	c.registerJava(fs)
	fs.StringVar(&c.bin, "bin", "build/djx-bpf", "djx-bpf binary")
	fs.StringVar(&c.workloads, "workloads", envStr("BENCH_WORKLOADS", "h2,xalan,fft,allocheavy,gchot"), "workloads: h2, hsqldb, xalan, fft, allocheavy, gchot, hotarrays (env BENCH_WORKLOADS)")
	fs.StringVar(&c.djxFlags, "djx-flags", envStr("BENCH_DJX_FLAGS", ""), "extra djx-bpf profile flags for every profiled run (env BENCH_DJX_FLAGS)")
	registerOut(fs, &c.out, prefix)
}

// registerOut registers -o, the results file, bench/results/PREFIXTIME.json
// by default.
func registerOut(fs *flag.FlagSet, out *string, prefix string) {
	fs.StringVar(out, "o", envStr("BENCH_OUT", ""), "JSON results file (default bench/results/"+prefix+"TIME.json; env BENCH_OUT)")
}

// check wants root, -cp and djx-bpf's binary, and returns the workloads
// named; it exits if one is missing.
func (c *common) check() []workload {
	if os.Geteuid() != 0 {
		fatal("must run as root: djx-bpf loads BPF programs and attaches to JVMs (sudo make bench)")
	}
	if c.cp == "" {
		fatal("-cp is required (make bench sets it)")
	}
	if _, err := os.Stat(c.bin); err != nil {
		fatal("djx-bpf binary: %v (make build)", err)
	}
	var ws []workload
	for _, n := range strings.Split(c.workloads, ",") {
		w, ok := findWorkload(strings.TrimSpace(n))
		if !ok {
			fatal("unknown workload %q", n)
		}
		ws = append(ws, w)
	}
	return ws
}

// start makes the harness, with a temporary directory, and the results'
// header. On SIGINT or SIGTERM the harness stops the processes it started
// and exits.
func (c *common) start() (*harness, *result) {
	tmp, err := os.MkdirTemp("", "djxbench-")
	if err != nil {
		fatal("%v", err)
	}
	h := &harness{bin: c.bin, java: c.java, cp: c.cp, tmp: tmp, djxFlags: strings.Fields(c.djxFlags), jvmFlags: strings.Fields(c.jvmFlags)}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "djxbench: interrupted: stopping the processes it started")
		h.cleanup()
		os.Exit(130)
	}()
	return h, newResult(h)
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return def
}

func envStr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func fatal(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "djxbench: "+format+"\n", a...)
	os.Exit(2)
}
