package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// signalGrace is how long djx-bpf may take, after SIGINT or SIGTERM, to
// finish and write what it collected before it exits regardless.
var signalGrace = 15 * time.Second

// signalContext is signal.NotifyContext for SIGINT and SIGTERM with a
// guarantee: once a signal arrives djx-bpf exits within signalGrace even if
// something it waits on (a target, a file) hangs, and a second signal ends
// it at once. stop releases the signals; it may be called more than once.
func signalContext(cmd string) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		var sig os.Signal
		select {
		case sig = <-sigs:
			cancel()
		case <-done:
			return
		}
		select {
		case <-sigs:
			fmt.Fprintf(os.Stderr, "djx-bpf %s: second %v: exiting without a report\n", cmd, sig)
		case <-time.After(signalGrace):
			fmt.Fprintf(os.Stderr, "djx-bpf %s: did not finish within %v of %v: exiting without a report\n", cmd, signalGrace, sig)
		case <-done:
			return
		}
		exit(128 + int(sig.(syscall.Signal)))
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			cancel()
		})
	}
}
