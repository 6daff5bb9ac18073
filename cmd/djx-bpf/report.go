package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/report/htmlreport"
	"github.com/djx-bpf/djx-bpf/report/pprofile"
	"github.com/djx-bpf/djx-bpf/safety/safefs"
)

const reportUsage = `Usage:
  djx-bpf report [flags] FILE...

Reads profiles saved by 'djx-bpf profile -o FILE.pb.gz' (pprof; JSON reports
from --format json too), merges them (equal objects and access paths add up,
as for instances of one service) and prints the table, JSON, folded stacks
for flame graph tools (collapsed), a merged pprof profile or a
self-contained HTML page (html: the merge and each JVM).

Flags:
`

// cmdReport reads saved profiles, merges them and writes the result: parse
// the flags, check them, read the files (keeping --pid's), merge and focus,
// write.
func cmdReport(args []string, stdout, stderr io.Writer) int {
	rf, code := parseReportFlags(args, stderr)
	if rf == nil {
		return code
	}
	if code := rf.check(stdout, stderr); code != 0 {
		return code
	}
	reps, code := rf.read(stderr)
	if code != 0 {
		return code
	}
	if err := rf.write(rf.combine(reps), stdout); err != nil {
		eprintf(stderr, "djx-bpf report: %v\n", err)
		return 1
	}
	return 0
}

// reportFlags are the command line of djx-bpf report.
type reportFlags struct {
	format, out, focus      string
	top, accTop, depth, pid int
	files                   []string
	set                     map[string]bool // the flags given
	re                      *regexp.Regexp  // --focus, compiled by check
	usage                   func()
}

// parseReportFlags parses report's command line. A nil result means exit
// with code: 0 after -h, 2 after a bad flag (the flag package said which).
func parseReportFlags(args []string, stderr io.Writer) (*reportFlags, int) {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), reportUsage)
		fs.PrintDefaults()
	}
	rf := &reportFlags{set: make(map[string]bool), usage: fs.Usage}
	fs.StringVar(&rf.format, "format", "table", "output format: table, json, collapsed (folded stacks), pprof or html; default pprof for -o *.pb.gz or *.pprof, html for -o *.html")
	fs.StringVar(&rf.out, "o", "", "write to `FILE` (atomically) instead of standard output")
	fs.IntVar(&rf.top, "top", report.DefaultTableOptions.Top, "objects to show (0: all); collapsed: all unless given")
	fs.IntVar(&rf.accTop, "access-top", report.DefaultTableOptions.AccessTop, "table: access paths shown under each object and in the remainder (0: none)")
	fs.IntVar(&rf.depth, "depth", report.DefaultTableOptions.Depth, "table, collapsed: frames kept per access path, innermost first (0: all); collapsed: all unless given")
	fs.StringVar(&rf.focus, "focus", "", "keep only objects whose type or allocation site, and data types whose name, match `REGEX`")
	fs.IntVar(&rf.pid, "pid", 0, "keep only the profiles of the JVM with this `PID`")
	files, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0
		}
		return nil, 2
	}
	rf.files = files
	fs.Visit(func(f *flag.Flag) { rf.set[f.Name] = true })
	rf.format = outputFormat(rf.format, rf.set["format"], rf.out)
	return rf, 0
}

// parseInterspersed parses fs's flags and returns the other arguments:
// flags may come after files too (djx-bpf report a.pb.gz --top 5); after
// "--" everything is a file.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var files []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return nil, err
		}
		left := fs.Args()
		if n := len(rest) - len(left); n > 0 && rest[n-1] == "--" {
			return append(files, left...), nil
		}
		if len(left) == 0 {
			return files, nil
		}
		files = append(files, left[0])
		rest = left[1:]
	}
}

// check says on stderr what is wrong with the flags, -o included, before
// any file is read, and returns 2 then; 0 when they are fine.
func (rf *reportFlags) check(stdout, stderr io.Writer) int {
	switch {
	case len(rf.files) == 0:
		fmt.Fprint(stderr, "djx-bpf report: give one or more profile files\n\n")
		rf.usage()
		return 2
	case !slices.Contains([]string{"table", "json", "collapsed", "pprof", "html"}, rf.format):
		eprintf(stderr, "djx-bpf report: unknown --format %q: use table, json, collapsed, pprof or html\n", rf.format)
		return 2
	case rf.top < 0 || rf.accTop < 0 || rf.depth < 0:
		fmt.Fprintln(stderr, "djx-bpf report: --top, --access-top and --depth must be 0 or more")
		return 2
	case rf.pid < 0:
		eprintf(stderr, "djx-bpf report: bad --pid %d\n", rf.pid)
		return 2
	case rf.focus != "":
		var err error
		if rf.re, err = regexp.Compile(rf.focus); err != nil {
			eprintf(stderr, "djx-bpf report: bad --focus: %v\n", err)
			return 2
		}
	}
	if err := checkOutputEarly(rf.out); err != nil {
		eprintf(stderr, "djx-bpf report: -o: %v\n", err)
		return 2
	}
	if rf.out == "" && rf.format == "pprof" && isCharDevice(stdout) {
		fmt.Fprintln(stderr, "djx-bpf report: a pprof profile is binary: give -o FILE or redirect standard output")
		return 2
	}
	return 0
}

