package jvmsym

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
)

// A preloaded library's symbols are the ones a later lookup gets from the
// cache, not a second read.
func TestPreloadServesTheCache(t *testing.T) {
	self := "/lib/x86_64-linux-gnu/libc.so.6" // has .dynsym, as any shared library
	if _, err := os.Stat(self); err != nil {
		t.Skipf("no libc at %s: %v", self, err)
	}
	p, err := Preload(self)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elfsafe.OpenPath(self)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	es, err := cachedELFSyms(ef)
	if err != nil {
		t.Fatal(err)
	}
	if es != p.es || len(es.syms) == 0 {
		t.Fatalf("lookup after Preload read its own table (%p, preloaded %p, %d symbols)", es, p.es, len(es.syms))
	}
}

func TestLibJVM(t *testing.T) {
	java, err := exec.LookPath("java")
	if err != nil {
		java = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"
	}
	if _, err := os.Stat(java); err != nil {
		t.Skipf("no java launcher: %v", err)
	}
	lib, err := LibJVM(java)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(lib) != "libjvm.so" {
		t.Errorf("LibJVM(%s) = %s", java, lib)
	}
	dir := t.TempDir()
	if _, err := LibJVM(filepath.Join(dir, "bin", "java")); err == nil {
		t.Error("LibJVM of a missing launcher succeeded")
	}
}
