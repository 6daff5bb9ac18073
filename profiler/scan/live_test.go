package scan

import (
	"os"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/target/discover"
)

// A cut takes the window of each session in its loop, skips a session
// that ended and one still attaching (within cutWait), adds the last
// windows of the sessions that ended, and takes the skipped JVMs and
// notes, so that none of them piles up across windows.
func TestLiveCut(t *testing.T) {
	defer func(w time.Duration) { cutWait = w }(cutWait)
	cutWait = 50 * time.Millisecond
	ls := &liveState{reqs: make(chan chan Cut), members: map[int]*liveMember{}}
	sr := &scanRun{live: ls, sc: &report.Scan{Skipped: []report.SkippedJVM{{PID: 9}}, Notes: []string{"n"}}}
	running := ls.join(jvmOf(1))
	ended := ls.join(jvmOf(2))
	ls.join(jvmOf(3)) // attaching: never takes a request
	ended.end()
	ls.ended(scanResult{jvm: ended.jvm, rep: &report.Report{PID: 2}})
	go func() {
		for req := range running.cuts {
			req.Reply <- &report.Report{PID: 1}
		}
	}()
	defer close(running.cuts)
	c := sr.cut()
	if len(c.JVMs) != 2 || c.JVMs[0].Report.PID != 1 || c.JVMs[0].Final || c.JVMs[1].Report.PID != 2 || !c.JVMs[1].Final {
		t.Errorf("cut %+v, want pid 1's window and pid 2's last", c.JVMs)
	}
	if len(c.Skipped) != 1 || len(c.Notes) != 1 || sr.sc.Skipped != nil || sr.sc.Notes != nil || ls.pending != nil {
		t.Errorf("cut took skipped %v notes %v, left %v %v %v", c.Skipped, c.Notes, sr.sc.Skipped, sr.sc.Notes, ls.pending)
	}
	if _, ok := ls.members[2]; ok {
		t.Error("the ended session is still a member")
	}
	if c := sr.cut(); len(c.JVMs) != 1 || c.JVMs[0].Report.PID != 1 {
		t.Errorf("second cut %+v, want pid 1's window only", c.JVMs)
	}
}

// The scan forgets JVMs that are gone, and keeps one that discover
// missed but whose process still runs (it may have a session).
func TestForgetGone(t *testing.T) {
	const gone = 1 << 30 // above pid_max
	self := os.Getpid()
	known := map[int]bool{gone: true, self: true, 7: true}
	forgetGone(known, []discover.JVM{jvmOf(7)})
	if known[gone] || !known[self] || !known[7] {
		t.Errorf("known %v, want the gone pid forgotten, the running ones kept", known)
	}
}

func jvmOf(pid int) discover.JVM {
	var j discover.JVM
	j.PID = pid
	return j
}
