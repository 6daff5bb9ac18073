package heapwalk

import (
	"cmp"
	"slices"
)

// Off-heap owners: the direct buffers and FFM native segments whose memory
// lies outside the heap.
// A java.nio.DirectByteBuffer (and DirectByteBufferR, both
// MappedByteBuffers) that allocated or mapped its memory has att == null;
// its slices and duplicates point att at it, and are not owners: their
// memory is charged to the buffer they came from, which the walk reaches
// through att.
// A jdk.internal.foreign.NativeMemorySegmentImpl (JDK 22+) owns
// [min, min+length). Its slices, and the segments made over a direct
// buffer, hold no reference to what they lie in, so after the walk an owner
// whose range lies within another's is a view, not an owner.

// OffHeapOwner is an object that owns memory outside the heap.
type OffHeapOwner struct {
	Addr, Size uint64 // the memory: [Addr, Addr+Size)
	Klass      uint64
	Class      string
	Chain      ChainID // the object's own holder chain
	// Mapped says it maps a file: a MappedByteBuffer whose fd is set, or a
	// MappedMemorySegmentImpl.
	Mapped bool
}

// OffHeap is what a walk found outside the heap.
type OffHeap struct {
	Owners []OffHeapOwner
	// Views counts direct buffers that are slices or duplicates of another,
	// and owners whose range lies within another owner's.
	Views int64
	// Invalid counts direct buffers and segments whose range was not
	// valid: empty, wrapping, in the heap or in page zero.
	Invalid int64
	Capped  int64 // owners past Config.MaxOwners, not kept
}

// FieldOffset locates an instance field of a class by name, from outside
// the walk (the agent's class descriptions): ok false when not known.
type FieldOffset func(klass uint64, name string) (off uint32, ok bool)

const (
	defaultMaxOwners = 1 << 20
	// minOwnerAddr: a heap buffer's "address" is an offset in its array,
	// and no mapping starts in the first 64 KiB (vm.mmap_min_addr).
	minOwnerAddr = 1 << 16
	maxOwnerAddr = 1 << 57 // above user space on x86-64 and arm64
)

// bufState says what the walk found of a class as an off-heap owner.
const (
	bufUnknown uint8 = iota
	bufNo
	bufYes
)

// The classes whose instances own memory outside the heap.
const (
	mappedByteBuffer    = "java.nio.MappedByteBuffer"
	nativeSegment       = "jdk.internal.foreign.NativeMemorySegmentImpl"
	mappedNativeSegment = "jdk.internal.foreign.MappedMemorySegmentImpl"
)

// bufFields are the offsets of an owner class's fields: a direct buffer's
// address and (int) capacity, or a native segment's min and (long) length.
type bufFields struct {
	address, size uint32
	long          bool  // size is a long (a segment's length)
	att, fd       int64 // -1: the class has none
	mapped        bool  // every instance maps a file (a mapped segment)
	end           uint64
}

// bufferFields says whether k's instances are off-heap owners, and where
// their fields are: classes below java.nio.MappedByteBuffer, and classes
// that are or are below jdk.internal.foreign.NativeMemorySegmentImpl.
func (w *walker) bufferFields(k *klass) *bufFields {
	if k.bufState != bufUnknown {
		return k.buf
	}
	k.bufState = bufNo
	var buffer, segment, mapped bool
	s := k
	for d := 0; d < maxSuperDepth && s != nil && !buffer && !segment; d++ {
		if d > 0 {
			if s.super == 0 {
				break
			}
			s = w.klassAt(s.super)
			if s == nil {
				break
			}
			buffer = s.name == mappedByteBuffer
		}
		mapped = mapped || s.name == mappedNativeSegment
		segment = s.name == nativeSegment
	}
	if !buffer && !segment {
		return nil
	}
	get := w.cfg.FieldOffset
	addrName, sizeName, sizeBytes := "address", "capacity", uint64(4)
	if segment {
		addrName, sizeName, sizeBytes = "min", "length", 8
	}
	ad, ok1 := get(k.addr, addrName)
	sz, ok2 := get(k.addr, sizeName)
	if !ok1 || !ok2 || uint64(ad)+8 > k.size || uint64(sz)+sizeBytes > k.size {
		return nil
	}
	bf := &bufFields{address: ad, size: sz, long: segment, att: -1, fd: -1, mapped: mapped}
	bf.end = max(uint64(ad)+8, uint64(sz)+sizeBytes)
	if buffer {
		for _, f := range []struct {
			name string
			to   *int64
		}{{"att", &bf.att}, {"fd", &bf.fd}} {
			if off, ok := get(k.addr, f.name); ok && uint64(off)+w.l.OopSize <= k.size && k.hasOop(off) {
				*f.to = int64(off)
				bf.end = max(bf.end, uint64(off)+w.l.OopSize)
			}
		}
	}
	k.buf, k.bufState = bf, bufYes
	return bf
}

