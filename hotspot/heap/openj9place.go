package heap

import (
	"errors"
	"fmt"
	"sort"
)

// OpenJ9 compressed-references heap placement, modelled on the policy that
// Dmitri Pivkine describes for eclipse/omr#7344 (quoted in
// ../shared/seeds/openj9-compressed-refs-heap-placement.txt and, with its
// examples, in testdata/openj9/). OpenJ9's compressed references have base
// 0, so a shift s can address [0, 4 GiB << s). The heap is allocated
// top-down in a sequence of attempts, each aiming below the ceiling of one
// shift; the first that fits wins:
//
//  1. size <= 4 GiB:  below 4 GiB, shift 0 (all platforms but z/OS)
//  2. size <= 8 GiB:  below 8 GiB, shift 1 (zLinux only)
//  3. size <= 16 GiB: below 16 GiB, shift 2 (zLinux only)
//  4. size <= 28 GiB: below 32 GiB, shift 3; 28 = 32 - 4 keeps [0, 4 GiB)
//     free ("estimated heap start address" 4 GiB); larger heaps skip to 5
//  5. below 64 GiB, the smallest shift possible (4)
//
// Ambiguities in the note, resolved here and flagged in the report:
//   - Why a 4 GiB heap gets [4G, 8G] and shift 1: attempt 1 would need
//     [0, 4G), and address 0 is never mappable. The model encodes that as
//     LowestAddress (Linux's default vm.mmap_min_addr, 64 KiB).
//   - Whether attempt 5 also protects the low 4 GiB (size <= 60 GiB) is
//     not said; its only example (60 GiB -> [4G, 64G]) fits either way.
//     The model does not protect (EstimatedStart 0), so 61 GiB -> [3G, 64G].
//   - The note's sizes are whole GiB; real heaps are rounded up to the
//     region size and aligned, which the model does not do (Align 0).
//   - Concurrent Scavenger with hardware support (Guarded Storage) stays
//     bottom-up on zLinux; not modelled.
//   - Non-Z platforms (shifts 0, 3, 4) are described only as "steps 1, 4
//     and 5"; the non-Z policy here is that, unverified by example.

// MaxCompressedTop is the highest heap top compressed references reach
// (shift 4): 64 GiB.
const MaxCompressedTop = 64 * GiB

// ZLinuxShifts are the shifts OpenJ9 supports on zLinux; DefaultShifts on
// the other 64-bit platforms.
var (
	ZLinuxShifts  = []uint{0, 1, 2, 3, 4}
	DefaultShifts = []uint{0, 3, 4}
)

// ShiftsFor returns the supported shifts for an architecture as named in a
// javacore's VM version ("s390x", "amd64", ...). Unknown ("") gets all
// shifts 0-4, so that a shift derived from it is a lower bound.
func ShiftsFor(arch string) []uint {
	switch arch {
	case "s390x", "s390":
		return ZLinuxShifts
	case "":
		return ZLinuxShifts
	}
	return DefaultShifts
}

// MinShift returns the smallest shift in shifts (ascending) whose ceiling
// 4 GiB << shift is at or above top.
func MinShift(top uint64, shifts []uint) (uint, bool) {
	for _, s := range shifts {
		if top <= (uint64(1)<<32)<<s {
			return s, true
		}
	}
	return 0, false
}

// Attempt is one top-down allocation attempt: the heap is placed as high
// as possible below 4 GiB << Shift, and only if EstimatedStart + size fits
// under that ceiling (EstimatedStart 4 GiB is how OpenJ9 keeps the low
// 4 GiB free; 0 lets the heap dip below 4 GiB).
type Attempt struct {
	Shift          uint
	EstimatedStart uint64
}

// Policy is a placement policy.
type Policy struct {
	Attempts []Attempt
	// LowestAddress is the lowest address the OS maps.
	LowestAddress uint64
	// Occupied are address ranges already in use (native memory below
	// 4 GiB, say); an attempt moves down below them, as a top-down search
	// of the free address space would.
	Occupied []Range
}

// DefaultLowestAddress is Linux's default vm.mmap_min_addr.
const DefaultLowestAddress = 64 << 10

// ZLinuxPolicy is the policy of eclipse/omr#7344 on zLinux: steps 1-5.
func ZLinuxPolicy() Policy {
	return Policy{
		Attempts: []Attempt{
			{Shift: 0}, {Shift: 1}, {Shift: 2},
			{Shift: 3, EstimatedStart: 4 * GiB},
			{Shift: 4},
		},
		LowestAddress: DefaultLowestAddress,
	}
}

// DefaultPolicy is the policy the note describes for other platforms:
// steps 1, 4 and 5.
func DefaultPolicy() Policy {
	return Policy{
		Attempts: []Attempt{
			{Shift: 0},
			{Shift: 3, EstimatedStart: 4 * GiB},
			{Shift: 4},
		},
		LowestAddress: DefaultLowestAddress,
	}
}

// Placement is where the model puts a heap.
type Placement struct {
	Range Range
	Shift uint
	// Attempt is the index in Policy.Attempts that succeeded.
	Attempt int
}

// Geometry returns the compressed-references geometry of the placement.
func (p Placement) Geometry() Geometry {
	r := p.Range
	r.Name = "heap"
	return Geometry{VM: OpenJ9, Reserved: r, Mode: modeFor(0, p.Shift), Shift: p.Shift}
}

// ErrNoPlacement means no attempt fits: OpenJ9 would fail to start with
// compressed references (or, for large -Xmx, not use them).
var ErrNoPlacement = errors.New("no compressed-references placement fits")

// Place computes where OpenJ9 puts a heap of size bytes under policy p.
func Place(size uint64, p Policy) (Placement, error) {
	if size == 0 {
		return Placement{}, fmt.Errorf("place heap: zero size")
	}
	occupied := append([]Range(nil), p.Occupied...)
	sort.Slice(occupied, func(i, j int) bool { return occupied[i].Start < occupied[j].Start })
	for i, a := range p.Attempts {
		ceiling := (uint64(1) << 32) << a.Shift
		if a.EstimatedStart+size > ceiling {
			continue // this shift is not attempted for this size
		}
		if r, ok := topDown(size, ceiling, p.LowestAddress, occupied); ok {
			return Placement{Range: r, Shift: a.Shift, Attempt: i}, nil
		}
	}
	return Placement{}, fmt.Errorf("place heap of %d MiB: %w", size>>20, ErrNoPlacement)
}

// topDown finds the highest [start, start+size) below ceiling, at or above
// lowest, overlapping nothing in occupied.
func topDown(size, ceiling, lowest uint64, occupied []Range) (Range, bool) {
	top := ceiling
	for top >= size && top-size >= lowest {
		start := top - size
		next := top
		for _, o := range occupied {
			if o.Start < top && o.End > start {
				// Any gap between overlapping ranges is shorter than size:
				// continue below the lowest of them.
				next = min(next, o.Start)
			}
		}
		if next == top {
			return Range{Start: start, End: top}, true
		}
		top = next
	}
	return Range{}, false
}
