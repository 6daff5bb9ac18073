package attach

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// procfs is the mount point of /proc; tests do not change it, but keeping it
// in one place documents every path the package reads.
const procfs = "/proc"

// status holds the fields of /proc/PID/status this package needs.
type status struct {
	state    byte
	tgid     int
	uid, gid int // effective
	nspid    int
	sigCgt   uint64
	sigIgn   uint64
}

func parseStatus(data []byte) (status, error) {
	st := status{uid: -1, gid: -1, nspid: -1}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 {
			continue
		}
		var err error
		switch key {
		case "State":
			st.state = f[0][0]
		case "Tgid":
			st.tgid, err = strconv.Atoi(f[0])
		case "Uid", "Gid":
			// Real, effective, saved, filesystem: HotSpot compares the peer
			// and the trigger file with its effective ids.
			if len(f) < 2 {
				return st, fmt.Errorf("status %s: %q", key, val)
			}
			var id int
			id, err = strconv.Atoi(f[1])
			if key == "Uid" {
				st.uid = id
			} else {
				st.gid = id
			}
		case "NSpid":
			// One pid per nested pid namespace, innermost last.
			st.nspid, err = strconv.Atoi(f[len(f)-1])
		case "SigCgt":
			st.sigCgt, err = strconv.ParseUint(f[0], 16, 64)
		case "SigIgn":
			st.sigIgn, err = strconv.ParseUint(f[0], 16, 64)
		}
		if err != nil {
			return st, fmt.Errorf("status %s: %w", key, err)
		}
	}
	if st.uid < 0 || st.gid < 0 {
		return st, errors.New("status: no Uid/Gid lines")
	}
	return st, nil
}

// handles reports whether the process catches or ignores sig, i.e. whether
// sending it cannot invoke the default action (SIGQUIT: terminate + core).
func (s status) handles(sig syscall.Signal) bool {
	bit := uint64(1) << (uint(sig) - 1)
	return s.sigCgt&bit != 0 || s.sigIgn&bit != 0
}

func readStatus(pid int) (status, error) {
	data, err := os.ReadFile(filepath.Join(procfs, strconv.Itoa(pid), "status"))
	if err != nil {
		return status{}, procErr(err)
	}
	return parseStatus(data)
}

// procErr maps the errors procfs returns for a vanished process to
// ErrNoProcess.
func procErr(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%w: %w", ErrNoProcess, err)
	}
	return err
}

// startTime returns field 22 of /proc/PID/stat, the process start time in
// clock ticks since boot. Together with the pid it names a process uniquely,
// which guards against signalling a recycled pid.
func startTime(pid int) (uint64, error) {
	data, err := os.ReadFile(filepath.Join(procfs, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, procErr(err)
	}
	return parseStartTime(data)
}

func parseStartTime(data []byte) (uint64, error) {
	// comm (field 2) may contain spaces and parentheses; it ends at the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, errors.New("stat: no command name")
	}
	f := strings.Fields(string(data[i+1:]))
	const idx = 22 - 3 // fields after comm start with field 3 (state)
	if len(f) <= idx {
		return 0, errors.New("stat: too few fields")
	}
	return strconv.ParseUint(f[idx], 10, 64)
}

// vmKind classifies the process by the JVM library it maps.
type vmKind int

const (
	vmNone vmKind = iota
	vmHotSpot
	vmOpenJ9
)

// classifyMaps looks for the JVM library in /proc/PID/maps. OpenJ9 also ships
// a libjvm.so (a redirector in lib/j9vm/), so libj9vm*.so decides first.
func classifyMaps(data []byte) vmKind {
	kind := vmNone
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		i := strings.IndexByte(line, '/')
		if i < 0 {
			continue
		}
		base := filepath.Base(strings.TrimSuffix(line[i:], " (deleted)"))
		switch {
		case strings.HasPrefix(base, "libj9vm") && strings.HasSuffix(base, ".so"):
			return vmOpenJ9
		case base == "libjvm.so":
			kind = vmHotSpot
		}
	}
	return kind
}

// disabledByFlags reports whether the last -XX:[+-]DisableAttachMechanism in
// the places HotSpot reads options from (JAVA_TOOL_OPTIONS, JDK_JAVA_OPTIONS,
// the command line, _JAVA_OPTIONS, in that order) enables it. Such a JVM never
// opens the attach socket; knowing it up front avoids a pointless SIGQUIT
// (which makes the JVM print a thread dump to its stdout) and the wait.
// Options in @argfiles or -XX:Flags files are not seen: the wait catches those.
func disabledByFlags(cmdline, environ []byte) bool {
	env := map[string]string{}
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			env[k] = v
		}
	}
	var args []string
	args = append(args, strings.Fields(env["JAVA_TOOL_OPTIONS"])...)
	args = append(args, strings.Fields(env["JDK_JAVA_OPTIONS"])...)
	args = append(args, strings.Split(string(bytes.TrimRight(cmdline, "\x00")), "\x00")...)
	args = append(args, strings.Fields(env["_JAVA_OPTIONS"])...)
	disabled := false
	for _, a := range args {
		switch a {
		case "-XX:+DisableAttachMechanism":
			disabled = true
		case "-XX:-DisableAttachMechanism":
			disabled = false
		}
	}
	return disabled
}
