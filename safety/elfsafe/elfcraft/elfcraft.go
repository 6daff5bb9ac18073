// Package elfcraft writes small hand-made ELF files for hostile tests:
// sections may declare more bytes than the file holds, the rest of the
// file being a hole, as a target process can write for free.
package elfcraft

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
)

// Section is one section to write. Data is written at its start; Size, if
// larger, is what the header declares, and the bytes past Data are a hole.
type Section struct {
	Name    string
	Type    elf.SectionType
	Flags   elf.SectionFlag
	Addr    uint64
	Link    uint32
	Entsize uint64
	Size    uint64
	Data    []byte
}

const page = 4096

// Write writes a little-endian ELF64 x86-64 shared object with a PT_LOAD
// mapping the file up to its section headers at address 0, and the
// sections given (a null section and .shstrtab are added).
func Write(path string, secs []Section) error {
	var shstr bytes.Buffer
	shstr.WriteByte(0)
	names := make([]uint32, len(secs)+1)
	for i, s := range secs {
		names[i] = uint32(shstr.Len())
		shstr.WriteString(s.Name + "\x00")
	}
	names[len(secs)] = uint32(shstr.Len())
	shstr.WriteString(".shstrtab\x00")
	secs = append(secs, Section{Name: ".shstrtab", Type: elf.SHT_STRTAB, Data: shstr.Bytes()})

	// Layout: headers in the first page, then each section from a page
	// boundary, then the section headers.
	offs := make([]uint64, len(secs))
	off := uint64(page)
	for i, s := range secs {
		offs[i] = off
		size := max(s.Size, uint64(len(s.Data)))
		off = (off + size + page - 1) &^ (page - 1)
	}
	shoff := off

	bo := binary.LittleEndian
	var buf bytes.Buffer
	hdr := elf.Header64{
		Type: uint16(elf.ET_DYN), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Phoff: 64, Shoff: shoff, Ehsize: 64,
		Phentsize: 56, Phnum: 1, Shentsize: 64,
		Shnum: uint16(len(secs) + 1), Shstrndx: uint16(len(secs)),
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	binary.Write(&buf, bo, hdr)
	binary.Write(&buf, bo, elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Filesz: shoff, Memsz: shoff, Align: page})

	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("craft elf: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteAt(buf.Bytes(), 0); err != nil {
		return fmt.Errorf("craft elf: %w", err)
	}
	var shdrs bytes.Buffer
	binary.Write(&shdrs, bo, elf.Section64{})
	for i, s := range secs {
		if _, err := f.WriteAt(s.Data, int64(offs[i])); err != nil {
			return fmt.Errorf("craft elf: %w", err)
		}
		binary.Write(&shdrs, bo, elf.Section64{
			Name: names[i], Type: uint32(s.Type), Flags: uint64(s.Flags), Addr: s.Addr,
			Off: offs[i], Size: max(s.Size, uint64(len(s.Data))), Link: s.Link, Addralign: 1, Entsize: s.Entsize,
		})
	}
	if _, err := f.WriteAt(shdrs.Bytes(), int64(shoff)); err != nil {
		return fmt.Errorf("craft elf: %w", err)
	}
	return nil
}

// SymtabBomb writes an ELF whose .symtab (or .dynsym, for dynamic)
// declares size bytes, one function symbol and a hole for the rest, with a
// small string table.
func SymtabBomb(path string, size uint64, dynamic bool) error {
	typ, name, strName := elf.SHT_SYMTAB, ".symtab", ".strtab"
	if dynamic {
		typ, name, strName = elf.SHT_DYNSYM, ".dynsym", ".dynstr"
	}
	var sym bytes.Buffer
	binary.Write(&sym, binary.LittleEndian, elf.Sym64{})
	binary.Write(&sym, binary.LittleEndian, elf.Sym64{Name: 1, Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC), Shndx: 3, Value: 0x100, Size: 0x10})
	return Write(path, []Section{
		{Name: name, Type: typ, Link: 2, Entsize: elf.Sym64Size, Size: size, Data: sym.Bytes()},
		{Name: strName, Type: elf.SHT_STRTAB, Data: []byte("\x00bomb\x00")},
		{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: 0x100, Data: make([]byte, 0x10)},
	})
}
