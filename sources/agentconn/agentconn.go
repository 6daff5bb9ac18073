// Package agentconn is a session's link to its JVM's agent: the agent's
// connection accepted on the session's channel, its stream decoded into
// batches on a goroutine, and its goodbye at detach.
package agentconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/target/channel"
)

// Accept has load start the agent of pid (nil: it starts with the JVM)
// and waits, within timeout, for the agent to connect to ch; exited is
// closed when the JVM exits.
func Accept(ctx context.Context, ch *channel.Channel, pid int, timeout time.Duration, exited <-chan struct{}, load func(context.Context) error) (*net.UnixConn, error) {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	accepted := make(chan acceptResult, 1)
	go func() {
		c, err := ch.Accept(actx, pid)
		accepted <- acceptResult{c, err}
	}()
	abandon := func() {
		cancel()
		if r := <-accepted; r.conn != nil {
			r.conn.Close() // the agent connected, then failed to start
		}
	}
	if load != nil {
		if err := load(actx); err != nil {
			abandon()
			return nil, err
		}
	}
	select {
	case r := <-accepted:
		if r.err != nil {
			return nil, fmt.Errorf("agent of pid %d did not connect: %w", pid, r.err)
		}
		return r.conn, nil
	case <-exited:
		abandon()
		return nil, fmt.Errorf("JVM (pid %d) exited before its agent connected", pid)
	}
}

type acceptResult struct {
	conn *net.UnixConn
	err  error
}

// Stream is the agent's stream as a session's loop reads it.
type Stream struct {
	// Batches are the agent's decoded batches; the loop sets it nil once
	// it is closed.
	Batches chan *agentwire.Batch
	// Done says the stream ended (nil error: at EOF); Open until it has.
	Done chan error
	Open bool
}

// Read decodes conn's stream into batches, depth of them ahead of the
// loop, until it ends.
func Read(conn io.Reader, depth int) *Stream {
	st := &Stream{Batches: make(chan *agentwire.Batch, depth), Done: make(chan error, 1), Open: true}
	go read(conn, st.Batches, st.Done)
	return st
}

func read(conn io.Reader, batches chan<- *agentwire.Batch, done chan<- error) {
	rd := agentwire.NewReader(conn)
	for {
		b, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			done <- err
			close(batches)
			return
		}
		batches <- b
	}
}

// Detach asks the agent for its last batch, which detaches it, and hands
// on what the stream still holds. late: the agent sent no last batch
// within 3 s.
func (st *Stream) Detach(conn io.Writer, on func(*agentwire.Batch)) (late bool) {
	if st.Open {
		conn.Write([]byte{agentwire.CommandQuit})
		deadline := time.After(3 * time.Second)
		bye := false
	wait:
		for {
			select {
			case b, ok := <-st.Batches:
				if !ok {
					st.Batches = nil
					continue
				}
				bye = bye || hasBye(b)
				on(b)
			case <-st.Done:
				st.Open = false
				break wait
			case <-deadline:
				// After its last batch the agent gives the JVM's heap
				// sampler back, then hangs up; a long GC pause can hold
				// that up. Nothing is lost then.
				late = !bye
				break wait
			}
		}
	}
	if st.Batches != nil && !st.Open {
		for b := range st.Batches {
			on(b)
		}
	}
	return late
}

func hasBye(b *agentwire.Batch) bool {
	for _, r := range b.Records {
		if _, ok := r.(*agentwire.Bye); ok {
			return true
		}
	}
	return false
}
