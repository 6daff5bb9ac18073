package targetmem

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/internal/fusetest"
)

// TestFileReads reads a file through File: ReadAt, Read to the end (in
// more than one staging buffer), Stat, Close.
func TestFileReads(t *testing.T) {
	data := make([]byte, 2*stageSize+4321)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := Openat2(unix.AT_FDCWD, path, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC})
	if err != nil {
		t.Fatal(err)
	}
	f := NewFile(fd, path)
	got := make([]byte, 100)
	if n, err := f.ReadAt(got, stageSize-50); n != 100 || err != nil || string(got) != string(data[stageSize-50:stageSize+50]) {
		t.Errorf("ReadAt: %d, %v", n, err)
	}
	if n, err := f.ReadAt(got, int64(len(data))-10); n != 10 || err != io.EOF {
		t.Errorf("ReadAt at the end: %d, %v; want 10, EOF", n, err)
	}
	all, err := io.ReadAll(f)
	if err != nil || string(all) != string(data) {
		t.Errorf("ReadAll: %d bytes, %v", len(all), err)
	}
	st, err := f.Stat()
	if err != nil || st.Size != int64(len(data)) {
		t.Errorf("Stat: size %d, %v", st.Size, err)
	}
	if err := f.Close(); err != nil {
		t.Error(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
		t.Error("the fd is still open after Close")
	}
	if _, err := Openat(unix.AT_FDCWD, filepath.Join(t.TempDir(), "none"), unix.O_RDONLY); !errors.Is(err, unix.ENOENT) {
		t.Errorf("open of a missing file: %v, want ENOENT", err)
	}
}

// TestFUSEFileReadAbandoned: a read of a FUSE file whose server never
// answers READ returns ErrHung within the timeout, later reads of the
// File fail at once, and Close still closes it. (An os.File read of it
// would not return: see TestDirectReadOfFUSEHangs for the memory read.)
func TestFUSEFileReadAbandoned(t *testing.T) {
	h := fusetest.Start(t)
	defer func(d time.Duration) { timeout = d }(timeout)
	timeout = time.Second

	path := fmt.Sprintf("/proc/%d/root%s/%s", h.Pid, h.Dir, fusetest.FileName)
	fd, err := Openat(unix.AT_FDCWD, path, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		t.Fatalf("open (answered by the server): %v", err)
	}
	f := NewFile(fd, path)
	start := time.Now()
	n, err := f.ReadAt(make([]byte, 64), 0)
	took := time.Since(start)
	if n != 0 || !errors.Is(err, ErrHung) {
		t.Fatalf("read: %d, %v; want ErrHung", n, err)
	}
	if took < timeout || took > timeout+2*time.Second {
		t.Errorf("the read took %v, want about %v", took, timeout)
	}
	t.Logf("abandoned after %v: %v", took, err)
	start = time.Now()
	if _, err := f.Read(make([]byte, 8)); !errors.Is(err, ErrHung) || time.Since(start) > 100*time.Millisecond {
		t.Errorf("a later read: %v after %v; want ErrHung at once", err, time.Since(start))
	}
	if err := f.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	h.Kill()
	waitReaped(t)
}

// waitReaped waits until every retired executor is reaped.
func waitReaped(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for retiredCount() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		reap()
	}
	if n := retiredCount(); n > 0 {
		t.Errorf("%d executors left after the FUSE server exited", n)
	}
	if n, _ := Stranded(); n != 0 {
		t.Errorf("%d executors counted stranded after all were reaped", n)
	}
}

// TestStrandedCap: once maxStranded executors are stuck, a read that
// would hang another is refused at once with ErrStranded, reads of
// memory the maps show as anonymous still work, and files of unknown
// filesystems are refused while known local ones are not.
func TestStrandedCap(t *testing.T) {
	h := fusetest.Start(t)
	h2 := fusetest.Start(t)
	defer func(d time.Duration, m int64) { timeout, maxStranded = d, m }(timeout, maxStranded)
	timeout, maxStranded = time.Second, 1

	r := Open(h.Pid)
	r.proc = fakeProc(t, h.Pid, "", "") // hides the FUSE mapping
	if _, err := r.ReadAt(make([]byte, 8), int64(h.Addr)); !errors.Is(err, ErrHung) {
		t.Fatalf("first hang: %v, want ErrHung", err)
	}
	if n, max := Stranded(); n != 1 || max != 1 || !Strict() {
		t.Fatalf("Stranded() = %d, %d; Strict %v", n, max, Strict())
	}

	r2 := Open(h2.Pid)
	r2.proc = fakeProc(t, h2.Pid, "", "")
	start := time.Now()
	_, err := r2.ReadAt(make([]byte, 8), int64(h2.Addr))
	if !errors.Is(err, ErrStranded) || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("a second hang: %v after %v; want ErrStranded at once", err, time.Since(start))
	}
	t.Log(err)
	if n, _ := Stranded(); n != 1 {
		t.Errorf("%d stranded after the refusal, want 1", n)
	}

	own := []byte("anonymous memory still reads")
	got := make([]byte, len(own))
	if n, err := Open(os.Getpid()).ReadAt(got, int64(addr(own))); n != len(own) || err != nil || string(got) != string(own) {
		t.Errorf("own memory: %d, %v, %q", n, err, got)
	}
	if err := CheckFS("f", ""); !errors.Is(err, ErrStranded) {
		t.Errorf("CheckFS of an unknown filesystem: %v, want ErrStranded", err)
	}
	if err := CheckFS("f", "ext4"); err != nil {
		t.Errorf("CheckFS of ext4: %v", err)
	}
	if err := CheckFS("f", "fuse.sshfs"); !errors.Is(err, ErrMayBlock) {
		t.Errorf("CheckFS of FUSE: %v, want ErrMayBlock", err)
	}
	h.Kill()
	waitReaped(t)
	if Strict() {
		t.Error("still strict once the stuck executor is reaped")
	}
}

// TestIdleExecutorsReaped: executors that exit idle are reaped by the
// reaper, not left as zombies until the next read.
func TestIdleExecutorsReaped(t *testing.T) {
	idle := 200 * time.Millisecond
	own := make([]byte, 8)
	if _, err := Open(os.Getpid()).ReadAt(own, int64(addr(own))); err != nil {
		t.Fatal(err)
	}
	pool.Lock()
	var pids []int
	for _, x := range pool.idle[0] {
		x.setIdle(idle) // the executor rereads it
		pids = append(pids, x.pid)
	}
	pool.Unlock()
	if len(pids) == 0 {
		t.Fatal("no executor in the pool after a read")
	}
	deadline := time.Now().Add(idle + 3*reapEvery)
	for time.Now().Before(deadline) {
		left := 0
		for _, pid := range pids {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", os.Getpid(), pid)); err == nil {
				left++
			} else if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
				left++ // a zombie of its own
			}
		}
		if left == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("executors %v still exist (as zombies) %v after they went idle", pids, idle+3*reapEvery)
}
