package targetmem

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func addr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

func munmap(b []byte) error {
	_, _, e := unix.Syscall(unix.SYS_MUNMAP, uintptr(addr(b)), uintptr(len(b)), 0)
	if e != 0 {
		return e
	}
	return nil
}

// pages maps n pages of a pattern and unmaps the ones in holes.
func pages(t *testing.T, n int, holes ...int) []byte {
	t.Helper()
	ps := os.Getpagesize()
	m, err := unix.Mmap(-1, 0, n*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = byte(i*7 + i>>12)
	}
	for _, h := range holes {
		if err := munmap(m[h*ps : (h+1)*ps]); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		munmap(m) // not unix.Munmap, which refuses a mapping with holes
	})
	return m
}

// TestReadAt reads this process's memory through the executor: whole, and
// short where a page is unmapped.
func TestReadAt(t *testing.T) {
	ps := os.Getpagesize()
	m := pages(t, 4, 2)
	r := Open(os.Getpid())
	got := make([]byte, 2*ps)
	if n, err := r.ReadAt(got, int64(addr(m))); err != nil || n != len(got) || !bytes.Equal(got, m[:2*ps]) {
		t.Fatalf("ReadAt = %d, %v; equal %v", n, err, bytes.Equal(got, m[:2*ps]))
	}
	n, err := r.ReadAt(got, int64(addr(m)+uint64(ps)+100))
	if n != ps-100 || err == nil || !bytes.Equal(got[:n], m[ps+100:2*ps]) {
		t.Fatalf("across the hole: %d, %v; want %d bytes and an error", n, err, ps-100)
	}
	want := fmt.Sprintf("memory at %#x of pid %d is unreadable", addr(m)+2*uint64(ps), os.Getpid())
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if st := r.Stats(); st.Reads != 2 || st.Bytes != int64(3*ps-100) {
		t.Errorf("stats %+v", st)
	}
}

// TestReadVector reads many spans, some larger than the staging buffer,
// more than one call takes, and stops at the first unreadable one.
func TestReadVector(t *testing.T) {
	ps := os.Getpagesize()
	big := make([]byte, 3*stageSize+123)
	for i := range big {
		big[i] = byte(i * 13)
	}
	small := pages(t, 2)
	var spans []Span
	var want []byte
	add := func(b []byte) {
		spans = append(spans, Span{addr(b), len(b)})
		want = append(want, b...)
	}
	for i := 0; i < 1500; i++ {
		add(small[i%ps : i%ps+8])
		if i == 700 {
			add(big)
		}
	}
	add(small[:0])
	add(small[ps-3 : ps+3])
	r := Open(os.Getpid())
	got := make([]byte, len(want))
	n, err := r.ReadVector(got, spans)
	runtime.KeepAlive(big) // spans hold its address only: GC could reuse it
	if err != nil || n != len(want) || !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		t.Fatalf("ReadVector = %d, %v (want %d); first difference at %d", n, err, len(want), i)
	}

	hole := pages(t, 3, 1)
	spans = []Span{{addr(hole), 8}, {addr(hole) + uint64(ps) - 4, 8}, {addr(hole) + 2*uint64(ps), 8}}
	n, err = r.ReadVector(got[:24], spans)
	if n != 12 || err == nil {
		t.Fatalf("into a hole: %d, %v; want 12 and an error", n, err)
	}
}

// fakeProc writes a /proc tree for pid with these maps and mountinfo.
func fakeProc(t *testing.T, pid int, maps, mountinfo string) string {
	dir := t.TempDir()
	p := filepath.Join(dir, strconv.Itoa(pid))
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"maps": maps, "mountinfo": mountinfo, "stat": "1 (x) S 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 42 0"} {
		if err := os.WriteFile(filepath.Join(p, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRefusesBlockingMapping: a read that touches a file mapping on FUSE
// (by its device in maps and mountinfo) is refused without being issued;
// the anonymous memory beside it and a file on ext4 are read.
func TestRefusesBlockingMapping(t *testing.T) {
	ps := uint64(os.Getpagesize())
	m := pages(t, 3)
	a := addr(m)
	maps := fmt.Sprintf("%x-%x rw-p 00000000 00:00 0 \n%x-%x r--s 00000000 00:2f 12 /home/u/fuse/f (deleted)\n%x-%x r--p 00000000 fe:00 99 /usr/lib/libjvm.so\n",
		a, a+ps, a+ps, a+2*ps, a+2*ps, a+3*ps)
	mountinfo := "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n" +
		"99 27 0:47 / /home/u/fuse rw,nosuid,nodev - fuse.sshfs u@h: rw,user_id=1000\n"
	r := Open(os.Getpid())
	r.proc = fakeProc(t, os.Getpid(), maps, mountinfo)

	got := make([]byte, 16)
	if n, err := r.ReadAt(got, int64(a+ps-8)); n != 0 || !errors.Is(err, ErrMayBlock) {
		t.Fatalf("read across into the FUSE mapping: %d, %v; want 0 and ErrMayBlock", n, err)
	}
	if st := r.Stats(); st.Reads != 0 || st.Refused != 1 {
		t.Errorf("a refused read was issued: %+v", st)
	}
	if n, err := r.ReadAt(got, int64(a)); n != 16 || err != nil {
		t.Errorf("anonymous memory: %d, %v", n, err)
	}
	if n, err := r.ReadAt(got, int64(a+2*ps)); n != 16 || err != nil {
		t.Errorf("ext4 mapping: %d, %v", n, err)
	}
	n, err := r.ReadVector(make([]byte, 24), []Span{{a, 8}, {a + 8, 8}, {a + ps, 8}})
	if n != 16 || !errors.Is(err, ErrMayBlock) {
		t.Errorf("vector into the FUSE mapping: %d, %v; want 16 and ErrMayBlock", n, err)
	}
}
