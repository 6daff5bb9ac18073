package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/profiler"
	"github.com/djx-bpf/djx-bpf/profiler/control"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/report/htmlreport"
	"github.com/djx-bpf/djx-bpf/report/pprofile"
	"github.com/djx-bpf/djx-bpf/target/attach"
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

// cmdProfile profiles a JVM, attached to by PID or launched, and writes
// its report: parse the flags, check them, build the profiler's options,
// open --control, profile, write the report and, in launch mode, wait for
// the JVM, whose exit code becomes djx-bpf's.
func cmdProfile(args []string) int {
	pf, code := parseProfileFlags(args)
	if pf == nil {
		return code
	}
	if code := pf.check(); code != 0 {
		return code
	}
	opts, live, code := pf.options()
	if code != 0 {
		return code
	}
	ctx, stop := signalContext("profile")
	defer stop()
	ctx, closeControl, code := openControl(ctx, pf.ctlSpec, &opts)
	if code != 0 {
		return code
	}
	defer closeControl()

	rep, wait, err := pf.run(ctx, opts)
	if live {
		endProgress(os.Stderr)
	}
	code = pf.write(rep, err)
	if wait != nil {
		stop() // Ctrl-C now reaches only the JVM, as without djx-bpf
		return waitJVM(wait, code)
	}
	return code
}

// profileFlags are the command line of djx-bpf profile.
type profileFlags struct {
	pid, top         int
	duration         time.Duration
	format           string
	period, interval uint64
	numa             bool
	runUser, ctlSpec string
	sf               sampleFlags
	launch           []string // the command after --
	freqGiven        bool
}

// parseProfileFlags parses profile's command line. A nil result means
// exit with code: 0 after -h, 2 after a bad flag (the flag package said
// which).
func parseProfileFlags(args []string) (*profileFlags, int) {
	fs := flag.NewFlagSet("profile", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage:\n  djx-bpf profile --pid PID [flags]\n  djx-bpf profile [flags] -- java ARGS...\n\nFlags:\n")
		fs.PrintDefaults()
	}
	pf := new(profileFlags)
	fs.IntVar(&pf.pid, "pid", 0, "`PID` of a running JVM to attach to")
	fs.DurationVar(&pf.duration, "duration", 0, "how long to profile (e.g. 30s); default: until Ctrl-C or the target exits")
	fs.IntVar(&pf.top, "top", 20, "number of objects to show (0: all)")
	fs.StringVar(&pf.format, "format", "table", "output format: table, json, pprof or html; default pprof for -o *.pb.gz or *.pprof, html for -o *.html")
	fs.Uint64Var(&pf.period, "period", 0, "sample every N-th event (page-faults: default 1; hardware events: the catalog's default, see djx-bpf events)")
	fs.BoolVar(&pf.numa, "numa", false, "find the NUMA node of each sampled page and of the sampling CPU: per object home nodes, accessing nodes and remote share")
	fs.StringVar(&pf.runUser, "user", "", "launch mode: run the application as `USER` (name or uid); default under sudo: the invoking user (SUDO_UID)")
	fs.StringVar(&pf.ctlSpec, "control", "", "switch sampling off and on while profiling, as perf record --control: `fifo:CTL[,ACK]` (made with mkfifo) or fd:CTL[,ACK]; lines disable, enable, ping, stop, each answered with \"ack\" on ACK")
	pf.sf.register(fs)
	fs.Var(sizeFlag{&pf.interval}, "alloc-interval", "mean heap sampling interval `SIZE`; default: min-size/4")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0
		}
		return nil, 2
	}
	pf.launch = fs.Args()
	pf.freqGiven = flagGiven(fs, "freq")
	pf.format = outputFormat(pf.format, flagGiven(fs, "format"), pf.sf.out)
	return pf, 0
}

// check says on standard error what is wrong with the flags, -o included,
// before any profiling, and returns 2 then; 0 when they are fine.
func (pf *profileFlags) check() int {
	switch {
	case pf.pid == 0 && len(pf.launch) == 0:
		fmt.Fprintln(os.Stderr, "djx-bpf profile: give --pid PID or a command after --, e.g. djx-bpf profile -- java -jar app.jar")
		return 2
	case pf.pid != 0 && len(pf.launch) > 0:
		fmt.Fprintln(os.Stderr, "djx-bpf profile: --pid and a launch command exclude each other")
		return 2
	case !slices.Contains([]string{"table", "json", "pprof", "html"}, pf.format):
		eprintf(os.Stderr, "djx-bpf profile: unknown --format %q: use table, json, pprof or html\n", pf.format)
		return 2
	case pf.format == "pprof" && pf.sf.out == "" && isCharDevice(os.Stdout):
		fmt.Fprintln(os.Stderr, "djx-bpf profile: a pprof profile is binary: give -o FILE.pb.gz or redirect standard output")
		return 2
	case pf.pid < 0:
		eprintf(os.Stderr, "djx-bpf profile: bad --pid %d\n", pf.pid)
		return 2
	}
	if err := pf.sf.check(); err != nil {
		eprintf(os.Stderr, "djx-bpf profile: %v\n", err)
		return 2
	}
	if err := checkOutputEarly(pf.sf.out); err != nil {
		eprintf(os.Stderr, "djx-bpf profile: -o: %v\n", err)
		return 2
	}
	return 0
}

