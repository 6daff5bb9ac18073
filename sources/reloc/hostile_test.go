package reloc

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
	"github.com/djx-bpf/djx-bpf/safety/elfsafe/elfcraft"
)

// bomb is a section of craftLibJVM declaring 120 MiB, a hole in the file.
const bomb = 120 << 20

// craftLibJVM writes a tiny libjvm.so with what AddJVM reads: .dynsym and
// .rela.dyn (memcpy's GOT slot), a .plt stub jumping through it, a G1 copy
// function in .symtab calling the stub, and .note.stapsdt. The section
// named big declares bomb bytes.
func craftLibJVM(t testing.TB, path, big string) {
	t.Helper()
	le := binary.LittleEndian
	var dynsym, symtab, rela, plt, text, note bytes.Buffer
	binary.Write(&dynsym, le, elf.Sym64{})
	binary.Write(&dynsym, le, elf.Sym64{Name: 1, Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC)})
	const slot, pltAddr, fn = 0x3000, 0x1000, 0x1100
	binary.Write(&rela, le, elf.Rela64{Off: slot, Info: elf.R_INFO(1, uint32(elf.R_X86_64_GLOB_DAT))})
	plt.Write([]byte{0xff, 0x25})
	binary.Write(&plt, le, int32(slot-(pltAddr+6))) // jmp *slot(%rip)
	plt.Write(bytes.Repeat([]byte{0x90}, 10))
	text.WriteByte(0xe8)
	binary.Write(&text, le, int32(pltAddr-(fn+5))) // call memcpy@plt
	text.Write(bytes.Repeat([]byte{0x90}, 11))
	name := "_ZN20G1ParScanThreadState4copyEv"
	binary.Write(&symtab, le, elf.Sym64{})
	binary.Write(&symtab, le, elf.Sym64{Name: 1, Info: elf.ST_INFO(elf.STB_LOCAL, elf.STT_FUNC), Shndx: 7, Value: fn, Size: 16})
	binary.Write(&note, le, [3]uint32{8, 0, 3}) // an empty-bodied note
	note.WriteString("stapsdt\x00")
	secs := []elfcraft.Section{
		{Name: ".dynsym", Type: elf.SHT_DYNSYM, Link: 2, Entsize: 24, Data: dynsym.Bytes()},
		{Name: ".dynstr", Type: elf.SHT_STRTAB, Data: []byte("\x00memcpy\x00")},
		{Name: ".rela.dyn", Type: elf.SHT_RELA, Link: 1, Entsize: 24, Data: rela.Bytes()},
		{Name: ".plt", Type: elf.SHT_PROGBITS, Addr: pltAddr, Entsize: 16, Data: plt.Bytes()},
		{Name: ".symtab", Type: elf.SHT_SYMTAB, Link: 6, Entsize: 24, Data: symtab.Bytes()},
		{Name: ".strtab", Type: elf.SHT_STRTAB, Data: []byte("\x00" + name + "\x00")},
		{Name: ".text", Type: elf.SHT_PROGBITS, Addr: fn, Data: text.Bytes()},
		{Name: ".note.stapsdt", Type: elf.SHT_NOTE, Data: note.Bytes()},
	}
	found := big == ""
	for i := range secs {
		if secs[i].Name == big {
			secs[i].Size, found = bomb, true
		}
	}
	if !found {
		t.Fatalf("no section %s", big)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := elfcraft.Write(path, secs); err != nil {
		t.Fatal(err)
	}
}

// TestSectionBombs: every section AddJVM reads is refused when it declares
// 120 MiB of a sparse file, at once and with little allocated; the file
// without a bomb parses.
func TestSectionBombs(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok", "libjvm.so")
	craftLibJVM(t, ok, "")
	f, err := elfsafe.OpenPath(ok)
	if err != nil {
		t.Fatal(err)
	}
	sites, err := gcCopySites(f)
	f.Close()
	if err != nil || len(sites) != 1 || sites[0].Callee != "memcpy" {
		t.Fatalf("the crafted libjvm.so without a bomb: sites %+v, %v; want one memcpy call", sites, err)
	}

	all := func(f *elfsafe.File) error {
		_, err1 := gcCopySites(f)
		_, _, err2 := gcProbes(f)
		_, err3 := gotSlots(f, copyImports)
		symbolAt(f, 0x1100)
		return errors.Join(err1, err2, err3)
	}
	for _, sec := range []string{".dynsym", ".dynstr", ".rela.dyn", ".plt", ".symtab", ".strtab", ".text", ".note.stapsdt"} {
		path := filepath.Join(dir, strings.TrimPrefix(sec, "."), "libjvm.so")
		craftLibJVM(t, path, sec)
		var err error
		n, d := testenv.Allocated(func() {
			var f *elfsafe.File
			if f, err = elfsafe.OpenPath(path); err != nil {
				return
			}
			defer f.Close()
			err = all(f)
		})
		if !errors.Is(err, elfsafe.ErrTooLarge) {
			t.Errorf("%s of 120 MiB: %v, want ErrTooLarge", sec, err)
		}
		if n > 8<<20 || d > 2*time.Second {
			t.Errorf("%s of 120 MiB: %d bytes allocated in %v, want under 8 MiB and 2 s", sec, n, d)
		}
	}
}

