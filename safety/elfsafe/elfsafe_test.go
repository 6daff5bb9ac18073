package elfsafe

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
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/safety/elfsafe/elfcraft"
	"github.com/djx-bpf/djx-bpf/safety/safefs"
)

// small writes a valid little ELF with one function symbol.
func small(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := elfcraft.SymtabBomb(path, 0, false); err != nil {
		t.Fatal(err)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestSymtabBomb: a sparse file declaring a 120 MiB .symtab or .dynsym
// (debug/elf allocates it and one Symbol per 24 bytes: 678 MiB) is
// refused at once, with little allocated.
func TestSymtabBomb(t *testing.T) {
	for _, dynamic := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "libjvm.so")
		if err := elfcraft.SymtabBomb(path, 120<<20, dynamic); err != nil {
			t.Fatal(err)
		}
		typ := elf.SHT_SYMTAB
		if dynamic {
			typ = elf.SHT_DYNSYM
		}
		var err error
		n, d := testenv.Allocated(func() {
			var f *File
			if f, err = OpenPath(path); err != nil {
				return
			}
			defer f.Close()
			_, err = f.Symbols(typ)
		})
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s of 120 MiB in a sparse file: %v, want ErrTooLarge", typ, err)
		}
		t.Logf("%s: %v, %d bytes allocated in %v", typ, err, n, d)
		if n > 4<<20 || d > 2*time.Second {
			t.Errorf("%s: %d bytes allocated in %v, want under 4 MiB and 2 s", typ, n, d)
		}
	}
}

// TestSectionCapIsAllocatedBytes: a section is refused past the file's
// allocated bytes even below MaxSection, and read when the bytes are there.
func TestSectionCapIsAllocatedBytes(t *testing.T) {
	dir := t.TempDir()
	sparse, full := filepath.Join(dir, "sparse"), filepath.Join(dir, "full")
	secs := func(data []byte, size uint64) []elfcraft.Section {
		return []elfcraft.Section{{Name: ".note.stapsdt", Type: elf.SHT_NOTE, Size: size, Data: data}}
	}
	if err := elfcraft.Write(sparse, secs(nil, 8<<20)); err != nil {
		t.Fatal(err)
	}
	if err := elfcraft.Write(full, secs(bytes.Repeat([]byte{1}, 8<<20), 0)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		ok   bool
	}{{sparse, false}, {full, true}} {
		f, err := OpenPath(c.path)
		if err != nil {
			t.Fatal(err)
		}
		data, err := f.Data(f.Section(".note.stapsdt"))
		f.Close()
		if c.ok && (err != nil || len(data) != 8<<20) {
			t.Errorf("%s: %d bytes, %v; want 8 MiB", filepath.Base(c.path), len(data), err)
		}
		if !c.ok && !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: %v, want ErrTooLarge", filepath.Base(c.path), err)
		}
	}
}

// TestHeaderBombs: what elf.NewFile reads by itself (section headers, the
// section name table) is capped before it runs.
func TestHeaderBombs(t *testing.T) {
	for _, c := range []struct {
		name  string
		patch func(b []byte)
	}{
		{"section name table of 120 MiB", func(b []byte) {
			shoff := binary.LittleEndian.Uint64(b[40:])
			shstrndx := uint64(binary.LittleEndian.Uint16(b[62:]))
			binary.LittleEndian.PutUint64(b[shoff+shstrndx*64+32:], 120<<20)
		}},
		{"section headers of 4 GiB", func(b []byte) {
			binary.LittleEndian.PutUint16(b[58:], 0xffff) // e_shentsize
			binary.LittleEndian.PutUint16(b[60:], 0xffff) // e_shnum
		}},
		{"program headers of 4 GiB", func(b []byte) {
			binary.LittleEndian.PutUint16(b[54:], 0xffff) // e_phentsize
			binary.LittleEndian.PutUint16(b[56:], 0xffff) // e_phnum
		}},
		{"extended section numbering", func(b []byte) {
			binary.LittleEndian.PutUint16(b[60:], 0)
		}},
	} {
		path := filepath.Join(t.TempDir(), "lib.so")
		small(t, path)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		c.patch(b)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, 200<<20); err != nil {
			t.Fatal(err)
		}
		n, d := testenv.Allocated(func() {
			var f *File
			if f, err = OpenPath(path); err == nil {
				f.Close()
			}
		})
		if err == nil {
			t.Errorf("%s: opened", c.name)
		}
		if n > 4<<20 {
			t.Errorf("%s: %d bytes allocated in %v", c.name, n, d)
		}
	}
}