// read reads the reports of every file and keeps those of --pid, if
// given. A file that does not read, or no report of --pid, is said on
// stderr, with code 1.
func (rf *reportFlags) read(stderr io.Writer) ([]*report.Report, int) {
	var reps []*report.Report
	for _, f := range rf.files {
		rs, err := readReports(f)
		if err != nil {
			eprintf(stderr, "djx-bpf report: %v\n", err)
			return nil, 1
		}
		reps = append(reps, rs...)
	}
	if rf.pid == 0 {
		return reps, 0
	}
	var keep []*report.Report
	var pids []string
	for _, r := range reps {
		if r.PID == rf.pid {
			keep = append(keep, r)
		} else if s := strconv.Itoa(r.PID); !slices.Contains(pids, s) {
			pids = append(pids, s)
		}
	}
	if len(keep) == 0 {
		eprintf(stderr, "djx-bpf report: no profile of pid %d in %s (they hold pids %s)\n", rf.pid, strings.Join(rf.files, ", "), strings.Join(pids, ", "))
		return nil, 1
	}
	return keep, 0
}

// combine merges the reports, one per JVM for pprof and html and into one
// otherwise, and keeps what --focus matches, saying so in their notes.
func (rf *reportFlags) combine(reps []*report.Report) []*report.Report {
	if rf.format == "pprof" || rf.format == "html" {
		reps = report.MergeByPID(reps)
	} else {
		reps = []*report.Report{report.Merge(reps...)}
	}
	if rf.re != nil {
		for i, r := range reps {
			f := report.Focus(r, rf.re)
			f.Notes = append(slices.Clip(f.Notes), fmt.Sprintf("--focus %q: %d of %d allocation sites; samples in no tracked object left out", rf.focus, len(f.Objects), len(r.Objects)))
			reps[i] = f
		}
	}
	return reps
}

// write writes the merged reports in --format to -o or else stdout.
func (rf *reportFlags) write(reps []*report.Report, stdout io.Writer) error {
	write := func(w io.Writer) error { return rf.writeTo(w, reps) }
	if rf.out == "" {
		return write(stdout)
	}
	return writeFileAtomic(rf.out, write)
}

// writeTo writes the merged reports to w in --format: all of them for
// pprof and html, else the one.
func (rf *reportFlags) writeTo(w io.Writer, reps []*report.Report) error {
	opt := report.TableOptions{Top: rf.top, AccessTop: rf.accTop, Depth: rf.depth}
	switch rf.format {
	case "json":
		return jsonSafe(w, func(w io.Writer) error { return report.WriteJSON(w, reps[0], opt.Top) })
	case "collapsed":
		c := report.TableOptions{}
		if rf.set["top"] {
			c.Top = opt.Top
		}
		if rf.set["depth"] {
			c.Depth = opt.Depth
		}
		return report.WriteCollapsed(w, reps[0], c)
	case "pprof":
		return pprofile.Write(w, pprofile.Options{}, reps...)
	case "html":
		return jsonSafe(w, func(w io.Writer) error { return htmlreport.WriteReports(w, reps, htmlreport.Options{Top: opt.Top}) })
	}
	return report.WriteTable(w, reps[0], opt)
}

// outputFormat is the format asked for with --format or, when it was not
// given, pprof for an output file named *.pb.gz or *.pprof and html for
// *.html.
func outputFormat(format string, given bool, out string) string {
	switch {
	case given:
	case strings.HasSuffix(out, ".pb.gz") || strings.HasSuffix(out, ".pprof"):
		return "pprof"
	case strings.HasSuffix(out, ".html"):
		return "html"
	}
	return format
}

// isCharDevice says whether w is a terminal (or another character device),
// where binary output does not belong.
func isCharDevice(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// readReports reads a saved profile: a pprof profile written by djx-bpf or
// a JSON report. Errors name the file.
func readReports(path string) ([]*report.Report, error) {
	// A file of unknown origin: capped, as pprofile.Read caps a profile. A
	// FIFO would block the read and a device act on it: the path is opened
	// O_PATH and only a regular file is opened for reading.
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err} // "open FILE: ..."
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		unix.Close(fd)
		return nil, &os.PathError{Op: "read", Path: path, Err: unix.EISDIR}
	}
	f, err := safefs.ReopenRegular(fd, path)
	unix.Close(fd)
	if errors.Is(err, safefs.ErrNotRegular) {
		return nil, fmt.Errorf("%w: give a profile file saved with -o (pipes and devices are not read)", err)
	}
	if err != nil {
		return nil, err
	}
	data, err := safefs.ReadAll(f, pprofile.MaxBytes)
	f.Close()
	if errors.Is(err, safefs.ErrTooLarge) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err != nil {
		return nil, err // *PathError: "read FILE: ..."
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		r, err := readJSONReport(t)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return []*report.Report{r}, nil
	}
	reps, err := pprofile.Read(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return reps, nil
}

// maxJSONObjects caps the JSON objects of a report read back.
const maxJSONObjects = 1 << 20

// readJSONReport decodes a report written by --format json.
func readJSONReport(data []byte) (*report.Report, error) {
	// Every JSON object costs a few hundred bytes decoded ("{}" is two in
	// the file): a bomb of empty objects is refused before decoding.
	if n := bytes.Count(data, []byte("{")); n > maxJSONObjects {
		return nil, fmt.Errorf("JSON report with more than %d objects: %w", maxJSONObjects, safefs.ErrTooLarge)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return nil, fmt.Errorf("not a djx-bpf JSON report: %w", err)
	}
	for _, k := range []string{"pid", "mode", "objects", "stats"} {
		if _, ok := keys[k]; !ok {
			return nil, fmt.Errorf("not a djx-bpf JSON report: no %q field", k)
		}
	}
	var r report.Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("not a djx-bpf JSON report: %w", err)
	}
	r.Finish()
	return &r, nil
}