// mapLib maps the file at path into this process, as a target maps its
// libjvm.so, until the test ends.
func mapLib(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, 4096, syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
}

// selfLibJVM returns this process's mapping of libjvm.so.
func selfLibJVM(t *testing.T) mapping {
	t.Helper()
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := parseMaps(data)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := findLib(ms, "libjvm.so")
	if !ok {
		t.Fatal("libjvm.so not in /proc/self/maps")
	}
	return m
}

// TestHostileLibJVMPath: a target maps a/<newline>b/libjvm.so, which maps
// shows as `a\012b/libjvm.so`, and plants there, literally, a symlink to a
// secret or a FIFO. Root opens the file mapped, never what was planted:
// the symlink put the secret's first bytes in AddJVM's error and the FIFO
// blocked it for good.
func TestHostileLibJVMPath(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(secret, []byte("root:$y$secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, plant := range []string{"symlink", "fifo"} {
		t.Run(plant, func(t *testing.T) {
			dir := t.TempDir()
			real := filepath.Join(dir, "a\nb", "libjvm.so")
			craftLibJVM(t, real, "")
			mapLib(t, real)
			lit := filepath.Join(dir, `a\012b`)
			os.Mkdir(lit, 0o755)
			switch plant {
			case "symlink":
				os.Symlink(secret, filepath.Join(lit, "libjvm.so"))
			case "fifo":
				if err := unix.Mkfifo(filepath.Join(lit, "libjvm.so"), 0o666); err != nil {
					t.Fatal(err)
				}
			}
			m := selfLibJVM(t)
			if !strings.Contains(m.path, `a\012b`) {
				t.Fatalf("maps path %q, want the kernel's escape", m.path)
			}

			done := make(chan error, 1)
			go func() {
				f, err := openMapped(os.Getpid(), m)
				if err == nil {
					var st unix.Stat_t
					unix.Stat(real, &st)
					if f.Key().Ino != st.Ino {
						err = errors.New("opened another file than the one mapped")
					}
					f.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("openMapped blocked")
			}

			if os.Geteuid() != 0 {
				return
			}
			tr, err := Open(Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			go func() {
				// Fails: the crafted libjvm.so has no USDT probes and
				// this process's GOT slot for memcpy is not bound.
				_, err := tr.AddJVM(os.Getpid(), []Range{{0x1000, 0x2000}})
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("AddJVM of the crafted libjvm.so succeeded")
				}
				if s := err.Error(); strings.Contains(s, "root:") || strings.Contains(s, "114 111 111 116") || strings.Contains(s, "bad magic") {
					t.Errorf("AddJVM read the planted file: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("AddJVM blocked")
			}
		})
	}
}

// TestAddJVMSymtabBomb: AddJVM of a process mapping a libjvm.so whose
// .symtab and .dynsym declare 120 MiB each (a sparse file) ends at once,
// without allocating them.
func TestAddJVMSymtabBomb(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: AddJVM loads BPF programs, which needs root")
	}
	path := filepath.Join(t.TempDir(), "libjvm.so")
	craftLibJVM(t, path, ".dynsym")
	// And .symtab too.
	f, err := elfsafe.OpenPath(path)
	if err != nil {
		t.Fatal(err)
	}
	sym := f.Section(".symtab")
	f.Close()
	if err := patchSectionSize(path, sym, bomb); err != nil {
		t.Fatal(err)
	}
	mapLib(t, path)
	tr, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var info Info
	n, d := testenv.Allocated(func() { info, err = tr.AddJVM(os.Getpid(), []Range{{0x1000, 0x2000}}) })
	t.Logf("AddJVM: %v; %d bytes allocated in %v", err, n, d)
	if !errors.Is(info.SitesErr, elfsafe.ErrTooLarge) || !errors.Is(info.CopyErr, elfsafe.ErrTooLarge) {
		t.Errorf("SitesErr %v, CopyErr %v; want both ErrTooLarge", info.SitesErr, info.CopyErr)
	}
	if n > 16<<20 || d > 3*time.Second {
		t.Errorf("%d bytes allocated in %v, want under 16 MiB and 3 s", n, d)
	}
}

// patchSectionSize sets the sh_size of s in the ELF64 file at path, in
// place: the file stays sparse.
func patchSectionSize(path string, s *elf.Section, size uint64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var h [64]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		return err
	}
	le := binary.LittleEndian
	shoff, shnum := le.Uint64(h[40:]), uint64(le.Uint16(h[60:]))
	for i := range shnum {
		at := int64(shoff + i*64)
		if _, err := f.ReadAt(h[:], at); err != nil {
			return err
		}
		if le.Uint64(h[24:]) == s.Offset && elf.SectionType(le.Uint32(h[4:])) == s.Type {
			le.PutUint64(h[32:], size)
			_, err := f.WriteAt(h[32:40], at+32)
			return err
		}
	}
	return errors.New("section header not found")
}
