package otlp

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/djx-bpf/djx-bpf/profiler/continuous"
	"github.com/djx-bpf/djx-bpf/report"
)

// testReport is a window of a JVM with objects objects, each with paths
// access paths of 8 frames; the first object has the most samples.
func testReport(pid, objects, paths int) *report.Report {
	r := &report.Report{PID: pid, JVM: "OpenJDK 64-Bit Server VM 17.0.15+6-Debian-1deb12u1", Mode: "attach", Event: "decode", DurationSec: 60}
	for i := range objects {
		o := report.Object{Type: "long[]", Site: fmt.Sprintf("Hot.alloc%d:12", i), AllocPath: []string{fmt.Sprintf("Hot.alloc%d:12", i), "Hot.main:40"},
			Origin: report.OriginAllocation, Objects: 1, Bytes: 1 << 20, EstObjects: 1, EstBytes: 1 << 20}
		for p := range paths {
			var path []string
			for f := range 8 {
				path = append(path, fmt.Sprintf("Hot.f%d_%d:%d", p, f, 10+f))
			}
			n := uint64((objects - i) * 10)
			o.Accesses = append(o.Accesses, report.Access{Path: path, Samples: n})
			o.Samples += n
			o.EstSamples += float64(n)
		}
		r.Objects = append(r.Objects, o)
	}
	r.Finish()
	return r
}

func testWindow(seq uint64) *continuous.Window {
	start := time.Unix(1_700_000_000, 0).Add(time.Duration(seq) * time.Minute)
	return &continuous.Window{Seq: seq, Start: start, End: start.Add(time.Minute), Dropped: 2, JVMs: []continuous.JVMProfile{
		{PID: 4242, Main: "Hot", Report: testReport(4242, 3, 2)},
		{PID: 4343, Main: "app.jar", Report: testReport(4343, 1, 1), Final: true},
	}}
}

