package pmu

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Prober says whether the kernel accepts an event; tests inject fakes so
// that catalog logic needs no PMU.
type Prober interface {
	Probe(ev Event) error
}

// LiveProber opens the event (and its group leader) on one CPU for all
// processes (pid -1, as the profiler does) and closes it again.
type LiveProber struct {
	CPU int // CPU to probe on; 0 by default
}

// Probe implements Prober. Every fd it opens is closed before it returns.
func (l LiveProber) Probe(ev Event) error {
	group := -1
	if ev.Leader != nil {
		lattr := *ev.Leader
		fd, err := unix.PerfEventOpen(&lattr, -1, l.CPU, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			return fmt.Errorf("open group leader of %s on cpu %d: %w", ev.Name, l.CPU, err)
		}
		defer unix.Close(fd)
		group = fd
	}
	attr := ev.Attr
	fd, err := unix.PerfEventOpen(&attr, -1, l.CPU, group, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open %s on cpu %d: %w", ev.Name, l.CPU, err)
	}
	return unix.Close(fd)
}
