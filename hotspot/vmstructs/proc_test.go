package vmstructs

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/safety/elfsafe/elfcraft"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// craftLibJVM writes a small libjvm.so whose .dynsym exports names as data
// objects at 0x3000 + 8*i, and a function that must not count.
func craftLibJVM(t *testing.T, path string, names []string) {
	t.Helper()
	var syms, strs bytes.Buffer
	strs.WriteByte(0)
	binary.Write(&syms, binary.LittleEndian, elf.Sym64{})
	for i, n := range append(slices.Clone(names), "gHotSpotVMStructs_func") {
		typ := elf.STT_OBJECT
		if i == len(names) {
			typ = elf.STT_FUNC
		}
		binary.Write(&syms, binary.LittleEndian, elf.Sym64{Name: uint32(strs.Len()), Info: elf.ST_INFO(elf.STB_GLOBAL, typ),
			Shndx: 3, Value: 0x3000 + 8*uint64(i), Size: 8})
		strs.WriteString(n + "\x00")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	err := elfcraft.Write(path, []elfcraft.Section{
		{Name: ".dynsym", Type: elf.SHT_DYNSYM, Flags: elf.SHF_ALLOC, Addr: 0x1000, Link: 2, Entsize: elf.Sym64Size, Data: syms.Bytes()},
		{Name: ".dynstr", Type: elf.SHT_STRTAB, Flags: elf.SHF_ALLOC, Addr: 0x2000, Data: strs.Bytes()},
		{Name: ".data", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_WRITE, Addr: 0x3000, Data: make([]byte, 0x1000)},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fakeProc makes a /proc tree for pid 4242 whose maps are maps, with
// libjvm.so inside its root at /jdk/lib/server/libjvm.so.
func fakeProc(t *testing.T, maps string, names []string) string {
	t.Helper()
	proc := t.TempDir()
	dir := filepath.Join(proc, "4242")
	craftLibJVM(t, filepath.Join(dir, "root", "jdk", "lib", "server", "libjvm.so"), names)
	if err := os.WriteFile(filepath.Join(dir, "maps"), []byte(maps), 0o644); err != nil {
		t.Fatal(err)
	}
	return proc
}

const hotspotMaps = `55d0c0000000-55d0c0001000 r--p 00000000 08:01 100 /jdk/bin/java
7f1200000000-7f1200001000 rw-p 00000000 00:00 0 
7f1200400000-7f1200402000 r--p 00002000 08:01 42 /jdk/lib/server/libjvm.so
7f1200410000-7f1200414000 r--p 00000000 08:01 42 /jdk/lib/server/libjvm.so
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
`

func TestFindSymbols(t *testing.T) {
	proc := fakeProc(t, hotspotMaps, SymbolNames)
	syms, err := FindSymbols(proc, 4242)
	if err != nil {
		t.Fatal(err)
	}
	// The mapping of file offset 0 sets the base, not the first one listed.
	if syms.Base != 0x7f1200410000 || syms.Lib != "/jdk/lib/server/libjvm.so" {
		t.Errorf("base %#x, lib %q", syms.Base, syms.Lib)
	}
	for i, n := range SymbolNames {
		if got, want := syms.Addrs[n], uint64(0x7f1200413000+8*i); got != want {
			t.Errorf("%s at %#x, want %#x", n, got, want)
		}
	}
	if len(syms.Addrs) != len(SymbolNames) {
		t.Errorf("%d symbols, want %d (the function does not count)", len(syms.Addrs), len(SymbolNames))
	}
}

func TestFindSymbolsNotHotSpot(t *testing.T) {
	cases := []struct {
		name, maps string
		syms       []string
		want       string
	}{
		{"OpenJ9", hotspotMaps + "7f1300000000-7f1300100000 r-xp 00000000 08:01 43 /j9/lib/default/libj9vm29.so\n", SymbolNames,
			"pid 4242 runs OpenJ9, which has no HotSpot vmStructs"},
		{"no JVM", "55d0c0000000-55d0c0001000 r--p 00000000 08:01 100 /usr/bin/cat\n", SymbolNames,
			"pid 4242 maps no libjvm.so: not a JVM, or one still starting"},
		// A libjvm without the tables resolves no symbol: Read says so.
		{"no symbols", hotspotMaps, []string{"JNI_CreateJavaVM"}, "exports no gHotSpotVMStructs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			proc := fakeProc(t, c.maps, c.syms)
			syms, err := FindSymbols(proc, 4242)
			if err == nil {
				_, err = Read(nil, syms)
			}
			if !errors.Is(err, ErrNotHotSpot) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want ErrNotHotSpot with %q", err, c.want)
			}
		})
	}
}

func TestOpenNotJVM(t *testing.T) {
	// This test binary is no JVM; reading its own maps needs no privilege.
	_, err := Open(os.Getpid())
	if !errors.Is(err, ErrNotHotSpot) {
		t.Errorf("Open(self): %v, want ErrNotHotSpot", err)
	}
	_, err = Open(1 << 30)
	if !errors.Is(err, procfs.ErrNoProcess) {
		t.Errorf("Open(no such pid): %v, want ErrNoProcess", err)
	}
}