// offHeap notes the direct buffer or native segment at a, of class k,
// whose first bytes are view, as an owner of the memory it points at.
func (w *walker) offHeap(a uint64, k *klass, view []byte, chain uint32) {
	bf := w.bufferFields(k)
	if bf == nil {
		return
	}
	o := &w.off
	b := view
	if uint64(len(b)) < bf.end {
		if cap(o.buf) < int(bf.end) {
			o.buf = make([]byte, bf.end)
		}
		b = o.buf[:bf.end]
		if !w.r.readAt(b, a) {
			return
		}
	}
	if bf.att >= 0 && w.slot(b[bf.att:]) != 0 {
		o.res.Views++
		return
	}
	addr := le64(b[bf.address:])
	var size uint64
	if bf.long {
		size = le64(b[bf.size:])
	} else {
		size = uint64(int64(int32(le32(b[bf.size:]))))
	}
	end := addr + size
	if int64(size) <= 0 || addr < minOwnerAddr || end < addr || end > maxOwnerAddr || w.l.overlapsHeap(addr, end) {
		o.res.Invalid++
		return
	}
	if len(o.res.Owners) >= w.maxOwners() {
		o.res.Capped++
		return
	}
	o.res.Owners = append(o.res.Owners, OffHeapOwner{Addr: addr, Size: size, Klass: k.addr, Class: k.name,
		Chain: ChainID(chain), Mapped: bf.mapped || bf.fd >= 0 && w.slot(b[bf.fd:]) != 0})
}

// dropViews removes the owners whose range lies within another owner's
// (a segment's slice, a segment over a direct buffer), counting them as
// views; of owners with equal ranges the first found stays. The others
// keep the order they were found in.
func (oh *OffHeap) dropViews() {
	n := len(oh.Owners)
	if n < 2 {
		return
	}
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	// By start, the widest first, then as found: an owner lies within
	// another exactly when an earlier one in this order ends at or past
	// its end.
	slices.SortFunc(order, func(i, j int32) int {
		a, b := &oh.Owners[i], &oh.Owners[j]
		if c := cmp.Compare(a.Addr, b.Addr); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Addr+b.Size, a.Addr+a.Size); c != 0 {
			return c
		}
		return cmp.Compare(i, j)
	})
	view := make([]bool, n)
	var reach uint64
	for x, i := range order {
		o := &oh.Owners[i]
		if x > 0 && o.Addr+o.Size <= reach {
			view[i] = true
			oh.Views++
		}
		reach = max(reach, o.Addr+o.Size)
	}
	out := oh.Owners[:0]
	for i, o := range oh.Owners {
		if !view[i] {
			out = append(out, o)
		}
	}
	clear(oh.Owners[len(out):])
	oh.Owners = out
}

func (w *walker) maxOwners() int {
	if w.cfg.MaxOwners > 0 {
		return w.cfg.MaxOwners
	}
	return defaultMaxOwners
}

// offHeapState is a walk's off-heap owners so far.
type offHeapState struct {
	res OffHeap
	buf []byte
}

// overlapsHeap says [start, end) meets one of the heap's ranges.
func (l *Layout) overlapsHeap(start, end uint64) bool {
	for _, h := range l.Heap {
		if start < h.End && h.Start < end {
			return true
		}
	}
	return false
}
