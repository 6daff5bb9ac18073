package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
	"github.com/djx-bpf/djx-bpf/internal/fusetest"
	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// fuseLimit bounds a 3 s profile of a JVM whose memory leads into an
// unanswered FUSE mapping: the attach, the profile, a read abandoned after
// targetmem.Timeout (3 s) and the report, with room for a busy machine.
const fuseLimit = 20 * time.Second

// TestProfileFUSEMapping is issue 39's "no FUSE mapping can stop profile
// from ending", end to end. A JDK 17 JVM maps a file of the test's FUSE
// filesystem, whose server answers everything but READ, and never touches
// it. The test points what djx-bpf follows into that mapping:
//   - vmstructs: gHotSpotVMStructs, read before the attach;
//   - klass: the klass word of an object only a static field holds,
//     written once the attach begins, which the heap walk reads mid-profile.
//
// and either leaves the mount in the JVM's mountinfo (the maps check
// refuses the read at once) or detaches it (umount -l: the mapping's
// device is in no mountinfo, the check lets the read through, and the
// executor abandons it after 3 s). `profile --duration 3s` must end within
// fuseLimit, with a report; the JVM keeps running; once the FUSE server is
// gone no task of djx-bpf's is left. DJX_FUSE_E2E_BIN runs another
// binary (e.g. one built before targetmem, which hangs in each case).
func TestProfileFUSEMapping(t *testing.T) {
	setup(t)
	if _, err := exec.LookPath("nsenter"); err != nil {
		testenv.Skip(t, "needs nsenter (util-linux): %v", err)
	}
	bin := binPath
	if b := os.Getenv("DJX_FUSE_E2E_BIN"); b != "" {
		bin = b
	}
	for _, c := range []struct {
		name   string
		klass  bool // else gHotSpotVMStructs
		detach bool
	}{
		{"vmstructs/mounted", false, false},
		{"vmstructs/detached", false, true},
		{"klass/mounted", true, false},
		{"klass/detached", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := fusetest.Start(t)
			j := startMapVictim(t, h)
			if c.detach {
				if out, err := exec.Command("nsenter", "-t", strconv.Itoa(h.Pid), "-m", "--", "umount", "-l", h.Dir).CombinedOutput(); err != nil {
					t.Fatalf("umount -l: %v\n%s", err, out)
				}
				mounts, _ := procfs.Mounts(procfs.Mount, j.pid)
				if typ := procfs.FSTypeOf(mounts, j.dev[0], j.dev[1]); typ != "" {
					t.Fatalf("the mapping's device is still mounted (%s)", typ)
				}
			}
			if !c.klass {
				syms, err := vmstructs.FindSymbols(procfs.Mount, j.pid)
				if err != nil {
					t.Fatal(err)
				}
				poke(t, j.pid, syms.Addrs["gHotSpotVMStructs"], j.mapAddr)
			}

			out := filepath.Join(t.TempDir(), "r.json")
			cmd := exec.Command(bin, "profile", "--pid", strconv.Itoa(j.pid), "--duration", "3s", "--format", "json", "-o", out)
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			stderr, _ := cmd.StderrPipe()
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var errText strings.Builder
			scanned := make(chan struct{})
			go func() {
				defer close(scanned)
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					errText.WriteString(sc.Text() + "\n")
					if c.klass && strings.Contains(sc.Text(), "attaching to") {
						// vmstructs and the heap layout are read; the
						// walk starts once the agent sent its roots.
						poke(t, j.pid, j.victim+8, j.mapAddr)
					}
				}
			}()
			done := make(chan error, 1)
			go func() { <-scanned; done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(fuseLimit):
				cmd.Process.Kill()
				h.Kill() // ends the stuck read, and with it the process
				<-done
				t.Fatalf("profile still running %v after it started:\n%s", fuseLimit, errText.String())
			}
			took := time.Since(start)
			t.Logf("profile ended after %v (%v):\n%s", took.Round(10*time.Millisecond), err, errText.String())
			why := "fuse.djxfusetest" // the check refused the read
			if c.detach {
				why = "no answer in time" // the executor abandoned it
			}
			if !c.klass {
				// vmStructs are read before the attach: the session ends
				// there, as the agent would read them too.
				if err == nil || !strings.Contains(errText.String(), "not attaching") || !strings.Contains(errText.String(), why) {
					t.Errorf("profile: %v; want it to refuse the attach, saying %q", err, why)
				}
			} else {
				// The walk reads the klass mid-profile: the profile goes on
				// and writes its report.
				data, rerr := os.ReadFile(out)
				if err != nil || rerr != nil {
					t.Errorf("profile: %v; report: %v", err, rerr)
				}
				if c.detach && !strings.Contains(string(data), why) {
					t.Errorf("the report does not say the walk's read was abandoned (%q)", why)
				}
			}

			if state := procState(j.pid); state == 0 || state == 'D' || state == 'Z' {
				t.Errorf("the JVM is in state %q after the profile", state)
			}
			h.Kill() // aborts the connection: every read stuck on it fails
			if left := tasksOf(bin, 10*time.Second); len(left) > 0 {
				t.Errorf("tasks of djx-bpf left 10 s after the FUSE server ended: %v", left)
			}
			j.stdin.Close()
			if err := j.wait(30 * time.Second); err != nil {
				t.Errorf("the JVM did not end cleanly: %v", err)
			}
		})
	}
}