// options are the profiler options the flags set, with progress messages
// (unless --quiet) and, on a terminal (live), a status line on standard
// error. A bad --user is said there, with code 2.
func (pf *profileFlags) options() (opts profiler.Options, live bool, code int) {
	opts = pf.sf.options()
	opts.Duration, opts.Interval, opts.Period, opts.NUMA = pf.duration, pf.interval, pf.period, pf.numa
	if len(pf.launch) > 0 {
		var err error
		if opts.RunAs, err = launchUser(pf.runUser, os.Getenv); err != nil {
			eprintf(os.Stderr, "djx-bpf profile: %v\n", err)
			return opts, false, 2
		}
	} else if pf.runUser != "" {
		fmt.Fprintln(os.Stderr, "djx-bpf profile: --user is for launch mode (a command after --)")
		return opts, false, 2
	}
	if pf.freqGiven {
		opts.HWFreq = pf.sf.freq
	}
	live = !pf.sf.quiet && isCharDevice(os.Stderr)
	if !pf.sf.quiet {
		opts.Notify = func(msg string) {
			if live {
				endProgress(os.Stderr) // the message replaces the status line
			}
			eprintf(os.Stderr, "djx-bpf: %s\n", msg)
		}
	}
	if live {
		opts.Progress = progressLine(os.Stderr)
	}
	return opts, live, 0
}

// openControl opens the --control channel spec, if given, and serves it
// into opts; the context returned ends on its stop command. closeControl
// releases the channel. A channel that does not open is said on standard
// error, with code 2.
func openControl(ctx context.Context, spec string, opts *profiler.Options) (_ context.Context, closeControl func(), code int) {
	if spec == "" {
		return ctx, func() {}, 0
	}
	ch, err := control.Open(spec, trustedUIDs(os.Getenv)...)
	if err != nil {
		eprintf(os.Stderr, "djx-bpf profile: --control: %v\n", err)
		return ctx, nil, 2
	}
	ctx, cancel := context.WithCancel(ctx)
	opts.Control, opts.Switched = serveControl(ctx, ch, cancel, opts.Notify)
	return ctx, func() {
		cancel()
		ch.Close()
	}, 0
}

// run profiles the JVM of --pid or launches the command and profiles it;
// wait, in launch mode, waits for the JVM to exit.
func (pf *profileFlags) run(ctx context.Context, opts profiler.Options) (rep *report.Report, wait func() (int, error), err error) {
	if pf.pid != 0 {
		rep, err = profiler.Attach(ctx, pf.pid, opts)
		return rep, nil, err
	}
	return profiler.Launch(ctx, pf.launch, opts, os.Stdin, os.Stdout, os.Stderr)
}

// write writes the report, or says on standard error why there is none;
// 0, or 1 on an error.
func (pf *profileFlags) write(rep *report.Report, err error) int {
	if err != nil {
		eprintf(os.Stderr, "djx-bpf: %v\n", err)
		if errors.Is(err, attach.ErrRefused) {
			fmt.Fprintln(os.Stderr, "djx-bpf: hint: djx-bpf profile [flags] -- java ARGS... starts the JVM with the agent on -agentpath")
		}
		return 1
	}
	if err := writeReport(rep, pf.format, pf.sf.table(pf.top), pf.sf.out); err != nil {
		eprintf(os.Stderr, "djx-bpf: %v\n", err)
		return 1
	}
	return 0
}

// waitJVM waits for the launched JVM: its exit code is djx-bpf's unless
// djx-bpf failed (code) already, or the wait did (1).
func waitJVM(wait func() (int, error), code int) int {
	jcode, err := wait()
	if err != nil {
		eprintf(os.Stderr, "djx-bpf: wait for JVM: %v\n", err)
		return 1
	}
	if code == 0 {
		return jcode
	}
	return code
}

