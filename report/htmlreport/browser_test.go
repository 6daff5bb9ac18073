package htmlreport

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/report"
)

// The browser tests load the page from disk in Debian's chromium, headless,
// and check the DOM its script built (--dump-dom prints it after the load
// event). A click is stood in for by the page's fragment (#select=2 selects
// row 2 through the same function as a click).

// chromium is the browser's path; the test is skipped, saying why, where
// there is none, and fails under CI, which installs it (make test-deps).
func chromium(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		testenv.Skip(t, "no chromium on PATH, the browser tests need it: make test-deps installs it (apt-get install chromium)")
	}
	return bin
}

// writePage writes reps' page to a file of its own and returns its path.
func writePage(t *testing.T, opt Options, reps ...*report.Report) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(path, render(t, opt, reps...), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// dumpDOM loads file://path+fragment and returns the DOM after its script
// ran.
func dumpDOM(t *testing.T, path, fragment string) string {
	t.Helper()
	bin := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// --no-sandbox: the tests run as root, where chromium's sandbox refuses
	// to start. A profile directory of the test's own keeps runs apart.
	cmd := exec.CommandContext(ctx, bin, "--headless", "--disable-gpu", "--no-sandbox", "--user-data-dir="+t.TempDir(),
		"--dump-dom", "file://"+path+fragment)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		// A chromium that does not start is a set-up to fix: a skip
		// outside CI, a failure under it.
		testenv.Skip(t, "chromium did not run (%v): %s", err, lastLines(stderr.String(), 5))
	}
	if !strings.Contains(string(out), "</html>") {
		t.Fatalf("chromium exited 0 but printed no DOM (%d bytes): %q\n%s", len(out), lastLines(string(out), 3), lastLines(stderr.String(), 5))
	}
	return string(out)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// section is the element with the given id, up to its end tag; for a div,
// whose frames are divs too, up to the end of the section holding it.
func section(t *testing.T, dom, tag, id string) string {
	t.Helper()
	end := `</` + tag + `>`
	if tag == "div" {
		end = `</section>`
	}
	m := regexp.MustCompile(`(?s)<` + tag + ` id="` + id + `"[^>]*>(.*?)` + end).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no <%s id=%q> in the DOM", tag, id)
	}
	return m[1]
}

var rowRE = regexp.MustCompile(`(?s)<tr class="row[^"]*" data-rank="(\d+)">(.*?)</tr>`)

func TestBrowserShowsTopObjectAndFlameGraph(t *testing.T) {
	r := sampleReport(4242, 20)
	dom := dumpDOM(t, writePage(t, Options{Top: 20}, r), "")
	rows := rowRE.FindAllStringSubmatch(section(t, dom, "table", "objects"), -1)
	if len(rows) != 20 {
		t.Fatalf("%d object rows in the DOM, want 20", len(rows))
	}
	top := rows[0][2]
	share := fmt.Sprintf("%.1f%%", 100*r.Objects[0].Share)
	for _, want := range []string{`<td class="type">long[]</td>`, "com.example.store.Table.grow:100", share} {
		if !strings.Contains(top, want) {
			t.Errorf("the top row lacks %q: %s", want, top)
		}
	}
	flame := section(t, dom, "div", "flame")
	if n := strings.Count(flame, `class="fr `); n < 20 {
		t.Errorf("%d frames in the flame graph, want at least 20 (one per object)", n)
	}
	if !strings.Contains(flame, "[object] long[] @ com.example.store.Table.grow:100") {
		t.Error("the whole profile's flame graph has no frame for the top object")
	}
	if !strings.Contains(dom, `<section id="detail" hidden=""`) {
		t.Error("an object's details show before any row was selected")
	}
	if m := regexp.MustCompile(`data-rendered-ms="([0-9.]+)" data-script-ms="([0-9.]+)" data-dom-ready-ms="([0-9.]+)"`).FindStringSubmatch(dom); m != nil {
		t.Logf("20 objects, %d bytes: DOM ready %s ms after navigation start, drawn at %s ms (script %s ms)", len(render(t, Options{Top: 20}, r)), m[3], m[1], m[2])
	} else {
		t.Error("the script did not finish: no data-rendered-ms on the body")
	}
}

func TestBrowserSelectShowsPaths(t *testing.T) {
	r := sampleReport(4242, 6)
	dom := dumpDOM(t, writePage(t, Options{}, r), "#select=2")
	detail := section(t, dom, "section", "detail")
	o := &r.Objects[1] // the structure: held, with fields
	for _, want := range []string{
		"com.example.cache.Lru$Node1",
		"com.example.cache.Registry.caches1 (static)", // its holder chain
		"next 75.0%", // its fields
		strings.Join(o.Accesses[0].Path, " ← "), // its access paths
	} {
		if !strings.Contains(detail, want) {
			t.Errorf("the details of row 2 lack %q:\n%s", want, detail)
		}
	}
	if strings.Contains(detail, "com.example.store.Table.scan0:") {
		t.Error("the details of row 2 show object 1's paths")
	}
	if !strings.Contains(dom, `<div class="fields">fields: next 75.0%, value 25.0%</div>`) {
		t.Error("row 2 does not list its fields")
	}
	if !strings.Contains(dom, `<tr class="row sel" data-rank="2">`) {
		t.Error("row 2 is not marked selected")
	}
	if title := section(t, dom, "small", "flame-title"); !strings.HasPrefix(title, "#2 com.example.cache.Lru$Node1") {
		t.Errorf("the flame graph is of %q, want object 2's", title)
	}
	if flame := section(t, dom, "div", "flame"); !strings.Contains(flame, "com.example.store.Table.scan1:200") || strings.Contains(flame, "scan0") {
		t.Error("the flame graph does not show object 2's paths alone")
	}
}

