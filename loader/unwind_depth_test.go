package loader

import (
	"bufio"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/bpf"
)

// The unwinder's fake code cache for TestUnwindDepthCap: this test
// binary's text is one code heap of one segment (segMap), whose blob is
// fakeBlob, a fixed-frame blob with depthFrame's frame size.
var (
	segMap   [8]byte // 0: the segment starts a block
	fakeBlob struct {
		words     int32  // CodeBlob::_frame_size
		complete  int32  // _frame_complete_offset: 0, no prologue check
		codeBegin uint64 // _code_begin
		compileID int32
		_         int32
	}
	depthStop  atomic.Bool
	depthFrame atomic.Uintptr // depthRecurse's frame size, bytes
	depthSink  atomic.Uint64
)

// depthRecurse recurses n times and spins at the bottom until depthStop,
// having measured its own frame size from the caller's local (a pointer
// into the stack: kept right if the stack is copied as it grows).
//
//go:noinline
func depthRecurse(n int, up *byte) uint64 {
	var x byte
	if n == 0 {
		depthFrame.Store(uintptr(unsafe.Pointer(up)) - uintptr(unsafe.Pointer(&x)))
		s := uint64(0)
		for !depthStop.Load() {
			for i := range 1 << 16 {
				s += uint64(i)
			}
		}
		return s
	}
	return depthRecurse(n-1, &x) + uint64(x)
}

// textRange is this binary's executable mapping.
func textRange(t *testing.T) (lo, hi uint64) {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || fs[1] != "r-xp" || fs[5] != exe {
			continue
		}
		a, b, _ := strings.Cut(fs[0], "-")
		lo, _ = strconv.ParseUint(a, 16, 64)
		hi, _ = strconv.ParseUint(b, 16, 64)
		return lo, hi
	}
	t.Fatal("no executable mapping of the test binary")
	return 0, 0
}

// fakeCodeText is this binary's text and fakeBlob's address, or skips
// when they are not laid out for a fake code cache of one segment.
func fakeCodeText(t *testing.T) (lo, hi, blob uint64) {
	t.Helper()
	lo, hi = textRange(t)
	blob = uint64(uintptr(unsafe.Pointer(&fakeBlob)))
	if blob < lo || blob-lo >= 1<<32 || blob&7 != 0 || hi-lo >= 1<<31 {
		t.Skipf("text %#x-%#x and data %#x not laid out for a fake code cache", lo, hi, blob)
	}
	return lo, hi, blob
}

// setFakeCodeCache gives the unwinder the text as one code heap whose one
// blob, fakeBlob, has depthRecurse's frame size: every frame of the
// recursion is a fixed-size "compiled" one. (Go keeps frame pointers, but
// walked as rbp-linked Java frames their slot at rbp - 8, the
// interpreter's sender sp, holds whatever the stack held before: the walk
// may stop early as a bad frame.)
func setFakeCodeCache(t *testing.T, s *Sampler, lo, hi, blob uint64) {
	t.Helper()
	heap := CodeHeap{Low: lo, High: hi, Segmap: uint64(uintptr(unsafe.Pointer(&segMap))), SegmapLen: 1, Log2SegmentSize: 31}
	layout := CodeLayout{HeapBlockSize: uint32(blob - lo), FrameSize: 0, FrameComplete: 4, CodeBegin: 8, CompileID: 16}
	fakeBlob.words = int32(depthFrame.Load() / 8)
	fakeBlob.compileID = 7
	if err := s.SetUnwind(os.Getpid(), []CodeHeap{heap}, layout); err != nil {
		t.Fatal(err)
	}
}

