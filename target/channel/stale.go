package channel

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/djx-bpf/djx-bpf/safety/safefs"
	"golang.org/x/sys/unix"
)

// marker is the owner file's text: the pid and start time of the djx-bpf
// process that made the directory.
func marker(pid int) string {
	return fmt.Sprintf("djx-bpf %d %d\n", pid, startTime(pid))
}

// startTime is a process's start time in clock ticks since boot (field 22
// of /proc/PID/stat), 0 if it is gone.
func startTime(pid int) uint64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return 0
	}
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}

// CleanStale removes the channel directories in the /tmp directory tmpFD
// whose djx-bpf process is gone (killed with SIGKILL, say). Only what is
// provably ours goes: a djx-bpf-<16 hex> directory owned by us with our
// mode, whose owner marker (a regular file of ours) names a process that no
// longer runs; only the names we create are unlinked in it, so a directory
// holding anything else stays. It returns how many it removed.
func CleanStale(tmpFD int) int {
	fd, err := unix.Openat(tmpFD, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	d := os.NewFile(uintptr(fd), "tmp")
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	removed := 0
	for _, n := range names {
		if ours(n) && stale(tmpFD, n) {
			dfd, err := unix.Openat(tmpFD, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			for _, f := range []string{sockName, libName, markerName} {
				unix.Unlinkat(dfd, f, 0)
			}
			unix.Close(dfd)
			if unix.Unlinkat(tmpFD, n, unix.AT_REMOVEDIR) == nil {
				removed++
			}
		}
	}
	return removed
}

// ours reports whether name has the form of our directories.
func ours(name string) bool {
	hex, ok := strings.CutPrefix(name, dirPrefix)
	if !ok || len(hex) != 16 {
		return false
	}
	for _, c := range hex {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// stale reports whether tmpFD/name is a directory we made for a djx-bpf
// process that is gone.
func stale(tmpFD int, name string) bool {
	var st unix.Stat_t
	if unix.Fstatat(tmpFD, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil ||
		st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o7777 != dirMode {
		return false
	}
	f, err := safefs.OpenFileAt(tmpFD, name+"/"+markerName, name+"/"+markerName)
	if err != nil {
		return false
	}
	defer f.Close()
	var mst unix.Stat_t
	if unix.Fstat(int(f.Fd()), &mst) != nil || int(mst.Uid) != os.Geteuid() {
		return false
	}
	data, err := safefs.ReadAll(f, 128)
	if err != nil {
		return false
	}
	var pid int
	var start uint64
	if _, err := fmt.Sscanf(string(data), "djx-bpf %d %d\n", &pid, &start); err != nil || pid <= 0 {
		return false
	}
	return startTime(pid) != start
}
