package agent

// End-to-end tests of access stacks (the agent's signal handler and
// AsyncGetCallTrace) and JIT code records, on a real JVM running
// testdata/Spin.java. The tests signal the JVM's threads with
// rt_tgsigqueueinfo (SI_QUEUE and the agent's cookie) instead of BPF, so
// they need no BPF, only a JDK, the library, and permission to signal our
// own children.

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/target/attach"
)

const (
	stackSig    = 42         // SIGRTMIN+8 with glibc
	stackCookie = 0x534A5844 // DJX_STACK_COOKIE: si_value of queued signals the agent takes as its own
)

// spinFlags: Spin hardly allocates; the default collector and JIT.
var spinFlags = []string{"-Xms256m", "-Xmx256m"}

// spinJDKs are the JDKs without their allocation-sampling flags
// (tlabWorkaround does not fit a small G1 heap and is beside the point).
func spinJDKs(t *testing.T) []jdk {
	t.Helper()
	var out []jdk
	for _, j := range availableJDKs(t) {
		out = append(out, jdk{j.name, j.home, nil})
	}
	return out
}

// sigqueue sends sig to thread tid of process pid with si_code SI_QUEUE
// and si_value cookie, as rt_tgsigqueueinfo(2).
func sigqueue(pid, tid, sig int, cookie int32) error {
	var info [128]byte // siginfo_t
	*(*int32)(unsafe.Pointer(&info[0])) = int32(sig)
	*(*int32)(unsafe.Pointer(&info[8])) = -1 // SI_QUEUE
	*(*int32)(unsafe.Pointer(&info[16])) = int32(os.Getpid())
	*(*uint32)(unsafe.Pointer(&info[20])) = uint32(os.Getuid())
	*(*int32)(unsafe.Pointer(&info[24])) = cookie // si_value.sival_int
	_, _, e := unix.Syscall6(unix.SYS_RT_TGSIGQUEUEINFO, uintptr(pid), uintptr(tid), uintptr(sig),
		uintptr(unsafe.Pointer(&info[0])), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

func monotonic() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// tasks lists the threads of pid: tid → comm.
func tasks(pid int) map[int]string {
	out := map[int]string{}
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid))
		out[tid] = strings.TrimSpace(string(comm))
	}
	return out
}

// threadNamed waits for pid's thread called name.
func threadNamed(t *testing.T, pid int, name string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for tid, comm := range tasks(pid) {
			if comm == name {
				return tid
			}
		}
	}
	t.Fatalf("no thread %q in process %d: %v", name, pid, tasks(pid))
	return 0
}

// catches says whether pid has a handler for sig (/proc/PID/status SigCgt).
func catches(t *testing.T, pid, sig int) bool {
	t.Helper()
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(l, "SigCgt:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return m&(1<<(sig-1)) != 0
		}
	}
	t.Fatal("no SigCgt in /proc/PID/status")
	return false
}

// exitCode waits for java to exit and checks it exited with code want,
// without a crash report.
func (v *jvm) exitCode(want int) {
	v.t.Helper()
	select {
	case err := <-v.waited:
		v.waited <- err // for Cleanup
		code := 0
		if err != nil {
			ee, ok := err.(interface{ ExitCode() int })
			if !ok {
				v.t.Fatalf("java: %v", err)
			}
			code = ee.ExitCode()
		}
		if code != want {
			v.t.Fatalf("java exited with %d (%v), want %d; stderr:\n%s", code, err, want, v.stderr.String())
		}
	case <-time.After(30 * time.Second):
		v.t.Fatal("java did not exit")
	}
	if s := v.stderr.String(); strings.Contains(s, "hs_err") || strings.Contains(s, "SIGSEGV") {
		v.t.Fatalf("java crashed:\n%s", s)
	}
}

// stackStream holds what the stacks tests look at.
type stackStream struct {
	stream
	stacks []*agentwire.Stack
	codes  []*agentwire.Code
	stubs  []*agentwire.Stub
}

