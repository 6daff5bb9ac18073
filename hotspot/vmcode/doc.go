// Package vmcode symbolizes a running HotSpot JVM's code from outside the
// JVM, with no agent: what a stack unwinder's raw frames (a pc in JIT
// code, or an interpreter frame's Method* and bcp) need to become Java
// frames named as jvmsym names them ("pkg.Class.method:line").
//
// Everything comes from the JVM's memory, read through a Mem
// (process_vm_readv), at the offsets libjvm's vmStructs give (package
// vmstructs):
//
//   - Blob finds the code blob holding a pc: CodeCache::_heaps, each
//     CodeHeap's segment map walked back to its block's HeapBlock, the
//     CodeBlob in it. It says what the blob is (an nmethod with its
//     Method*, compile id and tier; the interpreter; a named stub) and
//     gives what an unwinder needs: bounds and frame size. Heaps gives
//     the code heaps' ranges and segment maps.
//   - Frames resolves a pc in an nmethod to its inlining chain,
//     innermost first: the PcDesc at or after the pc, then the ScopeDesc
//     chain decoded from the scopes data (UNSIGNED5 streams), each
//     scope's Method* from the nmethod's metadata and its bci.
//     PCs lists an nmethod's pcs with debug information.
//   - Method, Frame and InterpretedFrame name a Method*: ConstMethod →
//     ConstantPool → its holder's name, the name and signature Symbols
//     at the ConstMethod's indexes, the source file, and the line of a
//     bci from the compressed line number table after the bytecodes.
//
// Offsets gives the layout facts (HeapBlock size, CodeBlob and nmethod
// fields) for an unwinder that walks the code cache itself, in BPF.
//
// JDK 17 keeps an nmethod's metadata, scopes and PcDescs inside the blob
// at offsets from its start; JDK 25 keeps the PcDescs and scopes in C
// heap "immutable data" and the metadata after the relocations of its
// "mutable data". JDK 20 and later encode streams with the NUL byte
// excluded. JDK 23 and 24 are not supported (their metadata offset is
// not exported).
//
// The target owns every byte read. Each pointer is checked to be in user
// space, each size against a cap, each table's bounds against its
// section, each stream read against its buffer; a chain is at most
// MaxInlineDepth deep, a segment map walk at most a fixed number of
// hops, and one query reads at most a fixed budget. Garbage yields an
// error wrapping ErrMalformed, never a panic, hang or unbounded
// allocation; an exited process gives ErrGone. Names are the target's text: escape them (termsafe)
// before they reach a terminal.
//
// Methods are cached by Method* and nmethods' debug information by blob
// start, both bounded in bytes. An nmethod's entry is used only while
// the blob at that start is the same compilation (compile id, method,
// bounds), which Frames reads again on every query; a Method* is trusted
// until Flush, so a caller that sees classes unloaded should flush.
package vmcode
