// Package htmlreport renders reports as one self-contained HTML page: the
// header, the objects (sortable, each with its holder chain, fields and
// access paths), an icicle flame graph of the access paths, the data
// types, the regions of the remainder, the statistics and the notes.
//
// The page fetches nothing: its style and script are inline, and its
// Content-Security-Policy allows only them (by hash). The report's data
// is embedded as JSON, which the script lays out. Every string of a report
// comes from the profiled JVM or a file and is hostile: html/template
// escapes the JSON for its script element, and the script puts strings in
// the page as text nodes only (docs/html.md).
package htmlreport

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"strconv"

	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/safety/termsafe"
)

var (
	//go:embed page.html
	pageHTML string
	//go:embed style.css
	styleCSS string
	//go:embed app.js
	appJS string

	pageTmpl = template.Must(template.New("page").Parse(pageHTML))
	// csp allows the page's own style and script and nothing else: no
	// fetch, no image, no inline event handler, whatever a report holds.
	csp = "default-src 'none'; style-src '" + sha256Source(styleCSS) + "'; script-src '" + sha256Source(appJS) + "'"
)

// DefaultMaxPaths is how many access paths the page keeps per object,
// data type and region: the rest add up in one "[N more paths]" path.
const DefaultMaxPaths = 200

// Options choose what the page holds.
type Options struct {
	Top      int // objects and data types per JVM (0: all with samples)
	MaxPaths int // access paths kept per object, data type and region (0: DefaultMaxPaths)
}

// View is one report the page shows, under a label ("pid 4242").
type View struct {
	Label  string
	Report *report.Report
}

// Write writes the page of views; a selector switches between them when
// there are several.
func Write(w io.Writer, views []View, opt Options) error {
	return write(w, views, nil, opt)
}

// WriteReports writes the page of one report, or of the reports of
// several JVMs: their merge first (as djx-bpf report merges them), then
// each.
func WriteReports(w io.Writer, reps []*report.Report, opt Options) error {
	var views []View
	if len(reps) > 1 {
		views = append(views, View{Label: fmt.Sprintf("all %d JVMs, merged", len(reps)), Report: report.Merge(reps...)})
	}
	for _, r := range reps {
		views = append(views, View{Label: jvmLabel(r), Report: r})
	}
	return write(w, views, nil, opt)
}

// WriteScan writes the page of a scan: its JVMs merged first, then each,
// and what the scan skipped and counted.
func WriteScan(w io.Writer, s *report.Scan, opt Options) error {
	var views []View
	if len(s.JVMs) > 1 {
		views = append(views, View{Label: fmt.Sprintf("all %d JVMs, merged", len(s.JVMs)), Report: report.Merge(s.JVMs...)})
	}
	for _, r := range s.JVMs {
		views = append(views, View{Label: jvmLabel(r), Report: r})
	}
	info := &scanInfo{
		Line: fmt.Sprintf("djx-bpf scan: %d JVMs profiled, event %s, %.1fs", len(s.JVMs), s.Event, s.DurationSec),
		Stats: []string{fmt.Sprintf("JVMs discovered %d, profiled %d; samples dropped %d (ring buffer full), lost %d (a JVM's session fell behind)",
			s.Stats.Discovered, s.Stats.Profiled, s.Stats.Dropped, s.Stats.Lost)},
		Notes: s.Notes,
	}
	if s.Stats.CostBPFMs > 0 || s.Stats.CostDjxCPUMs > 0 {
		info.Stats = append(info.Stats, fmt.Sprintf("cost for all JVMs: BPF %.2f CPU-s; djx-bpf %.2f CPU-s", s.Stats.CostBPFMs/1000, s.Stats.CostDjxCPUMs/1000))
	}
	for _, k := range s.Skipped {
		info.Skipped = append(info.Skipped, fmt.Sprintf("pid %d (%s): %s", k.PID, k.Main, k.Reason))
	}
	return write(w, views, info, opt)
}

func jvmLabel(r *report.Report) string {
	l := "pid " + strconv.Itoa(r.PID)
	if r.JVM != "" {
		l += " (" + r.JVM + ")"
	}
	return l
}

// write renders the page: the views' data as JSON in a script element of
// type application/json, which html/template escapes for that context
// (no "<" survives in it, so no "</script>" ends it early).
func write(w io.Writer, views []View, info *scanInfo, opt Options) error {
	if opt.MaxPaths <= 0 {
		opt.MaxPaths = DefaultMaxPaths
	}
	p := page{Title: "djx-bpf report", Scan: info, Views: make([]view, len(views))}
	for i, v := range views {
		p.Views[i] = newView(v.Label, v.Report, opt)
	}
	if len(views) == 1 {
		// The label names the JVM: the target's text, escaped (termsafe)
		// for a page printed to a terminal too.
		p.Title = "djx-bpf: " + termsafe.String(views[0].Label)
	}
	err := pageTmpl.Execute(w, struct {
		Title, CSP string
		CSS        template.CSS
		JS         template.JS
		Data       *page
	}{p.Title, csp, template.CSS(styleCSS), template.JS(appJS), &p})
	if err != nil {
		return fmt.Errorf("write html report: %w", err)
	}
	return nil
}

// sha256Source is a CSP source that allows an inline element whose text
// is s.
func sha256Source(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(h[:])
}
