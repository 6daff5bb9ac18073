package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/target/attach"
)

// reattachSession is what one session of TestReattachGCStorm saw.
type reattachSession struct {
	load    time.Duration // LoadAgent until the agent connected
	info    *agentwire.TypesInfo
	census  *agentwire.CensusEnd
	bye     *agentwire.Bye
	quitFor time.Duration // 'Q' until the stream's end
}

// runSession attaches lib to pid with a fresh socket in dir, waits for
// TYPES_INFO, asks for a census and waits for its end, then sends 'Q' and
// reads the stream to its end. With vanish, the loader goes away instead
// (as one killed would) right after asking for the census.
func runSession(t *testing.T, pid int, lib, dir string, i int, vanish bool) reattachSession {
	t.Helper()
	var s reattachSession
	sock := filepath.Join(dir, fmt.Sprintf("s%d.sock", i))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tg, err := attach.Inspect(pid)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if err := tg.LoadAgent(ctx, lib, true, "sock="+sock+",types=1,census=1,interval=256k,minsize=1k"); err != nil {
		t.Fatalf("session %d: load agent: %v", i, err)
	}
	ln.SetDeadline(time.Now().Add(30 * time.Second))
	conn, err := ln.AcceptUnix()
	if err != nil {
		t.Fatalf("session %d: agent did not connect: %v", i, err)
	}
	defer conn.Close()
	s.load = time.Since(start)
	conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	r := agentwire.NewReader(conn)
	var quitAt time.Time
	for {
		b, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("session %d: stream: %v (types %+v, census end %+v)", i, err, s.info, s.census)
		}
		for _, rec := range b.Records {
			switch rec := rec.(type) {
			case *agentwire.TypesInfo:
				s.info = rec
				if _, err := conn.Write([]byte{agentwire.CommandCensus}); err != nil {
					t.Fatal(err)
				}
				if vanish {
					return s
				}
			case *agentwire.CensusEnd:
				s.census = rec
				quitAt = time.Now()
				if _, err := conn.Write([]byte{agentwire.CommandQuit}); err != nil {
					t.Fatal(err)
				}
				conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			case *agentwire.Bye:
				s.bye = rec
			}
		}
	}
	if !quitAt.IsZero() {
		s.quitFor = time.Since(quitAt)
	}
	return s
}

// TestReattachGCStorm: one copy of the library, attached twelve times to a
// JVM that collects every few milliseconds, so that sessions end inside GC
// pauses. Every session's types self-check passes, its census ends and 'Q'
// ends it within seconds; every fourth loader vanishes mid-census instead;
// the next attach finds the agent free either way; one copy stays mapped
// and the JVM exits cleanly. A session torn down inside a
// pause used to count the GC's start but not its finish, and every later
// session in the library saw a GC that never ended.
func TestReattachGCStorm(t *testing.T) {
	for _, j := range availableJDKs(t) {
		t.Run(j.name, func(t *testing.T) {
			flags := []string{"-XX:+UseG1GC", "-Xms128m", "-Xmx128m", "-Xmn8m"}
			if !strings.Contains(j.name, "17") {
				flags = append(flags, "-XX:+EnableDynamicAgentLoading")
			}
			// A non-nil attach: no -agentpath; connect false: not attached yet.
			v := startJava(t, jdk{j.name, j.home, nil}, "", false, func(*jvm, string, string) {}, flags, "Churn", "2")
			v.line("READY")
			lib, _ := fixture(t)
			dir, err := os.MkdirTemp("", "djx") // sun_path holds only 107 bytes
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			pid := v.cmd.Process.Pid
			var loads []time.Duration
			for i := range 12 {
				vanish := i%4 == 3
				s := runSession(t, pid, lib, dir, i, vanish)
				loads = append(loads, s.load)
				if s.info == nil || !s.info.OK || s.info.KlassBytes == 0 {
					t.Fatalf("session %d: TYPES_INFO %+v, want OK", i, s.info)
				}
				if vanish {
					continue
				}
				if s.census == nil || s.bye == nil || s.bye.Reason != "detach" {
					t.Fatalf("session %d: census end %+v, BYE %+v, want both", i, s.census, s.bye)
				}
				if s.quitFor > 5*time.Second {
					t.Errorf("session %d: ended %v after 'Q'", i, s.quitFor)
				}
			}
			if n, _ := testenv.AgentCopies(t, pid); n != 1 {
				t.Errorf("%d copies of the library mapped after 12 sessions, want 1", n)
			}
			t.Logf("attach to connect: first %v, later ones %v", loads[0].Round(time.Millisecond), loads[1:])
			v.send("exit")
			v.exit()
		})
	}
}
