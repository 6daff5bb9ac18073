package jvmsym

import (
	"bufio"
	"debug/elf"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// BenchmarkLibJVMSymbols: what a profile pays to open a running JVM's
// libjvm.so safely (elfsafe.OpenMapped: map_files, the filesystem check,
// opens and reads in targetmem's executors) and read its symbol tables,
// uncached; and the open and the .dynsym alone, as vmstructs does.
func BenchmarkLibJVMSymbols(b *testing.B) {
	testenv.Root(b)
	jdk := testenv.JDKs(b)[0]
	src, _ := filepath.Abs("../hotspot/vmstructs/testdata/MapIdle.java")
	cmd := exec.Command(jdk.Java(), "-Xmx32m", src, "/etc/hostname")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); stdin.Close(); cmd.Wait() }()
	line := make(chan string, 1)
	go func() { s, _ := bufio.NewReader(stdout).ReadString('\n'); line <- s }()
	select {
	case <-line:
	case <-time.After(60 * time.Second):
		b.Fatal("JVM not ready in 60 s")
	}
	pid := cmd.Process.Pid
	ms, err := procfs.Maps(procfs.Mount, pid)
	if err != nil {
		b.Fatal(err)
	}
	var lib procfs.Mapping
	for _, m := range ms {
		if m.Offset == 0 && strings.HasSuffix(m.Path, "/libjvm.so") {
			lib = m
			break
		}
	}
	if lib.Start == 0 {
		b.Fatal("no libjvm.so mapping")
	}
	b.Run("open+symbols", func(b *testing.B) {
		for b.Loop() {
			ef, err := elfsafe.OpenMapped(procfs.Mount, pid, lib.Start, lib.End, lib.Path)
			if err != nil {
				b.Fatal(err)
			}
			es, err := loadELFSyms(ef)
			ef.Close()
			if err != nil || len(es.syms) < 1000 {
				b.Fatal(err)
			}
		}
	})
	b.Run("open+dynsym", func(b *testing.B) {
		for b.Loop() {
			ef, err := elfsafe.OpenMapped(procfs.Mount, pid, lib.Start, lib.End, lib.Path)
			if err != nil {
				b.Fatal(err)
			}
			tab, err := ef.Symbols(elf.SHT_DYNSYM)
			ef.Close()
			if err != nil || tab.Len() < 100 {
				b.Fatal(err)
			}
		}
	})
}
