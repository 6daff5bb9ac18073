package vmcode

import (
	"errors"
	"fmt"

	"github.com/djx-bpf/djx-bpf/hotspot/vmlayout"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
)

// maxStruct caps a HotSpot type's size or a field's offset as vmStructs
// gives them: the largest read here (nmethod) is 352 bytes on JDK 17.
const maxStruct = 4096

// field is a non-static field: its offset and width in bytes (1, 2, 4 or 8).
type field struct {
	off   uint64
	width int
}

// ok says whether the field was found.
func (f field) ok() bool { return f.width != 0 }

// layout is what the symbolizer needs of one JVM's vmStructs, checked for
// sanity once so that decoding never trusts a raw table entry.
type layout struct {
	heapsAddr uint64 // CodeCache::_heaps, a static: its address in the target

	gaLen, gaData                    field // GrowableArrayBase::_len, GrowableArray<T>::_data
	heapMemory, heapSegmap, heapLog2 field // CodeHeap
	vsLowBoundary, vsHighBoundary    field // VirtualSpace
	vsLow, vsHigh                    field
	heapBlockSize                    uint64
	hbLength, hbUsed                 field // HeapBlock::Header

	blobSize                                           uint64 // sizeof(CodeBlob)
	blobName, blobSizeF, blobHeaderSize, blobFrameSize field
	blobFrameComplete                                  field
	codeBegin, codeEnd                                 field // pointers (JDK 17) or offsets (JDK 23+)
	codeIsOffset                                       bool
	blobKind                                           field // JDK 25: CodeBlob::_kind
	kindNmethod                                        int64
	mutableData, mutableDataSize, relocationSize       field // JDK 25

	nmSize                                  uint64 // sizeof(nmethod)
	nmMethod, nmCompileID, nmCompLevel      field
	nmEntryBCI, nmState                     field
	nmMetadataOffset, nmScopesDataBegin     field // JDK 17
	nmScopesPcsOffset, nmDependenciesOffset field // JDK 17 (pcs: also 25)
	nmImmutableData, nmImmutableDataSize    field // JDK 23+
	nmScopesDataOffset                      field // JDK 23+

	pcDescSize              uint64
	pcOffset, pcScopeDecode field

	methodConst                          field // Method::_constMethod
	cmSize                               uint64
	cmConstants, cmNameIndex, cmSigIndex field
	cmCodeSize, cmFlags, cmWords         field
	cmHasLines                           uint64
	cpSize                               uint64
	cpHolder, cpLength, cpSourceIndex    field

	// vm is what the heap walk reads by too: Klass's name, Symbol.
	vm *vmlayout.Layout

	// unsigned5X is the excluded byte count of HotSpot's UNSIGNED5
	// streams: 1 from JDK 20 on (no NUL bytes in a stream), 0 before.
	unsigned5X byte
}

// ErrUnsupported means the JVM's vmStructs lack what symbolizing needs.
var ErrUnsupported = errors.New("unsupported HotSpot code layout")

// layoutOf resolves and checks every entry the symbolizer uses.
func layoutOf(t *vmstructs.Table) (*layout, error) {
	l := &layout{}
	b := builder{t: t}
	l.heapsAddr = b.static("CodeCache::_heaps")
	l.gaLen = b.field("GrowableArrayBase::_len", "GenericGrowableArray::_len")
	l.gaData = b.field("GrowableArray<int>::_data")
	l.heapMemory = b.field("CodeHeap::_memory")
	l.heapSegmap = b.field("CodeHeap::_segmap")
	l.heapLog2 = b.field("CodeHeap::_log2_segment_size")
	l.vsLowBoundary = b.field("VirtualSpace::_low_boundary")
	l.vsHighBoundary = b.field("VirtualSpace::_high_boundary")
	l.vsLow = b.field("VirtualSpace::_low")
	l.vsHigh = b.field("VirtualSpace::_high")
	l.heapBlockSize = b.size("HeapBlock")
	l.hbLength = b.field("HeapBlock::Header::_length")
	l.hbUsed = b.field("HeapBlock::Header::_used")
	l.blobFields(&b)
	l.nmethodFields(&b)
	l.methodFields(&b)
	if b.err != nil {
		return nil, b.err
	}
	if err := l.check(); err != nil {
		return nil, err
	}
	vm, err := vmlayout.New(t)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	l.vm = vm
	l.unsigned5X = unsigned5X(t)
	return l, nil
}

