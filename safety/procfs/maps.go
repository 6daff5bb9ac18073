package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Mapping is one line of /proc/PID/maps.
type Mapping struct {
	Start, End, Offset uint64
	Perms              string
	Major, Minor       uint32 // device of the file mapped (0:0 when anonymous)
	Inode              uint64
	// Path is the rest of the line as the kernel wrote it: "" when
	// anonymous, "[heap]" and the like, or a path escaped as maps does
	// ("\012" for a newline), perhaps ending in " (deleted)".
	Path string
}

// File reports whether m maps a file (it has an inode).
func (m Mapping) File() bool { return m.Inode != 0 }

// ParseMaps parses /proc/PID/maps, "start-end perms offset major:minor
// inode [path]" a line; a malformed line is an error.
func ParseMaps(data []byte) ([]Mapping, error) {
	var ms []Mapping
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		m, err := parseMapping(string(line))
		if err != nil {
			return nil, fmt.Errorf("maps line %d: %w", n, err)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// ParseMapsLine parses one line of /proc/PID/maps, for callers that skip
// a malformed line rather than refuse the whole file.
func ParseMapsLine(line string) (Mapping, error) { return parseMapping(line) }

func parseMapping(line string) (Mapping, error) {
	var f [5]string
	rest := line
	for i := range f {
		rest = strings.TrimLeft(rest, " ")
		var ok bool
		f[i], rest, ok = strings.Cut(rest, " ")
		if !ok && i < 4 {
			return Mapping{}, fmt.Errorf("%d fields in %q", i+1, line)
		}
	}
	var m Mapping
	lo, hi, ok := strings.Cut(f[0], "-")
	maj, min, ok2 := strings.Cut(f[3], ":")
	if !ok || !ok2 {
		return Mapping{}, fmt.Errorf("bad range or device in %q", line)
	}
	var errs [6]error
	m.Start, errs[0] = strconv.ParseUint(lo, 16, 64)
	m.End, errs[1] = strconv.ParseUint(hi, 16, 64)
	m.Offset, errs[2] = strconv.ParseUint(f[2], 16, 64)
	var major, minor uint64
	major, errs[3] = strconv.ParseUint(maj, 16, 32)
	minor, errs[4] = strconv.ParseUint(min, 16, 32)
	m.Inode, errs[5] = strconv.ParseUint(f[4], 10, 64)
	for _, err := range errs {
		if err != nil {
			return Mapping{}, fmt.Errorf("bad number in %q", line)
		}
	}
	if m.End < m.Start {
		return Mapping{}, fmt.Errorf("range ends before it starts in %q", line)
	}
	m.Major, m.Minor = uint32(major), uint32(minor)
	m.Perms = f[1]
	m.Path = strings.TrimLeft(rest, " ")
	return m, nil
}

// Maps reads and parses pid's maps below root, sorted by address.
func Maps(root string, pid int) ([]Mapping, error) {
	data, err := Read(root, pid, "maps")
	if err != nil {
		return nil, err
	}
	ms, err := ParseMaps(data)
	if err != nil {
		return nil, fmt.Errorf("maps of pid %d: %w", pid, err)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Start < ms[j].Start })
	return ms, nil
}

// MountPoint is the part of a /proc/PID/mountinfo line that says which
// filesystem a file is on.
type MountPoint struct {
	ID           int // mount ID, unique system-wide
	Major, Minor uint32
	Point        string // mount point, relative to the process's root, unescaped
	FSType       string // "ext4", "fuse.sshfs", ...
}

// ParseMountinfo parses /proc/PID/mountinfo; malformed lines are left out
// (the kernel writes it, but a mount point is the mounter's to name).
func ParseMountinfo(data []byte) []MountPoint {
	var ms []MountPoint
	for _, line := range strings.Split(string(data), "\n") {
		// id parent major:minor root point options [tags...] - fstype source super
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 1 {
			continue
		}
		maj, min, ok := strings.Cut(f[2], ":")
		major, err1 := strconv.ParseUint(maj, 10, 32)
		minor, err2 := strconv.ParseUint(min, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			continue
		}
		id, _ := strconv.Atoi(f[0])
		ms = append(ms, MountPoint{ID: id, Major: uint32(major), Minor: uint32(minor), Point: unescapeOctal(f[4]), FSType: g[0]})
	}
	return ms
}

// unescapeOctal undoes mountinfo's escaping of space, tab, newline and
// backslash as \NNN.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Mounts reads and parses pid's mountinfo below root.
func Mounts(root string, pid int) ([]MountPoint, error) {
	data, err := Read(root, pid, "mountinfo")
	if err != nil {
		return nil, err
	}
	return ParseMountinfo(data), nil
}

// FSTypeOf returns the type of the filesystem of device major:minor among
// mounts; "" when none is mounted there (a btrfs subvolume's files carry
// a device of their own, a file may outlive its mount).
func FSTypeOf(mounts []MountPoint, major, minor uint32) string {
	for _, m := range mounts {
		if m.Major == major && m.Minor == minor {
			return m.FSType
		}
	}
	return ""
}

// FSTypeAt returns the type of the filesystem mounted at the longest
// mount point that is a prefix of path (absolute, relative to the
// process's root, without symlinks); "" when none is.
func FSTypeAt(mounts []MountPoint, path string) string {
	best, typ := -1, ""
	for _, m := range mounts {
		p := strings.TrimSuffix(m.Point, "/")
		if (path == p || strings.HasPrefix(path, p+"/")) && len(p) >= best {
			best, typ = len(p), m.FSType // later mounts stack over earlier ones
		}
	}
	return typ
}

// MayBlock reports whether reading a file on a filesystem of type fstype
// (as mountinfo names it) may wait for an answer from outside the kernel
// and local storage, for as long as that party wishes: a FUSE server
// (mountable by any user where fusermount is installed) or a network
// server.
func MayBlock(fstype string) bool {
	if strings.HasPrefix(fstype, "fuse.") || strings.HasPrefix(fstype, "fuseblk.") {
		return true
	}
	switch fstype {
	case "fuse", "fuseblk", "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "ceph",
		"afs", "coda", "orangefs", "pvfs2", "lustre", "gfs2", "ocfs2", "glusterfs":
		return true
	}
	return false
}

// ErrMayBlock means a file lies on a filesystem whose reads may wait for
// another party for good (MayBlock).
var ErrMayBlock = errors.New("on a filesystem that may never answer a read")

// CheckMapped fails with ErrMayBlock when the file pid maps at start lies
// on a filesystem that may block, by the mapping's device in its maps and
// mountinfo (written by the kernel: reading them touches no such
// filesystem). What it cannot tell (no such mapping, an unknown device,
// unreadable files) it lets through.
func CheckMapped(root string, pid int, start uint64) error {
	ms, err := Maps(root, pid)
	if err != nil {
		return nil
	}
	for _, m := range ms {
		if m.Start != start || !m.File() {
			continue
		}
		mounts, err := Mounts(root, pid)
		if err != nil {
			return nil
		}
		if t := FSTypeOf(mounts, m.Major, m.Minor); MayBlock(t) {
			return fmt.Errorf("%s of pid %d is %w (%s)", m.Path, pid, ErrMayBlock, t)
		}
		return nil
	}
	return nil
}

// CheckPath fails with ErrMayBlock when path, inside pid's root, lies on
// a filesystem that may block, by the mount points in its mountinfo.
func CheckPath(root string, pid int, path string) error {
	mounts, err := Mounts(root, pid)
	if err != nil {
		return nil
	}
	if t := FSTypeAt(mounts, path); MayBlock(t) {
		return fmt.Errorf("%s of pid %d is %w (%s)", path, pid, ErrMayBlock, t)
	}
	return nil
}

// FDFSType returns the type of the filesystem the open file fd (of this
// process) lies on, by its mount ID in /proc/self/fdinfo and the
// mountinfo of this process or, for a file reached through another mount
// namespace, of process pid (0: none); "" when not found. Unlike fstatfs,
// it never calls into the filesystem.
func FDFSType(fd, pid int) string {
	data, err := Read(Mount, os.Getpid(), "fdinfo/"+strconv.Itoa(fd))
	if err != nil {
		return ""
	}
	id := -1
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "mnt_id:"); ok {
			id, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if id < 0 {
		return ""
	}
	for _, p := range []int{os.Getpid(), pid} {
		if p <= 0 {
			continue
		}
		mounts, err := Mounts(Mount, p)
		if err != nil {
			continue
		}
		for _, m := range mounts {
			if m.ID == id {
				return m.FSType
			}
		}
	}
	return ""
}
