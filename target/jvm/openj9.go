package jvm

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/target/channel"
	"github.com/djx-bpf/djx-bpf/target/discover"
	"github.com/djx-bpf/djx-bpf/target/openj9"
)

// openJ9 is an OpenJ9 JVM, reached through OpenJ9's attach protocol. Its
// heap comes from a javacore; moves are followed by rescans;
// AsyncGetCallTrace is HotSpot's, so the agent reports no stack handler
// and access paths name the sampled code only. Verified against a fake
// OpenJ9 target only: no OpenJ9 runs on the project's CI machine.
type openJ9 struct {
	j  discover.JVM
	vm *openj9.VM
	// geo is the heap read at inspection, before the agent loads; nil
	// when the javacore could not be read.
	geo *heap.Info
}

// inspectOpenJ9 reads the OpenJ9 JVM pid and its heap (a javacore, within
// timeout).
func inspectOpenJ9(ctx context.Context, pid int, timeout time.Duration, note Notes) (*openJ9, error) {
	j, ok := discover.Inspect(pid)
	if !ok || j.Kind != discover.OpenJ9 {
		return nil, fmt.Errorf("attach pid %d: not an OpenJ9 JVM", pid)
	}
	vm, err := discover.OpenJ9VM(j)
	if err != nil {
		return nil, err
	}
	o := &openJ9{j: j, vm: vm}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if geo, _, err := discover.OpenJ9Geometry(hctx, j); err != nil {
		note("heap range unknown (OpenJ9 javacore: %v); in_heap is not counted", err)
	} else {
		info := heap.Info{GC: "OpenJ9", Ranges: geo.Regions}
		if len(info.Ranges) == 0 && geo.Reserved.End > geo.Reserved.Start {
			info.Ranges = []heap.Range{geo.Reserved}
		}
		o.geo = &info
	}
	return o, nil
}

func (o *openJ9) String() string { return fmt.Sprintf("OpenJ9 pid %d", o.j.PID) }

func (o *openJ9) ChannelSpec(lib []byte) channel.Spec {
	root := filepath.Join("/proc", strconv.Itoa(o.j.PID), "root")
	return channel.Spec{Root: root, UID: o.j.UID, GID: o.j.GID, Library: lib}
}

func (o *openJ9) LoadAgent(ctx context.Context, path, options string) error {
	conn, err := o.vm.Attach(ctx, openj9.AttachOptions{HostPID: o.j.PID})
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.LoadAgentPath(ctx, path, options)
}

// Heap is the javacore's; without one, there is no HotSpot attach
// listener to ask instead.
func (o *openJ9) Heap(context.Context) (heap.Info, error) {
	if o.geo == nil {
		return heap.Info{}, ErrNoListener
	}
	return *o.geo, nil
}

func (o *openJ9) Jcmd(context.Context, string) (string, error) { return "", ErrNoListener }

// NSPID is the host's pid: the perf map and the agent's thread ids of an
// OpenJ9 JVM are looked up as if it shared our pid namespace.
func (o *openJ9) NSPID() int { return o.j.PID }
