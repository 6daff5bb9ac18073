package targetmem

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/internal/fusetest"
)

const envDirect = "DJX_TARGETMEM_DIRECT"

func TestMain(m *testing.M) {
	fusetest.Main()
	if a := os.Getenv(envDirect); a != "" {
		directRead(a)
	}
	os.Exit(m.Run())
}

// directRead reads "PID ADDR" with process_vm_readv on its own thread, as
// the readers before targetmem did, then exits.
func directRead(arg string) {
	var pid int
	var addr uintptr
	fmt.Sscanf(arg, "%d %x", &pid, &addr)
	b := make([]byte, 8)
	local := []unix.Iovec{{Base: &b[0], Len: 8}}
	unix.ProcessVMReadv(pid, local, []unix.RemoteIovec{{Base: addr, Len: 8}}, 0)
	os.Exit(0)
}

// stuck reports whether a task of process pid sleeps uninterruptibly
// (state D in its stat). FUSE waits for an answer interruptibly at first,
// then, once a fatal signal came, uninterruptibly.
func stuck(pid int) bool {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		s := string(data)
		if i := strings.LastIndexByte(s, ')'); err == nil && i >= 0 && i+2 < len(s) && s[i+2] == 'D' {
			return true
		}
	}
	return false
}

// TestDirectReadOfFUSEHangs shows the primitive: a process_vm_readv of
// memory backed by an unanswered FUSE file sleeps uninterruptibly, and
// SIGKILL does not end its process. (The readers before targetmem read so,
// on djx-bpf's own threads.)
func TestDirectReadOfFUSEHangs(t *testing.T) {
	h := fusetest.Start(t)
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %x", envDirect, h.Pid, h.Addr))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("the direct read returned (%v): no hang to guard against", err)
	case <-time.After(2 * time.Second):
	}
	cmd.Process.Kill()
	select {
	case <-done:
		t.Fatal("the reader ended on SIGKILL")
	case <-time.After(2 * time.Second):
	}
	if !stuck(cmd.Process.Pid) {
		t.Error("no task of the killed reader sleeps uninterruptibly")
	}
	h.Kill() // aborts the connection: the read fails, the reader dies
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader outlived the FUSE server")
	}
}

// TestFUSEReadAbandoned: a read of that memory returns ErrHung within the
// timeout, later reads of the pid fail at once, other processes are still
// read, and the stranded executor ends once the server goes.
func TestFUSEReadAbandoned(t *testing.T) {
	h := fusetest.Start(t)
	defer func(d time.Duration) { timeout = d }(timeout)
	timeout = time.Second

	r := Open(h.Pid)
	// An empty fake maps: the mapping check cannot see the FUSE mapping,
	// so the read is issued (as when the target maps it after the check).
	r.proc = fakeProc(t, h.Pid, "", "")
	start := time.Now()
	n, err := r.ReadAt(make([]byte, 64), int64(h.Addr))
	took := time.Since(start)
	if n != 0 || !errors.Is(err, ErrHung) {
		t.Fatalf("read of the FUSE mapping: %d, %v; want ErrHung", n, err)
	}
	if took < timeout || took > timeout+2*time.Second {
		t.Errorf("the read took %v, want about %v", took, timeout)
	}
	t.Logf("abandoned after %v: %v", took, err)
	if want := fmt.Sprintf("memory of pid %d did not answer a read at %#x within 1s", h.Pid, h.Addr); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q lacks %q", err, want)
	}
	retired.Lock()
	x := retired.list[len(retired.list)-1]
	retired.Unlock()
	if w, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", x.pid)); string(w) != "request_wait_answer" {
		t.Errorf("the abandoned executor %d waits in %q, not on the FUSE read", x.pid, w)
	}
	// It keeps none of our files open (our stdout, BPF links) once we exit.
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", x.pid)); err != nil || len(fds) != 0 {
		t.Errorf("the abandoned executor holds %d fds (%v)", len(fds), err)
	}

	start = time.Now()
	r2 := Open(h.Pid)
	r2.proc = r.proc
	if _, err := r2.ReadAt(make([]byte, 8), int64(h.Addr)+8192); !errors.Is(err, ErrHung) || time.Since(start) > 100*time.Millisecond {
		t.Errorf("a later read: %v after %v; want ErrHung at once", err, time.Since(start))
	}
	own := []byte("still readable")
	got := make([]byte, len(own))
	if n, err := Open(os.Getpid()).ReadAt(got, int64(addr(own))); n != len(own) || err != nil || string(got) != string(own) {
		t.Errorf("another process: %d, %v, %q", n, err, got)
	}

	h.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for retiredCount() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		reap()
	}
	if n := retiredCount(); n > 0 {
		t.Errorf("%d executors left after the FUSE server exited", n)
	}
}

// TestFUSEMappingRefused: with the real maps and mountinfo, the read of
// the FUSE mapping is refused before it is issued.
func TestFUSEMappingRefused(t *testing.T) {
	h := fusetest.Start(t)
	r := Open(h.Pid)
	start := time.Now()
	n, err := r.ReadAt(make([]byte, 64), int64(h.Addr))
	if n != 0 || !errors.Is(err, ErrMayBlock) {
		t.Fatalf("read of the FUSE mapping: %d, %v; want ErrMayBlock", n, err)
	}
	if !strings.Contains(err.Error(), "fuse.djxfusetest") {
		t.Errorf("error %q does not name the filesystem", err)
	}
	if st := r.Stats(); st.Reads != 0 || time.Since(start) > time.Second {
		t.Errorf("%d reads issued, %v taken", st.Reads, time.Since(start))
	}
}
