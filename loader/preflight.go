package loader

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Sentinel errors of the environment checks; each message says what to do.
var (
	ErrPrivilege = errors.New("insufficient privileges: run as root (sudo djx-bpf ...) or grant CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE")
	ErrNoBTF     = errors.New("kernel BTF missing (/sys/kernel/btf/vmlinux): use a kernel built with CONFIG_DEBUG_INFO_BTF=y")
	ErrKernel    = errors.New("kernel too old: djx-bpf needs Linux 5.8 or newer (BPF ring buffer)")
	ErrNoBPF     = errors.New("BPF unavailable: the bpf() syscall failed; check kernel.unprivileged_bpf_disabled, seccomp profiles and CONFIG_BPF_SYSCALL")
)

const (
	capSysAdmin  = 21
	capSysPtrace = 19
	capPerfmon   = 38
	capBPF       = 39
)

// Preflight checks privileges and kernel features before anything is loaded,
// so that a user gets one actionable error instead of a verifier dump.
func Preflight() error {
	if err := checkCaps(); err != nil {
		return err
	}
	if err := checkKernel(); err != nil {
		return err
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return ErrNoBTF
	}
	return nil
}

func checkCaps() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	if has(capSysAdmin) && has(capSysPtrace) {
		return nil
	}
	var missing []string
	for _, c := range []struct {
		n    uint
		name string
	}{{capBPF, "CAP_BPF"}, {capPerfmon, "CAP_PERFMON"}, {capSysPtrace, "CAP_SYS_PTRACE"}} {
		if !has(c.n) {
			missing = append(missing, c.name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w (missing %s)", ErrPrivilege, strings.Join(missing, ", "))
}

func checkKernel() error {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Errorf("uname: %w", err)
	}
	rel := unix.ByteSliceToString(u.Release[:])
	major, minor, ok := parseRelease(rel)
	if !ok {
		return nil // unknown format: let the load itself decide
	}
	if major < 5 || (major == 5 && minor < 8) {
		return fmt.Errorf("%w (running %s)", ErrKernel, rel)
	}
	return nil
}

func parseRelease(rel string) (major, minor int, ok bool) {
	parts := strings.SplitN(rel, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	maj, err1 := strconv.Atoi(parts[0])
	minStr := parts[1]
	if i := strings.IndexFunc(minStr, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minStr = minStr[:i]
	}
	mn, err2 := strconv.Atoi(minStr)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return maj, mn, true
}
