package agent

// End-to-end tests: a real JVM loads the embedded agent with -agentpath and
// streams to a unix socket served by the test. They need a JDK and the built
// library and skip (with the reason) when either is missing.

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

type jdk struct {
	name, home string
	// flags are extra JVM flags; see tlabWorkaround.
	flags []string
}

// tlabWorkaround keeps allocations inside TLABs. Before JDK-8356372 (fixed in
// JDK 25) HotSpot's heap sampler undercounts bytes allocated outside a TLAB
// by a factor of about 8, so e.g. 4 KiB arrays on JDK 17 with default flags
// are captured with probability ~p/8 (measured: 249/2000 at interval 512).
var tlabWorkaround = []string{"-XX:TLABSize=1m", "-XX:-ResizeTLAB"}

func availableJDKs(t testing.TB) []jdk {
	t.Helper()
	var out []jdk
	for _, j := range testenv.JDKs(t) {
		var flags []string
		if j.Name == testenv.JDK17.Name {
			flags = tlabWorkaround
		}
		out = append(out, jdk{j.Name, j.Home, flags})
	}
	return out
}

var (
	fixtureOnce sync.Once
	fixtureDir  string // holds libdjxagent.so, AllocSite.class and FreeSite.class
	fixtureErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
	os.Exit(code)
}

// fixture writes the embedded library (as the loader does) and compiles the
// workload once per test binary.
func fixture(t testing.TB) (lib, classes string) {
	t.Helper()
	so, err := Library()
	if err != nil {
		testenv.Skip(t, "%v", err)
	}
	javac := filepath.Join(testenv.JDKs(t)[0].Home, "bin", "javac")
	fixtureOnce.Do(func() {
		fixtureDir, fixtureErr = os.MkdirTemp("", "djx-agent-test")
		if fixtureErr != nil {
			return
		}
		fixtureErr = os.WriteFile(filepath.Join(fixtureDir, "libdjxagent.so"), so, 0o755)
		if fixtureErr != nil {
			return
		}
		out, err := exec.Command(javac, "--release", "11", "-d", fixtureDir,
			"testdata/AllocSite.java", "testdata/FreeSite.java", "testdata/Spin.java", "testdata/CensusSite.java", "testdata/HeapFill.java", "testdata/TypesSite.java", "testdata/RootsSite.java", "testdata/RootsLoad.java", "testdata/Churn.java").CombinedOutput()
		if err != nil {
			fixtureErr = fmt.Errorf("javac: %v\n%s", err, out)
		}
	})
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	return filepath.Join(fixtureDir, "libdjxagent.so"), fixtureDir
}

// siteLine returns the source line of the `// SITE:name` marker in AllocSite.java.
func siteLine(t *testing.T, name string) int32 {
	t.Helper()
	return siteLineIn(t, "AllocSite.java", name)
}

// siteLineIn returns the source line of the `// SITE:name` marker in testdata/file.
func siteLineIn(t *testing.T, file, name string) int32 {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(src), "\n") {
		if strings.HasSuffix(l, "// SITE:"+name) {
			return int32(i + 1)
		}
	}
	t.Fatalf("marker SITE:%s not found", name)
	return 0
}

type batchOrErr struct {
	b   *agentwire.Batch
	err error
}

// jvm is a running AllocSite with the agent connected to conn.
type jvm struct {
	t       testing.TB
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan string
	stderr  *testenv.SyncBuffer
	conn    *net.UnixConn
	batches chan batchOrErr
	waited  chan error
}

// jvmFlags: a young generation large enough that the workload never GCs, so
// addresses stay unique.
var jvmFlags = []string{"-XX:+UseSerialGC", "-Xms1g", "-Xmx1g", "-Xmn512m"}

// startJVM launches AllocSite with the agent; opts are appended to
// sock=PATH. With connect false no listener exists (the agent must stay
// dormant).
func startJVM(t testing.TB, j jdk, opts string, connect bool, args ...string) *jvm {
	t.Helper()
	return startMain(t, j, opts, connect, jvmFlags, "AllocSite", args...)
}

