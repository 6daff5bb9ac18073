package channel

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"github.com/djx-bpf/djx-bpf/safety/safefs"
	"golang.org/x/sys/unix"
)

// libDirPrefix names the directory in a target's /tmp that keeps the agent
// library for every profile of the JVMs sharing that /tmp:
// djx-bpf-agent-<the library's SHA-256, 16 hex digits>. HotSpot loads an
// agent with dlopen, which hands back the library already loaded from the
// same path: one copy per JVM however often it is attached, and a djx-bpf
// with another agent uses another path. It is never removed (a JVM
// attached later needs the same path), and it is root's (mode 0711, the
// library 0644): the target's user can neither change the library nor
// plant another at the path, only make the name unusable by taking it
// first, which costs a copy of the library per attach (placeLibrary).
const libDirPrefix = "djx-bpf-agent-"

// libDirName is the directory's name for lib.
func libDirName(lib []byte) string {
	sum := sha256.Sum256(lib)
	return libDirPrefix + hex.EncodeToString(sum[:8])
}

// errNotOurs is a library directory or file someone else made.
var errNotOurs = errors.New("not root's")

// placeLibrary makes sure the /tmp at tmpFD holds lib at
// <libDirName>/libdjxagent.so, a file of ours in a directory of ours, and
// returns the name of the directory.
func placeLibrary(tmpFD int, lib []byte) (string, error) {
	name := libDirName(lib)
	if err := unix.Mkdirat(tmpFD, name, dirMode); err != nil && !errors.Is(err, unix.EEXIST) {
		return "", fmt.Errorf("create %s: %w", name, err)
	}
	dfd, err := unix.Openat(tmpFD, name, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_RDONLY, 0)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", name, err)
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return "", fmt.Errorf("stat %s: %w", name, err)
	}
	if int(st.Uid) != os.Geteuid() {
		return "", fmt.Errorf("%s: owned by uid %d: %w", name, st.Uid, errNotOurs)
	}
	if st.Mode&0o7777 != dirMode {
		// Ours, made now under a umask: nobody else could have written in it.
		if err := unix.Fchmod(dfd, dirMode); err != nil {
			return "", fmt.Errorf("chmod %s: %w", name, err)
		}
	}
	if same(dfd, lib) {
		return name, nil
	}
	// Written aside and renamed in: a JVM never opens a half-written one.
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := ".lib-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(dfd, tmp, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return "", fmt.Errorf("create library in %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(lib)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, libName)
	}
	if err != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return "", fmt.Errorf("write library in %s: %w", name, err)
	}
	return name, nil
}

// same reports whether the directory dfd holds lib as a regular file of
// ours named libdjxagent.so.
func same(dfd int, lib []byte) bool {
	f, err := safefs.OpenFileAt(dfd, libName, libName)
	if err != nil {
		return false
	}
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || int(st.Uid) != os.Geteuid() || st.Mode&unix.S_IFMT != unix.S_IFREG ||
		st.Mode&0o022 != 0 || st.Size != int64(len(lib)) {
		return false
	}
	got, err := safefs.ReadAll(f, int64(len(lib)))
	return err == nil && bytes.Equal(got, lib)
}