// serveControl turns the control channel's commands into the profile's
// sampling switches (Options.Control), acknowledging each once carried out;
// stop ends the profile as Ctrl-C does.
func serveControl(ctx context.Context, ch *control.Channel, stop func(), notify func(string)) (<-chan bool, func(bool, error)) {
	warn := func(format string, args ...any) {
		if notify != nil {
			notify(fmt.Sprintf("--control: "+format, args...))
		}
	}
	ack := func() {
		if err := ch.Ack(); err != nil {
			warn("%v", err)
		}
	}
	sw := make(chan bool)
	go func() {
		defer close(sw)
		for cmd := range ch.Commands() {
			switch cmd.Op {
			case control.Enable, control.Disable:
				select {
				case sw <- cmd.Op == control.Enable: // acknowledged by switched
				case <-ctx.Done():
					ack()
				}
			case control.Stop:
				stop()
				ack()
			case control.Ping:
				ack()
			case control.TooLong:
				warn("ignored %s (commands are enable, disable, ping or stop)", cmd.Text)
				ack()
			default:
				warn("unknown command %q (use enable, disable, ping or stop)", cmd.Text)
				ack()
			}
		}
	}()
	switched := func(on bool, err error) {
		if err != nil {
			warn("%v", err)
		} else if on {
			warn("sampling on")
		} else {
			warn("sampling off")
		}
		ack()
	}
	return sw, switched
}

func writeReport(rep *report.Report, format string, opt report.TableOptions, out string) error {
	write := func(w io.Writer) error {
		switch format {
		case "json":
			return jsonSafe(w, func(w io.Writer) error { return report.WriteJSON(w, rep, opt.Top) })
		case "pprof":
			start := time.Now().Add(-time.Duration(rep.DurationSec * float64(time.Second)))
			return pprofile.Write(w, pprofile.Options{Time: start}, rep)
		case "html":
			return jsonSafe(w, func(w io.Writer) error {
				return htmlreport.WriteReports(w, []*report.Report{rep}, htmlreport.Options{Top: opt.Top})
			})
		}
		return report.WriteTable(w, rep, opt)
	}
	if out == "" {
		return write(os.Stdout)
	}
	return writeFileAtomic(out, write)
}

// writeFileAtomic writes through a temporary file in path's directory,
// renamed over path, so that a failed write never leaves a truncated report
// behind. djx-bpf runs as root: a FIFO or device another user planted at
// path would receive the report or block the write, and another user's
// file is not root's to replace, so path must be absent or a regular file
// of root's or the invoking user's. The null device alone is written in
// place (renaming over it would replace /dev/null for the whole machine).
func writeFileAtomic(path string, write func(io.Writer) error) error {
	null, err := checkOutput(path, trustedUIDs(os.Getenv))
	if err != nil {
		return err
	}
	if null != nil {
		defer null.Close()
		if err := write(null); err != nil {
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

// checkOutput checks what is at path before -o replaces it: nothing, or a
// regular file that one of owners owns. The null device is opened for
// writing and returned. The path is opened O_PATH, which opens no device
// and never waits, and judged by fstat of that very inode.
func checkOutput(path string, owners []int) (null *os.File, err error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("write %w", &os.PathError{Op: "open", Path: path, Err: err})
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if !slices.Contains(owners, int(st.Uid)) {
			return nil, fmt.Errorf("write %s: the file is owned by uid %d, not by you or root: remove it or give another -o path", path, st.Uid)
		}
		return nil, nil
	case unix.S_IFDIR:
		return nil, fmt.Errorf("write %s: is a directory: give a file name", path)
	case unix.S_IFCHR:
		if unix.Major(st.Rdev) == 1 && unix.Minor(st.Rdev) == 3 { // the null device
			nfd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
			if err != nil {
				return nil, fmt.Errorf("write %s: %w", path, err)
			}
			return os.NewFile(uintptr(nfd), path), nil
		}
	}
	return nil, fmt.Errorf("write %s: not a regular file (%s): -o writes regular files only; omit -o and redirect standard output to write elsewhere", path, fileKind(st.Mode))
}

// fileKind names the type of a file that is not a regular one.
func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a named pipe"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFSOCK:
		return "a socket"
	}
	return fmt.Sprintf("mode %#o", mode)
}

// checkOutputEarly checks -o before a profile starts, so that a path that
// will be refused is said at once rather than after the profile.
func checkOutputEarly(path string) error {
	if path == "" {
		return nil
	}
	null, err := checkOutput(path, trustedUIDs(os.Getenv))
	if null != nil {
		null.Close()
	}
	return err
}

// trustedUIDs are the owners a file djx-bpf uses may have: root, djx-bpf's
// own user and, under sudo, the user who ran it (SUDO_UID).
func trustedUIDs(getenv func(string) string) []int {
	uids := []int{0, os.Geteuid()}
	if os.Geteuid() == 0 {
		if u, err := strconv.ParseUint(getenv("SUDO_UID"), 10, 31); err == nil {
			uids = append(uids, int(u))
		}
	}
	return uids
}
