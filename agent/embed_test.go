package agent

import (
	"bytes"
	"debug/elf"
	"testing"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

// TestLibraryHasNoTLS: the agent library must not have thread-local
// storage. A new copy is dlopen'ed per profile; with a TLS segment each
// one bumps glibc's TLS generation, every thread's next TLS access then
// takes __tls_get_addr's allocating slow path, and the stack signal handler
// (GetEnv reads libjvm's Thread::current()) can interrupt and corrupt it:
// two JVMs died with a null Thread::current() before __thread went away.
func TestLibraryHasNoTLS(t *testing.T) {
	f, err := elf.NewFile(bytes.NewReader(library(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_TLS {
			t.Fatalf("libdjxagent.so has a PT_TLS segment (%d bytes): no __thread variables in agent/src", p.Memsz)
		}
	}
	syms, _ := f.DynamicSymbols()
	for _, s := range syms {
		if s.Name == "__tls_get_addr" {
			t.Fatal("libdjxagent.so calls __tls_get_addr: no __thread variables in agent/src")
		}
	}
}

// TestLibraryIsNodelete: HotSpot 16+ dlcloses an agent library whose
// Agent_OnAttach fails (JDK-8252657); the stack handler or a callback
// still pointing into it then jumps into unmapped memory (a harness exited
// 139). -z nodelete keeps it mapped.
func TestLibraryIsNodelete(t *testing.T) {
	f, err := elf.NewFile(bytes.NewReader(library(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := f.DynValue(elf.DT_FLAGS_1)
	if err != nil || len(flags) == 0 || flags[0]&uint64(elf.DF_1_NODELETE) == 0 {
		t.Fatalf("libdjxagent.so DT_FLAGS_1 = %v (%v): link it with -z nodelete", flags, err)
	}
}

// library returns the built agent; without it these tests cannot run, and
// `make` (which builds it first) never gets here.
func library(t *testing.T) []byte {
	t.Helper()
	b, err := Library()
	if err != nil {
		testenv.Skip(t, "%v", err)
	}
	return b
}
