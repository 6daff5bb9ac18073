package jvmsym

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
	"github.com/djx-bpf/djx-bpf/safety/elfsafe/elfcraft"
)

// TestNativeSymtabBomb: a target mapping a sparse file whose .symtab or
// .dynsym declares 120 MiB (4 KiB on disk) does not make the symbolizer
// allocate it: debug/elf took 678 MiB and 10.8 s.
func TestNativeSymtabBomb(t *testing.T) {
	for _, dynamic := range []bool{false, true} {
		proc := t.TempDir()
		lib := filepath.Join(proc, "42", "root", "opt", "libjvm.so")
		os.MkdirAll(filepath.Dir(lib), 0o755)
		if err := elfcraft.SymtabBomb(lib, 120<<20, dynamic); err != nil {
			t.Fatal(err)
		}
		maps := "400000-401000 r-xp 00000000 fd:01 4242 /opt/libjvm.so\n"
		if err := os.WriteFile(filepath.Join(proc, "42", "maps"), []byte(maps), 0o644); err != nil {
			t.Fatal(err)
		}
		n := newTestNative(proc, 42, time.Now)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		fr, ok := n.Lookup(0x400100)
		d := time.Since(start)
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("dynamic %v: %v %v, %d bytes allocated in %v", dynamic, fr, ok, alloc, d)
		if ok {
			t.Errorf("dynamic %v: named %v from a refused file", dynamic, fr)
		}
		if alloc > 8<<20 || d > 2*time.Second {
			t.Errorf("dynamic %v: %d bytes allocated in %v, want under 8 MiB and 2 s", dynamic, alloc, d)
		}
		m := n.find(0x400100)
		if _, err := n.openSyms(m); !errors.Is(err, elfsafe.ErrTooLarge) {
			t.Errorf("dynamic %v: openSyms: %v, want ErrTooLarge", dynamic, err)
		}
	}
}

// FuzzLoadELFSyms: a mapped file is the target's to write.
func FuzzLoadELFSyms(f *testing.F) {
	for _, p := range []string{"testdata/native/libfixture.so", "testdata/native/libfixture-stripped.so"} {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ef, err := elfsafe.Parse(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		if es, err := loadELFSyms(ef); err == nil {
			for _, s := range es.syms {
				if s.end <= s.start {
					t.Fatalf("empty symbol %+v", s)
				}
			}
			es.lookup(0x1000)
			es.vaddr(0x1000)
		}
	})
}
