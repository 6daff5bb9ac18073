package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/djx-bpf/djx-bpf/profiler"
	"github.com/djx-bpf/djx-bpf/profiler/continuous"
	"github.com/djx-bpf/djx-bpf/profiler/scan"
	"github.com/djx-bpf/djx-bpf/report/otlp"
)

// continuousFreq is --freq's default in continuous mode: a tenth of a
// one-off profile's, so that a profile that never stops costs the JVMs
// little (docs/continuous.md has the measurements).
const continuousFreq = 49

// continuousPoll is how often a continuous scan looks at the ring buffer
// between the BPF program's wakeups.
const continuousPoll = 250 * time.Millisecond

// continuousFlags are scan's flags for --continuous.
type continuousFlags struct {
	on       bool
	window   time.Duration
	endpoint string
	queue    int
	host     string
}

func (cf *continuousFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&cf.on, "continuous", false, "profile until stopped, in windows, and push each window's profile of each JVM to an OpenTelemetry Collector (OTLP profiles over OTLP/HTTP); --freq defaults to 49")
	fs.DurationVar(&cf.window, "window", continuous.DefaultWindow, "continuous: length of a window")
	fs.StringVar(&cf.endpoint, "otlp-endpoint", "http://127.0.0.1:4318", "continuous: the Collector's OTLP/HTTP `URL` (profiles go to "+otlp.ProfilesPath+" unless the URL has a path)")
	fs.IntVar(&cf.queue, "queue", continuous.DefaultQueue, "continuous: windows kept while the backend is down, at most `N`; past it the oldest are dropped and counted")
	fs.StringVar(&cf.host, "host", "", "continuous: host.name of the profiles (default: the hostname)")
}

// check validates the flags once parsed.
func (cf *continuousFlags) check(fs *flag.FlagSet) error {
	if !cf.on {
		bad := ""
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "window", "otlp-endpoint", "queue", "host":
				bad = f.Name
			}
		})
		if bad != "" {
			return fmt.Errorf("--%s needs --continuous", bad)
		}
		return nil
	}
	bad := ""
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "duration", "format", "o", "top":
			bad = f.Name
		}
	})
	if bad != "" {
		return fmt.Errorf("--%s does not apply to --continuous, which runs until stopped and pushes to --otlp-endpoint: leave it out", bad)
	}
	if cf.window < time.Second {
		return fmt.Errorf("bad --window %v: give 1s or more, such as 60s", cf.window)
	}
	if cf.queue < 1 {
		return fmt.Errorf("bad --queue %d: give 1 or more", cf.queue)
	}
	return nil
}

// run profiles the host's JVMs so selects until SIGINT or SIGTERM, pushing
// each window to the Collector; then it pushes the window in progress.
func (cf *continuousFlags) run(fs *flag.FlagSet, so profiler.ScanOptions, quiet bool) int {
	if !flagGiven(fs, "freq") {
		so.Freq = continuousFreq
	}
	// Looking for new JVMs reads every process's /proc files: the scan's
	// 2 s would be a fifth of djx-bpf's own CPU time here. A sixth of the
	// window, 10 s at most, still attaches a new JVM within its first
	// window.
	so.Every = min(10*time.Second, max(2*time.Second, cf.window/6))
	// At 49 Hz the ring wakes the reader about every quarter second
	// anyway; looking more often only wakes djx-bpf.
	so.Poll = continuousPoll
	host := cf.host
	if host == "" {
		host, _ = os.Hostname()
	}
	exp, err := otlp.New(cf.endpoint, host, nil)
	if err != nil {
		eprintf(os.Stderr, "djx-bpf scan: %v\n", err)
		return 2
	}
	notify := func(msg string) {
		if !quiet {
			eprintf(os.Stderr, "djx-bpf: %s\n", msg)
		}
	}
	ctx, stop := signalContext("scan")
	defer stop()
	live, err := profiler.StartLive(context.Background(), so)
	if err != nil {
		eprintf(os.Stderr, "djx-bpf: %v\n", err)
		return 1
	}
	notify(fmt.Sprintf("continuous profile: %v windows to %s", cf.window, exp.URL()))
	st := continuous.Run(ctx, liveSource{live, notify}, exp, continuous.Config{Window: cf.window, Queue: cf.queue, Flush: 5 * time.Second, Notify: notify})
	live.Stop()
	eprintf(os.Stderr, "djx-bpf: %d windows cut, %d sent, %d tries failed and were retried, %d dropped (%d refused by the backend)\n",
		st.Windows, st.Sent, st.Retries, st.Dropped, st.Refused)
	if st.Dropped > 0 {
		return 1
	}
	return 0
}

// liveSource is a continuous scan as the window loop's source.
type liveSource struct {
	live   *scan.Live
	notify func(string)
}

func (ls liveSource) Cut(ctx context.Context) ([]continuous.JVMProfile, error) {
	c, err := ls.live.Cut(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range c.Skipped {
		ls.notify(fmt.Sprintf("pid %d (%s) skipped: %s", s.PID, s.Main, s.Reason))
	}
	for _, n := range c.Notes {
		ls.notify(n)
	}
	out := make([]continuous.JVMProfile, 0, len(c.JVMs))
	for _, j := range c.JVMs {
		out = append(out, continuous.JVMProfile{PID: j.JVM.PID, Main: j.JVM.Main, Report: j.Report, Final: j.Final})
	}
	return out, nil
}
