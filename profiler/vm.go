package profiler

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

// vmAttacher reaches one kind of JVM: HotSpot through its attach listener,
// OpenJ9 through its own attach protocol and a javacore. It says where the
// agent's channel goes, loads the agent, and answers what a session asks
// the VM itself. A launched JVM, whose agent came with -agentpath, is
// asked through its HotSpot one.
type vmAttacher interface {
	// String names the JVM in notes and errors.
	String() string
	// channelSpec is where the agent's channel is made, and for whom.
	channelSpec(lib []byte) channel.Spec
	// loadAgent loads the agent library at path with the agent's options.
	loadAgent(ctx context.Context, path, options string) error
	// heap is the collector and its reserved ranges; errNoRanges comes with
	// the collector when it gave none.
	heap(ctx context.Context) (heap.Info, error)
	// jcmd runs a diagnostic command: errNoListener when the VM cannot be
	// asked.
	jcmd(ctx context.Context, command string) (string, error)
	// nsPID is the JVM's pid in its own pid namespace, which names its files.
	nsPID() int
}

var (
	errNoListener = errors.New("no attach listener")
	errNoRanges   = errors.New("no heap ranges")
)

// inspectVM finds which kind of JVM pid is. Notes go to the session.
func (s *session) inspectVM(ctx context.Context, pid int) (vmAttacher, error) {
	t, err := attach.Inspect(pid)
	if errors.Is(err, attach.ErrUnsupportedVM) {
		return s.inspectOpenJ9(ctx, pid)
	}
	if err != nil {
		return nil, err
	}
	return newHotSpot(pid, t), nil
}

// attachListener is HotSpot's attach listener (attach.Target).
type attachListener interface {
	Jcmd(ctx context.Context, command string) (string, error)
	LoadAgent(ctx context.Context, path string, absolute bool, options string) error
}

// hotspot is a HotSpot JVM.
type hotspot struct {
	pid, ns int
	spec    channel.Spec
	l       attachListener // nil: none answered (a launched JVM)
}

// newHotSpot is the HotSpot JVM pid; t is nil when its attach listener
// could not be found.
func newHotSpot(pid int, t *attach.Target) *hotspot {
	h := &hotspot{pid: pid, ns: pid}
	if t != nil {
		h.l, h.ns = t, t.NSPID
		h.spec = channel.Spec{Root: t.Root, UID: t.UID, GID: t.GID}
	}
	return h
}

func (h *hotspot) String() string { return fmt.Sprintf("pid %d", h.pid) }

func (h *hotspot) channelSpec(lib []byte) channel.Spec {
	spec := h.spec
	spec.Library = lib
	return spec
}

func (h *hotspot) loadAgent(ctx context.Context, path, options string) error {
	if h.l == nil {
		return errNoListener
	}
	err := h.l.LoadAgent(ctx, path, true, options)
	var ae *attach.AgentError
	if errors.As(err, &ae) && ae.Attached && ae.ReturnCode == agentwire.RCSamplerBusy {
		return ErrSamplerBusy
	}
	return err
}

// heap asks GC.heap_info.
func (h *hotspot) heap(ctx context.Context) (heap.Info, error) {
	hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	out, err := h.jcmd(hctx, "GC.heap_info")
	if errors.Is(err, errNoListener) {
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
		return info, errNoRanges
	}
	return info, nil
}

func (h *hotspot) jcmd(ctx context.Context, command string) (string, error) {
	if h.l == nil {
		return "", errNoListener
	}
	return h.l.Jcmd(ctx, command)
}

func (h *hotspot) nsPID() int { return h.ns }