func (l *layout) blobFields(b *builder) {
	l.blobSize = b.size("CodeBlob")
	l.blobName = b.field("CodeBlob::_name")
	l.blobSizeF = b.field("CodeBlob::_size")
	l.blobHeaderSize = b.field("CodeBlob::_header_size")
	l.blobFrameSize = b.field("CodeBlob::_frame_size")
	l.blobFrameComplete = b.field("CodeBlob::_frame_complete_offset")
	if f, ok := b.opt("CodeBlob::_code_begin"); ok {
		l.codeBegin = f
		l.codeEnd = b.field("CodeBlob::_code_end")
	} else {
		// JDK 23+: offsets from the blob's start.
		l.codeIsOffset = true
		l.codeBegin = b.field("CodeBlob::_code_offset")
		l.codeEnd = b.field("CodeBlob::_data_offset")
	}
	if f, ok := b.opt("CodeBlob::_kind"); ok {
		l.blobKind = f
		l.kindNmethod = int64(b.intConst("CodeBlobKind::Nmethod"))
	}
	if f, ok := b.opt("CodeBlob::_mutable_data"); ok {
		l.mutableData = f
		l.mutableDataSize = b.field("CodeBlob::_mutable_data_size")
		l.relocationSize = b.field("CodeBlob::_relocation_size")
	}
}

func (l *layout) nmethodFields(b *builder) {
	l.nmSize = b.size("nmethod")
	l.nmMethod = b.field("nmethod::_method", "CompiledMethod::_method")
	l.nmCompileID = b.field("nmethod::_compile_id")
	l.nmCompLevel = b.field("nmethod::_comp_level")
	l.nmEntryBCI = b.field("nmethod::_entry_bci")
	l.nmState = b.field("nmethod::_state")
	l.nmScopesPcsOffset = b.field("nmethod::_scopes_pcs_offset")
	if f, ok := b.opt("nmethod::_immutable_data"); ok {
		l.nmImmutableData = f
		l.nmImmutableDataSize = b.field("nmethod::_immutable_data_size")
		l.nmScopesDataOffset = b.field("nmethod::_scopes_data_offset")
		if !l.mutableData.ok() {
			// JDK 23 and 24 keep the metadata in the blob at an
			// offset vmStructs does not export in every build.
			b.fail("CodeBlob::_mutable_data (JDK 23 and 24 are not supported)")
		}
	} else {
		l.nmMetadataOffset = b.field("nmethod::_metadata_offset")
		l.nmScopesDataBegin = b.field("CompiledMethod::_scopes_data_begin", "nmethod::_scopes_data_begin")
		l.nmDependenciesOffset = b.field("nmethod::_dependencies_offset")
	}
	l.pcDescSize = b.size("PcDesc")
	l.pcOffset = b.field("PcDesc::_pc_offset")
	l.pcScopeDecode = b.field("PcDesc::_scope_decode_offset")
}

func (l *layout) methodFields(b *builder) {
	l.methodConst = b.field("Method::_constMethod")
	l.cmSize = b.size("ConstMethod")
	l.cmConstants = b.field("ConstMethod::_constants")
	l.cmNameIndex = b.field("ConstMethod::_name_index")
	l.cmSigIndex = b.field("ConstMethod::_signature_index")
	l.cmCodeSize = b.field("ConstMethod::_code_size")
	l.cmFlags = b.field("ConstMethod::_flags._flags", "ConstMethod::_flags")
	l.cmWords = b.field("ConstMethod::_constMethod_size")
	l.cmHasLines = uint64(b.intConst("ConstMethodFlags::_misc_has_linenumber_table", "ConstMethod::_has_linenumber_table"))
	l.cpSize = b.size("ConstantPool")
	l.cpHolder = b.field("ConstantPool::_pool_holder")
	l.cpLength = b.field("ConstantPool::_length")
	l.cpSourceIndex = b.field("ConstantPool::_source_file_name_index")
}