// startMain launches class main with the JVM flags flags (and j's) and the agent.
func startMain(t testing.TB, j jdk, opts string, connect bool, flags []string, main string, args ...string) *jvm {
	t.Helper()
	return startJava(t, j, opts, connect, nil, flags, main, args...)
}

// startJava is startMain; with a non-nil attach it starts java without the
// agent and calls attach(v, lib, options) to load it dynamically before
// accepting its connection.
func startJava(t testing.TB, j jdk, opts string, connect bool, attach func(v *jvm, lib, opts string),
	flags []string, main string, args ...string) *jvm {
	t.Helper()
	lib, classes := fixture(t)
	// Not t.TempDir: sun_path holds only 107 bytes.
	dir, err := os.MkdirTemp("", "djx") // mode 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "agent.sock")
	var ln *net.UnixListener
	if connect {
		ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
	}
	agentOpts := "sock=" + sock
	if opts != "" {
		agentOpts += "," + opts
	}
	var argv []string
	if attach == nil {
		argv = append(argv, "-agentpath:"+lib+"="+agentOpts)
	}
	argv = append(argv, flags...)
	argv = append(argv, j.flags...)
	argv = append(argv, "-cp", classes, main)
	argv = append(argv, args...)
	v := &jvm{t: t, cmd: exec.Command(filepath.Join(j.home, "bin", "java"), argv...),
		lines: make(chan string, 16), stderr: &testenv.SyncBuffer{}, batches: make(chan batchOrErr, 1024),
		waited: make(chan error, 1)}
	v.cmd.Stderr = v.stderr
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the test binary, also on a timeout panic
	if v.stdin, err = v.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := v.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		v.stdin.Close()
		select {
		case <-v.waited:
		case <-time.After(10 * time.Second):
			v.cmd.Process.Kill() // our own child, by PID
			<-v.waited
		}
		if v.conn != nil {
			v.conn.Close()
		}
		if t.Failed() {
			t.Logf("java stderr:\n%s", v.stderr.String())
		}
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			v.lines <- sc.Text()
		}
		close(v.lines)
		v.waited <- v.cmd.Wait()
	}()
	if !connect {
		return v
	}
	if attach != nil {
		attach(v, lib, agentOpts)
	}
	ln.SetDeadline(time.Now().Add(30 * time.Second))
	if v.conn, err = ln.AcceptUnix(); err != nil {
		t.Fatalf("agent did not connect: %v\nstderr: %s", err, v.stderr.String())
	}
	go func() {
		r := agentwire.NewReader(v.conn)
		for {
			b, err := r.Next()
			if err != nil {
				v.batches <- batchOrErr{err: err}
				close(v.batches)
				return
			}
			v.batches <- batchOrErr{b: b}
		}
	}()
	return v
}

// ready waits for the workload's READY line and returns its nanoTime, which
// is CLOCK_MONOTONIC on Linux like the agent's timestamps.
func (v *jvm) ready() uint64 {
	v.t.Helper()
	return v.line("READY")
}

// line waits for the workload's next output line, which must be
// "<word> <nanoTime>", and returns the nanoTime.
func (v *jvm) line(word string) uint64 {
	v.t.Helper()
	select {
	case l, ok := <-v.lines:
		if !ok {
			v.t.Fatalf("java exited before %s; stderr:\n%s", word, v.stderr.String())
		}
		f := strings.Fields(l)
		if len(f) != 2 || f[0] != word {
			v.t.Fatalf("unexpected output %q", l)
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			v.t.Fatal(err)
		}
		return n
	case <-time.After(60 * time.Second):
		v.t.Fatalf("timeout waiting for %s", word)
	}
	return 0
}

// until collects batches until one has a watermark ≥ wm.
func (v *jvm) until(wm uint64) []*agentwire.Batch {
	v.t.Helper()
	var out []*agentwire.Batch
	timeout := time.After(30 * time.Second)
	for {
		select {
		case be, ok := <-v.batches:
			if !ok || be.err != nil {
				v.t.Fatalf("stream ended before watermark %d: %v", wm, be.err)
			}
			out = append(out, be.b)
			if be.b.Watermark >= wm {
				return out
			}
		case <-timeout:
			v.t.Fatalf("timeout waiting for watermark %d", wm)
		}
	}
}

