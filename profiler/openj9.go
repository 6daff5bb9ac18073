package profiler

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/djx-bpf/djx-bpf/agent"
	"github.com/djx-bpf/djx-bpf/channel"
	"github.com/djx-bpf/djx-bpf/discover"
	"github.com/djx-bpf/djx-bpf/heap"
	"github.com/djx-bpf/djx-bpf/openj9"
	"github.com/djx-bpf/djx-bpf/report"
)

// attachOpenJ9 loads the agent into an OpenJ9 JVM through OpenJ9's attach
// protocol and profiles it. The heap comes from a javacore; moves are
// followed by rescans; AsyncGetCallTrace is HotSpot's, so the agent
// reports no stack handler and access paths name the sampled code only.
// Verified against a fake OpenJ9 target only: no OpenJ9 runs on the
// project's CI machine.
func (s *session) attachOpenJ9(ctx context.Context, pid int) (*report.Report, error) {
	j, ok := discover.Inspect(pid)
	if !ok || j.Kind != discover.OpenJ9 {
		return nil, fmt.Errorf("attach pid %d: not an OpenJ9 JVM", pid)
	}
	vm, err := discover.OpenJ9VM(j)
	if err != nil {
		return nil, err
	}
	hctx, cancel := context.WithTimeout(ctx, s.opts.AgentTimeout)
	defer cancel()
	if geo, _, err := discover.OpenJ9Geometry(hctx, j); err != nil {
		s.addNote("heap range unknown (OpenJ9 javacore: %v); in_heap is not counted", err)
	} else {
		info := heap.Info{GC: "OpenJ9", Ranges: geo.Regions}
		if len(info.Ranges) == 0 && geo.Reserved.End > geo.Reserved.Start {
			info.Ranges = []heap.Range{geo.Reserved}
		}
		s.heapPre = &info
	}
	lib, err := agent.Library()
	if err != nil {
		return nil, err
	}
	root := filepath.Join("/proc", strconv.Itoa(pid), "root")
	if s.ch, err = channel.Create(channel.Spec{Root: root, UID: j.UID, GID: j.GID, Library: lib}); err != nil {
		return nil, fmt.Errorf("prepare agent channel for pid %d: %w", pid, err)
	}
	exited := watchExit(pid)
	err = s.connectAgent(ctx, pid, exited, func(actx context.Context) error {
		s.opts.note("attaching to OpenJ9 pid %d", pid)
		conn, err := vm.Attach(actx, openj9.AttachOptions{HostPID: pid})
		if err == nil {
			err = conn.LoadAgentPath(actx, s.ch.LibraryPath(), s.opts.agentOptions(s.ch.SocketPath()))
			conn.Close()
		}
		if err != nil {
			return fmt.Errorf("load agent into OpenJ9 pid %d: %w", pid, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.run(ctx, exited)
}
