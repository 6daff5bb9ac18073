package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/djx-bpf/djx-bpf/report"
)

// cmdScanheld prints, for each JVM of a scan's JSON report, the share of
// its in-heap samples in rows named by a holder chain and its top row: what
// a scan of a busy host left each JVM.
func cmdScanheld(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: djxbench scanheld SCAN.json (djx-bpf scan --format json -o SCAN.json)")
		return 2
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "djxbench: %v\n", err)
		return 1
	}
	var sc report.Scan
	if err := json.Unmarshal(data, &sc); err != nil {
		fmt.Fprintf(os.Stderr, "djxbench: %s is not a scan's JSON report: %v\n", args[0], err)
		return 1
	}
	writeScanheld(os.Stdout, &sc)
	return 0
}

// writeScanheld writes one line per JVM: pid, JVM, in-heap samples, held
// and attributed shares, the walk's notes, and the top row.
func writeScanheld(w io.Writer, sc *report.Scan) {
	fmt.Fprintf(w, "%d JVMs profiled, %d skipped; dropped %d, lost %d\n", len(sc.JVMs), len(sc.Skipped), sc.Stats.Dropped, sc.Stats.Lost)
	for _, r := range sc.JVMs {
		var held uint64
		for i := range r.Objects {
			if r.Objects[i].Held() {
				held += r.Objects[i].Samples
			}
		}
		s := r.Stats
		top := "-"
		if len(r.Objects) > 0 {
			o := r.Objects[0]
			top = fmt.Sprintf("%s @ %s / %s (%d)", o.Type, o.Site, strings.Join(o.Holder, " → "), o.Samples)
		}
		fmt.Fprintf(w, "pid %d %s: in heap %d, held %.1f%%, attributed %.1f%%; top %s\n",
			r.PID, r.JVM, s.InHeap, pctOf(held, s.InHeap), pctOf(s.Attributed, s.InHeap), top)
		for _, n := range r.Notes {
			if strings.Contains(n, "walk") {
				fmt.Fprintf(w, "    note: %s\n", n)
			}
		}
	}
}

func pctOf(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}