func (s *stackStream) addAll(t *testing.T, bs []*agentwire.Batch) {
	t.Helper()
	s.stream.add(t, bs)
	for _, b := range bs {
		for _, r := range b.Records {
			switch r := r.(type) {
			case *agentwire.Stack:
				for _, f := range r.Frames {
					if f.Method != 0 && s.methods[f.Method] == nil {
						t.Fatalf("STACK frame method %#x before its METHOD", f.Method)
					}
				}
				s.stacks = append(s.stacks, r)
			case *agentwire.Code:
				if s.methods[r.Method] == nil {
					t.Fatalf("CODE of method %#x before its METHOD", r.Method)
				}
				for i, p := range r.PCs {
					if i > 0 && p.PC < r.PCs[i-1].PC {
						t.Fatalf("CODE PCs not sorted")
					}
					for _, f := range p.Frames {
						if s.methods[f.Method] == nil {
							t.Fatalf("CODE pc frame method %#x before its METHOD", f.Method)
						}
					}
				}
				s.codes = append(s.codes, r)
			case *agentwire.Stub:
				s.stubs = append(s.stubs, r)
			}
		}
	}
}

func (s *stackStream) is(id uint64, class, name string) bool {
	m := s.methods[id]
	return m != nil && m.ClassSig == class && m.Name == name
}

// attachAgent loads the agent into v's JVM with the attach package.
func attachAgent(v *jvm, lib, opts string) {
	v.t.Helper()
	v.line("READY") // the JVM is up
	tg, err := attach.Inspect(v.cmd.Process.Pid)
	if err != nil {
		v.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tg.LoadAgent(ctx, lib, true, opts); err != nil {
		v.t.Fatalf("load agent: %v", err)
	}
}

// attachFlags: JDK 21+ warns about dynamically loaded agents without it;
// older JDKs do not know the flag.
func attachFlags(j jdk) []string {
	if strings.Contains(j.name, "17") {
		return spinFlags
	}
	return append([]string{"-XX:+EnableDynamicAgentLoading"}, spinFlags...)
}

func pct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	ys := slices.Clone(xs)
	sort.Float64s(ys)
	return ys[int(q*float64(len(ys)-1))]
}

// TestStacksSpin signals the spinning thread 2000 times and checks that the
// stacks name Spin.hot at its line, that CODE records describe the JIT code
// the thread runs in, and the handler's latency.
func TestStacksSpin(t *testing.T) {
	hotLine := siteLineIn(t, "Spin.java", "hot")
	for _, j := range spinJDKs(t) {
		for _, mode := range []string{"launch", "attach"} {
			t.Run(j.name+"/"+mode, func(t *testing.T) { spinStacks(t, j, mode, hotLine) })
		}
	}
}

