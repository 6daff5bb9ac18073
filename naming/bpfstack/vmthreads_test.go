package bpfstack

import (
	"os"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/loader"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

func TestHotspotThread(t *testing.T) {
	for comm, want := range map[string]bool{
		"C2 CompilerThre": true, "C1 CompilerThre": true, "VM Thread": true, "GC Thread#3": true,
		"G1 Main Marker": true, "G1 Conc#0": true, "G1 Refine#1": true, "G1 Service": true,
		"VM Periodic Tas": true, "ZWorker#0": true, "ZDriverMajor": true, "Sweeper thread": true,
		"java": false, "main": false, "Service Thread": false, "Notification Th": false,
		"JVMCI CompilerT": false, "Finalizer": false, "Reference Handl": false, "Signal Dispatch": false,
		"Common-Cleaner": false, "Attach Listener": false, "pool-1-thread-1": false, "": false,
	} {
		if got := hotspotThread(comm); got != want {
			t.Errorf("hotspotThread(%q) = %v, want %v", comm, got, want)
		}
	}
}

// A thread whose walk found no Java frames is judged by its name, once;
// the JVM's own are marked, the others and walks with Java frames not.
func TestVMThreadsJudgeByName(t *testing.T) {
	named := func(name string) (uint32, func()) {
		tids := make(chan uint32)
		stop := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread() // the thread ends: its name goes with it
			b, err := unix.BytePtrFromString(name)
			if err == nil {
				err = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(b)), 0, 0, 0)
			}
			if err != nil {
				t.Error(err)
			}
			tids <- uint32(unix.Gettid())
			<-stop
		}()
		return <-tids, func() { close(stop) }
	}
	compiler, stop1 := named("C2 CompilerThre")
	defer stop1()
	app, stop2 := named("worker-1")
	defer stop2()
	var marked []uint32
	v := NewVMThreads(os.Getpid(), nil, func(pid int, tid uint32) error {
		if pid != os.Getpid() {
			t.Errorf("marked pid %d", pid)
		}
		marked = append(marked, tid)
		return nil
	})
	noJava := &sample.Stack{Frames: []sample.RawFrame{{Blob: loader.FrameNative, A: 0x1000}}, End: loader.UnwindNoJava}
	javaStack := &sample.Stack{Frames: []sample.RawFrame{{Blob: 0x7000 | loader.FrameSized}}, End: loader.UnwindEntry}
	for range 3 {
		v.See(&loader.Sample{TID: compiler, Stack: noJava})
		v.See(&loader.Sample{TID: app, Stack: noJava})
		v.See(&loader.Sample{TID: app + 1000000, Stack: javaStack})
	}
	if len(marked) != 1 || marked[0] != compiler {
		t.Fatalf("marked %v, want only the compiler thread %d, once", marked, compiler)
	}
	if len(v.judged) != 2 {
		t.Errorf("judged %v, want the two threads without Java frames", v.judged)
	}
}