// TestSectionNameBomb: a thousand sections all named by one 512 KiB name
// (half a MiB on disk) made elf.NewFile copy the name for each: 512 MiB.
func TestSectionNameBomb(t *testing.T) {
	const n, nameLen = 1000, 512 << 10
	le := binary.LittleEndian
	shoff := uint64(64)
	strOff := shoff + (n+2)*64
	b := make([]byte, strOff+nameLen+2)
	copy(b, elf.ELFMAG)
	b[elf.EI_CLASS], b[elf.EI_DATA], b[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	le.PutUint16(b[16:], uint16(elf.ET_DYN))
	le.PutUint16(b[18:], uint16(elf.EM_X86_64))
	le.PutUint32(b[20:], uint32(elf.EV_CURRENT))
	le.PutUint64(b[40:], shoff)
	le.PutUint16(b[52:], 64)
	le.PutUint16(b[58:], 64)
	le.PutUint16(b[60:], n+2)
	le.PutUint16(b[62:], 1)
	for i := uint64(1); i < n+2; i++ {
		h := b[shoff+i*64:]
		le.PutUint32(h, 1)
		le.PutUint32(h[4:], uint32(elf.SHT_PROGBITS))
		if i == 1 {
			le.PutUint32(h[4:], uint32(elf.SHT_STRTAB))
			le.PutUint64(h[24:], strOff)
			le.PutUint64(h[32:], nameLen+2)
		}
	}
	copy(b[strOff+1:], bytes.Repeat([]byte("A"), nameLen))
	path := filepath.Join(t.TempDir(), "lib.so")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	alloc, d := testenv.Allocated(func() {
		var f *File
		if f, err = OpenPath(path); err == nil {
			f.Close()
		}
	})
	t.Logf("%v; %d bytes allocated in %v", err, alloc, d)
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("%v, want ErrTooLarge", err)
	}
	if alloc > 16<<20 {
		t.Errorf("%d bytes allocated in %v", alloc, d)
	}
}