func spinStacks(t *testing.T, j jdk, mode string, hotLine int32) {
	{
		{
			opts := fmt.Sprintf("interval=1m,minsize=1g,stacks=%d", stackSig)
			var v *jvm
			if mode == "launch" {
				v = startJava(t, j, opts, true, nil, spinFlags, "Spin")
				v.ready()
			} else {
				// Attach mode: Spin's jmethodIDs come from the agent's
				// preload of the classes already loaded.
				v = startJava(t, j, opts, true, attachAgent, attachFlags(j), "Spin")
			}
			pid := v.cmd.Process.Pid
			if !catches(t, pid, stackSig) {
				t.Fatalf("no handler for signal %d", stackSig)
			}
			tid := threadNamed(t, pid, "djx-spin")
			time.Sleep(1500 * time.Millisecond) // JIT-compile hot and outer

			// 2000 signals, one every ~250 µs (sleep granularity).
			const n = 2000
			sent := make([]uint64, 0, n)
			for i := 0; i < n; i++ {
				now := monotonic()
				if err := sigqueue(pid, tid, stackSig, stackCookie); err != nil {
					t.Fatalf("rt_tgsigqueueinfo: %v", err)
				}
				sent = append(sent, now)
				time.Sleep(200 * time.Microsecond) // not a busy wait: 2 cores here
			}
			time.Sleep(100 * time.Millisecond) // keeps the bursts apart from the 2000
			bursts := sendBursts(t, pid, tid)

			v.send("exit")
			bs, err := v.rest()
			if err != io.EOF {
				t.Errorf("stream end: %v, want EOF", err)
			}
			var s stackStream
			s.addAll(t, bs)
			v.exitCode(3)
			if s.hello.StackSignal != stackSig {
				t.Errorf("HELLO.StackSignal = %d, want %d", s.hello.StackSignal, stackSig)
			}
			if len(s.errs) > 0 {
				t.Errorf("ERROR records: %q", s.errs)
			}

			// Only the first n stacks of the spinning thread: the bursts
			// signal it too, 100 ms later.
			var mine []*agentwire.Stack
			for _, st := range s.stacks {
				if st.TID == uint32(tid) && st.Time < sent[n-1]+50_000_000 {
					mine = append(mine, st)
				}
			}
			sort.Slice(mine, func(a, b int) bool { return mine[a].Time < mine[b].Time })
			status := map[int32]int{}
			good, onLine := 0, 0
			var lat []float64
			for _, st := range mine {
				status[st.Status]++
				if st.Status > 0 {
					good++
					if len(st.Frames) != int(st.Status) {
						t.Fatalf("STACK status %d with %d frames", st.Status, len(st.Frames))
					}
					f := st.Frames[0]
					if s.is(f.Method, "LSpin;", "hot") && lineOf(s.methods[f.Method], f.BCI) == hotLine {
						onLine++
					}
				}
				if k, ok := slices.BinarySearch(sent, st.Time); k > 0 || ok {
					if !ok {
						k--
					}
					lat = append(lat, float64(st.Time-sent[k])/1e3)
				}
			}
			t.Logf("%s %s: %d signals, %d STACKs for the thread: %d (%.1f%%) with Java frames, %d (%.1f%% of signals) innermost Spin.hot:%d; status counts %v",
				j.name, mode, n, len(mine), good, pct(good, n), onLine, pct(onLine, n), hotLine, status)
			t.Logf("%s: handler latency (send → handler's timestamp): p50 %.1f µs, p90 %.1f µs, p99 %.1f µs",
				j.name, quantile(lat, .5), quantile(lat, .9), quantile(lat, .99))
			gaps := burstCost(s.stacks, tid, bursts)
			t.Logf("%s: cost per signal to the thread (gap between back-to-back handlers, %d gaps): p10 %.1f µs, p50 %.1f µs",
				j.name, len(gaps), quantile(gaps, .1), quantile(gaps, .5))
			if len(mine) < n*99/100 {
				t.Errorf("%d STACKs for %d signals", len(mine), n)
			}
			if good < n*8/10 || onLine < good*9/10 {
				t.Errorf("%d/%d stacks with Java frames, %d of them at Spin.hot:%d; want ≥ 80%% and ≥ 90%%", good, n, onLine, hotLine)
			}
			st := s.stats
			if st == nil || st.StacksSent != uint64(len(s.stacks)) || st.StackSignals < st.StacksSent ||
				st.StacksDropped != 0 || st.SignalsChained != 0 || st.CodeSent != uint64(len(s.codes)) || st.CodeDropped != 0 {
				t.Errorf("STATS = %+v; %d STACK, %d CODE records", st, len(s.stacks), len(s.codes))
			}
			checkCode(t, &s, mine)
		}
	}
}

// checkCode: a CODE for Spin.hot exists, the JIT pcs of the stacks lie in
// CODE ranges whose pc maps name Spin.hot, inlining chains are innermost
// first, and the interpreter has a STUB.
func checkCode(t *testing.T, s *stackStream, mine []*agentwire.Stack) {
	t.Helper()
	hotCodes, inlined := 0, 0
	for _, c := range s.codes {
		if s.is(c.Method, "LSpin;", "hot") {
			hotCodes++
		}
		for _, p := range c.PCs {
			ih, io := -1, -1
			for i, f := range p.Frames {
				if s.is(f.Method, "LSpin;", "hot") && ih < 0 {
					ih = i
				}
				if s.is(f.Method, "LSpin;", "outer") {
					io = i
				}
			}
			if ih >= 0 && io >= 0 {
				inlined++
				if ih > io {
					t.Fatalf("CODE %#x pc %#x: chain %v is not innermost first", c.Start, p.PC, p.Frames)
				}
			}
			if len(p.Frames) > 0 && p.Frames[len(p.Frames)-1].Method != c.Method {
				t.Errorf("CODE %#x pc %#x: outermost frame %#x is not the compiled method %#x", c.Start, p.PC, p.Frames[len(p.Frames)-1].Method, c.Method)
			}
		}
	}
	inCode := 0
	for _, st := range mine {
		for _, c := range s.codes {
			if st.PC < c.Start || st.PC >= c.Start+uint64(c.Size) {
				continue
			}
			if slices.ContainsFunc(c.PCs, func(p agentwire.PCInfo) bool {
				return slices.ContainsFunc(p.Frames, func(f agentwire.Frame) bool { return s.is(f.Method, "LSpin;", "hot") })
			}) {
				inCode++
				break
			}
		}
	}
	interp := slices.ContainsFunc(s.stubs, func(x *agentwire.Stub) bool { return x.Name == "Interpreter" })
	t.Logf("%d CODE (%d of Spin.hot; %d pcs with hot inlined into outer), %d STUB (interpreter: %v); %d/%d stack pcs inside JIT code of Spin.hot",
		len(s.codes), hotCodes, inlined, len(s.stubs), interp, inCode, len(mine))
	if hotCodes == 0 {
		t.Errorf("no CODE record for Spin.hot")
	}
	if inCode < len(mine)/2 {
		t.Errorf("only %d/%d stack pcs inside a CODE naming Spin.hot", inCode, len(mine))
	}
	if !interp {
		t.Errorf("no STUB for the interpreter")
	}
}