// rest collects batches until the stream ends and returns them and the end error.
func (v *jvm) rest() ([]*agentwire.Batch, error) {
	v.t.Helper()
	var out []*agentwire.Batch
	timeout := time.After(30 * time.Second)
	for {
		select {
		case be, ok := <-v.batches:
			if !ok {
				return out, io.EOF
			}
			if be.err != nil {
				return out, be.err
			}
			out = append(out, be.b)
		case <-timeout:
			v.t.Fatal("timeout waiting for the end of the stream")
		}
	}
}

func (v *jvm) send(line string) {
	v.t.Helper()
	if _, err := io.WriteString(v.stdin, line+"\n"); err != nil {
		v.t.Fatal(err)
	}
}

// finish has the workload exit, adds the rest of the stream (which must
// end at EOF) to s and waits for java to exit.
func (v *jvm) finish(t *testing.T, s *stream) {
	t.Helper()
	v.send("exit")
	bs, err := v.rest()
	if err != io.EOF {
		t.Errorf("stream end: %v, want EOF", err)
	}
	s.add(t, bs)
	v.exit()
}

// exit waits for java to exit and checks that it exited with code 0.
func (v *jvm) exit() {
	v.t.Helper()
	select {
	case err := <-v.waited:
		v.waited <- err // for Cleanup
		if err != nil {
			v.t.Fatalf("java: %v; stderr:\n%s", err, v.stderr.String())
		}
	case <-time.After(30 * time.Second):
		v.t.Fatal("java did not exit")
	}
	if s := v.stderr.String(); strings.Contains(s, "hs_err") || strings.Contains(s, "SIGSEGV") {
		v.t.Fatalf("java crashed:\n%s", s)
	}
}

// stream indexes decoded records and checks the invariants every stream
// must hold: HELLO first, METHOD before use, nondecreasing times, every
// ALLOC at least minsize.
type stream struct {
	hello   *agentwire.Hello
	methods map[uint64]*agentwire.Method
	allocs  []*agentwire.Alloc
	raw     []*agentwire.AllocRaw
	stats   *agentwire.Stats
	bye     *agentwire.Bye
	errs    []string
}

func (s *stream) add(t *testing.T, bs []*agentwire.Batch) {
	t.Helper()
	if s.methods == nil {
		s.methods = map[uint64]*agentwire.Method{}
	}
	var last uint64
	if n := len(s.allocs); n > 0 {
		last = s.allocs[n-1].Time
	}
	for _, b := range bs {
		for _, r := range b.Records {
			if s.hello == nil {
				h, ok := r.(*agentwire.Hello)
				if !ok {
					t.Fatalf("first record is %v, want HELLO", r.Type())
				}
				s.hello = h
				continue
			}
			if s.bye != nil {
				t.Fatalf("%v record after BYE", r.Type())
			}
			switch r := r.(type) {
			case *agentwire.Hello:
				t.Fatal("second HELLO")
			case *agentwire.Method:
				s.methods[r.ID] = r
			case *agentwire.Alloc:
				if r.Size < s.hello.MinSize {
					t.Errorf("ALLOC of %d bytes below minsize %d", r.Size, s.hello.MinSize)
				}
				if r.Time < last || r.Time > b.Watermark {
					t.Errorf("ALLOC time %d out of order (previous %d, watermark %d)", r.Time, last, b.Watermark)
				}
				last = r.Time
				for _, f := range r.Frames {
					if s.methods[f.Method] == nil {
						t.Fatalf("frame method %#x used before its METHOD record", f.Method)
					}
				}
				s.allocs = append(s.allocs, r)
			case *agentwire.AllocRaw:
				if r.Size < s.hello.MinSize || r.Time < last || r.Time > b.Watermark {
					t.Errorf("ALLOC_RAW of %d bytes at %d (previous %d, watermark %d)", r.Size, r.Time, last, b.Watermark)
				}
				last = r.Time
				s.raw = append(s.raw, r)
			case *agentwire.Stats:
				s.stats = r
			case *agentwire.Bye:
				s.bye = r
			case *agentwire.ErrorRec:
				s.errs = append(s.errs, r.Message)
			}
		}
	}
}