// A stack deeper than the unwinder walks is cut after exactly
// MaxUnwindFrames frames, for depth, and the walk (32 tail-called runs)
// ends there: this binary's text stands in for the code cache, so that
// every frame of a Go recursion of 300 is a fixed-size "compiled" frame.
func TestUnwindDepthCap(t *testing.T) {
	s := openOrSkip(t, Config{Source: Decode, Freq: 1000, Unwind: true})
	lo, hi, blob := fakeCodeText(t)
	depthStop.Store(false)
	done := make(chan struct{})
	go func() { depthSink.Add(depthRecurse(300, new(byte))); close(done) }()
	for depthFrame.Load() == 0 {
		select {
		case <-done:
			t.Fatal("recursion ended early")
		default:
		}
	}
	defer func() { depthStop.Store(true); <-done }()
	setFakeCodeCache(t, s, lo, hi, blob)
	since := Now() // samples before had no code cache
	samples := collect(t, s, 300, func(stop <-chan struct{}) { <-stop })
	cut, deep := 0, 0
	for _, smp := range samples {
		st := smp.Stack
		if smp.Time < since || st == nil || len(st.Frames) < 2 || st.Frames[1].Blob != blob|FrameSized {
			continue // another thread, or not in the recursion
		}
		deep++
		ret := st.Frames[1].A // the recursion's return address
		ok := len(st.Frames) == MaxUnwindFrames && st.End == UnwindDepth
		for _, f := range st.Frames[1:] {
			ok = ok && f.Blob == blob|FrameSized && f.A == ret && f.B == 7
		}
		if ok {
			cut++
		}
	}
	t.Logf("%d samples, %d in the recursion (frame %d bytes), %d of them cut for depth after %d frames of it",
		len(samples), deep, depthFrame.Load(), cut, MaxUnwindFrames)
	if deep < 50 || 10*cut < 9*deep {
		t.Errorf("%d of %d samples in the recursion cut for depth after exactly %d frames, want 90%% of at least 50", cut, deep, MaxUnwindFrames)
	}
}

// A thread marked as the JVM's own (VMThread) is not walked: its samples
// come without frames, ended as having no Java frames; a mark whose
// start time is another thread's (a tid reused) is dropped and the thread
// walked again; RemovePID drops the process's marks.
func TestVMThreadSkipsWalk(t *testing.T) {
	s := openOrSkip(t, Config{Source: Decode, Freq: 1000, Unwind: true})
	lo, hi, blob := fakeCodeText(t)
	depthStop.Store(false)
	tids := make(chan uint32, 1)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tids <- uint32(unix.Gettid())
		depthSink.Add(depthRecurse(20, new(byte)))
		close(done)
	}()
	tid := <-tids
	for depthFrame.Load() == 0 {
		runtime.Gosched()
	}
	defer func() { depthStop.Store(true); <-done }()
	setFakeCodeCache(t, s, lo, hi, blob)
	// phase counts the recursing thread's samples from now on: walked
	// (frames) and skipped (none, ended as without Java frames).
	phase := func() (walked, skipped int) {
		since := Now()
		s.SetDeadline(time.Now().Add(3 * time.Second))
		for walked+skipped < 30 {
			var smp Sample
			if err := s.Read(&smp); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					break
				}
				t.Fatal(err)
			}
			if smp.Time < since || smp.TID != tid || smp.Stack == nil {
				continue
			}
			switch {
			case len(smp.Stack.Frames) > 1:
				walked++
			case len(smp.Stack.Frames) == 0 && smp.Stack.End == UnwindNoJava:
				skipped++
			}
		}
		return walked, skipped
	}
	if w, sk := phase(); w < 20 || sk != 0 {
		t.Fatalf("unmarked thread: %d samples walked, %d skipped; want at least 20 walked, none skipped", w, sk)
	}
	if err := s.VMThread(os.Getpid(), tid); err != nil {
		t.Fatal(err)
	}
	if w, sk := phase(); sk < 20 || w != 0 {
		t.Fatalf("marked thread: %d samples walked, %d skipped; want at least 20 skipped, none walked", w, sk)
	}
	key := bpf.DjxThreadKey{Tgid: uint32(os.Getpid()), Tid: tid}
	var born uint64
	if err := s.vmThreads.Lookup(key, &born); err != nil || born <= 1 {
		t.Fatalf("mark after the thread's samples: %d, %v; want its start time", born, err)
	}
	if err := s.vmThreads.Put(key, born+1); err != nil { // another thread's start
		t.Fatal(err)
	}
	if w, sk := phase(); w < 20 || sk != 0 {
		t.Fatalf("mark of another thread with this tid: %d samples walked, %d skipped; want at least 20 walked, none skipped", w, sk)
	}
	if err := s.vmThreads.Lookup(key, &born); !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Fatalf("mark of another thread kept (%d, %v), want it dropped", born, err)
	}
	if err := s.VMThread(os.Getpid(), tid); err != nil {
		t.Fatal(err)
	}
	if err := s.NoJavaThread(os.Getpid(), tid); err != nil {
		t.Fatal(err)
	}
	if err := s.RemovePID(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	var b uint8
	if err := s.vmThreads.Lookup(key, &born); !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Errorf("after RemovePID the thread's mark is still there (%v)", err)
	}
	if err := s.maps.NoJava.Lookup(key, &b); !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Errorf("after RemovePID the thread's no-Java mark is still there (%v)", err)
	}
}
