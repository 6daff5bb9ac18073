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

	"github.com/djx-bpf/djx-bpf/attach"
	"github.com/djx-bpf/djx-bpf/control"
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
		top      = fs.Int("top", 20, "number of objects to show (0: all)")
		format   = fs.String("format", "table", "output format: table, json or pprof; default pprof for -o *.pb.gz or *.pprof")
		period   = fs.Uint64("period", 0, "sample every N-th event (page-faults: default 1; hardware events: the catalog's default, see djx-bpf events)")
		numaFlag = fs.Bool("numa", false, "find the NUMA node of each sampled page and of the sampling CPU: per object home nodes, accessing nodes and remote share")
		runUser  = fs.String("user", "", "launch mode: run the application as `USER` (name or uid); default under sudo: the invoking user (SUDO_UID)")
		ctlSpec  = fs.String("control", "", "switch sampling off and on while profiling, as perf record --control: `fifo:CTL[,ACK]` (made with mkfifo) or fd:CTL[,ACK]; lines disable, enable, ping, stop, each answered with \"ack\" on ACK")
	)
	var sf sampleFlags
	sf.register(fs)
	var interval uint64
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
	*format = outputFormat(*format, formatGiven, sf.out)
	switch {
	case *pid == 0 && len(launch) == 0:
		fmt.Fprintln(os.Stderr, "djx-bpf profile: give --pid PID or a command after --, e.g. djx-bpf profile -- java -jar app.jar")
		return 2
	case *pid != 0 && len(launch) > 0:
		fmt.Fprintln(os.Stderr, "djx-bpf profile: --pid and a launch command exclude each other")
		return 2
	case *format != "table" && *format != "json" && *format != "pprof":
		eprintf(os.Stderr, "djx-bpf profile: unknown --format %q: use table, json or pprof\n", *format)
		return 2
	case *format == "pprof" && sf.out == "" && isCharDevice(os.Stdout):
		fmt.Fprintln(os.Stderr, "djx-bpf profile: a pprof profile is binary: give -o FILE.pb.gz or redirect standard output")
		return 2
	case *pid < 0:
		eprintf(os.Stderr, "djx-bpf profile: bad --pid %d\n", *pid)
		return 2
	}
	if err := sf.check(); err != nil {
		eprintf(os.Stderr, "djx-bpf profile: %v\n", err)
		return 2
	}
	if err := checkOutputEarly(sf.out); err != nil {
		eprintf(os.Stderr, "djx-bpf profile: -o: %v\n", err)
		return 2
	}
	opts := sf.options()
	opts.Duration, opts.Interval, opts.Period, opts.NUMA = *duration, interval, *period, *numaFlag
	if len(launch) > 0 {
		var err error
		if opts.RunAs, err = launchUser(*runUser, os.Getenv); err != nil {
			eprintf(os.Stderr, "djx-bpf profile: %v\n", err)
			return 2
		}
	} else if *runUser != "" {
		fmt.Fprintln(os.Stderr, "djx-bpf profile: --user is for launch mode (a command after --)")
		return 2
	}
	if freqGiven {
		opts.HWFreq = sf.freq
	}
	live := !sf.quiet && isCharDevice(os.Stderr)
	if !sf.quiet {
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
	ctx, stop := signalContext("profile")
	defer stop()
	if *ctlSpec != "" {
		ch, err := control.Open(*ctlSpec, trustedUIDs(os.Getenv)...)
		if err != nil {
			eprintf(os.Stderr, "djx-bpf profile: --control: %v\n", err)
			return 2
		}
		defer ch.Close()
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		opts.Control, opts.Switched = serveControl(ctx, ch, cancel, opts.Notify)
	}

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
		eprintf(os.Stderr, "djx-bpf: %v\n", err)
		if errors.Is(err, attach.ErrRefused) {
			fmt.Fprintln(os.Stderr, "djx-bpf: hint: djx-bpf profile [flags] -- java ARGS... starts the JVM with the agent on -agentpath")
		}
		code = 1
	} else if werr := writeReport(rep, *format, sf.table(*top), sf.out); werr != nil {
		eprintf(os.Stderr, "djx-bpf: %v\n", werr)
		code = 1
	}
	if wait != nil {
		stop() // Ctrl-C now reaches only the JVM, as without djx-bpf
		jcode, werr := wait()
		if werr != nil {
			eprintf(os.Stderr, "djx-bpf: wait for JVM: %v\n", werr)
			return 1
		}
		if code == 0 {
			code = jcode
		}
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