func lineOf(m *agentwire.Method, bci int64) int32 {
	var line int32
	best := int64(-1)
	for _, l := range m.Lines {
		if l.Start <= bci && l.Start > best {
			best, line = l.Start, l.Line
		}
	}
	return line
}

// site counts the ALLOCs whose innermost frame is AllocSite.<method> at line.
func (s *stream) site(method string, line int32) []*agentwire.Alloc {
	return s.siteIn("LAllocSite;", method, line)
}

// siteIn counts the ALLOCs whose innermost frame is class.method at line.
func (s *stream) siteIn(class, method string, line int32) []*agentwire.Alloc {
	var out []*agentwire.Alloc
	for _, a := range s.allocs {
		if len(a.Frames) == 0 {
			continue
		}
		m := s.methods[a.Frames[0].Method]
		if m.ClassSig == class && m.Name == method && lineOf(m, a.Frames[0].BCI) == line {
			out = append(out, a)
		}
	}
	return out
}

const siteN = 2000

func TestAgentLaunch(t *testing.T) {
	bigLine, kibLine := siteLine(t, "big"), siteLine(t, "kib")
	var variants []jdk
	for _, j := range availableJDKs(t) {
		variants = append(variants, j)
		if j.flags != nil {
			// Default flags too: rates are only logged (JDK-8356372).
			variants = append(variants, jdk{j.name + "-defaultflags", j.home, nil})
		}
	}
	for _, j := range variants {
		strict := !strings.HasSuffix(j.name, "-defaultflags")
		for _, interval := range []uint64{256, 512, 1024, 4096, 16384} {
			t.Run(fmt.Sprintf("%s/interval=%d", j.name, interval), func(t *testing.T) {
				v := startJVM(t, j, fmt.Sprintf("interval=%d,minsize=1024,future=1", interval), true,
					"site", strconv.Itoa(siteN), "200000")
				var s stream
				s.add(t, v.until(v.ready()))

				h := s.hello
				if h.ProtoVersion != 1 || h.Mode != "launch" || h.Interval != interval || h.MinSize != 1024 ||
					int(h.PID) != v.cmd.Process.Pid || h.VMName == "" || h.VMVersion == "" {
					t.Errorf("HELLO = %+v (java pid %d)", h, v.cmd.Process.Pid)
				}
				if !hasThread(t, v.cmd.Process.Pid, "djx-bpf writer") {
					t.Error("no thread named \"djx-bpf writer\": top -H and perf cannot tell the agent's CPU apart")
				}
				seen := map[uint64]bool{}
				for _, a := range s.allocs {
					if a.Addr == 0 || a.Addr%8 != 0 || seen[a.Addr] {
						t.Fatalf("bad or duplicate address %#x (type %s)", a.Addr, a.TypeSig)
					}
					seen[a.Addr] = true
				}
				for _, c := range []struct {
					name, method string
					line         int32
					size         uint64
				}{
					{"4KiB", "allocBig", bigLine, 4112},
					{"1KiB", "allocKib", kibLine, 1024},
				} {
					got := s.site(c.method, c.line)
					for _, a := range got {
						if a.TypeSig != "[J" || a.Size != c.size {
							t.Fatalf("%s site: ALLOC %s of %d bytes, want [J of %d", c.name, a.TypeSig, a.Size, c.size)
						}
						if m := s.methods[a.Frames[0].Method]; m.SourceFile != "AllocSite.java" || m.Sig != "()[J" {
							t.Errorf("METHOD %+v", m)
						}
						if len(a.Frames) < 3 || s.methods[a.Frames[len(a.Frames)-1].Method].Name != "main" {
							t.Errorf("stack does not end in main: %d frames", len(a.Frames))
						}
					}
					rate := float64(len(got)) / siteN
					p := 1 - math.Exp(-float64(c.size)/float64(interval))
					tol := 0.03 + 4*math.Sqrt(p*(1-p)/siteN)
					t.Logf("%s: %s objects: captured %d/%d = %.3f, expected p = %.3f", j.name, c.name, len(got), siteN, rate, p)
					if strict && math.Abs(rate-p) > tol {
						t.Errorf("%s capture rate %.3f, want %.3f ± %.3f", c.name, rate, p, tol)
					}
				}

				v.finish(t, &s)
				if s.bye == nil || s.bye.Reason != "vmdeath" {
					t.Errorf("BYE = %+v, want vmdeath", s.bye)
				}
				st := s.stats
				if st == nil || st.AllocsSent != uint64(len(s.allocs)) || st.Dropped != 0 || st.StackErrors != 0 ||
					st.BelowMinSize == 0 || st.Callbacks < st.AllocsSent+st.BelowMinSize {
					t.Errorf("STATS = %+v, %d ALLOCs received", st, len(s.allocs))
				}
				if len(s.errs) > 0 {
					t.Errorf("ERROR records: %q", s.errs)
				}
			})
		}
	}
}

