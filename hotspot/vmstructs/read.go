package vmstructs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// column is one member of a table's entries: the symbol holding its offset
// in an entry, and its width (8 for pointers and uint64_t, 4 for int32_t).
type column struct {
	sym  string
	size uint64
}

// layout describes one exported table.
type layout struct {
	array  string // the symbol holding the address of the first entry
	stride string // the symbol holding the size of an entry
	cols   []column
	end    int // the column whose null ends the table
}

// The four tables, their members in vmStructs.hpp's order. The struct
// table ends at a null field name (the serviceability agent's rule,
// HotSpotTypeDataBase.readVMStructs), the others at a null name.
var (
	structsLayout = layout{
		array:  "gHotSpotVMStructs",
		stride: "gHotSpotVMStructEntryArrayStride",
		cols: []column{
			{"gHotSpotVMStructEntryTypeNameOffset", 8},
			{"gHotSpotVMStructEntryFieldNameOffset", 8},
			{"gHotSpotVMStructEntryTypeStringOffset", 8},
			{"gHotSpotVMStructEntryIsStaticOffset", 4},
			{"gHotSpotVMStructEntryOffsetOffset", 8},
			{"gHotSpotVMStructEntryAddressOffset", 8},
		},
		end: 1,
	}
	typesLayout = layout{
		array:  "gHotSpotVMTypes",
		stride: "gHotSpotVMTypeEntryArrayStride",
		cols: []column{
			{"gHotSpotVMTypeEntryTypeNameOffset", 8},
			{"gHotSpotVMTypeEntrySuperclassNameOffset", 8},
			{"gHotSpotVMTypeEntryIsOopTypeOffset", 4},
			{"gHotSpotVMTypeEntryIsIntegerTypeOffset", 4},
			{"gHotSpotVMTypeEntryIsUnsignedOffset", 4},
			{"gHotSpotVMTypeEntrySizeOffset", 8},
		},
	}
	intsLayout = layout{
		array:  "gHotSpotVMIntConstants",
		stride: "gHotSpotVMIntConstantEntryArrayStride",
		cols: []column{
			{"gHotSpotVMIntConstantEntryNameOffset", 8},
			{"gHotSpotVMIntConstantEntryValueOffset", 4},
		},
	}
	longsLayout = layout{
		array:  "gHotSpotVMLongConstants",
		stride: "gHotSpotVMLongConstantEntryArrayStride",
		cols: []column{
			{"gHotSpotVMLongConstantEntryNameOffset", 8},
			{"gHotSpotVMLongConstantEntryValueOffset", 8},
		},
	}
	layouts = []*layout{&structsLayout, &typesLayout, &intsLayout, &longsLayout}
)

// SymbolNames are the libjvm symbols Read needs, all exported in .dynsym.
var SymbolNames = func() []string {
	var names []string
	for _, l := range layouts {
		names = append(names, l.array, l.stride)
		for _, c := range l.cols {
			names = append(names, c.sym)
		}
	}
	return names
}()

// row is one entry's members, in its layout's column order.
type row [6]uint64

const pageSize = 4096

// reader reads the target's memory within the caps.
type reader struct {
	mem    Mem
	stats  Stats
	budget int // bytes still allowed to be asked for

	pages    map[uint64][]byte // page address → its readable prefix (empty: unreadable)
	strs     map[uint64]string
	strBytes int
	scratch  []byte // str's buffer

	// gone is the Mem's error once the process has exited: whatever
	// failed after it is no fault of the tables.
	gone error

	// used, when set, is told every byte range the tables' decoding used;
	// the fixture recorder keeps only those bytes of what was read.
	used func(addr, n uint64)
}

