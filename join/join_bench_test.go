package join

import (
	"fmt"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// The hot paths of the loader's consumer, driven through the functions the
// session uses (OnBatch, OnSample, drain, applyGC): a JVM with n tracked
// objects of 1–2 KiB spread over 16 allocation sites, and samples that hit
// one of them 90% of the time.
//
//	go test -run '^$' -bench . -benchmem ./join/

const (
	benchHeap  = 0x7f00_0000_0000
	benchSlot  = 2048
	benchChunk = 1024 // samples between two agent batches
)

func benchSize(i int) uint64 { return 1024 + uint64(i*2654435761)%1024&^7 }

// benchJVM is a connected JVM holding n objects at benchHeap + i*benchSlot.
func benchJVM(b *testing.B, n int, stackSig bool) *JVM {
	b.Helper()
	j := exactJVM(1)
	h := hello(1)
	if stackSig {
		h.StackSignal = 23
	}
	recs := []agentwire.Record{h}
	for m := uint64(1); m <= 64; m++ {
		recs = append(recs, method(m, "LBench;", fmt.Sprintf("m%d", m), int32(m)))
	}
	j.OnBatch(batch(1, recs...))
	if stackSig {
		j.stackSig = j.agentStackSig
	}
	const per = 4096
	for lo := 0; lo < n; lo += per {
		rs := make([]agentwire.Record, 0, per)
		for i := lo; i < min(n, lo+per); i++ {
			site := uint64(i % 16)
			rs = append(rs, alloc(2, benchHeap+uint64(i)*benchSlot, benchSize(i), "[J", agentwire.Frame{Method: 1 + site, BCI: 3}, agentwire.Frame{Method: 40}))
		}
		j.OnBatch(batch(2, rs...))
	}
	if stackSig {
		// Stacks hold the horizon stackGrace behind the watermark.
		j.OnBatch(batch(3 + stackGrace))
	}
	if got := len(j.objs); got != n {
		b.Fatalf("tracked %d objects, want %d", got, n)
	}
	return j
}

// benchAddrs are sample addresses: 90% inside a live object, 10% anywhere
// in the heap (mostly between objects).
func benchAddrs(n int) []uint64 {
	a := make([]uint64, 1<<16)
	x := uint64(0x9E3779B97F4A7C15)
	for i := range a {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		k := int(x>>8) % n
		if x%10 == 0 {
			a[i] = benchHeap + x%(uint64(n)*benchSlot)
		} else {
			a[i] = benchHeap + uint64(k)*benchSlot + (x>>40)%benchSize(k)
		}
	}
	return a
}

var benchObjCounts = []int{10_000, 1_000_000}

// BenchmarkAttribute: one page-fault-like sample (exact address) from the
// ring buffer to its object's counters: OnSample queues it, the next agent
// batch's watermark drains it through attribute (index lookup, site
// counters, access-path tree insertion with the leaf-only path). ns/op is
// per sample.
func BenchmarkAttribute(b *testing.B) {
	for _, n := range benchObjCounts {
		b.Run(fmt.Sprintf("objs=%d", n), func(b *testing.B) {
			j := benchJVM(b, n, false)
			addrs := benchAddrs(n)
			var s sample.Sample
			t := uint64(10)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				s.Time, s.Addr, s.Regs[16] = t, addrs[i&(len(addrs)-1)], 0x7000_0000+uint64(i&63)*16
				j.OnSample(&s, sample.PageFaults)
				t++
				if i%benchChunk == benchChunk-1 {
					j.OnBatch(batch(t))
				}
			}
			j.OnBatch(batch(t))
			b.StopTimer()
			if j.stats.Attributed == 0 {
				b.Fatal("nothing attributed")
			}
			b.ReportMetric(100*float64(j.stats.Attributed)/float64(j.stats.Samples), "%attributed")
		})
	}
}