// hasThread reports whether process pid has a thread named comm.
func hasThread(t *testing.T, pid int, comm string) bool {
	t.Helper()
	dirs, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/comm", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if b, err := os.ReadFile(d); err == nil && strings.TrimSpace(string(b)) == comm {
			return true
		}
	}
	return false
}

// TestAgentDetach: closing the socket, or sending 'Q', detaches the agent;
// the JVM keeps allocating and exits normally.
func TestAgentDetach(t *testing.T) {
	for _, j := range availableJDKs(t) {
		for _, how := range []string{"close", "quit"} {
			t.Run(j.name+"/"+how, func(t *testing.T) {
				v := startJVM(t, j, "interval=1024,minsize=1024", true, "site", "500", "1000")
				var s stream
				s.add(t, v.until(v.ready()))
				if len(s.allocs) == 0 {
					t.Fatal("no ALLOC before detach")
				}
				if how == "close" {
					v.conn.Close()
				} else {
					if _, err := v.conn.Write([]byte{'Q'}); err != nil {
						t.Fatal(err)
					}
					bs, err := v.rest()
					if err != io.EOF {
						t.Fatalf("stream end after Q: %v, want EOF", err)
					}
					s.add(t, bs)
					if s.bye == nil || s.bye.Reason != "detach" {
						t.Fatalf("BYE = %+v, want detach", s.bye)
					}
				}
				// Allocate on after the detach: the first sampled callbacks
				// switch the event off.
				time.Sleep(200 * time.Millisecond)
				for i := 0; i < 3; i++ {
					v.send("again")
					v.ready()
				}
				v.send("exit")
				v.exit()
			})
		}
	}
}

