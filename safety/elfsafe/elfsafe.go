// Package elfsafe opens an ELF file that a profiled process names (a
// library in its maps) and reads its sections without letting that process
// steer root's opens or make root allocate what it declares. The file is
// opened through /proc/PID/map_files or safefs (no symlinks, no FIFO or
// device, regular files only) and parsed from that open file only. Every
// section read is capped at MaxSection and at the bytes the file really
// has on disk (st_blocks), so a sparse file cannot declare a huge table.
// Symbol tables are read in place: no value per symbol is allocated.
package elfsafe

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
	"github.com/djx-bpf/djx-bpf/safety/safefs"
)

// MaxSection caps every section read: the largest a real JVM library needs
// is libjvm.so's .text, 12-20 MiB.
const MaxSection = 64 << 20

// ErrTooLarge means a section, or the section headers, exceed their cap;
// it is also a safefs.ErrTooLarge.
var ErrTooLarge = fmt.Errorf("elf section over its size cap: %w", safefs.ErrTooLarge)

// Key identifies a file's contents for caches: a replaced file gets a new
// inode, one rewritten in place a new size or mtime.
type Key struct {
	Dev, Ino    uint64
	Size, Mtime int64
}

// File is an ELF file opened safely. Sections and Progs are the parsed
// headers; read sections only through Data and Symbols (or ReadAt after
// Check), never through (*elf.Section).Data, which allocates whatever the
// file declares.
type File struct {
	elf.FileHeader
	Sections []*elf.Section
	Progs    []*elf.Prog

	ef    *elf.File
	file  *targetmem.File // nil for an in-memory file
	owned bool            // Close closes file
	limit uint64          // per-section cap: MaxSection and the allocated bytes
	key   Key
	// proc and pid name the process whose file it is (OpenMapped), whose
	// files a read that did not answer stops (targetmem.MarkFilesHung).
	proc string
	pid  int
}

// MapsPath undoes /proc/PID/maps' escaping of a path ("\012" for a
// newline) and says whether the kernel marked the file deleted.
func MapsPath(p string) (path string, deleted bool) {
	p, deleted = strings.CutSuffix(p, " (deleted)")
	return strings.ReplaceAll(p, `\012`, "\n"), deleted
}

// OpenMapped opens the file that process pid maps at [start, end), path
// being its maps name, with procfs mounted at proc. /proc/PID/map_files
// reaches the very file mapped (even deleted, or in another mount
// namespace); without it (no CAP_SYS_ADMIN, a fake proc in tests) the path
// is opened inside the process's root through safefs, unless deleted. A
// mapping of something else than a regular file is refused either way,
// and so is a file on a filesystem whose open or read may never return
// (procfs.CheckMapped: FUSE, network filesystems).
func OpenMapped(proc string, pid int, start, end uint64, path string) (ef *File, err error) {
	if err := targetmem.FilesHung(proc, pid); err != nil {
		return nil, fmt.Errorf("open mapped %q: %w", path, err)
	}
	if err := procfs.CheckMapped(proc, pid, start); err != nil {
		return nil, fmt.Errorf("open mapped: %w", err)
	}
	defer func() {
		if errors.Is(err, targetmem.ErrHung) {
			targetmem.MarkFilesHung(proc, pid, err)
		}
		if ef != nil {
			ef.proc, ef.pid = proc, pid
		}
	}()
	pidDir := filepath.Join(proc, strconv.Itoa(pid))
	link := filepath.Join(pidDir, "map_files", strconv.FormatUint(start, 16)+"-"+strconv.FormatUint(end, 16))
	f, mapErr := openMapFile(link)
	if mapErr != nil {
		name, deleted := MapsPath(path)
		if deleted || errors.Is(mapErr, safefs.ErrNotRegular) {
			return nil, fmt.Errorf("open mapped %q: %w", path, mapErr)
		}
		var err error
		if f, err = safefs.Open(filepath.Join(pidDir, "root"), name); err != nil {
			return nil, fmt.Errorf("open mapped %q: %w", path, errors.Join(mapErr, err))
		}
	}
	return own(f)
}

