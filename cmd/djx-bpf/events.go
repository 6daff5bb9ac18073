package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/djx-bpf/djx-bpf/sources/pmu"
)

// cmdEvents lists the sample sources this machine offers, like perf list:
// each with whether it is available, why not, and the perf_event_attr
// djx-bpf would open.
func cmdEvents(args []string) int {
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	root := fs.String("root", "/", "read /proc and /sys below `DIR` (a captured machine, see sources/pmu/testdata)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage:\n  djx-bpf events [flags]\n\nLists the sample sources (--event) of this machine.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var m *pmu.Machine
	var err error
	if *root == "/" {
		m, err = pmu.Live()
	} else {
		m, err = pmu.Detect(*root)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "djx-bpf events: %v\n", err)
		return 1
	}
	writeEvents(os.Stdout, m)
	return 0
}

func writeEvents(w io.Writer, m *pmu.Machine) {
	fmt.Fprintf(w, "CPU: %s\n\n", m.CPU.ModelName)
	for _, e := range m.Catalog() {
		state := "available"
		if !e.Available {
			state = "unavailable"
		}
		fmt.Fprintf(w, "%-34s %-8s %s\n", e.Name, e.Kind, state)
		fmt.Fprintf(w, "    %s\n", e.Description)
		if !e.Available {
			fmt.Fprintf(w, "    why: %s\n", e.Reason)
		}
		if e.Note != "" {
			fmt.Fprintf(w, "    note: %s\n", e.Note)
		}
		if e.Event.Attr.Size != 0 {
			fmt.Fprintf(w, "    attr: %s\n", pmu.DescribeAttr(&e.Event.Attr))
		}
	}
	_, why := m.Auto()
	fmt.Fprintf(w, "\n%s\n", why)
	fmt.Fprintf(w, "Raw events in perf's syntax work too: --event cpu/event=0xd1,umask=0x08/pp, ibs_op//, r01d1.\n")
}
