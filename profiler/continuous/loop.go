// Package continuous runs a profile for days: it cuts it into windows of
// a fixed length and hands each window to an exporter, through a bounded
// queue that keeps the windows a backend could not take yet, retries them
// with backoff, and drops (and counts) the oldest when it is full. It
// knows neither how windows are profiled (a Source) nor where they go (an
// Exporter), so that it is tested with fakes and a fake clock.
package continuous

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/djx-bpf/djx-bpf/report"
)

// JVMProfile is one JVM's report of a window, with the labels a backend
// selects by.
type JVMProfile struct {
	PID int
	// Main is the JVM's main class or jar.
	Main   string
	Report *report.Report
	// Final: the JVM exited (or let go) during the window.
	Final bool
}

// Window is what a window of the profile holds.
type Window struct {
	Seq        uint64 // 1 for the first window
	Start, End time.Time
	JVMs       []JVMProfile
	// Dropped is how many windows the queue had dropped when this one was
	// cut: a backend sees that its series has holes, and how many.
	Dropped uint64
}

// Source cuts the window that ends now; the loop calls it once a window.
type Source interface {
	Cut(ctx context.Context) ([]JVMProfile, error)
}

// Exporter sends a window to a backend. An error wrapped by Permanent is
// not retried (the backend refused the data itself); any other is.
type Exporter interface {
	Export(ctx context.Context, w *Window) error
}

// permanent marks an error retrying cannot fix.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks err as one that retrying cannot fix.
func Permanent(err error) error { return permanent{err} }

// IsPermanent says whether err was marked by Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

// Config sets the loop's window and what it does when the backend is down.
type Config struct {
	Window time.Duration // default DefaultWindow
	// Queue is how many windows wait for the backend at most (default
	// DefaultQueue); past it the oldest is dropped and counted.
	Queue int
	// MinBackoff and MaxBackoff bound the wait between two tries of one
	// window (defaults 1s, and 30s or the window if shorter); it doubles
	// after each failure.
	MinBackoff, MaxBackoff time.Duration
	// Flush bounds, after ctx ends, the time spent sending the windows
	// still queued (default 10s); those left are dropped and counted.
	Flush time.Duration
	// Notify, when set, hears about failures and drops.
	Notify func(msg string)
	// Clock, when set, replaces the wall clock (tests).
	Clock Clock
}

// Defaults of Config.
const (
	DefaultWindow = 60 * time.Second
	DefaultQueue  = 10
)

// Clock is the time the loop runs on.
type Clock interface {
	Now() time.Time
	// NewTicker ticks every d; stop releases it.
	NewTicker(d time.Duration) (c <-chan time.Time, stop func())
	// After fires once after d.
	After(d time.Duration) <-chan time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
func (wallClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Stats count what the loop did.
type Stats struct {
	Windows   uint64 // cut
	Sent      uint64 // taken by the backend
	Retries   uint64 // failed tries that were retried
	Dropped   uint64 // windows lost: queue full, refused, or unsent at the stop
	Refused   uint64 // of Dropped: the backend refused them (Permanent)
	CutErrors uint64 // cuts the source failed
}

func (c *Config) fill() {
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.Queue <= 0 {
		c.Queue = DefaultQueue
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = time.Second
	}
	if c.MaxBackoff <= 0 {
		// Past a window, waiting longer only lets the queue fill.
		c.MaxBackoff = min(30*time.Second, c.Window)
	}
	c.MaxBackoff = max(c.MaxBackoff, c.MinBackoff)
	if c.Flush <= 0 {
		c.Flush = 10 * time.Second
	}
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
}

func (c *Config) notify(format string, args ...any) {
	if c.Notify != nil {
		c.Notify(fmt.Sprintf(format, args...))
	}
}
