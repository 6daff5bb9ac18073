package profiler

import (
	"net"
	"os"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/join"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"golang.org/x/sys/unix"
)

// detachAgent: an agent that sent its last batch (BYE) but hangs up late,
// giving the heap sampler back during a long GC pause, lost nothing, so
// no note says so; one that never sent BYE is noted.
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
		s := &session{conn: conn, j: join.New(join.Config{})}
		st := &streams{batches: make(chan *agentwire.Batch, 1), agentDone: make(chan error, 1), agentOpen: true}
		recs := []agentwire.Record{&agentwire.Stats{}}
		if bye {
			recs = append(recs, &agentwire.Bye{Reason: "detach"})
		}
		st.batches <- &agentwire.Batch{Records: recs}
		s.detachAgent(st) // the agent never hangs up: the 3 s deadline
		conn.Close()
		theirs.Close()
		noted := strings.Contains(strings.Join(s.notes, "\n"), "did not finish its last batch")
		if noted == bye {
			t.Errorf("bye %v: notes %q", bye, s.notes)
		}
	}
}
