package main

import (
	"flag"
	"fmt"
	"syscall"
	"time"

	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/naming/stacks"
	"github.com/djx-bpf/djx-bpf/profiler"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/sources/pmu"
)

// sampleFlags are the flags profile and scan share: what to sample, how to
// follow objects and stacks, and how to show them.
type sampleFlags struct {
	event, relocate string
	census          string
	stacks          string
	censusBudget    time.Duration
	freq, stackSig  int
	stackIvl        time.Duration
	minSize         uint64
	budget          uint64
	accTop, depth   int
	quiet, verbose  bool
	dataTypes       bool
	out             string
	fs              *flag.FlagSet
}

func (f *sampleFlags) register(fs *flag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.event, "event", pmu.NameAuto, "sample source: auto, decode, page-faults, a hardware event or a raw perf event (djx-bpf events lists them)")
	fs.IntVar(&f.freq, "freq", profiler.DefaultFreq, "samples per second per CPU (decode; hardware events: frequency mode instead of the catalog's period)")
	fs.StringVar(&f.relocate, "relocation", profiler.DefaultRelocation, "how to follow objects the GC moves: uprobe, rescan or off")
	fs.Uint64Var(&f.budget, "alloc-budget", profiler.DefaultAllocBudget, "max sampled allocations per second in the JVM before the heap sampling interval is raised (0: no cap)")
	fs.IntVar(&f.stackSig, "stack-signal", profiler.DefaultStackSignal, "`SIGNAL` number that asks sampled threads for their Java stacks (0: no access stacks)")
	fs.StringVar(&f.stacks, "stacks", stacks.Default, "where access stacks come from: auto (bpf where its program loads and the JVM is HotSpot, else agent), bpf (every sample's own stack, unwound in BPF; HotSpot x86-64) or agent (AsyncGetCallTrace on a signal; the default when --stack-signal or --stack-interval is given)")
	fs.DurationVar(&f.stackIvl, "stack-interval", profiler.DefaultStackInterval, "least time between two Java stacks of one thread; samples in between take their callers from the thread's last stack (0: a stack with every sample)")
	fs.StringVar(&f.census, "census", profiler.CensusAuto, "objects that exist when djx-bpf attaches: auto (a heap walk from outside the JVM, no pause; else as jvmti), jvmti (the agent's census in pauses within --census-budget), on (the agent's census whatever the pause), objects (no holders), off")
	fs.DurationVar(&f.censusBudget, "census-budget", profiler.DefaultCensusBudget, "longest stop-the-world pause the agent's census may cause (jvmti, objects, and auto where it cannot walk the heap); past it the census drops holders, then itself")
	f.minSize = profiler.DefaultMinSize
	fs.Var(sizeFlag{&f.minSize}, "min-size", "track objects of at least this `SIZE` (e.g. 1KiB)")
	fs.IntVar(&f.accTop, "access-top", report.DefaultTableOptions.AccessTop, "table: access paths shown under each object and in the remainder (0: none; json lists all)")
	fs.IntVar(&f.depth, "depth", report.DefaultTableOptions.Depth, "table: frames shown per access path (0: all; json has whole paths)")
	fs.BoolVar(&f.dataTypes, "data-types", true, "name heap samples by class and field, and the others by memory region (-data-types=false: only tracked objects)")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress messages on standard error")
	fs.BoolVar(&f.verbose, "v", false, "progress messages give their reasons (why this sample source)")
	fs.StringVar(&f.out, "o", "", "write the report to `FILE` (atomically) instead of standard output")
}

// check says what is wrong with the values, in a way the user can act on.
func (f *sampleFlags) check() error {
	switch {
	case f.stackSig < 0 || f.stackSig > 64 || f.stackSig == int(syscall.SIGKILL) || f.stackSig == int(syscall.SIGSTOP):
		return fmt.Errorf("bad --stack-signal %d: use a free signal such as %d (SIGURG; HotSpot uses neither it nor real-time signals), or 0 for no stacks", f.stackSig, profiler.DefaultStackSignal)
	case f.stackIvl < 0:
		return fmt.Errorf("bad --stack-interval %v: give a duration such as 10ms, or 0 for a stack with every sample", f.stackIvl)
	case f.accTop < 0 || f.depth < 0:
		return fmt.Errorf("--access-top and --depth must be 0 or more")
	case f.censusBudget <= 0:
		return fmt.Errorf("bad --census-budget %v: give a duration such as 500ms (--census on has no budget)", f.censusBudget)
	}
	if err := profiler.CheckCensus(f.census); err != nil {
		return fmt.Errorf("bad --census: %w", err)
	}
	if err := stacks.Check(f.stacks); err != nil {
		return fmt.Errorf("bad --stacks: %w", err)
	}
	return nil
}

// options are the profiler options these flags set.
func (f *sampleFlags) options() profiler.Options {
	sig := f.stackSig
	if sig == 0 {
		sig = -1 // profiler: no stacks
	}
	// 0 asks for a stack with every sample: the BPF program's floor, not
	// the profiler's default.
	ivl := max(f.stackIvl, loader.MinStackGap)
	mode := f.stacks
	if f.set("stack-signal") || f.set("stack-interval") {
		if !f.set("stacks") {
			mode = stacks.Agent // those flags set the agent's stacks
		}
	}
	return profiler.Options{Event: f.event, Freq: f.freq, MinSize: f.minSize, AllocBudget: f.budget,
		Relocation: f.relocate, StackSignal: sig, StackInterval: ivl, Census: f.census, CensusBudget: f.censusBudget, NoDataTypes: !f.dataTypes, Verbose: f.verbose, Stacks: mode}
}

// table are the table options these flags set, with top rows.
func (f *sampleFlags) table(top int) report.TableOptions {
	return report.TableOptions{Top: top, AccessTop: f.accTop, Depth: f.depth}
}

// set says whether the command line set flag name.
func (f *sampleFlags) set(name string) bool { return f.fs != nil && flagGiven(f.fs, name) }

// flagGiven says whether fs's command line set flag name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}
