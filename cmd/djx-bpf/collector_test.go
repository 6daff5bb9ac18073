package main

// The OpenTelemetry Collector the continuous-profiling tests push to:
// testdata/otelcol, a module of its own (the OTLP receiver and an exporter
// that writes each profile received as a JSON line), built from the module
// proxy by make test (DJX_TEST_OTELCOL), or else by the test and cached under
// build/ by the hash of its sources.

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	collectorOnce sync.Once
	collectorBin  string
	collectorErr  error
)

// collectorSrc is the collector's module, from this package's directory.
const collectorSrc = "../../testdata/otelcol"

// collectorEnv names a collector built beforehand: make test builds it
// beside the fuzzing, off the tests' path (a first build takes minutes).
const collectorEnv = "DJX_TEST_OTELCOL"

// buildCollector builds the collector once per test binary, or takes the
// one collectorEnv names, or the one cached under build/ for the same
// sources.
func buildCollector(t *testing.T) string {
	t.Helper()
	collectorOnce.Do(func() {
		if bin := os.Getenv(collectorEnv); bin != "" {
			if _, err := os.Stat(bin); err != nil {
				collectorErr = fmt.Errorf("%s: %w (make test builds it)", collectorEnv, err)
			}
			collectorBin = bin
			return
		}
		collectorBin, collectorErr = cachedCollector(t)
	})
	if collectorErr != nil {
		t.Fatal(collectorErr)
	}
	return collectorBin
}

func cachedCollector(t *testing.T) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum", "main.go", "dump.go"} {
		b, err := os.ReadFile(filepath.Join(collectorSrc, f))
		if err != nil {
			return "", fmt.Errorf("collector sources: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	key := hex.EncodeToString(h.Sum(nil))[:16]
	dir, err := filepath.Abs(filepath.Join("../../build", "otelcol-"+key))
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "otelcol")
	if _, err := os.Stat(bin); err == nil {
		t.Logf("collector: cached %s", bin)
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp := filepath.Join(dir, fmt.Sprintf("otelcol.%d.tmp", os.Getpid()))
	start := time.Now()
	cmd := exec.Command("go", "build", "-trimpath", "-o", tmp, ".")
	cmd.Dir = collectorSrc
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the test collector (%s): %v\n%s", collectorSrc, err, out)
	}
	t.Logf("collector: built in %v", time.Since(start).Round(100*time.Millisecond))
	return bin, os.Rename(tmp, bin)
}

// collector is a running test collector.
type collector struct {
	bin, dir, addr, dump string
	cmd                  *exec.Cmd
	done                 chan struct{}
}

// freeAddr is a 127.0.0.1 address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startCollector starts the collector on a free port, writing what it
// receives to a file; it is killed (by its pid) at cleanup.
func startCollector(t *testing.T) *collector {
	t.Helper()
	c := &collector{bin: buildCollector(t), dir: t.TempDir(), addr: freeAddr(t)}
	c.dump = filepath.Join(c.dir, "profiles.jsonl")
	c.start(t)
	t.Cleanup(c.stop)
	return c
}

func (c *collector) start(t *testing.T) {
	t.Helper()
	cfg := filepath.Join(c.dir, "config.yaml")
	yaml := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
exporters:
  dump:
    path: %s
    top: 20
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [dump]
`, c.addr, c.dump)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := os.OpenFile(filepath.Join(c.dir, "collector.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	c.cmd = exec.Command(c.bin, "--config", cfg, "--feature-gates=service.profilesSupport")
	c.cmd.Stdout, c.cmd.Stderr = log, log
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(c.cmd, c.done)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Post("http://"+c.addr+"/v1development/profiles", "application/x-protobuf", strings.NewReader(""))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-c.done:
			b, _ := os.ReadFile(filepath.Join(c.dir, "collector.log"))
			t.Fatalf("collector exited:\n%s", b)
		default:
		}
	}
	t.Fatal("collector not ready after 30s")
}

// stop kills the collector by its pid.
func (c *collector) stop() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	select {
	case <-c.done:
	default:
		c.cmd.Process.Kill()
		<-c.done
	}
}

// dumpLine is what the collector's dump exporter writes of one profile
// (testdata/otelcol/dump.go).
type dumpLine struct {
	Resource   map[string]any `json:"resource"`
	SampleType string         `json:"sample_type"`
	Attributes map[string]any `json:"attributes"`
	Samples    int            `json:"samples"`
	Total      int64          `json:"total"`
	Top        []struct {
		Stack []string `json:"stack"`
		Value int64    `json:"value"`
	} `json:"top"`
}

func (c *collector) received(t *testing.T) []dumpLine {
	t.Helper()
	f, err := os.Open(c.dump)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []dumpLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var l dumpLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("collector's dump: %v: %s", err, sc.Bytes())
		}
		out = append(out, l)
	}
	return out
}

// num is a JSON number of the dump as an int.
func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

// topObject is the object a window's samples profile charges most, named
// by its object frame and the frame under it (its allocation site's
// method, or its holder).
func topObject(l dumpLine) (string, int64) {
	by := map[string]int64{}
	for _, s := range l.Top {
		for i, f := range s.Stack {
			if strings.HasPrefix(f, "[object] ") {
				k := f
				if i+1 < len(s.Stack) {
					k += " / " + s.Stack[i+1]
				}
				by[k] += s.Value
				break
			}
		}
	}
	best, n := "", int64(0)
	for k, v := range by {
		if v > n || v == n && k < best {
			best, n = k, v
		}
	}
	return best, n
}
