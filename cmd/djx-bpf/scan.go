package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/djx-bpf/djx-bpf/profiler"
	"github.com/djx-bpf/djx-bpf/profiler/scan"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/report/htmlreport"
)

// pidList parses "1,2,3".
func pidList(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad pid %q: want a comma-separated list of pids", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// noCap turns a flag's 0 (no cap) into ScanOptions' negative.
func noCap(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// cmdScan profiles every JVM on the host at once.
func cmdScan(args []string) int {
	fs := flag.NewFlagSet("scan", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage:\n  djx-bpf scan [flags]\n\nProfiles every JVM on this host (containers included) at once, and JVMs that start meanwhile.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	var (
		duration = fs.Duration("duration", 0, "how long to scan (e.g. 30s); default: until Ctrl-C")
		pids     = fs.String("pids", "", "only these JVMs (comma-separated pids)")
		exclude  = fs.String("exclude", "", "leave these JVMs alone (comma-separated pids)")
		match    = fs.String("match", "", "only JVMs whose command line matches `REGEX`")
		top      = fs.Int("top", 10, "objects per JVM and in the combined table (0: all)")
		format   = fs.String("format", "table", "output format: table, json or html; default html for -o *.html")
		maxJVMs  = fs.Int("max-jvms", scan.DefaultMaxJVMs, "profile at most `N` JVMs at once; more are skipped and listed (0: no cap)")
		perUser  = fs.Int("max-jvms-per-user", scan.DefaultMaxPerUser, "profile at most `N` JVMs of one user at once; more are skipped and listed (0: no cap)")
		memory   = uint64(profiler.DefaultScanMemory)
	)
	fs.Var(sizeFlag{&memory}, "max-memory", "what the scan keeps of its JVMs' agent streams together, at most `SIZE` (methods, classes, code, sites, queued records); past it records are dropped and counted")
	var sf sampleFlags
	sf.register(fs)
	var cf continuousFlags
	cf.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usage := func(format string, a ...any) int {
		eprintf(os.Stderr, "djx-bpf scan: "+format+"\n", a...)
		return 2
	}
	if fs.NArg() > 0 {
		return usage("unexpected argument %q (scan takes flags only)", fs.Arg(0))
	}
	if *format = scanFormat(fs, *format, sf.out); *format != "table" && *format != "json" && *format != "html" {
		return usage("unknown --format %q: use table, json or html", *format)
	}
	if err := sf.check(); err != nil {
		return usage("%v", err)
	}
	if err := cf.check(fs); err != nil {
		return usage("%v", err)
	}
	if *maxJVMs < 0 || *perUser < 0 {
		return usage("--max-jvms and --max-jvms-per-user must be 0 (no cap) or more")
	}
	so := profiler.ScanOptions{Options: sf.options(), Config: scan.Config{MaxJVMs: noCap(*maxJVMs), MaxPerUser: noCap(*perUser)}, Memory: int64(memory)}
	so.Duration = *duration
	if err := scanFilters(&so, *pids, *exclude, *match); err != nil {
		return usage("%v", err)
	}
	if !sf.quiet {
		so.Notify = func(msg string) { eprintf(os.Stderr, "djx-bpf: %s\n", msg) }
	}
	if cf.on {
		return cf.run(fs, so, sf.quiet)
	}
	ctx, stop := signalContext("scan")
	defer stop()
	sc, err := profiler.Scan(ctx, so)
	if err != nil {
		eprintf(os.Stderr, "djx-bpf: %v\n", err)
		return 1
	}
	if err := writeScan(sc, *format, sf.table(*top), sf.out); err != nil {
		eprintf(os.Stderr, "djx-bpf: %v\n", err)
		return 1
	}
	return 0
}

// scanFilters sets the JVMs --pids, --exclude and --match select.
func scanFilters(so *profiler.ScanOptions, pids, exclude, match string) error {
	var err error
	if so.PIDs, err = pidList(pids); err != nil {
		return fmt.Errorf("--pids: %w", err)
	}
	if so.Exclude, err = pidList(exclude); err != nil {
		return fmt.Errorf("--exclude: %w", err)
	}
	if match != "" {
		if so.Match, err = regexp.Compile(match); err != nil {
			return fmt.Errorf("--match: %w", err)
		}
	}
	return nil
}

// scanFormat is --format or, when it was not given, html for -o *.html
// (scan writes no pprof: *.pb.gz keeps the table).
func scanFormat(fs *flag.FlagSet, format, out string) string {
	if !flagGiven(fs, "format") && strings.HasSuffix(out, ".html") {
		return "html"
	}
	return format
}

// writeScan writes the scan's result in format to out, or else stdout.
func writeScan(sc *report.Scan, format string, opt report.TableOptions, out string) error {
	write := func(w io.Writer) error {
		switch format {
		case "json":
			return jsonSafe(w, func(w io.Writer) error { return report.WriteScanJSON(w, sc, opt.Top) })
		case "html":
			return jsonSafe(w, func(w io.Writer) error { return htmlreport.WriteScan(w, sc, htmlreport.Options{Top: opt.Top}) })
		}
		return report.WriteScanTable(w, sc, opt)
	}
	if out == "" {
		return write(os.Stdout)
	}
	return writeFileAtomic(out, write)
}
