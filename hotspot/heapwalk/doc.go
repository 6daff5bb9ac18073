// Package heapwalk walks a running HotSpot JVM's heap from outside the
// JVM, reading its memory with process_vm_readv, with no agent and no
// pause, and names every object by what holds it.
//
// NewLayout reads what parsing the heap needs from the JVM's vmStructs
// (package vmstructs) and memory: compressed oop and klass encoding,
// the object header, the Klass fields and layout helper encoding, the
// heap's reserved range, java.lang.Class's injected fields. It refuses
// what it cannot parse: ZGC, Shenandoah. Under compact object headers
// (-XX:+UseCompactObjectHeaders) the narrow klass is read from the mark
// word.
//
// Walk starts from the statics of every loaded class, found the way
// HotSpot keeps them (ClassLoaderDataGraph → ClassLoaderData → Klass →
// its java.lang.Class instance, whose static reference fields are
// roots), then from the caller's roots by rank, and walks breadth first
// over the reference fields of each object (InstanceKlass's nonstatic
// oop maps, object array elements). The first root to reach an object
// names it, by a holder chain of hops: the root, then
// "DeclaringClass.field" for each field ("+OFFSET" without a name
// resolver) and "[]" for any array element. Chains are interned, and
// folded so that a data structure is one chain per node class:
//
//   - an object of the class the hop starts from (a list's next node, a
//     tree's child) keeps its parent's chain;
//   - a hop already on the chain (a cycle through several classes)
//     folds back to where the chain first took it.
//
// Objects are counted per (chain, class) row; those of at least
// Config.MinSize go to a callback, the others into an address lookup
// (sorted runs of consecutive objects of one row) so that a sampled
// address can be named.
//
// Besides the first root, a row says how many other roots reach it
// (Row.OtherRoots) and what its chain retains (Row.Retained), from the
// references across roots the walk keeps (reach.go, retained.go). The
// objects on pages the caller's samples hit (Config.Hot) are walked
// first and kept past the caps (hot.go).
//
// The JVM runs during the walk: objects are visited in batches sorted
// by address, parsed in place from copies of the heap's pieces (64 KiB,
// up to Config.MaxCopy bytes, pieces.go) or, past that, read one span
// each in one vector read per batch; each is validated (its klass
// a Klass whose mirror points back, its size and length inside the
// heap) and skipped and counted when not. A collection during the walk
// moves objects under it: Result.GC says so, and the caller discards or
// walks again. Every count read from the target is checked against a
// cap or the heap's ranges, so a garbled or forged heap costs bounded
// time and memory, and never a panic.
package heapwalk