// BenchmarkDecodeAttribute: a decode (timer) sample: registers and
// instruction bytes from the ring buffer, the load `mov (%rax,%rcx,8),%rax`
// decoded to its address, then attributed as above.
func BenchmarkDecodeAttribute(b *testing.B) {
	j := benchJVM(b, 1_000_000, false)
	addrs := benchAddrs(1_000_000)
	var s sample.Sample
	copy(s.At[:], []byte{0x48, 0x8b, 0x04, 0xc8})
	s.Flags = sample.FlagAtOK
	t := uint64(10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		a := addrs[i&(len(addrs)-1)]
		// pt_regs: rax is [10], rcx [11]; address = rax + rcx*8.
		s.Time, s.Regs[10], s.Regs[11], s.Regs[16] = t, a&^0xff, (a&0xff)/8, 0x7000_0000
		j.OnSample(&s, sample.Decode)
		t++
		if i%benchChunk == benchChunk-1 {
			j.OnBatch(batch(t))
		}
	}
	j.OnBatch(batch(t))
	b.StopTimer()
	if j.stats.DecodedAtIP == 0 || j.stats.Attributed == 0 {
		b.Fatalf("stats %+v", j.stats)
	}
}

// BenchmarkJoinStacks: samples with access stacks. Each sample's thread
// sends its stack (8 frames, one of 64 paths) in the next agent batch; the
// join finds it (same thread, same pc, stamped after), and the path goes
// into the object's access-path tree. ns/op is per sample, stack included.
func BenchmarkJoinStacks(b *testing.B) {
	for _, n := range benchObjCounts {
		b.Run(fmt.Sprintf("objs=%d", n), func(b *testing.B) {
			j := benchJVM(b, n, true)
			addrs := benchAddrs(n)
			paths := make([][]agentwire.Frame, 64)
			for p := range paths {
				for d := 0; d < 8; d++ {
					paths[p] = append(paths[p], agentwire.Frame{Method: uint64(1 + (p+d)%64), BCI: int64(d * 4)})
				}
			}
			stacks := make([]*agentwire.Stack, benchChunk)
			for i := range stacks {
				stacks[i] = &agentwire.Stack{}
			}
			recs := make([]agentwire.Record, benchChunk)
			var s sample.Sample
			const dt = 1000 // ns between samples
			t := uint64(1_000_000)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				k := i % benchChunk
				tid := uint32(100 + i%8)
				ip := 0x7000_0000 + uint64(i%64)*16
				s.Time, s.Addr, s.Regs[16], s.TID = t, addrs[i&(len(addrs)-1)], ip, tid
				j.OnSample(&s, sample.PageFaults)
				st := stacks[k]
				*st = agentwire.Stack{Time: t + 20, TID: tid, PC: ip, Status: 8, Frames: paths[i%64]}
				recs[k] = st
				t += dt
				if k == benchChunk-1 {
					// The watermark runs stackGrace ahead, so this
					// chunk's samples are judged now.
					j.OnBatch(batch(t+stackGrace, recs...))
					for x := range stacks {
						stacks[x] = &agentwire.Stack{}
					}
				}
			}
			b.StopTimer()
			j.Drain(true)
			if j.stats.SamplesJavaStack == 0 {
				b.Fatalf("no sample joined to its stack: %+v", j.stats)
			}
			b.ReportMetric(100*float64(j.stats.SamplesJavaStack)/float64(j.stats.Samples), "%joined")
		})
	}
}

// BenchmarkTreeUpdate: inserting one access path (8 frames) into an
// object's path tree: key building and the map update, over 1000 distinct
// paths.
func BenchmarkTreeUpdate(b *testing.B) {
	const npaths = 1000
	paths := make([][]pathFrame, npaths)
	for p := range paths {
		for d := 0; d < 8; d++ {
			paths[p] = append(paths[p], pathFrame{method: uint64(p*8 + d), bci: int64(d)})
		}
	}
	set := make(accessSet)
	j := newJVM(1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		j.addAccess(set, "", "", paths[i%npaths]).samples++
	}
	if len(set) != min(npaths, b.N) {
		b.Fatalf("%d paths", len(set))
	}
}