func TestAgentOptions(t *testing.T) {
	j := availableJDKs(t)[0]
	t.Run("bad interval", func(t *testing.T) {
		v := startJVM(t, j, "interval=12x", false, "site", "1", "1")
		select {
		case err := <-v.waited:
			v.waited <- err
			if err == nil {
				t.Fatal("java started despite a bad option")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("java did not exit")
		}
		if s := v.stderr.String(); !strings.Contains(s, `djx-bpf agent: option interval: bad value "12x"`) {
			t.Errorf("stderr:\n%s", s)
		}
	})
	t.Run("no listener", func(t *testing.T) {
		v := startJVM(t, j, "interval=1024", false, "site", "100", "100")
		v.ready()
		v.send("exit")
		v.exit()
		s := v.stderr.String()
		if n := strings.Count(s, "djx-bpf agent: "); n != 1 || !strings.Contains(s, "connect") {
			t.Errorf("want one connect error line on stderr, got:\n%s", s)
		}
	})
}

// BenchmarkAgentOverhead measures AllocSite's allocation loops with and
// without the agent: M allocs/s, and the share of the rate without it, per
// JDK, allocation kind and agent options (minsize=1g: every callback
// returns at once, which isolates the JVM's own cost of sampling and
// posting the event).
func BenchmarkAgentOverhead(b *testing.B) {
	_, classes := fixture(b)
	for _, j := range availableJDKs(b) {
		for _, kind := range []string{"kib", "small"} {
			var base float64
			for _, opts := range []string{"", "interval=512,minsize=1024", "interval=1024,minsize=1024",
				"interval=512,minsize=1g", "interval=1024,minsize=1g"} {
				name := opts
				if name == "" {
					name = "no-agent"
				}
				b.Run(j.name+"/"+kind+"/"+name, func(b *testing.B) {
					var r float64
					for i := 0; i < b.N; i++ {
						r = benchRate(b, j, classes, kind, opts)
					}
					if opts == "" {
						base = r
					}
					b.ReportMetric(r/1e6, "Mallocs/s")
					if base > 0 {
						b.ReportMetric(100*r/base, "pct-of-no-agent")
					}
				})
			}
		}
	}
}

func benchRate(t testing.TB, j jdk, classes, kind, opts string) float64 {
	t.Helper()
	var line string
	if opts == "" {
		cmd := exec.Command(filepath.Join(j.home, "bin", "java"),
			append(append(append([]string{}, jvmFlags...), j.flags...), "-cp", classes, "AllocSite", "bench", kind, "3")...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		line = strings.TrimSpace(string(out))
	} else {
		v := startJVM(t, j, opts, true, "bench", kind, "3")
		go func() { // drain the stream
			for range v.batches {
			}
		}()
		select {
		case line = <-v.lines:
		case <-time.After(60 * time.Second):
			t.Fatal("timeout")
		}
		v.exit()
	}
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != "RATE" {
		t.Fatalf("unexpected output %q", line)
	}
	r, err := strconv.ParseFloat(f[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// gcFlags are the collectors the frees test runs under: each moves objects
// in its full GC (System.gc()). 256 KiB arrays are not humongous in G1 with
// 4 MiB regions (the threshold is half a region).
var gcFlags = []struct {
	name  string
	flags []string
}{
	{"serial", []string{"-XX:+UseSerialGC", "-Xms1g", "-Xmx1g"}},
	{"parallel", []string{"-XX:+UseParallelGC", "-Xms1g", "-Xmx1g"}},
	{"g1", []string{"-XX:+UseG1GC", "-XX:G1HeapRegionSize=4m", "-Xms1g", "-Xmx1g"}},
}

// recordsOf flattens batches and checks that timestamped records are in
// time order and not after their batch's watermark.
func recordsOf(t testing.TB, bs []*agentwire.Batch) []agentwire.Record {
	t.Helper()
	var out []agentwire.Record
	var last, lastFinish uint64
	for _, b := range bs {
		for _, r := range b.Records {
			var tm uint64
			switch r := r.(type) {
			case *agentwire.Alloc:
				tm = r.Time
			case *agentwire.Free:
				// Stamped at the end of the GC the object died in.
				if r.Time < lastFinish || r.Time > b.Watermark {
					t.Errorf("FREE time %d before the last GC_FINISH %d or past the watermark %d", r.Time, lastFinish, b.Watermark)
				}
				out = append(out, r)
				continue
			case *agentwire.GCStart:
				tm = r.Time
			case *agentwire.GCFinish:
				tm = r.Time
				lastFinish = r.Time
			case *agentwire.Reconcile:
				tm = r.Time
			case *agentwire.Interval:
				tm = r.Time
			default:
				out = append(out, r)
				continue
			}
			if tm < last || tm > b.Watermark {
				t.Errorf("%v time %d out of order (previous %d, watermark %d)", r.Type(), tm, last, b.Watermark)
			}
			last = tm
			out = append(out, r)
		}
	}
	return out
}

const freesN = 1000 // FreeSite frees: half kept, half dropped

// TestAgentFrees: tagged ALLOCs, FREE for dropped objects only, paired GC
// records, and a RECONCILE after System.gc() that lists the kept objects at
// their new addresses; per collector and JDK.
func TestAgentFrees(t *testing.T) {
	keepLine, dropLine := siteLineIn(t, "FreeSite.java", "keep"), siteLineIn(t, "FreeSite.java", "drop")
	for _, j := range availableJDKs(t) {
		for _, gc := range gcFlags {
			t.Run(j.name+"/"+gc.name, func(t *testing.T) {
				// interval 4k: 256 KiB arrays are captured with p ≈ 1 even at
				// JDK 17's 8× undercount outside TLABs (JDK-8356372).
				v := startMain(t, j, "interval=4k,minsize=1024,reconcile=1", true, gc.flags, "FreeSite",
					"frees", strconv.Itoa(freesN))
				bs := v.until(v.line("ALLOCATED"))
				v.send("gc")
				gcDone := v.line("GCDONE")
				bs = append(bs, v.until(gcDone)...)
				v.send("exit")
				rest, err := v.rest()
				if err != io.EOF {
					t.Errorf("stream end: %v, want EOF", err)
				}
				bs = append(bs, rest...)
				v.exit()
				checkFrees(t, bs, gcDone, keepLine, dropLine, gc.name == "parallel")
			})
		}
	}
}

func checkFrees(t *testing.T, bs []*agentwire.Batch, gcDone uint64, keepLine, dropLine int32, mustMove bool) {
	t.Helper()
	var s stream
	s.add(t, bs)
	recs := recordsOf(t, bs)
	if len(s.errs) > 0 {
		t.Errorf("ERROR records: %q", s.errs)
	}

	// Tags: nonzero and distinct over every ALLOC.
	allocOf := map[uint64]*agentwire.Alloc{}
	for _, a := range s.allocs {
		if a.Tag == 0 || allocOf[a.Tag] != nil {
			t.Fatalf("ALLOC %s of %d bytes: zero or duplicate tag %d", a.TypeSig, a.Size, a.Tag)
		}
		allocOf[a.Tag] = a
	}
	kept, dropped := map[uint64]bool{}, map[uint64]bool{}
	for _, a := range s.siteIn("LFreeSite;", "allocKeep", keepLine) {
		kept[a.Tag] = true
	}
	for _, a := range s.siteIn("LFreeSite;", "allocDrop", dropLine) {
		dropped[a.Tag] = true
	}
	t.Logf("captured %d/%d kept, %d/%d dropped arrays", len(kept), freesN/2, len(dropped), freesN/2)
	if len(kept) < freesN/2*95/100 || len(dropped) < freesN/2*95/100 {
		t.Fatalf("captured %d kept and %d dropped arrays of %d each, want ≥ 95%%", len(kept), len(dropped), freesN/2)
	}

	// Walk the stream in order: FREE after its ALLOC, GC records paired,
	// RECONCILE (the moves found after a GC) outside GCs and only for
	// tracked, live objects.
	seen := map[uint64]bool{}
	freed := map[uint64]uint64{} // tag → time
	addr := map[uint64]uint64{}  // tag → address, from its ALLOC and later moves
	movedTags := map[uint64]bool{}
	var nFree, nStart, nFinish, nListed int
	inGC := false
	for _, r := range recs {
		switch r := r.(type) {
		case *agentwire.Alloc:
			seen[r.Tag] = true
			addr[r.Tag] = r.Addr
		case *agentwire.Free:
			nFree++
			if !seen[r.Tag] {
				t.Errorf("FREE of tag %d before (or without) its ALLOC", r.Tag)
			}
			if _, dup := freed[r.Tag]; dup {
				t.Errorf("second FREE of tag %d", r.Tag)
			}
			freed[r.Tag] = r.Time
		case *agentwire.GCStart:
			nStart++
			if inGC {
				t.Errorf("GC_START at %d inside a GC", r.Time)
			}
			inGC = true
		case *agentwire.GCFinish:
			nFinish++
			if !inGC {
				t.Errorf("GC_FINISH at %d without GC_START", r.Time)
			}
			inGC = false
		case *agentwire.Reconcile:
			if inGC {
				t.Errorf("RECONCILE at %d inside a GC", r.Time)
			}
			for _, o := range r.Objects {
				nListed++
				switch {
				case !seen[o.Tag]:
					t.Errorf("RECONCILE lists unknown tag %d", o.Tag)
				case freed[o.Tag] != 0:
					t.Errorf("RECONCILE lists tag %d after its FREE", o.Tag)
				case o.Addr == 0 || o.Addr%8 != 0:
					t.Errorf("RECONCILE tag %d: bad address %#x", o.Tag, o.Addr)
				case o.Addr == addr[o.Tag]:
					t.Errorf("RECONCILE tag %d: listed at the address it had", o.Tag)
				}
				addr[o.Tag] = o.Addr
				movedTags[o.Tag] = true
			}
		}
	}
	if nStart < 2 || nStart != nFinish {
		t.Errorf("%d GC_START, %d GC_FINISH; want equal and ≥ 2", nStart, nFinish)
	}

	nDropFreed := 0
	for tag := range dropped {
		if tm, ok := freed[tag]; ok && tm <= gcDone {
			nDropFreed++
		}
	}
	for tag := range kept {
		if _, ok := freed[tag]; ok {
			t.Errorf("FREE for kept tag %d", tag)
		}
	}
	t.Logf("FREE: %d records, %d/%d dropped arrays freed by GCDONE; %d GCs", nFree, nDropFreed, len(dropped), nFinish)
	if nDropFreed < len(dropped)*9/10 {
		t.Errorf("%d/%d dropped arrays freed, want ≥ 90%%", nDropFreed, len(dropped))
	}
	moved := 0
	for tag := range kept {
		if movedTags[tag] {
			moved++
		}
	}
	t.Logf("RECONCILE: %d moves, %d/%d kept arrays moved", nListed, moved, len(kept))
	if mustMove && moved == 0 {
		t.Errorf("no kept array moved: the full GC should have compacted them")
	}

	st := s.stats
	if st == nil || st.Frees != uint64(nFree) || st.GCs != uint64(nFinish) || st.Reconciles == 0 ||
		st.Reconciled != uint64(nListed) || st.Dropped != 0 || st.Tracked < uint64(len(kept)+len(dropped)) {
		t.Errorf("STATS = %+v; %d FREE, %d GC_FINISH, %d moves", st, nFree, nFinish, nListed)
	} else {
		t.Logf("STATS: %d scans (%d skipped), %d moves, %.2f ms total", st.Reconciles, st.ReconcileSkipped, st.Reconciled, float64(st.ReconcileNanos)/1e6)
	}
}

// TestAgentFreesDetach: the loader closes the socket mid-run with frees, GC
// events and reconciliation on; GCs afterwards must be harmless and the
// JVM must exit normally.
func TestAgentFreesDetach(t *testing.T) {
	for _, j := range availableJDKs(t) {
		for _, gc := range gcFlags {
			t.Run(j.name+"/"+gc.name, func(t *testing.T) {
				v := startMain(t, j, "interval=4k,minsize=1024,reconcile=1", true, gc.flags, "FreeSite",
					"frees", strconv.Itoa(freesN))
				v.until(v.line("ALLOCATED"))
				v.conn.Close()
				time.Sleep(200 * time.Millisecond)
				v.send("gc")
				v.line("GCDONE")
				v.send("gc1")
				v.line("GCDONE")
				v.send("exit")
				v.exit()
			})
		}
	}
}

// TestAgentPause: 'P' stops allocation sampling and 'R' restarts it (the
// loader's --control). The commands come split across writes, after an 'H'
// whose u64 is split too, as a stream socket may deliver them.
func TestAgentPause(t *testing.T) {
	for _, j := range availableJDKs(t) {
		t.Run(j.name, func(t *testing.T) {
			v := startJVM(t, j, "interval=1024,minsize=1024", true, "site", "500", "1000")
			var s stream
			s.add(t, v.until(v.ready()))
			before := len(s.allocs)
			if before < 200 {
				t.Fatalf("%d ALLOCs before the pause, want the ~1000 of 4 KiB and 1 KiB arrays", before)
			}
			// 'H' with 2^40 (tags every array here), then 'P'.
			cmd := agentwire.CommandUntag(1 << 40)
			write := func(b []byte) {
				if _, err := v.conn.Write(b); err != nil {
					t.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond) // separate reads
			}
			write(cmd[:4])
			write(append(cmd[4:], agentwire.CommandPause))
			// The writer takes commands at once (it polls the socket); the
			// margin covers a loaded machine.
			time.Sleep(500 * time.Millisecond)
			phase := func() int {
				v.send("again")
				n := len(s.allocs)
				s.add(t, v.until(v.ready()))
				return len(s.allocs) - n
			}
			if n := phase(); n != 0 {
				t.Errorf("%d ALLOCs while paused, want 0", n)
			}
			write([]byte{agentwire.CommandResume})
			time.Sleep(500 * time.Millisecond)
			if n := phase(); n < before/2 {
				t.Errorf("%d ALLOCs after the resume, want about the %d before the pause", n, before)
			}
			v.send("exit")
			v.exit()
		})
	}
}