// openMapFile opens a map_files link: O_PATH first (following the magic
// link, which is the kernel's, to the mapped file), then for reading only
// if it is a regular file.
func openMapFile(link string) (*targetmem.File, error) {
	fd, err := unix.Open(link, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", link, err)
	}
	defer unix.Close(fd)
	return safefs.ReopenRegular(fd, link)
}

// OpenPath opens an ELF file at a path root chose itself (a JDK's
// libjvm.so in launch mode): symlinks are followed, but the open never
// blocks, only a regular file is read, and its sections are capped.
func OpenPath(path string) (*File, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	f, err := safefs.ReopenRegular(fd, path)
	if err != nil {
		return nil, err
	}
	return own(f)
}

func own(f *targetmem.File) (*File, error) {
	ef, err := NewFile(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	ef.owned = true
	return ef, nil
}

// NewFile parses the regular file f, which stays the caller's to close.
// Its reads run in executors: a library that safefs let through may
// still stall (see safefs).
func NewFile(f *targetmem.File) (*File, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s: %w", f.Name(), safefs.ErrNotRegular)
	}
	// A hole reads as zeros but costs the file's owner nothing.
	limit := min(uint64(MaxSection), uint64(st.Blocks)*512)
	ef, err := newFile(f, st.Size, limit)
	if err != nil {
		return nil, fmt.Errorf("parse elf %s: %w", f.Name(), err)
	}
	ef.file = f
	ef.key = Key{Dev: st.Dev, Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano()}
	return ef, nil
}

// Parse parses an ELF file held in memory, size bytes in r, for tests and
// fuzzing: its bytes are all real, so sections are capped at its size.
func Parse(r io.ReaderAt, size int64) (*File, error) {
	return newFile(r, size, min(uint64(MaxSection), uint64(size)))
}

// newFile parses the ELF file of size bytes in r, capping each section
// read at limit.
func newFile(r io.ReaderAt, size int64, limit uint64) (*File, error) {
	sr := io.NewSectionReader(r, 0, size)
	if err := checkHeaders(sr, uint64(size), limit); err != nil {
		return nil, err
	}
	ef, err := elf.NewFile(sr)
	if err != nil {
		return nil, err
	}
	return &File{FileHeader: ef.FileHeader, Sections: ef.Sections, Progs: ef.Progs, ef: ef, limit: limit}, nil
}

// maxNames caps the section name table, and the section names elf.NewFile
// copies out of it (one string per section, even when all point at one
// long name); a real library's are a few hundred bytes.
const maxNames = 1 << 20

// checkHeaders bounds what elf.NewFile reads and allocates on its own: the
// program and section header tables, the section name table and the
// names. A file debug/elf would refuse anyway passes, for elf.NewFile to
// say why.
func checkHeaders(r io.ReaderAt, size, limit uint64) error {
	l, ok := readLayout(r)
	if !ok {
		return nil
	}
	var h [64]byte
	if n, _ := r.ReadAt(h[:], 0); n < 52 || (l.is64 && n < 64) {
		return nil
	}
	shoff := l.word(h[:], 40, 32)
	phentsize, phnum := l.half(h[:], 54, 42), l.half(h[:], 56, 44)
	shentsize, shnum, shstrndx := l.half(h[:], 58, 46), l.half(h[:], 60, 48), l.half(h[:], 62, 50)
	phdrSize, shdrSize := uint64(32), uint64(40)
	if l.is64 {
		phdrSize, shdrSize = 56, 64
	}
	// The standard entry sizes bound both tables to a few MiB.
	if phnum > 0 && phentsize != phdrSize {
		return fmt.Errorf("program header size %d, not %d", phentsize, phdrSize)
	}
	if phnum*phentsize > limit {
		return fmt.Errorf("program headers of %d bytes, over the cap of %d: %w", phnum*phentsize, limit, ErrTooLarge)
	}
	if shoff != 0 && shnum == 0 {
		// The count is then in section 0's sh_size, unbounded by the
		// header's 16 bits; no library needs that many sections.
		return errors.New("extended section numbering is not supported")
	}
	if shnum*shentsize > limit {
		return fmt.Errorf("section headers of %d bytes, over the cap of %d: %w", shnum*shentsize, limit, ErrTooLarge)
	}
	if shnum == 0 || shstrndx == 0 || shstrndx >= shnum || shoff > size {
		return nil
	}
	if shentsize != shdrSize {
		return fmt.Errorf("section header size %d, not %d", shentsize, shdrSize)
	}
	shdrs := make([]byte, shnum*shentsize)
	if _, err := r.ReadAt(shdrs, int64(shoff)); err != nil {
		return nil
	}
	return checkNames(r, l, shdrs, shentsize, shstrndx, limit)
}

