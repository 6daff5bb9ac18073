package profiler

import (
	"os"
	"os/exec"
	"syscall"
)

// RunAs is the user a launched application runs as (Options.RunAs): under
// sudo, the invoking user rather than root.
type RunAs struct {
	UID, GID uint32
	Groups   []uint32 // supplementary groups
	Name     string   // for messages
}

// apply makes cmd run as r (nil: as djx-bpf itself).
func (r *RunAs) apply(cmd *exec.Cmd) {
	if r == nil {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: r.UID, Gid: r.GID, Groups: r.Groups}
}

// owner is who the launch channel is made for: the launched process.
func (r *RunAs) owner() (uid, gid int) {
	if r == nil {
		return os.Geteuid(), os.Getegid()
	}
	return int(r.UID), int(r.GID)
}
