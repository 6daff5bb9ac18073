package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// TestReportHTML writes the HTML page of two saved profiles of two JVMs:
// --format html, or -o *.html alone, gives one page with their merge and
// each JVM.
func TestReportHTML(t *testing.T) {
	for _, args := range [][]string{{"--format", "html", "-o"}, {"-o"}} {
		out := filepath.Join(t.TempDir(), "report.html")
		var stdout, stderr bytes.Buffer
		if code := cmdReport(append(args, out, fixture(1), fixture(2)), &stdout, &stderr); code != 0 {
			t.Fatalf("djx-bpf report %q: exit %d: %s", args, code, stderr.String())
		}
		page, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"<!DOCTYPE html>", `"label":"all 2 JVMs, merged"`, `"label":"pid 5151 (OpenJDK`, `"type":"long[]","site":"HotArrays.allocHot:12"`} {
			if !bytes.Contains(page, []byte(want)) {
				t.Errorf("djx-bpf report %q: the page lacks %s", args, want)
			}
		}
	}
}

// TestHTMLFormatAccepted checks that profile and scan take --format html
// (and -o *.html), before any profiling.
func TestHTMLFormatAccepted(t *testing.T) {
	out := filepath.Join(t.TempDir(), "p.html")
	pf, code := parseProfileFlags([]string{"--pid", "1", "-o", out})
	if pf == nil || pf.format != "html" || pf.check() != 0 {
		t.Errorf("profile -o %s: format %v, parse code %d", out, pf, code)
	}
	if pf, _ := parseProfileFlags([]string{"--pid", "1", "--format", "html"}); pf == nil || pf.check() != 0 {
		t.Error("profile --format html refused")
	}
	fs := flag.NewFlagSet("scan", flag.ContinueOnError)
	format := fs.String("format", "table", "")
	if err := fs.Parse([]string{"--format", "json"}); err != nil {
		t.Fatal(err)
	}
	if got := scanFormat(fs, *format, out); got != "json" {
		t.Errorf("scan --format json -o %s: format %q, want json (given wins)", out, got)
	}
	if got := scanFormat(flag.NewFlagSet("scan", flag.ContinueOnError), "table", out); got != "html" {
		t.Errorf("scan -o %s: format %q, want html", out, got)
	}
}
