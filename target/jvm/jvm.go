// Package jvm reaches one JVM from outside as a session does: HotSpot
// through its attach listener, OpenJ9 through its own attach protocol and
// a javacore. A VM says where the agent's channel goes, loads the agent,
// and answers what a session asks the VM itself (its heap, jcmd); a
// Process is what the session reads of its process through /proc.
package jvm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/target/attach"
	"github.com/djx-bpf/djx-bpf/target/channel"
)

// VM reaches one kind of JVM. A launched JVM, whose agent came with
// -agentpath, is asked through its HotSpot one.
type VM interface {
	// String names the JVM in notes and errors.
	String() string
	// ChannelSpec is where the agent's channel is made, and for whom.
	ChannelSpec(lib []byte) channel.Spec
	// LoadAgent loads the agent library at path with the agent's options.
	LoadAgent(ctx context.Context, path, options string) error
	// Heap is the collector and its reserved ranges; ErrNoRanges comes
	// with the collector when it gave none.
	Heap(ctx context.Context) (heap.Info, error)
	// Jcmd runs a diagnostic command: ErrNoListener when the VM cannot be
	// asked.
	Jcmd(ctx context.Context, command string) (string, error)
	// NSPID is the JVM's pid in its own pid namespace, which names its files.
	NSPID() int
}

var (
	// ErrNoListener: the VM cannot be asked (no attach listener answered).
	ErrNoListener = errors.New("no attach listener")
	// ErrNoRanges: the collector named no heap ranges.
	ErrNoRanges = errors.New("no heap ranges")
	// ErrSamplerBusy means another JVMTI environment holds the JVM's heap
	// sampler, which HotSpot grants to one environment at a time.
	ErrSamplerBusy = errors.New("the JVM's heap sampler is held by another agent (is another djx-bpf profile of this JVM running?); wait for it to finish and try again")
)

// Notes are where notes on a VM go: into the session's report.
type Notes func(format string, args ...any)

// Inspect finds which kind of JVM pid is; an OpenJ9 JVM's heap is read
// within timeout.
func Inspect(ctx context.Context, pid int, timeout time.Duration, note Notes) (VM, error) {
	t, err := attach.Inspect(pid)
	if errors.Is(err, attach.ErrUnsupportedVM) {
		return inspectOpenJ9(ctx, pid, timeout, note)
	}
	if err != nil {
		return nil, err
	}
	return NewHotSpot(pid, t), nil
}

// Listener is HotSpot's attach listener (attach.Target).
type Listener interface {
	Jcmd(ctx context.Context, command string) (string, error)
	LoadAgent(ctx context.Context, path string, absolute bool, options string) error
}

// HotSpot is a HotSpot JVM: PID on the host, NS in its own pid namespace.
type HotSpot struct {
	PID, NS int
	spec    channel.Spec
	L       Listener // nil: none answered (a launched JVM)
}

// NewHotSpot is the HotSpot JVM pid; t is nil when its attach listener
// could not be found.
func NewHotSpot(pid int, t *attach.Target) *HotSpot {
	h := &HotSpot{PID: pid, NS: pid}
	if t != nil {
		h.L, h.NS = t, t.NSPID
		h.spec = channel.Spec{Root: t.Root, UID: t.UID, GID: t.GID}
	}
	return h
}

func (h *HotSpot) String() string { return fmt.Sprintf("pid %d", h.PID) }

// ChannelSpec is the JVM's root and user.
func (h *HotSpot) ChannelSpec(lib []byte) channel.Spec {
	spec := h.spec
	spec.Library = lib
	return spec
}

// LoadAgent loads the agent through the attach listener.
func (h *HotSpot) LoadAgent(ctx context.Context, path, options string) error {
	if h.L == nil {
		return ErrNoListener
	}
	err := h.L.LoadAgent(ctx, path, true, options)
	var ae *attach.AgentError
	if errors.As(err, &ae) && ae.Attached && ae.ReturnCode == agentwire.RCSamplerBusy {
		return ErrSamplerBusy
	}
	return err
}

// Heap asks GC.heap_info.
func (h *HotSpot) Heap(ctx context.Context) (heap.Info, error) {
	hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	out, err := h.Jcmd(hctx, "GC.heap_info")
	if errors.Is(err, ErrNoListener) {
		return heap.Info{}, err
	}
	if err != nil {
		return heap.Info{}, fmt.Errorf("GC.heap_info: %w", err)
	}
	info, err := heap.ParseHeapInfo(out)
	if err != nil {
		return heap.Info{}, fmt.Errorf("GC.heap_info: %w", err)
	}
	if len(info.Ranges) == 0 {
		return info, ErrNoRanges
	}
	return info, nil
}

// Jcmd runs command through the attach listener.
func (h *HotSpot) Jcmd(ctx context.Context, command string) (string, error) {
	if h.L == nil {
		return "", ErrNoListener
	}
	return h.L.Jcmd(ctx, command)
}

// NSPID is the JVM's pid in its namespace.
func (h *HotSpot) NSPID() int { return h.NS }