// BenchmarkRelocationBatch: one young-GC-like relocation batch through the
// session's path (OnGCBegin, OnCopy ×64, OnGCEnd, then the relocation
// watermark applies it: objindex.ApplyMoves and the object table's
// addresses), each copy carrying 8 adjacent objects; every other GC moves
// them back. 1M tracked objects. ns/op is per GC.
func BenchmarkRelocationBatch(b *testing.B) {
	const n, copies, runLen = 1_000_000, 64, 8
	j := benchJVM(b, n, false)
	j.watermark = 1 << 62
	top := benchHeap + uint64(2*n)*benchSlot
	t := uint64(10)
	moved := uint64(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		j.OnGCBegin(t)
		dst := top
		for c := 0; c < copies; c++ {
			r := ((i/2)*copies + c) * 7919 % (n / runLen)
			first, last := r*runLen, r*runLen+runLen-1
			src := benchHeap + uint64(first)*benchSlot
			ln := benchHeap + uint64(last)*benchSlot + benchSize(last) - src
			if i%2 == 0 {
				j.OnCopy(src, dst, ln)
			} else {
				j.OnCopy(dst, src, ln)
			}
			dst += ln
		}
		j.OnGCEnd(t + 1)
		j.RelocComplete(t + 2)
		t += 3
	}
	b.StopTimer()
	moved = j.stats.Relocations
	if moved == 0 {
		b.Fatalf("nothing moved: %+v", j.stats)
	}
	b.ReportMetric(float64(moved)/float64(b.N), "objects/GC")
}

// BenchmarkDecodeUntyped and BenchmarkDecodeTyped: a decode sample of an
// untracked object in the heap, `mov 0x10(%rsi),%rax`, without and with its
// data type named (the header the sampling program read for rsi, looked up
// in a table of 4096 classes). The difference is what naming costs a sample.
func BenchmarkDecodeUntyped(b *testing.B) { benchDecodeHeap(b, false) }
func BenchmarkDecodeTyped(b *testing.B)   { benchDecodeHeap(b, true) }

func benchDecodeHeap(b *testing.B, typed bool) {
	j := benchJVM(b, 10_000, false)
	const lo, hi = 0x6_0000_0000, 0x7_0000_0000
	j.heap = heap.Info{GC: "G1", Ranges: []heap.Range{{Start: lo, End: hi}}}
	j.heapKnown = true
	if typed {
		j.onTypesInfo(&agentwire.TypesInfo{OK: true, Fields: true, OopBytes: 4, OopShift: 3, KlassBytes: 4})
		for k := uint32(1); k <= 4096; k++ {
			j.onClass(&agentwire.Class{Klass: 0x8_0000_0000 + uint64(k)<<6, Narrow: k << 6, Sig: fmt.Sprintf("LBench%d;", k),
				Fields: []agentwire.Field{{Offset: 12, Name: "a", Sig: "I"}, {Offset: 16, Name: "b", Sig: "J"}, {Offset: 24, Name: "c", Sig: "Ljava/lang/Object;"}}})
		}
	}
	var s sample.Sample
	copy(s.At[:], []byte{0x48, 0x8b, 0x46, 0x10})
	s.Flags = sample.FlagAtOK
	t := uint64(10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		obj := uint64(lo + 0x1000 + (i&0xffff)*64)
		// pt_regs: rsi is slot 13.
		s.Time, s.Regs[13], s.Regs[16] = t, obj, 0x7000_0000
		s.HdrOK, s.Hdr[13] = 1<<13, [2]uint64{1, uint64(1+i&4095) << 6}
		j.OnSample(&s, sample.Decode)
		t++
		if i%benchChunk == benchChunk-1 {
			j.OnBatch(batch(t))
		}
	}
	j.OnBatch(batch(t))
	b.StopTimer()
	if typed && len(j.rows) == 0 || j.stats.InHeap == 0 {
		b.Fatalf("stats %+v, %d type rows", j.stats, len(j.rows))
	}
}
