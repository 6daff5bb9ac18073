package agentconn

import (
	"net"
	"os"
	"testing"

	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"golang.org/x/sys/unix"
)

// Detach: an agent that sent its last batch (BYE) but hangs up late,
// giving the heap sampler back during a long GC pause, lost nothing, so
// it is not late; one that never sent BYE is.
func TestDetachAgentLateHangUp(t *testing.T) {
	for _, bye := range []bool{true, false} {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		ours, theirs := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "theirs")
		c, err := net.FileConn(ours)
		ours.Close()
		if err != nil {
			t.Fatal(err)
		}
		conn := c.(*net.UnixConn)
		st := &Stream{Batches: make(chan *agentwire.Batch, 1), Done: make(chan error, 1), Open: true}
		recs := []agentwire.Record{&agentwire.Stats{}}
		if bye {
			recs = append(recs, &agentwire.Bye{Reason: "detach"})
		}
		st.Batches <- &agentwire.Batch{Records: recs}
		var got int
		late := st.Detach(conn, func(*agentwire.Batch) { got++ }) // the agent never hangs up: the 3 s deadline
		conn.Close()
		theirs.Close()
		if late == bye || got != 1 {
			t.Errorf("bye %v: late %v, %d batches handed on", bye, late, got)
		}
	}
}
