package join

import "github.com/djx-bpf/djx-bpf/report"

// ResetWindow starts a new window of a continuous profile: the counters a
// report shows go back to zero and the access paths, remainder and data
// types are dropped, while what names and finds objects (the tracked
// objects, sites, methods, classes, code, holder chains) stays. Without it
// a join that runs for days would keep every access path it ever saw and
// report totals since attach; with it each window's report holds that
// window only, and the join holds at most one window's paths.
//
// Census and heap-walk sites keep their object counts and retained bytes:
// they describe the heap as found at attach, not what the window
// allocated, so a later window still names their size.
func (j *JVM) ResetWindow() {
	for _, s := range j.sites {
		if s.census == 0 {
			s.objects, s.bytes, s.estObjects, s.estBytes = 0, 0, 0, 0
		}
		s.samples, s.estSamples = 0, 0
		s.accesses = nil
		s.fields = nil
		s.mem, s.numa = nil, nil
	}
	j.remainder = make(accessSet)
	j.accessBytes = 0
	if j.rows != nil {
		j.rows = make(map[typeKey]*typeRow)
	}
	j.stats = report.Stats{}
}
