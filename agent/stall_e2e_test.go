package agent

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAgentGivesUpOnStalledLoader: a loader that stops reading (stopped,
// or its stderr blocked) must not stall the JVM: once the buffers are full
// the agent gives the connection up within seconds and the JVM runs on.
// Before, send_all waited for good and every CompiledMethodLoad slept.
func TestAgentGivesUpOnStalledLoader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JVM")
	}
	j := availableJDKs(t)[0]
	lib, classes := fixture(t)
	dir, err := os.MkdirTemp("", "djx") // sun_path holds only 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "agent.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(filepath.Join(j.home, "bin", "java"), "-agentpath:"+lib+"=sock="+sock+",interval=1024,minsize=1024",
		"-XX:+UseSerialGC", "-Xmx256m", "-cp", classes, "AllocSite", "bench", "kib", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Kill() // our own child, by PID
		<-exited
	}()
	ln.SetDeadline(time.Now().Add(30 * time.Second))
	conn, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Read nothing; wait for the agent to hang up (POLLHUP needs no read).
	raw, _ := conn.SyscallConn()
	start := time.Now()
	hup := false
	for !hup && time.Since(start) < 20*time.Second {
		raw.Control(func(fd uintptr) {
			pf := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if n, _ := unix.Poll(pf, 200); n > 0 && pf[0].Revents&unix.POLLHUP != 0 {
				hup = true
			}
		})
	}
	select {
	case <-exited:
		t.Fatalf("the JVM exited (%v) before the agent gave up", cmd.ProcessState)
	default:
	}
	if !hup {
		t.Fatalf("agent still connected %v after the loader stopped reading", time.Since(start).Round(time.Second))
	}
	t.Logf("agent gave up %v after the loader stopped reading", time.Since(start).Round(100*time.Millisecond))
}
