package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/djx-bpf/djx-bpf/attach"
	"github.com/djx-bpf/djx-bpf/pprofile"
	"github.com/djx-bpf/djx-bpf/profiler"
	"github.com/djx-bpf/djx-bpf/report"
)

type sizeFlag struct{ v *uint64 }

func (f sizeFlag) String() string {
	if f.v == nil {
		return ""
	}
	return report.Bytes(*f.v)
}

func (f sizeFlag) Set(s string) error {
	n, err := report.ParseBytes(s)
	if err != nil {
		return err
	}
	*f.v = n
	return nil
}

func cmdProfile(args []string) int {
	fs := flag.NewFlagSet("profile", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage:\n  djx-bpf profile --pid PID [flags]\n  djx-bpf profile [flags] -- java ARGS...\n\nFlags:\n")
		fs.PrintDefaults()
	}
	var (
		pid      = fs.Int("pid", 0, "`PID` of a running JVM to attach to")
		duration = fs.Duration("duration", 0, "how long to profile (e.g. 30s); default: until Ctrl-C or the target exits")
		event    = fs.String("event", "auto", "sample source: auto, decode, page-faults, a hardware event or a raw perf event (djx-bpf events lists them)")
		top      = fs.Int("top", 20, "number of objects to show (0: all)")
		format   = fs.String("format", "table", "output format: table, json or pprof; default pprof for -o *.pb.gz or *.pprof")
		out      = fs.String("o", "", "write the report to `FILE` (atomically) instead of standard output")
		freq     = fs.Int("freq", profiler.DefaultFreq, "samples per second per CPU (decode; hardware events: frequency mode instead of the catalog's period)")
		period   = fs.Uint64("period", 0, "sample every N-th event (page-faults: default 1; hardware events: the catalog's default, see djx-bpf events)")
		quiet    = fs.Bool("quiet", false, "no progress messages on standard error")
		relocate = fs.String("relocation", profiler.DefaultRelocation, "how to follow objects the GC moves: uprobe, rescan or off")
		budget   = fs.Uint64("alloc-budget", profiler.DefaultAllocBudget, "max sampled allocations per second in the JVM before the heap sampling interval is raised (0: no cap)")
		accTop   = fs.Int("access-top", report.DefaultTableOptions.AccessTop, "table: access paths shown under each object and in the remainder (0: none; json lists all)")
		depth    = fs.Int("depth", report.DefaultTableOptions.Depth, "table: frames shown per access path (0: all; json has whole paths)")
		numaFlag = fs.Bool("numa", false, "find the NUMA node of each sampled page and of the sampling CPU: per object home nodes, accessing nodes and remote share")
		stackSig = fs.Int("stack-signal", profiler.DefaultStackSignal, "`SIGNAL` number that asks sampled threads for their Java stacks (0: no access stacks)")
		stackIvl = fs.Duration("stack-interval", profiler.DefaultStackInterval, "least time between two Java stacks of one thread; samples in between take their callers from the thread's last stack (min 100us)")
	)
	minSize := uint64(profiler.DefaultMinSize)
	var interval uint64
	fs.Var(sizeFlag{&minSize}, "min-size", "track objects of at least this `SIZE` (e.g. 1KiB)")
	fs.Var(sizeFlag{&interval}, "alloc-interval", "mean heap sampling interval `SIZE`; default: min-size/4")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	launch := fs.Args()
	formatGiven, freqGiven := false, false
	fs.Visit(func(f *flag.Flag) {
		formatGiven = formatGiven || f.Name == "format"
		freqGiven = freqGiven || f.Name == "freq"
	})
	*format = outputFormat(*format, formatGiven, *out)
	switch {
	case *pid == 0 && len(launch) == 0:
		fmt.Fprintln(os.Stderr, "djx-bpf profile: give --pid PID or a command after --, e.g. djx-bpf profile -- java -jar app.jar")
		return 2
	case *pid != 0 && len(launch) > 0:
		fmt.Fprintln(os.Stderr, "djx-bpf profile: --pid and a launch command exclude each other")
		return 2
	case *format != "table" && *format != "json" && *format != "pprof":
		fmt.Fprintf(os.Stderr, "djx-bpf profile: unknown --format %q: use table, json or pprof\n", *format)
		return 2
	case *format == "pprof" && *out == "" && isCharDevice(os.Stdout):
		fmt.Fprintln(os.Stderr, "djx-bpf profile: a pprof profile is binary: give -o FILE.pb.gz or redirect standard output")
		return 2
	case *pid < 0:
		fmt.Fprintf(os.Stderr, "djx-bpf profile: bad --pid %d\n", *pid)
		return 2
	case *stackSig < 0 || *stackSig > 64 || *stackSig == int(syscall.SIGKILL) || *stackSig == int(syscall.SIGSTOP):
		fmt.Fprintf(os.Stderr, "djx-bpf profile: bad --stack-signal %d: use a free signal such as %d (SIGURG; HotSpot uses neither it nor real-time signals), or 0 for no stacks\n", *stackSig, profiler.DefaultStackSignal)
		return 2
	case *accTop < 0 || *depth < 0:
		fmt.Fprintln(os.Stderr, "djx-bpf profile: --access-top and --depth must be 0 or more")
		return 2
	case *stackIvl < 0:
		fmt.Fprintf(os.Stderr, "djx-bpf profile: bad --stack-interval %v: give a duration such as 10ms, or 0 for a stack with every sample\n", *stackIvl)
		return 2
	}
	sig := *stackSig
	if sig == 0 {
		sig = -1 // profiler: no stacks
	}
	opts := profiler.Options{
		Event: *event, Duration: *duration, MinSize: minSize, Interval: interval,
		Freq: *freq, Period: *period, AllocBudget: *budget, Relocation: *relocate,
		StackSignal: sig, StackInterval: stackInterval(*stackIvl), NUMA: *numaFlag,
	}
	if freqGiven {
		opts.HWFreq = *freq
	}
	live := !*quiet && isCharDevice(os.Stderr)
	if !*quiet {
		opts.Notify = func(msg string) {
			if live {
				endProgress(os.Stderr) // the message replaces the status line
			}
			fmt.Fprintf(os.Stderr, "djx-bpf: %s\n", msg)
		}
	}
	if live {
		opts.Progress = progressLine(os.Stderr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var (
		rep  *report.Report
		err  error
		wait func() (int, error)
	)
	if *pid != 0 {
		rep, err = profiler.Attach(ctx, *pid, opts)
	} else {
		rep, wait, err = profiler.Launch(ctx, launch, opts, os.Stdin, os.Stdout, os.Stderr)
	}
	if live {
		endProgress(os.Stderr)
	}
	code := 0
	if err != nil {
		fmt.Fprintf(os.Stderr, "djx-bpf: %v\n", err)
		if errors.Is(err, attach.ErrRefused) {
			fmt.Fprintln(os.Stderr, "djx-bpf: hint: djx-bpf profile [flags] -- java ARGS... starts the JVM with the agent on -agentpath")
		}
		code = 1
	} else if werr := writeReport(rep, *format, report.TableOptions{Top: *top, AccessTop: *accTop, Depth: *depth}, *out); werr != nil {
		fmt.Fprintf(os.Stderr, "djx-bpf: %v\n", werr)
		code = 1
	}
	if wait != nil {
		stop() // Ctrl-C now reaches only the JVM, as without djx-bpf
		jcode, werr := wait()
		if werr != nil {
			fmt.Fprintf(os.Stderr, "djx-bpf: wait for JVM: %v\n", werr)
			return 1
		}
		if code == 0 {
			code = jcode
		}
	}
	return code
}

func writeReport(rep *report.Report, format string, opt report.TableOptions, out string) error {
	write := func(w io.Writer) error {
		switch format {
		case "json":
			return report.WriteJSON(w, rep, opt.Top)
		case "pprof":
			start := time.Now().Add(-time.Duration(rep.DurationSec * float64(time.Second)))
			return pprofile.Write(w, pprofile.Options{Time: start}, rep)
		}
		return report.WriteTable(w, rep, opt)
	}
	if out == "" {
		return write(os.Stdout)
	}
	return writeFileAtomic(out, write)
}

// writeFileAtomic writes through a temporary file renamed over path, so that
// a failed write never leaves a truncated report behind.
func writeFileAtomic(path string, write func(io.Writer) error) error {
	// A device or pipe (-o /dev/null, -o /dev/stdout, a fifo) is written in
	// place: renaming a file over it would replace /dev/null itself.
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		if fi.IsDir() {
			return fmt.Errorf("write %s: is a directory", path)
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		if err := write(f); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// stackInterval maps --stack-interval to the profiler's option: 0 (and
// anything below the BPF program's floor) asks for a stack with every
// sample, which the program still spaces by 100 us.
func stackInterval(d time.Duration) time.Duration {
	return max(d, 100*time.Microsecond)
}