func TestBrowserHostileText(t *testing.T) {
	r, _ := hostileReport()
	dom := dumpDOM(t, writePage(t, Options{}, r), "#select=1")
	for _, tag := range []string{"<img", "<svg", "<iframe", "<b "} {
		if strings.Contains(dom, tag) {
			t.Errorf("the DOM holds a %s element made of target text", tag)
		}
	}
	// The text is on the page, as text.
	if !strings.Contains(dom, `&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;`) {
		t.Error("the hostile class name is not shown as text")
	}
	if !strings.Contains(section(t, dom, "section", "detail"), "__proto__") {
		t.Error(`the frame named "__proto__" is missing from the paths`)
	}
}

func TestBrowserSeveralJVMs(t *testing.T) {
	path := writePage(t, Options{}, sampleReport(4242, 3), sampleReport(5151, 4))
	dom := dumpDOM(t, path, "#jvm=2&select=1")
	if h := section(t, dom, "p", "header"); !strings.HasPrefix(h, "djx-bpf: pid 5151 ") {
		t.Errorf("view 2's header is %q, want pid 5151's", h)
	}
	if n := len(rowRE.FindAllString(section(t, dom, "table", "objects"), -1)); n != 4 {
		t.Errorf("view 2 shows %d objects, want pid 5151's 4", n)
	}
	if opts := strings.Count(section(t, dom, "select", "jvm"), "<option"); opts != 3 {
		t.Errorf("the selector offers %d views, want 3 (merged and each JVM)", opts)
	}
}

func TestBrowserEmptyReport(t *testing.T) {
	r := &report.Report{PID: 1, Mode: "attach", Event: "decode"}
	r.Finish()
	dom := dumpDOM(t, writePage(t, Options{}, r), "#select=3")
	if !strings.Contains(section(t, dom, "table", "objects"), "no samples hit a tracked object") {
		t.Error("an empty report does not say that no sample hit a tracked object")
	}
	if !strings.Contains(dom, "data-rendered-ms") {
		t.Error("the script did not finish on an empty report")
	}
}

func TestBrowserSortAndZoom(t *testing.T) {
	r := sampleReport(4242, 6)
	dom := dumpDOM(t, writePage(t, Options{}, r), "#sort=retained&zoom=1")
	rows := rowRE.FindAllStringSubmatch(section(t, dom, "table", "objects"), -1)
	if len(rows) != 6 || rows[0][1] != "2" || rows[1][1] != "5" {
		t.Errorf("sorted by retained bytes, the rows' ranks are %v, want 2 and 5 (the structures) first", ranks(rows))
	}
	if !strings.Contains(dom, `<th class="num sort desc" data-key="retained">`) {
		t.Error("the retained column is not marked as the sort, descending")
	}
	flame := section(t, dom, "div", "flame")
	top := regexp.MustCompile(`<div class="fr obj" title="\[object\] long\[\] @ com.example.store.Table.grow:100[^"]*" style="left: 0%; width: 100%;`)
	if !strings.Contains(flame, `<div class="fr root anc"`) || !top.MatchString(flame) {
		t.Errorf("a click on frame 1 did not zoom into the top object (full width, the root dimmed above it):\n%.600s", flame)
	}
	if info := section(t, dom, "span", "flame-info"); !strings.Contains(info, "% of all samples") {
		t.Errorf("the zoomed frame's line says %q", info)
	}
}

func ranks(rows [][]string) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r[1])
	}
	return out
}

// The browser tests can fail: a missing or crashing chromium fails them
// under CI, and one that prints no DOM fails them everywhere. Each case
// runs TestBrowserEmptyReport in a child with a stand-in chromium on PATH.
func TestBrowserTestsFailOnBrokenChromium(t *testing.T) {
	if os.Getenv("HTMLREPORT_CHILD") != "" {
		t.Skip("run in a child of itself")
	}
	for _, c := range []struct {
		name, script, ci, want string
	}{
		{"missing", "", "", "--- SKIP"},
		{"missing", "", "true", "--- FAIL"},
		{"crashes", "kill -SEGV $$", "", "--- SKIP"},
		{"crashes", "kill -SEGV $$", "true", "--- FAIL"},
		{"silent", "exit 0", "", "--- FAIL"},
		{"silent", "exit 0", "true", "--- FAIL"},
		{"no-dom", "echo '<html><body>'", "", "--- FAIL"},
	} {
		dir := t.TempDir()
		if c.script != "" {
			if err := os.WriteFile(filepath.Join(dir, "chromium"), []byte("#!/bin/sh\n"+c.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestBrowserEmptyReport$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "HTMLREPORT_CHILD=1", "PATH="+dir, "CI="+c.ci)
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), c.want) {
			t.Errorf("chromium %s, CI=%q: want %s, got:\n%s", c.name, c.ci, c.want, out)
		}
	}
}