// sendBursts queues 20 bursts of 50 signals to tid, each burst sent faster
// than the thread handles them: real-time signals queue, so the thread runs
// the handler back to back and the gaps between consecutive STACK times of
// a burst are the whole cost of one signal to the thread (kernel delivery,
// handler, sigreturn). Returns the burst start times.
func sendBursts(t *testing.T, pid, tid int) []uint64 {
	t.Helper()
	var starts []uint64
	for b := 0; b < 20; b++ {
		starts = append(starts, monotonic())
		for i := 0; i < 50; i++ {
			if err := sigqueue(pid, tid, stackSig, stackCookie); err != nil {
				t.Fatalf("rt_tgsigqueueinfo: %v", err)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return starts
}

// burstCost returns the gaps (µs) between consecutive stacks of each burst.
func burstCost(stacks []*agentwire.Stack, tid int, starts []uint64) []float64 {
	var gaps []float64
	for _, b := range starts {
		var ts []uint64
		for _, st := range stacks {
			if st.TID == uint32(tid) && st.Time >= b && st.Time < b+10_000_000 {
				ts = append(ts, st.Time)
			}
		}
		slices.Sort(ts)
		for i := 1; i < len(ts); i++ {
			gaps = append(gaps, float64(ts[i]-ts[i-1])/1e3)
		}
	}
	return gaps
}

// TestStacksStorm: 20k signals at full speed across every thread of the
// JVM (GC and compiler threads included), some of them not ours (plain
// tgkill), in launch and attach mode; then detach and more signals. The
// JVM must keep running and exit with its own status.
func TestStacksStorm(t *testing.T) {
	for _, j := range spinJDKs(t) {
		for _, mode := range []string{"launch", "attach"} {
			t.Run(j.name+"/"+mode, func(t *testing.T) {
				opts := fmt.Sprintf("interval=64k,minsize=1g,stacks=%d", stackSig)
				var v *jvm
				if mode == "launch" {
					v = startJava(t, j, opts, true, nil, spinFlags, "Spin")
					v.ready()
				} else {
					v = startJava(t, j, opts, true, attachAgent, attachFlags(j), "Spin")
				}
				pid := v.cmd.Process.Pid
				threadNamed(t, pid, "djx-spin")
				done := make(chan []*agentwire.Batch, 1)
				go func() {
					var bs []*agentwire.Batch
					for be := range v.batches {
						if be.err != nil {
							break
						}
						bs = append(bs, be.b)
					}
					done <- bs
				}()

				storm := func(n int) (ours, plain int) {
					rng := rand.New(rand.NewSource(1))
					var tids []int
					for i := 0; i < n; i++ {
						if i%500 == 0 {
							tids = tids[:0]
							for tid := range tasks(pid) {
								tids = append(tids, tid)
							}
						}
						tid := tids[rng.Intn(len(tids))]
						if i%10 == 9 {
							// Not ours: the agent passes it on to the previous
							// action, SIG_DFL here, i.e. ignores it.
							if unix.Tgkill(pid, tid, unix.Signal(stackSig)) == nil {
								plain++
							}
						} else if sigqueue(pid, tid, stackSig, stackCookie) == nil {
							ours++
						}
					}
					return ours, plain
				}
				t0 := time.Now()
				v.send("gcs 20") // safepoints and GC workers busy during the storm
				ours, plain := storm(20000)
				t.Logf("storm: %d ours + %d plain signals in %v", ours, plain, time.Since(t0))
				v.line("GCDONE")
				time.Sleep(300 * time.Millisecond)
				v.conn.Close() // detach
				bs := <-done
				var s stackStream
				s.addAll(t, bs)
				status := map[int32]int{}
				for _, st := range s.stacks {
					status[st.Status]++
				}
				if st := s.stats; st != nil {
					t.Logf("before detach: %d STACKs; STATS stack_signals %d, sent %d, dropped %d, chained %d, code %d (dropped %d); status counts %v",
						len(s.stacks), st.StackSignals, st.StacksSent, st.StacksDropped, st.SignalsChained, st.CodeSent, st.CodeDropped, status)
					if st.StackSignals == 0 || st.StacksSent == 0 {
						t.Errorf("no stacks recorded: %+v", st)
					}
				}
				if s.hello.StackSignal != stackSig || s.hello.Mode != mode {
					t.Errorf("HELLO = %+v", s.hello)
				}
				if len(s.errs) > 0 {
					t.Errorf("ERROR records: %q", s.errs)
				}

				time.Sleep(300 * time.Millisecond) // the writer detaches
				ours, plain = storm(5000)
				t.Logf("after detach: %d ours + %d plain signals", ours, plain)
				time.Sleep(200 * time.Millisecond)
				if !catches(t, pid, stackSig) {
					t.Errorf("handler gone after detach")
				}
				v.send("count")
				select {
				case l := <-v.lines:
					if !strings.HasPrefix(l, "COUNT ") {
						t.Fatalf("unexpected output %q", l)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("the JVM does not answer after the storm")
				}
				v.send("exit")
				v.exitCode(3)
			})
		}
	}
}

// TestStacksOff: without stacks= the agent installs no handler and says so
// in HELLO; a signal the JVM owns is refused with an ERROR; a bad value
// fails the launch.
func TestStacksOff(t *testing.T) {
	j := spinJDKs(t)[0]
	for _, tc := range []struct {
		name, opts string
		errWant    string
	}{
		{"default", "", ""},
		{"zero", "stacks=0", ""},
		{"sigsegv", "stacks=11", "the JVM or the kernel owns this signal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := startJava(t, j, "interval=1m,minsize=1g,"+tc.opts, true, nil, spinFlags, "Spin")
			pid := v.cmd.Process.Pid
			wm := v.ready()
			var s stackStream
			s.addAll(t, v.until(wm))
			if s.hello.StackSignal != 0 {
				t.Errorf("HELLO.StackSignal = %d, want 0", s.hello.StackSignal)
			}
			if catches(t, pid, stackSig) {
				t.Errorf("signal %d is caught with stacks off", stackSig)
			}
			v.send("exit")
			rest, _ := v.rest()
			s.addAll(t, rest)
			v.exitCode(3)
			if tc.errWant == "" && len(s.errs) > 0 {
				t.Errorf("ERROR records: %q", s.errs)
			}
			if tc.errWant != "" && !slices.ContainsFunc(s.errs, func(e string) bool { return strings.Contains(e, tc.errWant) }) {
				t.Errorf("ERROR records %q, want one containing %q", s.errs, tc.errWant)
			}
			if len(s.codes) == 0 || len(s.stubs) == 0 {
				t.Errorf("%d CODE, %d STUB records with code=1 (default)", len(s.codes), len(s.stubs))
			}
		})
	}
	t.Run("code=0", func(t *testing.T) {
		v := startJava(t, j, "interval=1m,minsize=1g,code=0", true, nil, spinFlags, "Spin")
		v.ready()
		time.Sleep(500 * time.Millisecond)
		v.send("exit")
		bs, _ := v.rest()
		var s stackStream
		s.addAll(t, bs)
		v.exitCode(3)
		if len(s.codes) != 0 || len(s.stubs) != 0 {
			t.Errorf("%d CODE, %d STUB records with code=0", len(s.codes), len(s.stubs))
		}
	})
	for _, bad := range []string{"65", "-1", "x", "42k", "042"} {
		t.Run("bad="+bad, func(t *testing.T) {
			v := startJava(t, j, "stacks="+bad, false, nil, spinFlags, "Spin")
			select {
			case err := <-v.waited:
				v.waited <- err
				if err == nil {
					t.Fatal("java started despite a bad option")
				}
			case <-time.After(30 * time.Second):
				t.Fatal("java did not exit")
			}
			if s := v.stderr.String(); !strings.Contains(s, `djx-bpf agent: option stacks: bad value "`+bad+`"`) {
				t.Errorf("stderr:\n%s", s)
			}
		})
	}
}