// fakeRoot makes proc/42/root and returns proc and the root.
func fakeRoot(t *testing.T) (proc, root string) {
	proc = t.TempDir()
	root = filepath.Join(proc, "42", "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return proc, root
}

// TestOpenMappedHostile: the path a target names in its maps is opened
// inside its root, never through a symlink, never a FIFO, directory or
// the replacement of a deleted file; "\012" is a newline.
func TestOpenMappedHostile(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(secret, []byte("root:$y$secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	// An ELF outside the root, which a plain open would parse happily.
	outsideELF := filepath.Join(t.TempDir(), "libreal.so")
	small(t, outsideELF)

	t.Run("escaped newline", func(t *testing.T) {
		proc, root := fakeRoot(t)
		real := filepath.Join(root, "opt", "a\nb", "libjvm.so")
		small(t, real)
		// The name maps shows, taken literally, holds a symlink.
		lit := filepath.Join(root, "opt", `a\012b`)
		os.MkdirAll(lit, 0o755)
		os.Symlink(secret, filepath.Join(lit, "libjvm.so"))
		f, err := OpenMapped(proc, 42, 0x1000, 0x2000, `/opt/a\012b/libjvm.so`)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if f.Key().Ino != inode(t, real) {
			t.Errorf("opened inode %d, want %s's %d", f.Key().Ino, real, inode(t, real))
		}
	})

	for _, c := range []struct {
		name, path string
		plant      func(t *testing.T, root string)
		want       error
	}{
		{"symlink to a secret", "/opt/jdk/lib/server/libjvm.so", func(t *testing.T, root string) {
			os.MkdirAll(filepath.Join(root, "opt/jdk/lib/server"), 0o755)
			os.Symlink(secret, filepath.Join(root, "opt/jdk/lib/server/libjvm.so"))
		}, nil},
		{"symlink to an ELF", "/opt/jdk/lib/server/libjvm.so", func(t *testing.T, root string) {
			os.MkdirAll(filepath.Join(root, "opt/jdk/lib/server"), 0o755)
			os.Symlink(outsideELF, filepath.Join(root, "opt/jdk/lib/server/libjvm.so"))
		}, nil},
		{"symlinked directory", "/opt/jdk/lib/server/libjvm.so", func(t *testing.T, root string) {
			os.MkdirAll(filepath.Join(root, "opt/jdk/lib"), 0o755)
			os.Symlink(filepath.Dir(outsideELF), filepath.Join(root, "opt/jdk/lib/server"))
		}, nil},
		{"literal escape holding a symlink", `/opt/a\012b/libjvm.so`, func(t *testing.T, root string) {
			os.MkdirAll(filepath.Join(root, `opt/a\012b`), 0o755)
			os.Symlink(secret, filepath.Join(root, `opt/a\012b/libjvm.so`))
		}, nil},
		{"FIFO", "/opt/libjvm.so", func(t *testing.T, root string) {
			os.MkdirAll(filepath.Join(root, "opt"), 0o755)
			if err := unix.Mkfifo(filepath.Join(root, "opt/libjvm.so"), 0o666); err != nil {
				t.Fatal(err)
			}
		}, safefs.ErrNotRegular},
		{"directory", "/opt/libjvm.so", func(t *testing.T, root string) {
			os.MkdirAll(filepath.Join(root, "opt/libjvm.so"), 0o755)
		}, safefs.ErrNotRegular},
		{"deleted, a file planted in its place", "/opt/libjvm.so (deleted)", func(t *testing.T, root string) {
			small(t, filepath.Join(root, "opt/libjvm.so"))
			small(t, filepath.Join(root, "opt/libjvm.so (deleted)"))
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			proc, root := fakeRoot(t)
			c.plant(t, root)
			done := make(chan error, 1)
			go func() {
				f, err := OpenMapped(proc, 42, 0x1000, 0x2000, c.path)
				if err == nil {
					f.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("opened")
				}
				if c.want != nil && !errors.Is(err, c.want) {
					t.Errorf("%v, want %v", err, c.want)
				}
				if strings.Contains(err.Error(), "root:") || strings.Contains(err.Error(), "114 111 111 116") {
					t.Errorf("the secret's bytes are in the error: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("OpenMapped blocked")
			}
		})
	}
}

// TestOpenMappedMapFiles: through the real /proc, the very file mapped is
// opened, even deleted and with another file at its path, and FDPath
// names that inode.
func TestOpenMappedMapFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: /proc/PID/map_files needs CAP_SYS_ADMIN")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "libjvm.so")
	small(t, path)
	ino := inode(t, path)
	mf, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := syscall.Mmap(int(mf.Fd()), 0, 4096, syscall.PROT_READ, syscall.MAP_PRIVATE)
	mf.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	os.Remove(path)
	small(t, path) // the target's replacement
	start := uint64(uintptrOf(mem))
	f, err := OpenMapped("/proc", os.Getpid(), start, start+4096, path+" (deleted)")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Key().Ino != ino {
		t.Errorf("opened inode %d, want the mapped %d", f.Key().Ino, ino)
	}
	if got := inode(t, f.FDPath()); got != ino {
		t.Errorf("%s is inode %d, want %d", f.FDPath(), got, ino)
	}
}

// FuzzNewFile: whatever the bytes, parsing and reading every section and
// both symbol tables stays within the caps and does not panic.
func FuzzNewFile(f *testing.F) {
	dir := f.TempDir()
	for i, size := range []uint64{0, 0} {
		path := filepath.Join(dir, "seed"+string(rune('0'+i)))
		if err := elfcraft.SymtabBomb(path, size, i == 1); err == nil {
			if data, err := os.ReadFile(path); err == nil {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ef, err := Parse(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		for _, s := range ef.Sections {
			if d, err := ef.Data(s); err == nil && uint64(len(d)) > uint64(len(data)) {
				t.Fatalf("%s: %d bytes from a %d-byte file", s.Name, len(d), len(data))
			}
		}
		for _, typ := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
			if st, err := ef.Symbols(typ); err == nil {
				for i := range st.Len() {
					st.At(i)
				}
			}
		}
	})
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
