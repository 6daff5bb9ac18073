package vmcode

import (
	"fmt"
)

// Caps on one nmethod's debug information.
const (
	maxPcDescs  = 8 << 20 // bytes of PcDescs
	maxScopes   = 16 << 20
	maxMetadata = 1 << 20
	maxPCFrames = 512 // decoded pcs cached per nmethod
	// maxBlobFrameBytes bounds what the frames cached for one nmethod
	// hold, names included.
	maxBlobFrameBytes = 1 << 20
	maxBlobCache      = 2048
)

// debugInfo is an nmethod's PcDescs, scopes data and metadata, as read.
type debugInfo struct {
	blob     Blob
	pcs      pcDescs
	scopes   []byte
	metadata []byte
	frames   map[int32][]Frame // by pc offset from CodeBegin
	// framesBytes is what frames holds (Frame.bytes); bytes, what the
	// blob cache counts for the whole.
	framesBytes int
	bytes       int
}

// section is a range of the target's memory.
type section struct{ start, end uint64 }

func (s section) size() uint64 { return s.end - s.start }

// sections finds an nmethod's metadata, PcDescs and scopes data.
func (s *Symbolizer) sections(hb *header) (meta, pcs, scopes section, err error) {
	l, b, buf := s.l, &hb.blob, hb.buf
	if l.nmImmutableData.ok() {
		// JDK 25: PcDescs and scopes in the C heap's immutable data,
		// metadata after the relocations in the mutable data.
		imm := get(buf, l.nmImmutableData)
		immSize := get(buf, l.nmImmutableDataSize)
		pcsOff, scOff := get(buf, l.nmScopesPcsOffset), get(buf, l.nmScopesDataOffset)
		mut := get(buf, l.mutableData)
		mutSize, relSize := get(buf, l.mutableDataSize), get(buf, l.relocationSize)
		if pcsOff > scOff || scOff > immSize || immSize > maxScopes+maxPcDescs || relSize > mutSize || mutSize > maxStruct+maxMetadata {
			return meta, pcs, scopes, malformed("immutable data offsets %d, %d of %d; mutable %d of %d", pcsOff, scOff, immSize, relSize, mutSize)
		}
		meta = section{mut + relSize, mut + mutSize}
		pcs = section{imm + pcsOff, imm + scOff}
		scopes = section{imm + scOff, imm + immSize}
		if !plausible(imm, int(immSize)) || !plausible(mut, int(mutSize)) {
			return meta, pcs, scopes, malformed("immutable data %#x or mutable data %#x", imm, mut)
		}
		return meta, pcs, scopes, nil
	}
	// JDK 17: all inside the blob, after the code.
	metaOff, pcsOff, depsOff := get(buf, l.nmMetadataOffset), get(buf, l.nmScopesPcsOffset), get(buf, l.nmDependenciesOffset)
	scBegin := get(buf, l.nmScopesDataBegin)
	meta = section{b.Start + metaOff, scBegin}
	scopes = section{scBegin, b.Start + pcsOff}
	pcs = section{b.Start + pcsOff, b.Start + depsOff}
	if meta.start > meta.end || meta.end > scopes.end || pcs.start > pcs.end || pcs.end > b.End || meta.start < b.CodeBegin {
		return meta, pcs, scopes, malformed("metadata %#x, scopes %#x-%#x, pcs %#x-%#x outside the blob's %#x-%#x", meta.start, scopes.start, scopes.end, pcs.start, pcs.end, b.Start, b.End)
	}
	return meta, pcs, scopes, nil
}

// readDebugInfo reads an nmethod's debug information.
func (s *Symbolizer) readDebugInfo(r *reader, hb *header) (*debugInfo, error) {
	meta, pcs, scopes, err := s.sections(hb)
	if err != nil {
		return nil, err
	}
	d := &debugInfo{blob: hb.blob, frames: make(map[int32][]Frame)}
	if d.metadata, err = r.bytesAt(meta.start, meta.size(), maxMetadata, "nmethod metadata"); err != nil {
		return nil, err
	}
	if d.scopes, err = r.bytesAt(scopes.start, scopes.size(), maxScopes, "nmethod scopes data"); err != nil {
		return nil, err
	}
	pb, err := r.bytesAt(pcs.start, pcs.size(), maxPcDescs, "nmethod PcDescs")
	if err != nil {
		return nil, err
	}
	l := s.l
	d.pcs = pcDescs{buf: pb, stride: int(l.pcDescSize), off: int(l.pcOffset.off), scope: int(l.pcScopeDecode.off)}
	d.bytes = len(d.metadata) + len(d.scopes) + len(pb) + 256
	return d, nil
}

// metaAt is nmethod::metadata_at: index 0 is null, i is the (i-1)th word.
func (d *debugInfo) metaAt(i uint32) (uint64, error) {
	if i == 0 || uint64(i)*8 > uint64(len(d.metadata)) {
		return 0, malformed("metadata index %d of %d", i, len(d.metadata)/8)
	}
	return get(d.metadata[(i-1)*8:], field{0, 8}), nil
}

// rawFrames is the inlining chain at pc in the nmethod, innermost first,
// as (Method*, bci) pairs.
func (s *Symbolizer) rawFrames(d *debugInfo, pc uint64) ([][2]int64, error) {
	b := d.blob
	root := [][2]int64{{int64(b.Method), -1}}
	if pc < b.CodeBegin || pc >= b.CodeEnd || d.pcs.len() == 0 {
		// The header, constants, or a native wrapper without scopes:
		// the compiled method itself.
		return root, nil
	}
	scope, ok := d.pcs.find(int32(pc - b.CodeBegin))
	if !ok || scope == 0 {
		return root, nil
	}
	chain, err := decodeScopes(d.scopes, scope, s.l.unsigned5X)
	if err != nil {
		return nil, err
	}
	out := make([][2]int64, 0, len(chain))
	for _, f := range chain {
		m, err := d.metaAt(f.metaIndex)
		if err != nil {
			return nil, err
		}
		if !plausible(m, 0) || m%8 != 0 {
			return nil, malformed("scope's Method* %#x", m)
		}
		out = append(out, [2]int64{int64(m), int64(f.bci)})
	}
	if len(out) == 0 {
		return root, nil
	}
	if uint64(out[len(out)-1][0]) != b.Method {
		return nil, fmt.Errorf("%w: outermost scope's method %#x is not the nmethod's %#x", ErrMalformed, out[len(out)-1][0], b.Method)
	}
	return out, nil
}

// PCs returns the pcs of the nmethod holding pc that have debug
// information (its PcDescs inside its code), in order: the return
// addresses and safepoints a Frames query resolves exactly.
func (s *Symbolizer) PCs(pc uint64) ([]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []uint64
	err := s.query(func(r *reader) error {
		hb, err := s.readBlob(r, pc)
		if err != nil {
			return err
		}
		if hb.blob.Kind != KindNMethod {
			return fmt.Errorf("%w: %#x is in %s %q, not an nmethod", ErrNotCode, pc, hb.blob.Kind, hb.blob.Name)
		}
		d, err := s.readDebugInfo(r, &hb)
		if err != nil {
			return err
		}
		b := hb.blob
		for i := range d.pcs.len() {
			off, _ := d.pcs.at(i)
			if off >= 0 && uint64(off) < b.CodeEnd-b.CodeBegin {
				out = append(out, b.CodeBegin+uint64(off))
			}
		}
		return nil
	})
	return out, err
}