// check bounds each field by its type's size, so that decoding a header
// read with that size never indexes past it.
func (l *layout) check() error {
	type in struct {
		size uint64
		fs   []field
	}
	for _, c := range []in{
		{l.blobSize, []field{l.blobName, l.blobSizeF, l.blobHeaderSize, l.blobFrameSize, l.blobFrameComplete, l.codeBegin, l.codeEnd, l.blobKind, l.mutableData, l.mutableDataSize, l.relocationSize}},
		{l.nmSize, []field{l.nmMethod, l.nmCompileID, l.nmCompLevel, l.nmEntryBCI, l.nmState, l.nmMetadataOffset, l.nmScopesDataBegin, l.nmScopesPcsOffset, l.nmDependenciesOffset, l.nmImmutableData, l.nmImmutableDataSize, l.nmScopesDataOffset}},
		{l.pcDescSize, []field{l.pcOffset, l.pcScopeDecode}},
		{l.cmSize, []field{l.cmConstants, l.cmNameIndex, l.cmSigIndex, l.cmCodeSize, l.cmFlags, l.cmWords}},
		{l.cpSize, []field{l.cpHolder, l.cpLength, l.cpSourceIndex}},
		{l.heapBlockSize, []field{l.hbLength, l.hbUsed}},
	} {
		if c.size == 0 || c.size > maxStruct {
			return fmt.Errorf("%w: type size %d out of range", ErrUnsupported, c.size)
		}
		for _, f := range c.fs {
			if f.ok() && f.off+uint64(f.width) > c.size {
				return fmt.Errorf("%w: field at %d of width %d past its type's %d bytes", ErrUnsupported, f.off, f.width, c.size)
			}
		}
	}
	if l.nmSize < l.blobSize {
		return fmt.Errorf("%w: nmethod (%d bytes) smaller than CodeBlob (%d)", ErrUnsupported, l.nmSize, l.blobSize)
	}
	if l.pcDescSize < 8 || l.pcDescSize > 64 {
		return fmt.Errorf("%w: PcDesc size %d", ErrUnsupported, l.pcDescSize)
	}
	if l.methodConst.off > maxStruct {
		return fmt.Errorf("%w: Method offsets out of range", ErrUnsupported)
	}
	return nil
}

// unsigned5X is 1 from JDK 20 on, when HotSpot's CompressedStream became
// UNSIGNED5 with the NUL byte excluded. The tables have no entry for it:
// the release says, else ConstMethodFlags (JDK 21 on) does.
func unsigned5X(t *vmstructs.Table) byte {
	if m := t.Major(); m >= 20 {
		return 1
	} else if m > 0 {
		return 0
	}
	if _, ok := t.IntConst("ConstMethodFlags::_misc_has_linenumber_table"); ok {
		return 1
	}
	return 0
}

// builder collects lookups, keeping the names of what is missing.
type builder struct {
	t       *vmstructs.Table
	err     error
	missing []string
}

func (b *builder) fail(what string) {
	b.missing = append(b.missing, what)
	b.err = fmt.Errorf("%w: vmStructs lack %v", ErrUnsupported, b.missing)
}

// opt looks up a non-static field by its alternative names.
func (b *builder) opt(names ...string) (field, bool) {
	f, ok := b.t.FirstField(names...)
	if !ok || f.Static || f.Offset > maxStruct {
		return field{}, false
	}
	w := b.width(f.TypeString)
	if w == 0 {
		return field{}, false
	}
	return field{off: f.Offset, width: w}, true
}

func (b *builder) field(names ...string) field {
	f, ok := b.opt(names...)
	if !ok {
		b.fail(names[0])
	}
	return f
}

func (b *builder) static(name string) uint64 {
	f, ok := b.t.FirstField(name)
	if !ok || !f.Static || f.Address == 0 {
		b.fail(name)
		return 0
	}
	return f.Address
}

func (b *builder) size(name string) uint64 {
	s, ok := b.t.Size(name)
	if !ok || s == 0 || s > maxStruct {
		b.fail("type " + name)
		return 0
	}
	return s
}

func (b *builder) intConst(names ...string) int32 {
	for _, n := range names {
		if v, ok := b.t.IntConst(n); ok {
			return v
		}
	}
	b.fail(names[0])
	return 0
}

// width is the byte width of a field of C++ type ts: pointers are 8, the
// rest as gHotSpotVMTypes sizes them. 0 for an opaque entry whose size
// no table gives.
func (b *builder) width(ts string) int {
	if ts == "" {
		return 0
	}
	if ts[len(ts)-1] == '*' || ts == "address" {
		return 8
	}
	for _, pre := range []string{"volatile ", "const "} {
		if len(ts) > len(pre) && ts[:len(pre)] == pre {
			ts = ts[len(pre):]
		}
	}
	if w, ok := builtinWidth[ts]; ok {
		return w
	}
	if ty, ok := b.t.Type(ts); ok {
		switch ty.Size {
		case 1, 2, 4, 8:
			return int(ty.Size)
		}
	}
	if ts == "VirtualSpace" {
		// CodeHeap's embedded _memory and _segmap: only their offsets
		// are used, added to VirtualSpace's fields'.
		return 1
	}
	return 0
}

// builtinWidth sizes C++ types that gHotSpotVMTypes may not list.
var builtinWidth = map[string]int{"signed char": 1, "jint": 4, "jlong": 8, "uintptr_t": 8, "intptr_t": 8}
