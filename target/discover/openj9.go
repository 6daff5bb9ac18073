package discover

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/target/openj9"
)

// OpenJ9VM finds the attach advertisement of an OpenJ9 JVM (in its own
// mount namespace's /tmp).
func OpenJ9VM(j JVM) (*openj9.VM, error) {
	root := filepath.Join(ProcRoot, strconv.Itoa(j.PID), "root")
	vms, err := openj9.Discover(root)
	for i := range vms {
		if vms[i].PID == j.NSPID {
			return &vms[i], nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", j.PID, err)
	}
	return nil, fmt.Errorf("pid %d: no OpenJ9 attach advertisement in %s (attach disabled with -Dcom.ibm.tools.attach.enable=no?)", j.PID, filepath.Join(root, "tmp", openj9.AttachDirName))
}

// OpenJ9Geometry asks an OpenJ9 JVM for a javacore (written to its /tmp,
// read through /proc/PID/root, then removed: see openj9.Conn.FetchJavacore) and models its heap from the
// 1STHEAPREGION lines. props are its system properties.
func OpenJ9Geometry(ctx context.Context, j JVM) (geo heap.Geometry, props map[string]string, err error) {
	vm, err := OpenJ9VM(j)
	if err != nil {
		return geo, nil, err
	}
	conn, err := vm.Attach(ctx, openj9.AttachOptions{HostPID: j.PID})
	if err != nil {
		return geo, nil, err
	}
	defer conn.Close()
	props, err = conn.SystemProperties(ctx)
	if err != nil {
		return geo, nil, err
	}
	// The target names the file it wrote; FetchJavacore reads and removes
	// only the name it asked for, never a path the reply chose.
	text, err := conn.FetchJavacore(ctx, filepath.Join(ProcRoot, strconv.Itoa(j.PID), "root"), j.UID)
	if err != nil {
		return geo, props, fmt.Errorf("read javacore of pid %d: %w", j.PID, err)
	}
	geo, err = heap.ParseJavacore(string(text))
	if err != nil {
		return geo, props, fmt.Errorf("javacore of pid %d: %w", j.PID, err)
	}
	return geo, props, nil
}

// describeOpenJ9 fills Details through OpenJ9's attach protocol.
func describeOpenJ9(ctx context.Context, j JVM) Details {
	var d Details
	geo, props, err := OpenJ9Geometry(ctx, j)
	if props != nil {
		d.VM = strings.TrimSpace(props["java.vm.name"] + " " + props["java.vm.version"])
	}
	if err != nil {
		d.Attach, d.AttachErr = err.Error(), err
		return d
	}
	d.Attach = "ok"
	d.Geometry = &geo
	d.Reserved = geo.Reserved.End - geo.Reserved.Start
	d.MaxHeap = d.Reserved
	switch {
	case geo.Mode == heap.RefsFull:
		d.Oops = "off"
	case geo.Mode.Compressed():
		d.Oops, d.OopBase, d.OopShift = "compressed refs", geo.Base, int(geo.Shift)
	}
	return d
}