// collector is a fake OTLP/HTTP receiver that decodes what it gets as the
// Collector does and answers with status.
type collector struct {
	mu     sync.Mutex
	status int
	reply  []byte
	got    []pprofile.Profiles
	errs   []string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.URL.Path != ProfilesPath || r.Header.Get("Content-Type") != "application/x-protobuf" || r.Header.Get("Content-Encoding") != "gzip" {
		c.errs = append(c.errs, fmt.Sprintf("%s %s %v", r.Method, r.URL.Path, r.Header))
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		c.errs = append(c.errs, err.Error())
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	raw, _ := io.ReadAll(zr)
	pd, err := (&pprofile.ProtoUnmarshaler{}).UnmarshalProfiles(raw)
	if err != nil {
		c.errs = append(c.errs, err.Error())
	}
	c.got = append(c.got, pd)
	if c.status != 0 {
		w.WriteHeader(c.status)
	}
	w.Write(c.reply)
}

func newCollector(t *testing.T) (*collector, *Exporter) {
	t.Helper()
	c := &collector{}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	exp, err := New(srv.URL, "host-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, exp
}

// A window reaches the receiver as one resource per JVM, labelled, with a
// profile per sample type that has samples, whose largest sample is on
// the top object's frame.
func TestExportWindow(t *testing.T) {
	c, exp := newCollector(t)
	if err := exp.Export(context.Background(), testWindow(7)); err != nil {
		t.Fatal(err)
	}
	if len(c.errs) > 0 || len(c.got) != 1 {
		t.Fatalf("receiver: %d requests, errors %q", len(c.got), c.errs)
	}
	pd := c.got[0]
	if n := pd.ResourceProfiles().Len(); n != 2 {
		t.Fatalf("%d resources, want one per JVM", n)
	}
	res := pd.ResourceProfiles().At(0).Resource().Attributes().AsRaw()
	want := map[string]any{AttrHost: "host-a", AttrPID: int64(4242), AttrMain: "Hot", AttrService: "Hot", AttrRuntimeName: "java",
		AttrRuntimeVer: "17.0.15+6-Debian-1deb12u1", AttrRuntimeDesc: "OpenJDK 64-Bit Server VM 17.0.15+6-Debian-1deb12u1"}
	for k, v := range want {
		if res[k] != v {
			t.Errorf("resource %s = %v, want %v", k, res[k], v)
		}
	}
	dict := pd.Dictionary()
	str := func(i int32) string { return dict.StringTable().At(int(i)) }
	sp := pd.ResourceProfiles().At(0).ScopeProfiles().At(0)
	var types []string
	for _, p := range sp.Profiles().All() {
		types = append(types, str(p.SampleType().TypeStrindex())+"/"+str(p.SampleType().UnitStrindex()))
		if p.DurationNano() != uint64(time.Minute) || p.Time().AsTime().Unix() != 1_700_000_000+7*60 {
			t.Errorf("profile time %v for %v, want the window's", p.Time().AsTime(), time.Duration(p.DurationNano()))
		}
		attrs, err := pprofile.FromAttributeIndices(dict.AttributeTable(), p, dict)
		if err != nil {
			t.Fatal(err)
		}
		if a := attrs.AsRaw(); a[AttrWindowSeq] != int64(7) || a[AttrWindowsDropped] != int64(2) || a[AttrEvent] != "decode" {
			t.Errorf("profile attributes %v", a)
		}
	}
	if got := strings.Join(types, " "); got != "samples/count est_samples/count alloc_objects/count alloc_bytes/bytes est_alloc_objects/count est_alloc_bytes/bytes" {
		t.Errorf("sample types %s", got)
	}
	top, stack := topSample(t, pd, sp.Profiles().At(0))
	// Leaf first: the access path's innermost frame, then the object.
	if top != 30 || len(stack) != 11 || stack[8] != "[object] long[] @ Hot.alloc0:12" || stack[0] != "Hot.f0_0" && stack[0] != "Hot.f1_0" {
		t.Errorf("top sample %d on %q, want 30 on an access path of Hot.alloc0", top, stack)
	}
}

// topSample is a profile's largest sample and its stack's function names,
// leaf first.
func topSample(t *testing.T, pd pprofile.Profiles, p pprofile.Profile) (int64, []string) {
	t.Helper()
	dict := pd.Dictionary()
	var best int64
	var stack []string
	for _, s := range p.Samples().All() {
		if v := s.Values().At(0); v > best {
			best, stack = v, nil
			for _, li := range dict.StackTable().At(int(s.StackIndex())).LocationIndices().All() {
				for _, ln := range dict.LocationTable().At(int(li)).Lines().All() {
					stack = append(stack, dict.StringTable().At(int(dict.FunctionTable().At(int(ln.FunctionIndex())).NameStrindex())))
				}
			}
		}
	}
	return best, stack
}

// What the receiver answers decides what the loop does: 503 and 429 are
// retried, other failures and rejected profiles are not.
func TestExportResponses(t *testing.T) {
	c, exp := newCollector(t)
	rejected := []byte{0x0a, 0x07, 0x08, 0x03, 0x12, 0x03, 'b', 'a', 'd'} // partial_success{rejected_profiles: 3, error_message: "bad"}
	for _, tc := range []struct {
		status    int
		reply     []byte
		ok, perm  bool
		errSubstr string
	}{
		{status: 200, ok: true},
		{status: 200, reply: rejected, perm: true, errSubstr: "rejected 3 profiles of window 1: bad"},
		{status: 503, errSubstr: "HTTP 503"},
		{status: 429, errSubstr: "HTTP 429"},
		{status: 400, reply: []byte("no such pipeline"), perm: true, errSubstr: "HTTP 400: no such pipeline"},
		{status: 404, perm: true, errSubstr: "HTTP 404"},
	} {
		c.mu.Lock()
		c.status, c.reply = tc.status, tc.reply
		c.mu.Unlock()
		err := exp.Export(context.Background(), testWindow(1))
		switch {
		case tc.ok && err != nil:
			t.Errorf("HTTP %d: %v", tc.status, err)
		case !tc.ok && (err == nil || continuous.IsPermanent(err) != tc.perm || !strings.Contains(err.Error(), tc.errSubstr)):
			t.Errorf("HTTP %d %q: error %v, want permanent %v with %q", tc.status, tc.reply, err, tc.perm, tc.errSubstr)
		}
	}
}

// A backend that cannot be reached is retried.
func TestExportBackendDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	exp, err := New(url, "h", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Export(context.Background(), testWindow(1)); err == nil || continuous.IsPermanent(err) {
		t.Errorf("closed backend: %v, want a retryable error", err)
	}
}

func TestNewEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4318":          "http://127.0.0.1:4318" + ProfilesPath,
		"http://127.0.0.1:4318/":         "http://127.0.0.1:4318" + ProfilesPath,
		"https://otel:4318/v1/profiles2": "https://otel:4318/v1/profiles2",
	} {
		e, err := New(in, "h", nil)
		if err != nil || e.URL() != want {
			t.Errorf("New(%q): %v %v, want %s", in, e, err, want)
		}
	}
	for _, bad := range []string{"127.0.0.1:4318", "ftp://x", "http://"} {
		if _, err := New(bad, "h", nil); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}

func TestJVMVersion(t *testing.T) {
	for in, want := range map[string]string{
		"OpenJDK 64-Bit Server VM 17.0.15+6-Debian-1deb12u1": "17.0.15+6-Debian-1deb12u1",
		"Eclipse OpenJ9 VM": "Eclipse OpenJ9 VM",
	} {
		if got := jvmVersion(in); got != want {
			t.Errorf("jvmVersion(%q) = %q, want %q", in, got, want)
		}
	}
}
