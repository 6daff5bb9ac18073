package vmcode

// Field is where a HotSpot field is in its struct.
type Field struct {
	Offset uint64
	Width  int // bytes: 1, 2, 4 or 8; 0 when this JVM has no such field
}

func exported(f field) Field { return Field{Offset: f.off, Width: f.width} }

// Offsets are the layout facts a stack unwinder that reads the code cache
// itself (in BPF) needs, resolved from this JVM's vmStructs and checked
// as the symbolizer checks them.
type Offsets struct {
	// HeapBlockSize is sizeof(HeapBlock): a blob starts this far into
	// the block its segment map walk finds; HeapBlockUsed says whether
	// the block is allocated.
	HeapBlockSize uint64
	HeapBlockUsed Field
	// CodeBlob's fields. CodeBegin and CodeEnd are pointers on JDK 17
	// and int offsets from the blob's start from JDK 23 on
	// (CodeIsOffset); FrameSize is in words.
	BlobSize, BlobFrameSize, BlobFrameComplete, BlobName Field
	CodeBegin, CodeEnd                                   Field
	CodeIsOffset                                         bool
	// BlobKind is CodeBlob::_kind (JDK 25), KindNMethod's value in it
	// KindNMethodValue; without it, nmethods are told by their name.
	BlobKind         Field
	KindNMethodValue int64
	// NMethod's Method*, compile id (which tells a reused blob from the
	// one a sample saw) and tier.
	NMethodMethod, NMethodCompileID, NMethodCompLevel Field
	// Method's ConstMethod; a bcp minus (ConstMethod + ConstMethodSize)
	// is a bci.
	MethodConstMethod Field
	ConstMethodSize   uint64
	// Unsigned5X is 1 where HotSpot's compressed streams exclude the
	// NUL byte (JDK 20 on), 0 before.
	Unsigned5X byte
}

// Offsets returns this JVM's layout facts for an unwinder.
func (s *Symbolizer) Offsets() Offsets {
	l := s.l
	return Offsets{
		HeapBlockSize:     l.heapBlockSize,
		HeapBlockUsed:     exported(l.hbUsed),
		BlobSize:          exported(l.blobSizeF),
		BlobFrameSize:     exported(l.blobFrameSize),
		BlobFrameComplete: exported(l.blobFrameComplete),
		BlobName:          exported(l.blobName),
		CodeBegin:         exported(l.codeBegin),
		CodeEnd:           exported(l.codeEnd),
		CodeIsOffset:      l.codeIsOffset,
		BlobKind:          exported(l.blobKind),
		KindNMethodValue:  l.kindNmethod,
		NMethodMethod:     exported(l.nmMethod),
		NMethodCompileID:  exported(l.nmCompileID),
		NMethodCompLevel:  exported(l.nmCompLevel),
		MethodConstMethod: exported(l.methodConst),
		ConstMethodSize:   l.cmSize,
		Unsigned5X:        l.unsigned5X,
	}
}
