package join

import (
	"fmt"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// lateFreeStream is a batch of queued ALLOCs stamped a little ahead of the
// watermark, and a batch of FREEs stamped before them, each of which lands
// in front of every queued ALLOC.
func lateFreeStream(queued, frees int) (allocs, late *agentwire.Batch) {
	wm := uint64(10 * time.Second)
	ahead := wm + uint64(30*time.Second)
	allocs = &agentwire.Batch{Watermark: wm, Records: make([]agentwire.Record, 0, queued+1)}
	allocs.Records = append(allocs.Records, hello(1))
	for i := 0; i < queued; i++ {
		allocs.Records = append(allocs.Records, &agentwire.Alloc{Time: ahead + uint64(i), Addr: 0x1000_0000 + uint64(i)*32, Size: 32, TypeSig: "[B", Tag: uint64(i + 1)})
	}
	late = &agentwire.Batch{Watermark: wm, Records: make([]agentwire.Record, 0, frees)}
	for i := 0; i < frees; i++ {
		late.Records = append(late.Records, &agentwire.Free{Time: wm + uint64(time.Second) + uint64(i), Tag: uint64(i + 1)})
	}
	return allocs, late
}

// BenchmarkQueueLateFrees measures FREEs stamped before the records queued
// ahead of them: one op is one batch of 4,000 such FREEs behind the queue.
//
//	go test -run '^$' -bench QueueLateFrees ./join/
func BenchmarkQueueLateFrees(b *testing.B) {
	for _, queued := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("queued=%d", queued), func(b *testing.B) {
			allocs, late := lateFreeStream(queued, 4000)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				j := newJVM(1)
				j.OnBatch(allocs)
				b.StartTimer()
				j.OnBatch(late)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/4000, "ns/free")
		})
	}
}
