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

	"github.com/djx-bpf/djx-bpf/pprofile"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/safefs"
)

const reportUsage = `Usage:
  djx-bpf report [flags] FILE...

Reads profiles saved by 'djx-bpf profile -o FILE.pb.gz' (pprof; JSON reports
from --format json too), merges them (equal objects and access paths add up,
as for instances of one service) and prints the table, JSON, folded stacks
for flame graph tools (collapsed) or a merged pprof profile.

Flags:
`

func cmdReport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), reportUsage)
		fs.PrintDefaults()
	}
	var (
		format = fs.String("format", "table", "output format: table, json, collapsed (folded stacks) or pprof; default pprof for -o *.pb.gz or *.pprof")
		out    = fs.String("o", "", "write to `FILE` (atomically) instead of standard output")
		top    = fs.Int("top", report.DefaultTableOptions.Top, "objects to show (0: all); collapsed: all unless given")
		accTop = fs.Int("access-top", report.DefaultTableOptions.AccessTop, "table: access paths shown under each object and in the remainder (0: none)")
		depth  = fs.Int("depth", report.DefaultTableOptions.Depth, "table, collapsed: frames kept per access path, innermost first (0: all); collapsed: all unless given")
		focus  = fs.String("focus", "", "keep only objects whose type or allocation site, and data types whose name, match `REGEX`")
		pid    = fs.Int("pid", 0, "keep only the profiles of the JVM with this `PID`")
	)
	// Flags may come after files too (djx-bpf report a.pb.gz --top 5);
	// after "--" everything is a file.
	var files []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		left := fs.Args()
		if n := len(rest) - len(left); n > 0 && rest[n-1] == "--" {
			files = append(files, left...)
			break
		}
		if len(left) == 0 {
			break
		}
		files = append(files, left[0])
		rest = left[1:]
	}
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	*format = outputFormat(*format, set["format"], *out)
	var re *regexp.Regexp
	switch {
	case len(files) == 0:
		fmt.Fprint(stderr, "djx-bpf report: give one or more profile files\n\n")
		fs.Usage()
		return 2
	case !slices.Contains([]string{"table", "json", "collapsed", "pprof"}, *format):
		eprintf(stderr, "djx-bpf report: unknown --format %q: use table, json, collapsed or pprof\n", *format)
		return 2
	case *top < 0 || *accTop < 0 || *depth < 0:
		fmt.Fprintln(stderr, "djx-bpf report: --top, --access-top and --depth must be 0 or more")
		return 2
	case *pid < 0:
		eprintf(stderr, "djx-bpf report: bad --pid %d\n", *pid)
		return 2
	case *focus != "":
		var err error
		if re, err = regexp.Compile(*focus); err != nil {
			eprintf(stderr, "djx-bpf report: bad --focus: %v\n", err)
			return 2
		}
	}
	if err := checkOutputEarly(*out); err != nil {
		eprintf(stderr, "djx-bpf report: -o: %v\n", err)
		return 2
	}
	if *out == "" && *format == "pprof" && isCharDevice(stdout) {
		fmt.Fprintln(stderr, "djx-bpf report: a pprof profile is binary: give -o FILE or redirect standard output")
		return 2
	}

	var reps []*report.Report
	for _, f := range files {
		rs, err := readReports(f)
		if err != nil {
			eprintf(stderr, "djx-bpf report: %v\n", err)
			return 1
		}
		reps = append(reps, rs...)
	}
	if *pid != 0 {
		var keep []*report.Report
		var pids []string
		for _, r := range reps {
			if r.PID == *pid {
				keep = append(keep, r)
			} else if s := strconv.Itoa(r.PID); !slices.Contains(pids, s) {
				pids = append(pids, s)
			}
		}
		if len(keep) == 0 {
			eprintf(stderr, "djx-bpf report: no profile of pid %d in %s (they hold pids %s)\n", *pid, strings.Join(files, ", "), strings.Join(pids, ", "))
			return 1
		}
		reps = keep
	}
	if *format == "pprof" {
		reps = report.MergeByPID(reps)
	} else {
		reps = []*report.Report{report.Merge(reps...)}
	}
	if re != nil {
		for i, r := range reps {
			f := report.Focus(r, re)
			f.Notes = append(slices.Clip(f.Notes), fmt.Sprintf("--focus %q: %d of %d allocation sites; samples in no tracked object left out", *focus, len(f.Objects), len(r.Objects)))
			reps[i] = f
		}
	}
	opt := report.TableOptions{Top: *top, AccessTop: *accTop, Depth: *depth}
	write := func(w io.Writer) error {
		switch *format {
		case "json":
			return report.WriteJSON(w, reps[0], opt.Top)
		case "collapsed":
			c := report.TableOptions{}
			if set["top"] {
				c.Top = opt.Top
			}
			if set["depth"] {
				c.Depth = opt.Depth
			}
			return report.WriteCollapsed(w, reps[0], c)
		case "pprof":
			return pprofile.Write(w, pprofile.Options{}, reps...)
		}
		return report.WriteTable(w, reps[0], opt)
	}
	var err error
	if *out == "" {
		err = write(stdout)
	} else {
		err = writeFileAtomic(*out, write)
	}
	if err != nil {
		eprintf(stderr, "djx-bpf report: %v\n", err)
		return 1
	}
	return 0
}

// outputFormat is the format asked for with --format or, when it was not
// given, pprof for an output file named *.pb.gz or *.pprof.
func outputFormat(format string, given bool, out string) string {
	if !given && (strings.HasSuffix(out, ".pb.gz") || strings.HasSuffix(out, ".pprof")) {
		return "pprof"
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