func (r *reader) use(addr, n uint64) {
	if r.used != nil {
		r.used(addr, n)
	}
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

// read reads into p at addr, counting what it asks for against the budget.
// It returns the bytes read and, when short, why.
func (r *reader) read(p []byte, addr uint64) (int, error) {
	if len(p) > r.budget {
		return 0, malformed("tables need more than %d bytes read in all", MaxRead)
	}
	if addr > math.MaxInt64-uint64(len(p)) {
		return 0, malformed("read of %d bytes at %#x is out of the address space", len(p), addr)
	}
	r.budget -= len(p)
	r.stats.Reads++
	r.stats.Bytes += len(p)
	n, err := r.mem.ReadAt(p, int64(addr))
	n = max(0, min(n, len(p))) // a Mem's count is not trusted either
	if n < len(p) && err == nil {
		err = errors.New("short read")
	}
	if n == len(p) {
		err = nil
	}
	if errors.Is(err, procfs.ErrNoProcess) && r.gone == nil {
		r.gone = err
	}
	return n, err
}

// words reads the 8-byte values at the addresses of names, one read per
// cluster of nearby symbols (they sit together in libjvm's .data).
func (r *reader) words(syms Symbols, names []string) (map[string]uint64, error) {
	addrs := make([]uint64, 0, len(names))
	for _, n := range names {
		addrs = append(addrs, syms.Addrs[n])
	}
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	vals := make(map[uint64]uint64, len(addrs))
	for i := 0; i < len(addrs); {
		j := i + 1
		for j < len(addrs) && addrs[j]+8-addrs[i] <= pageSize {
			j++
		}
		buf := make([]byte, addrs[j-1]+8-addrs[i])
		if n, err := r.read(buf, addrs[i]); n < len(buf) {
			return nil, fmt.Errorf("read libjvm's vmStructs symbols at %#x: %w", addrs[i]+uint64(n), err)
		}
		for _, a := range addrs[i:j] {
			vals[a] = binary.LittleEndian.Uint64(buf[a-addrs[i]:])
			r.use(a, 8)
		}
		i = j
	}
	out := make(map[string]uint64, len(names))
	for _, n := range names {
		out[n] = vals[syms.Addrs[n]]
	}
	return out, nil
}

// entries reads the entries of table l, whose symbols' values are in vals,
// up to its end. Entries are read in chunks that double in size, so a real
// table takes one read and a forged one stops at the caps.
func (r *reader) entries(l *layout, vals map[string]uint64) ([]row, error) {
	start, stride := vals[l.array], vals[l.stride]
	if start == 0 {
		return nil, malformed("%s is null: a JVM still starting (try again) or a forged table", l.array)
	}
	if stride == 0 || stride > MaxStride {
		return nil, malformed("%s is %d, not in 1..%d", l.stride, stride, MaxStride)
	}
	offs := make([]uint64, len(l.cols))
	for i, c := range l.cols {
		offs[i] = vals[c.sym]
		if stride < c.size || offs[i] > stride-c.size {
			return nil, malformed("%s is %d, past the end of a %d-byte entry", c.sym, offs[i], stride)
		}
	}
	addr, chunk := start, uint64(1024)
	rows := make([]row, 0, chunk)
	for {
		n := min(chunk, uint64(MaxEntries+1-len(rows)), uint64(r.budget)/stride)
		if n == 0 {
			return nil, malformed("%s: no end within %d bytes read in all", l.array, MaxRead)
		}
		buf := make([]byte, n*stride)
		got, err := r.read(buf, addr)
		for i := range uint64(got) / stride {
			e := buf[i*stride : (i+1)*stride]
			r.use(addr+i*stride, stride)
			var rw row
			for c, off := range offs {
				if l.cols[c].size == 8 {
					rw[c] = binary.LittleEndian.Uint64(e[off:])
				} else {
					rw[c] = uint64(binary.LittleEndian.Uint32(e[off:]))
				}
			}
			if rw[l.end] == 0 {
				return rows, nil
			}
			if len(rows) == MaxEntries {
				return nil, malformed("%s has more than %d entries", l.array, MaxEntries)
			}
			rows = append(rows, rw)
		}
		if got < len(buf) {
			return nil, malformed("%s: entry %d at %#x is unreadable before the table's end: %w",
				l.array, len(rows), addr+uint64(got)/stride*stride, err)
		}
		if addr > math.MaxUint64-uint64(len(buf)) {
			return nil, malformed("%s runs off the address space", l.array)
		}
		addr += uint64(len(buf))
		chunk *= 2
	}
}

// prefetch reads the pages holding the strings at addrs, nearby pages in
// one read: libjvm's names sit in a few runs of .rodata.
func (r *reader) prefetch(addrs []uint64) {
	var pages []uint64
	for _, a := range addrs {
		if a != 0 {
			pages = append(pages, a&^(pageSize-1))
		}
	}
	slices.Sort(pages)
	pages = slices.Compact(pages)
	// Reading up to maxGap unneeded pages costs less than another call.
	const maxGap = 4
	for i := 0; i < len(pages); {
		j := i + 1
		for j < len(pages) && pages[j]-pages[j-1] <= maxGap*pageSize {
			j++
		}
		first, last := pages[i], pages[j-1]
		i = j
		if _, ok := r.pages[first]; ok {
			continue
		}
		size := last + pageSize - first
		if size > uint64(r.budget) {
			return // str reads page by page and says what failed
		}
		buf := make([]byte, size)
		n, _ := r.read(buf, first)
		for p := uint64(0); p < uint64(n); p += pageSize {
			r.pages[first+p] = buf[p:min(p+pageSize, uint64(n))]
		}
		// Pages past a failure are left for str to try one by one.
	}
}

// page returns the readable prefix of the page at p, reading it if needed.
func (r *reader) page(p uint64) ([]byte, error) {
	if data, ok := r.pages[p]; ok {
		return data, nil
	}
	buf := make([]byte, pageSize)
	n, err := r.read(buf, p)
	if errors.Is(err, ErrMalformed) {
		return nil, err
	}
	r.pages[p] = buf[:n]
	return buf[:n], nil
}

// str reads the NUL-terminated string at addr; "" for a null pointer.
func (r *reader) str(addr uint64) (string, error) {
	if addr == 0 {
		return "", nil
	}
	if s, ok := r.strs[addr]; ok {
		return s, nil
	}
	b := r.scratch[:0]
	defer func() { r.scratch = b[:0] }()
	for a := addr; ; {
		p := a &^ (pageSize - 1)
		data, err := r.page(p)
		if err != nil {
			return "", err
		}
		off := a - p
		if off >= uint64(len(data)) {
			return "", malformed("string at %#x: memory at %#x is unreadable before its NUL", addr, a)
		}
		chunk := data[off:]
		chunk = chunk[:min(len(chunk), MaxString-len(b))]
		if i := bytes.IndexByte(chunk, 0); i >= 0 {
			b = append(b, chunk[:i]...)
			break
		}
		b = append(b, chunk...)
		if len(b) >= MaxString {
			return "", malformed("string at %#x: no NUL within %d bytes", addr, MaxString)
		}
		a = p + pageSize
	}
	r.use(addr, uint64(len(b))+1)
	if r.strBytes += len(b); r.strBytes > maxStringBytes {
		return "", malformed("names of more than %d bytes in all", maxStringBytes)
	}
	s := string(b)
	r.strs[addr] = s
	return s, nil
}

// Read reads the tables of the JVM whose memory is mem and whose libjvm
// symbols are syms. A symbol missing from syms is an ErrNotHotSpot; a
// garbled table an ErrMalformed.
func Read(mem Mem, syms Symbols) (*Table, error) { return read(mem, syms, nil) }

// read is Read telling used what it decoded.
func read(mem Mem, syms Symbols, used func(addr, n uint64)) (*Table, error) {
	var missing []string
	for _, n := range SymbolNames {
		if syms.Addrs[n] == 0 {
			missing = append(missing, n)
		}
	}
	lib := syms.Lib
	if lib == "" {
		lib = "libjvm"
	}
	if len(missing) == len(SymbolNames) {
		return nil, fmt.Errorf("%w: %s exports no gHotSpotVMStructs: not a HotSpot JVM, or one built without the vmStructs feature (a minimal VM)", ErrNotHotSpot, lib)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s lacks the exported symbols %v", ErrNotHotSpot, lib, missing)
	}
	r := &reader{mem: mem, budget: MaxRead, pages: make(map[uint64][]byte), strs: make(map[uint64]string), used: used}
	t, err := r.table(syms)
	if err != nil && r.gone != nil {
		return nil, r.gone
	}
	return t, err
}

// table reads the four tables.
func (r *reader) table(syms Symbols) (*Table, error) {
	vals, err := r.words(syms, SymbolNames)
	if err != nil {
		return nil, err
	}
	var tables [4][]row
	for i, l := range layouts {
		if tables[i], err = r.entries(l, vals); err != nil {
			return nil, err
		}
	}
	// Every name is in libjvm's .rodata: read their pages in a few calls
	// before reading the strings one by one from them.
	addrs := make([]uint64, 0, 3*len(tables[0])+2*len(tables[1])+len(tables[2])+len(tables[3]))
	for i, l := range layouts {
		for _, rw := range tables[i] {
			for c, col := range l.cols {
				if col.size == 8 && isName(l, c) {
					addrs = append(addrs, rw[c])
				}
			}
		}
	}
	// Sized for the names, most of which are distinct: growing the map
	// was a third of Read's time.
	r.strs = make(map[uint64]string, min(len(addrs), 1<<16))
	r.prefetch(addrs)

	t := &Table{
		Base:     syms.Base,
		fieldIdx: make(map[fieldKey]int, len(tables[0])),
		typeIdx:  make(map[string]int, len(tables[1])),
		ints:     make(map[string]int32, len(tables[2])),
		longs:    make(map[string]uint64, len(tables[3])),
	}
	if err := t.fill(r, tables); err != nil {
		return nil, err
	}
	t.Release = t.release(r)
	t.Stats = r.stats
	return t, nil
}

// isName says whether column c of l points to a string.
func isName(l *layout, c int) bool {
	switch l {
	case &structsLayout:
		return c <= 2
	case &typesLayout:
		return c <= 1
	}
	return c == 0
}

// fill decodes the rows' strings and indexes the entries.
func (t *Table) fill(r *reader, tables [4][]row) error {
	var err error
	// str reads the string at a for entry i of table, keeping the first
	// failure in err.
	str := func(table string, i int, a uint64) string {
		if err != nil {
			return ""
		}
		s, e := r.str(a)
		if e != nil {
			err = fmt.Errorf("%s entry %d: %w", table, i, e)
		}
		return s
	}
	for i, rw := range tables[0] {
		if rw[0] == 0 {
			return malformed("gHotSpotVMStructs entry %d has a field name but no type name", i)
		}
		f := Field{Type: str("gHotSpotVMStructs", i, rw[0]), Name: str("gHotSpotVMStructs", i, rw[1]),
			TypeString: str("gHotSpotVMStructs", i, rw[2]), Static: uint32(rw[3]) != 0}
		if err != nil {
			return err
		}
		if f.Static {
			f.Address = rw[5]
		} else {
			f.Offset = rw[4]
		}
		k := fieldKey{f.Type, f.Name}
		if _, dup := t.fieldIdx[k]; dup {
			r.stats.Duplicates++
			continue
		}
		t.fieldIdx[k] = len(t.fields)
		t.fields = append(t.fields, f)
	}
	for i, rw := range tables[1] {
		ty := Type{Name: str("gHotSpotVMTypes", i, rw[0]), Superclass: str("gHotSpotVMTypes", i, rw[1]),
			Oop: uint32(rw[2]) != 0, Integer: uint32(rw[3]) != 0, Unsigned: uint32(rw[4]) != 0, Size: rw[5]}
		if err != nil {
			return err
		}
		if _, dup := t.typeIdx[ty.Name]; dup {
			r.stats.Duplicates++
			continue
		}
		t.typeIdx[ty.Name] = len(t.types)
		t.types = append(t.types, ty)
	}
	for i, rw := range tables[2] {
		name := str("gHotSpotVMIntConstants", i, rw[0])
		if err != nil {
			return err
		}
		if _, dup := t.ints[name]; dup {
			r.stats.Duplicates++
			continue
		}
		t.ints[name] = int32(uint32(rw[1]))
	}
	for i, rw := range tables[3] {
		name := str("gHotSpotVMLongConstants", i, rw[0])
		if err != nil {
			return err
		}
		if _, dup := t.longs[name]; dup {
			r.stats.Duplicates++
			continue
		}
		t.longs[name] = rw[1]
	}
	return nil
}

// release reads the string Abstract_VM_Version::_s_vm_release points to,
// statically initialized to the build's VM_RELEASE; "" when unreadable,
// since the tables are whole without it.
func (t *Table) release(r *reader) string {
	f, ok := t.Field("Abstract_VM_Version", "_s_vm_release")
	if !ok || !f.Static {
		return ""
	}
	var b [8]byte
	if n, _ := r.read(b[:], f.Address); n < len(b) {
		return ""
	}
	r.use(f.Address, 8)
	s, err := r.str(binary.LittleEndian.Uint64(b[:]))
	if err != nil {
		return ""
	}
	return s
}
