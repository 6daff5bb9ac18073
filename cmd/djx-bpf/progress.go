package main

import (
	"fmt"
	"io"
	"time"

	"github.com/djx-bpf/djx-bpf/profiler"
)

// progressLine draws one status line, rewritten in place (\r, erase to the
// end of line), like perf record and async-profiler's live views.
func progressLine(w io.Writer) func(profiler.Progress) {
	return func(p profiler.Progress) {
		left := ""
		if p.Remaining > 0 {
			left = fmt.Sprintf(" (%s left)", p.Remaining.Round(time.Second))
		}
		drops := ""
		if p.Dropped > 0 {
			drops = fmt.Sprintf(", %d dropped", p.Dropped)
		}
		fmt.Fprintf(w, "\r\x1b[Kdjx-bpf: %s%s, %d samples (%.0f/s), %d objects tracked%s",
			p.Elapsed.Round(time.Second), left, p.Samples, p.Rate, p.Objects, drops)
	}
}

// endProgress clears the status line before the report or a message.
func endProgress(w io.Writer) { fmt.Fprint(w, "\r\x1b[K") }
