package decode

// Cause says why Decode found no data address (or that it found one), for
// the classification in docs/sources.md and the report's statistics.
type Cause uint8

const (
	CauseAddress        Cause = iota // Decode gives an address
	CauseNoBytes                     // the bytes at ip are unreadable or do not decode
	CauseUncomputable                // the access at ip has an fs/gs segment or a vector index
	CauseNoBoundary                  // no operand at ip, and the instruction ending at ip is ambiguous
	CauseNoMemory                    // no memory operand at ip, nor a load ending at ip: arithmetic, branches
	CauseBaseClobbered               // the load ending at ip overwrote its base register
	CauseIndexClobbered              // the load ending at ip overwrote its index, and Base did not apply
	CauseNotLoad                     // the instruction ending at ip accesses memory but is no whitelisted load (a store, rep movs, ...)
)

var causeNames = [...]string{"address", "no-bytes", "uncomputable", "no-boundary", "no-memory-operand", "base-clobbered", "index-clobbered", "not-a-load"}

func (c Cause) String() string {
	if int(c) < len(causeNames) {
		return causeNames[c]
	}
	return "unknown"
}

// Why classifies the sample Decode would decode from the same arguments.
func (d *Decoder) Why(before, at []byte, r *Regs) Cause {
	if d.Decode(before, at, r).Method != None {
		return CauseAddress
	}
	x := &d.at
	if !x.decode(at) {
		return CauseNoBytes
	}
	if x.access() {
		return CauseUncomputable
	}
	return d.whyBack(before)
}

// WhyPrevious classifies the sample Previous would decode from the same
// arguments: why no load ending at ip gives an address.
func (d *Decoder) WhyPrevious(before []byte, r *Regs) Cause {
	if d.Previous(before, r).Method != None {
		return CauseAddress
	}
	return d.whyBack(before)
}

// whyBack says why the instruction ending at ip gives no address.
func (d *Decoder) whyBack(before []byte) Cause {
	s, ok := d.boundary(before)
	if !ok {
		return CauseNoBoundary
	}
	c := &d.cand[s]
	if !c.access() {
		return CauseNoMemory
	}
	dst, ok := c.loadDest()
	switch {
	case !ok:
		return CauseNotLoad
	case c.base >= 0 && c.base < 16 && dst&gprBit(uint8(c.base)) != 0:
		return CauseBaseClobbered
	case c.index >= 0 && dst&gprBit(uint8(c.index)) != 0:
		return CauseIndexClobbered
	}
	return CauseUncomputable
}