// mapVictim is a MapVictim JVM.
type mapVictim struct {
	pid     int
	mapAddr uint64    // where it maps the FUSE file
	dev     [2]uint32 // the mapping's device
	victim  uint64    // the Victim object's address
	stdin   io.WriteCloser
	wait    func(time.Duration) error
}

// startMapVictim runs testdata/java/MapVictim.java in h's mount
// namespace, where the FUSE file is, and waits for its "ready".
func startMapVictim(t *testing.T, h *fusetest.Helper) *mapVictim {
	t.Helper()
	src, err := filepath.Abs("../../testdata/java/MapVictim.java")
	if err != nil {
		t.Fatal(err)
	}
	java := filepath.Join(jdks()["jdk17"], "bin", "java")
	cmd := exec.Command("nsenter", "-t", strconv.Itoa(h.Pid), "-m", "--", java, "-Xmx256m",
		"-XX:-UseCompressedOops", "-XX:-UseCompressedClassPointers", src, filepath.Join(h.Dir, fusetest.FileName))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
	})
	line := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		s, _ := r.ReadString('\n')
		line <- s
		io.Copy(io.Discard, r)
	}()
	j := &mapVictim{pid: cmd.Process.Pid, stdin: stdin} // nsenter execs java in place
	select {
	case s := <-line:
		if _, err := fmt.Sscanf(s, "ready %x", &j.victim); err != nil {
			t.Fatalf("MapVictim said %q", s)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("MapVictim not ready in 60 s")
	}
	j.wait = func(d time.Duration) error {
		select {
		case err := <-exited:
			exited <- err
			return err
		case <-time.After(d):
			return fmt.Errorf("still running after %v", d)
		}
	}
	ms, err := procfs.Maps(procfs.Mount, j.pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if strings.HasSuffix(m.Path, filepath.Base(h.Dir)+"/"+fusetest.FileName) {
			j.mapAddr, j.dev = m.Start, [2]uint32{m.Major, m.Minor}
		}
	}
	if j.mapAddr == 0 {
		t.Fatalf("pid %d does not map the FUSE file", j.pid)
	}
	return j
}

// poke writes addr as a 64-bit word at at in process pid.
func poke(t *testing.T, pid int, at, addr uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], addr)
	local := []unix.Iovec{{Base: &b[0], Len: 8}}
	if n, err := unix.ProcessVMWritev(pid, local, []unix.RemoteIovec{{Base: uintptr(at), Len: 8}}, 0); n != 8 || err != nil {
		t.Errorf("write %#x at %#x of pid %d: %d, %v", addr, at, pid, n, err)
	}
}

// procState is the state letter in /proc/PID/stat, 0 if none.
func procState(pid int) byte {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); err == nil && i >= 0 && i+2 < len(s) {
		return s[i+2]
	}
	return 0
}

// tasksOf waits up to d for no live process to run the executable bin
// (djx-bpf's executors are processes of their own), and returns those
// still left, with their states.
func tasksOf(bin string, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		var left []string
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == bin {
				left = append(left, fmt.Sprintf("%d(%c)", pid, procState(pid)))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(100 * time.Millisecond)
	}
}
