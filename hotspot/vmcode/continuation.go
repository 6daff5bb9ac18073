package vmcode

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// Continuation is where a JDK 21+ JVM keeps what ends a virtual thread's
// stack at its entry, for an unwinder: a virtual thread's frames sit on
// its carrier's stack above the frame of Continuation.enterSpecial (an
// nmethod whose frame holds a ContinuationEntry), its frames not thawed
// yet in the StackChunk that entry points to, reached through the return
// barrier stub. The zero value means none (JDK 17, or a libjvm without
// .symtab).
type Continuation struct {
	// ReturnBarrier is StubRoutines::_cont_returnBarrier: the return
	// address of the lowest frame thawed when more are frozen.
	ReturnBarrier uint64
	// EnterSpecial is the address of the static
	// ContinuationEntry::_enter_special: the enterSpecial nmethod, set
	// when the first continuation runs (read it when needed).
	EnterSpecial uint64
	// EntrySize is ContinuationEntry::size(): the entry sits right
	// below the entry frame's saved rbp.
	EntrySize uint32
	// Offsets: a ContinuationEntry's _cont (the Continuation); a
	// Continuation's tail (its top StackChunk, a narrow oop with
	// compressed oops); a StackChunk's sp and bottom (ints, words from
	// its stack), pc (the top frame's) and stack
	// (InstanceStackChunkKlass::_offset_of_stack) and parent (the next
	// chunk, an oop).
	EntryCont, ContTail, ChunkSP, ChunkBottom, ChunkPC, ChunkStack, ChunkParent uint32
}

// The statics of libjvm the offsets and stubs are in (.symtab names).
const (
	symReturnBarrier = "_ZN12StubRoutines19_cont_returnBarrierE"
	symContTail      = "_ZN28jdk_internal_vm_Continuation12_tail_offsetE"
	symEnterSpecial  = "_ZN17ContinuationEntry14_enter_specialE"
	symChunkSP       = "_ZN26jdk_internal_vm_StackChunk10_sp_offsetE"
	symChunkBottom   = "_ZN26jdk_internal_vm_StackChunk14_bottom_offsetE"
	symChunkPC       = "_ZN26jdk_internal_vm_StackChunk10_pc_offsetE"
	symChunkStack    = "_ZN23InstanceStackChunkKlass16_offset_of_stackE"
	symChunkParent   = "_ZN26jdk_internal_vm_StackChunk14_parent_offsetE"
)

// entryContOffset is ContinuationEntry::_cont's offset in a product build
// (debug builds put a cookie first): its fields are not in vmStructs.
// JDK 21's follows _parent; Temurin 25's ContinuationEntry is 8 bytes
// bigger (64), _cont 16 bytes in, as read from live entries (its _parent
// and _chunk null, its flags 1 after the chunk).
func entryContOffset(major int) uint32 {
	if major >= 25 {
		return 16
	}
	return 8
}

// ErrNoContinuations means the JVM has no virtual threads (before JDK 21)
// or its libjvm does not say where their entries are (no .symtab).
var ErrNoContinuations = errors.New("no continuation layout")

// ReadContinuation reads pid's Continuation: the statics from libjvm's
// .symtab, their values from its memory. t is its vmStructs table.
func ReadContinuation(pid int, t *vmstructs.Table) (Continuation, error) {
	if t.Major() != 0 && t.Major() < 21 {
		return Continuation{}, fmt.Errorf("%w: JDK %d has no virtual threads", ErrNoContinuations, t.Major())
	}
	sz, ok := t.Size("ContinuationEntry")
	if !ok || sz < 48 || sz > 256 {
		return Continuation{}, fmt.Errorf("%w: no ContinuationEntry in vmStructs", ErrNoContinuations)
	}
	addrs, err := vmstructs.FindStatics(procfs.Mount, pid, []string{symReturnBarrier, symEnterSpecial, symContTail, symChunkSP, symChunkBottom, symChunkPC, symChunkStack, symChunkParent})
	if err != nil {
		return Continuation{}, fmt.Errorf("%w: %w", ErrNoContinuations, err)
	}
	c, err := continuationOf(targetmem.Open(pid), addrs)
	if err != nil {
		return Continuation{}, err
	}
	c.EntrySize = uint32(sz+15) &^ 15 // align_up(sizeof(ContinuationEntry), 2 * wordSize)
	c.EntryCont = entryContOffset(t.Major())
	return c, nil
}

// continuationOf reads the values of the statics at addrs.
func continuationOf(mem Mem, addrs map[string]uint64) (Continuation, error) {
	c := Continuation{EnterSpecial: addrs[symEnterSpecial]}
	if c.EnterSpecial == 0 {
		return Continuation{}, fmt.Errorf("%w: no %s in libjvm's .symtab", ErrNoContinuations, symEnterSpecial)
	}
	var b [8]byte
	word := func(name string, n int) (uint64, error) {
		a, ok := addrs[name]
		if !ok {
			return 0, fmt.Errorf("%w: no %s in libjvm's .symtab", ErrNoContinuations, name)
		}
		if _, err := mem.ReadAt(b[:n], int64(a)); err != nil {
			return 0, fmt.Errorf("read %s: %w", name, err)
		}
		if n == 4 {
			return uint64(binary.LittleEndian.Uint32(b[:])), nil
		}
		return binary.LittleEndian.Uint64(b[:]), nil
	}
	var err error
	if c.ReturnBarrier, err = word(symReturnBarrier, 8); err != nil {
		return Continuation{}, err
	}
	offs := []*uint32{&c.ContTail, &c.ChunkSP, &c.ChunkBottom, &c.ChunkPC, &c.ChunkStack, &c.ChunkParent}
	for i, name := range []string{symContTail, symChunkSP, symChunkBottom, symChunkPC, symChunkStack, symChunkParent} {
		v, err := word(name, 4)
		if err != nil {
			return Continuation{}, err
		}
		// The JVM sets them while it starts; the fields are in an
		// object's first hundred bytes.
		if v == 0 || v > 1024 {
			return Continuation{}, fmt.Errorf("%w: %s is %d", ErrNoContinuations, name, v)
		}
		*offs[i] = uint32(v)
	}
	if c.ReturnBarrier < minAddr || c.ReturnBarrier >= maxAddr {
		return Continuation{}, fmt.Errorf("%w: return barrier at %#x", ErrNoContinuations, c.ReturnBarrier)
	}
	return c, nil
}