// layout is an ELF file's class and byte order, which place and size its
// header fields.
type layout struct {
	bo   binary.ByteOrder
	is64 bool
}

// readLayout reads r's identification; false for what is no ELF file
// debug/elf reads.
func readLayout(r io.ReaderAt) (layout, bool) {
	var ident [elf.EI_NIDENT]byte
	if _, err := r.ReadAt(ident[:], 0); err != nil || string(ident[:4]) != elf.ELFMAG {
		return layout{}, false
	}
	var l layout
	switch elf.Data(ident[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		l.bo = binary.LittleEndian
	case elf.ELFDATA2MSB:
		l.bo = binary.BigEndian
	default:
		return layout{}, false
	}
	l.is64 = elf.Class(ident[elf.EI_CLASS]) == elf.ELFCLASS64
	if !l.is64 && elf.Class(ident[elf.EI_CLASS]) != elf.ELFCLASS32 {
		return layout{}, false
	}
	return l, true
}

// word reads a field that is 8 bytes at off64 in ELF64, 4 at off32 in
// ELF32.
func (l layout) word(b []byte, off64, off32 int) uint64 {
	if l.is64 {
		return l.bo.Uint64(b[off64:])
	}
	return uint64(l.bo.Uint32(b[off32:]))
}

// half reads a 2-byte field, at off64 in ELF64 and off32 in ELF32.
func (l layout) half(b []byte, off64, off32 int) uint64 {
	if l.is64 {
		return uint64(l.bo.Uint16(b[off64:]))
	}
	return uint64(l.bo.Uint16(b[off32:]))
}

// checkNames bounds the section name table that section shstrndx of the
// headers shdrs names, and the names elf.NewFile copies out of it.
func checkNames(r io.ReaderAt, l layout, shdrs []byte, shentsize, shstrndx, limit uint64) error {
	sh := shdrs[shstrndx*shentsize:]
	if l.word(sh, 8, 8)&uint64(elf.SHF_COMPRESSED) != 0 {
		// Its uncompressed size would be the compressed stream's to say.
		return errors.New("compressed section name table")
	}
	strOff, strSize := l.word(sh, 24, 16), l.word(sh, 32, 20)
	if strSize > min(limit, maxNames) {
		return fmt.Errorf("section name table of %d bytes, over the cap of %d: %w", strSize, min(limit, maxNames), ErrTooLarge)
	}
	strs := make([]byte, strSize)
	if _, err := r.ReadAt(strs, int64(strOff)); err != nil {
		return nil
	}
	budget := maxNames
	for i := range uint64(len(shdrs)) / shentsize {
		name := uint64(l.bo.Uint32(shdrs[i*shentsize:]))
		if name >= uint64(len(strs)) {
			continue
		}
		rest := strs[name:]
		n := bytes.IndexByte(rest[:min(len(rest), budget+1)], 0)
		if n < 0 && len(rest) <= budget {
			continue // no NUL: debug/elf gives no name
		}
		if n < 0 {
			return fmt.Errorf("section names of more than %d bytes: %w", maxNames, ErrTooLarge)
		}
		budget -= n
	}
	return nil
}

// Close closes the file if it was opened here.
func (f *File) Close() error {
	if f.owned && f.file != nil {
		return f.file.Close()
	}
	return nil
}

// Key identifies the file's contents, from the open file's fstat.
func (f *File) Key() Key { return f.key }

// FDPath names the open file for the kernel: /proc/self/fd/N. Attaching a
// uprobe there places it on this very inode, not on whatever a path names
// by then; the file must stay open until the attach returns. It is ""
// for a file parsed from memory.
func (f *File) FDPath() string {
	if f.file == nil {
		return ""
	}
	return "/proc/self/fd/" + strconv.FormatUint(uint64(f.file.Fd()), 10)
}

// Section returns the section named name, or nil.
func (f *File) Section(name string) *elf.Section { return f.ef.Section(name) }

// Check says whether s may be read whole: its size, in memory and in the
// file, within the file's cap.
func (f *File) Check(s *elf.Section) error { return f.checkMax(s, MaxSection) }

func (f *File) checkMax(s *elf.Section, limit uint64) error {
	limit = min(limit, f.limit)
	if s.Size > limit || s.FileSize > limit {
		return fmt.Errorf("section %s declares %d bytes, over its cap of %d: %w", s.Name, max(s.Size, s.FileSize), limit, ErrTooLarge)
	}
	return nil
}

// Data reads section s whole, if within the cap.
func (f *File) Data(s *elf.Section) ([]byte, error) { return f.DataMax(s, MaxSection) }

// DataMax is Data with a cap of its own for s, below MaxSection: for
// sections that are small in any real file (.plt, notes) and are decoded
// byte by byte.
func (f *File) DataMax(s *elf.Section, limit uint64) ([]byte, error) {
	if err := f.checkMax(s, limit); err != nil {
		return nil, err
	}
	data, err := s.Data()
	if err != nil {
		if errors.Is(err, targetmem.ErrHung) && f.pid > 0 {
			targetmem.MarkFilesHung(f.proc, f.pid, err)
		}
		return nil, fmt.Errorf("read %s: %w", s.Name, err)
	}
	return data, nil
}

// Symbol is one entry of a symbol table. Name points into the string
// table: copy it to keep it.
type Symbol struct {
	Name        []byte
	Info, Other byte
	Section     elf.SectionIndex
	Value, Size uint64
}

// Symbols is a symbol table read whole with its string table; entries are
// decoded on demand.
type Symbols struct {
	data, strs []byte
	bo         binary.ByteOrder
	entsize    int
}

// Symbols reads the first table of type typ (elf.SHT_SYMTAB for .symtab,
// elf.SHT_DYNSYM for .dynsym) and its string table, both capped. Without
// one the error wraps elf.ErrNoSymbols.
func (f *File) Symbols(typ elf.SectionType) (*Symbols, error) {
	var sec *elf.Section
	for _, s := range f.Sections {
		if s.Type == typ {
			sec = s
			break
		}
	}
	if sec == nil {
		return nil, fmt.Errorf("%s: %w", typ, elf.ErrNoSymbols)
	}
	t := &Symbols{bo: f.ByteOrder, entsize: elf.Sym64Size}
	if f.Class == elf.ELFCLASS32 {
		t.entsize = elf.Sym32Size
	}
	if sec.Link == 0 || int(sec.Link) >= len(f.Sections) {
		return nil, fmt.Errorf("%s: bad string table link %d", sec.Name, sec.Link)
	}
	var err error
	if t.data, err = f.Data(sec); err != nil {
		return nil, err
	}
	if t.strs, err = f.Data(f.Sections[sec.Link]); err != nil {
		return nil, err
	}
	return t, nil
}

// Len is the number of entries, the null symbol at index 0 included.
func (t *Symbols) Len() int { return len(t.data) / t.entsize }

// At decodes entry i, 0 <= i < Len().
func (t *Symbols) At(i int) Symbol {
	e := t.data[i*t.entsize : (i+1)*t.entsize]
	var s Symbol
	var name uint32
	if t.entsize == elf.Sym64Size {
		name = t.bo.Uint32(e)
		s.Info, s.Other = e[4], e[5]
		s.Section = elf.SectionIndex(t.bo.Uint16(e[6:]))
		s.Value, s.Size = t.bo.Uint64(e[8:]), t.bo.Uint64(e[16:])
	} else {
		name = t.bo.Uint32(e)
		s.Value, s.Size = uint64(t.bo.Uint32(e[4:])), uint64(t.bo.Uint32(e[8:]))
		s.Info, s.Other = e[12], e[13]
		s.Section = elf.SectionIndex(t.bo.Uint16(e[14:]))
	}
	if int64(name) < int64(len(t.strs)) {
		rest := t.strs[name:]
		if end := bytes.IndexByte(rest, 0); end >= 0 {
			s.Name = rest[:end:end]
		}
	}
	return s
}
