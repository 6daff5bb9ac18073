package heapwalk

// Off-heap owners: the direct buffers whose memory lies outside the heap.
// A java.nio.DirectByteBuffer (and DirectByteBufferR, both
// MappedByteBuffers) that allocated or mapped its memory has att == null;
// its slices and duplicates point att at it, and are not owners: their
// memory is charged to the buffer they came from, which the walk reaches
// through att.

// OffHeapOwner is an object that owns memory outside the heap.
type OffHeapOwner struct {
	Addr, Size uint64 // the memory: [Addr, Addr+Size)
	Klass      uint64
	Class      string
	Chain      ChainID // the object's own holder chain
	// Mapped says it is a MappedByteBuffer of a file (its fd is set).
	Mapped bool
}

// OffHeap is what a walk found outside the heap.
type OffHeap struct {
	Owners []OffHeapOwner
	Views  int64 // direct buffers that are slices or duplicates of another
	// Invalid counts direct buffers whose range was not valid: empty,
	// wrapping, in the heap or in page zero.
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

// bufState says what the walk found of a class as a direct buffer.
const (
	bufUnknown uint8 = iota
	bufNo
	bufYes
)

// bufFields are the offsets of a direct buffer class's fields.
type bufFields struct {
	address, capacity uint32
	att, fd           int64 // -1: the class has none
	end               uint64
}

// bufferFields says whether k's instances are direct buffers, and where
// their fields are: classes below java.nio.MappedByteBuffer.
func (w *walker) bufferFields(k *klass) *bufFields {
	if k.bufState != bufUnknown {
		return k.buf
	}
	k.bufState = bufNo
	mapped := false
	s := k
	for d := 0; d < maxSuperDepth && s != nil && s.super != 0; d++ {
		if s = w.klassAt(s.super); s != nil && s.name == "java.nio.MappedByteBuffer" {
			mapped = true
			break
		}
	}
	if !mapped {
		return nil
	}
	get := w.cfg.FieldOffset
	ad, ok1 := get(k.addr, "address")
	cp, ok2 := get(k.addr, "capacity")
	if !ok1 || !ok2 || uint64(ad)+8 > k.size || uint64(cp)+4 > k.size {
		return nil
	}
	bf := &bufFields{address: ad, capacity: cp, att: -1, fd: -1}
	bf.end = max(uint64(ad)+8, uint64(cp)+4)
	for _, f := range []struct {
		name string
		to   *int64
	}{{"att", &bf.att}, {"fd", &bf.fd}} {
		if off, ok := get(k.addr, f.name); ok && uint64(off)+w.l.OopSize <= k.size && k.hasOop(off) {
			*f.to = int64(off)
			bf.end = max(bf.end, uint64(off)+w.l.OopSize)
		}
	}
	k.buf, k.bufState = bf, bufYes
	return bf
}

// offHeap notes the direct buffer at a, of class k, whose first bytes
// are view, as an owner of the memory it points at.
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
	size := uint64(int64(int32(le32(b[bf.capacity:]))))
	end := addr + size
	if int32(size) <= 0 || addr < minOwnerAddr || end < addr || end > maxOwnerAddr || w.l.overlapsHeap(addr, end) {
		o.res.Invalid++
		return
	}
	if len(o.res.Owners) >= w.maxOwners() {
		o.res.Capped++
		return
	}
	o.res.Owners = append(o.res.Owners, OffHeapOwner{Addr: addr, Size: size, Klass: k.addr, Class: k.name,
		Chain: ChainID(chain), Mapped: bf.fd >= 0 && w.slot(b[bf.fd:]) != 0})
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
