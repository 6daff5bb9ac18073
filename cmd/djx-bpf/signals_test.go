package main

import (
	"bufio"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestSignalEndsAHungRun: with something that never returns (the FIFO at a
// target's perf-PID.map once kept `profile` alive for good), SIGTERM still
// ends djx-bpf within the grace period, and a second signal at once.
func TestSignalEndsAHungRun(t *testing.T) {
	if os.Getenv("DJX_SIGNAL_CHILD") != "" {
		signalGrace = 500 * time.Millisecond
		ctx, stop := signalContext("test")
		defer stop()
		defer stop() // profile stops early too: twice is fine
		os.Stdout.WriteString("ready\n")
		<-ctx.Done()
		if os.Getenv("DJX_SIGNAL_CHILD") == "hang" {
			select {} // a wait that ignores ctx
		}
		return
	}
	for _, tc := range []struct {
		mode    string
		signals int
		within  time.Duration
		code    int
	}{
		{"hang", 1, 5 * time.Second, 128 + int(syscall.SIGTERM)},
		{"hang", 2, 400 * time.Millisecond, 128 + int(syscall.SIGTERM)},
		{"clean", 1, 5 * time.Second, 0},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSignalEndsAHungRun$")
		cmd.Env = append(os.Environ(), "DJX_SIGNAL_CHILD="+tc.mode)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		line, _ := bufio.NewReader(out).ReadString('\n')
		if line != "ready\n" {
			cmd.Process.Kill()
			<-exited
			t.Fatalf("child said %q", line)
		}
		start := time.Now()
		for i := 0; i < tc.signals; i++ {
			cmd.Process.Signal(syscall.SIGTERM)
			time.Sleep(50 * time.Millisecond)
		}
		select {
		case <-exited:
		case <-time.After(tc.within + time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("%s, %d SIGTERM: still running after %v", tc.mode, tc.signals, time.Since(start))
			continue
		}
		if code := cmd.ProcessState.ExitCode(); code != tc.code {
			t.Errorf("%s, %d SIGTERM: exit code %d, want %d", tc.mode, tc.signals, code, tc.code)
		}
		if d := time.Since(start); d > tc.within {
			t.Errorf("%s, %d SIGTERM: took %v, want under %v", tc.mode, tc.signals, d, tc.within)
		}
	}
}
