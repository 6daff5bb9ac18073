// Package openj9 implements the OpenJ9 (IBM J9) dynamic attach protocol in
// Go: discovering the JVMs that advertise themselves in the shared attach
// directory, and attaching to one to load an agent, read its system
// properties or run a diagnostic command such as writing a javacore.
//
// The protocol, from OpenJ9's openj9.internal.tools.attach.target sources
// and jattach's OpenJ9 support:
//
//   - Every JVM with the attach API on creates <tmp>/.com_ibm_tools_attach/
//     <vmId>/attachInfo, a Java properties file (vmId, processId, userUid,
//     displayName, ...), and an empty attachNotificationSync file beside it.
//     All JVMs wait on one System V semaphore keyed by ftok on
//     <tmp>/.com_ibm_tools_attach/_notifier.
//   - The attacher takes the flock on _attachlock, listens on a loopback TCP
//     port, writes "<key>\n<port>\n" to the target's replyInfo (mode 0600,
//     owned by the target's user), flocks every VM's attachNotificationSync
//     (so that each VM consumes only one post) and posts the semaphore once
//     per VM directory.
//   - Every woken VM looks for its replyInfo; the target connects to the
//     port and sends "ATTACH_CONNECTED <key> \0". The attacher then removes
//     replyInfo, unlocks, takes back unconsumed posts and releases the lock.
//   - Commands and replies are NUL-terminated strings: ATTACH_LOADAGENTPATH(
//     path,options) -> ATTACH_ACK or ATTACH_ERR ...; ATTACH_GETSYSTEMPROPERTIES
//     and ATTACH_DIAGNOSTICS:<cmd>,<args> -> a Java properties text;
//     ATTACH_DETACH -> ATTACH_DETACHED.
//
// The semaphore and the loopback socket live in the target's IPC and network
// namespaces: attaching to a JVM in another container must run inside them,
// which this package does not do (Attach reports ErrNamespace).
package openj9

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/djx-bpf/djx-bpf/safety/safefs"
	"golang.org/x/sys/unix"
)

// AttachDirName is the shared attach directory's name inside the system
// temporary directory (OpenJ9 uses /tmp on Linux unless
// -Dcom.ibm.tools.attach.directory says otherwise).
const AttachDirName = ".com_ibm_tools_attach"

// VM is a JVM advertised in an attach directory.
type VM struct {
	ID          string // vmId: the directory name, by default the pid
	PID         int    // processId, in the JVM's own pid namespace
	UID         int    // userUid
	User        string // userId (user name)
	DisplayName string
	Version     string // advertisement format version
	// Dir is the VM's directory and CommonDir the attach directory, as paths
	// in this process's mount namespace (under the root given to Discover).
	Dir, CommonDir string
	// Props are all properties of attachInfo.
	Props map[string]string

	// root and rel are the root given to Discover and the attach directory
	// below it: attaching reopens it from there, refusing symlinks.
	root, rel string
}

// AdvertError is an attach directory entry that could not be read.
type AdvertError struct {
	Dir string
	Err error
}

func (e *AdvertError) Error() string { return fmt.Sprintf("openj9 advertisement %s: %v", e.Dir, e.Err) }
func (e *AdvertError) Unwrap() error { return e.Err }

// Discover lists the JVMs advertised under root (a container's root, e.g.
// /proc/PID/root, or "/") in <root>/tmp/.com_ibm_tools_attach. See DiscoverDir.
func Discover(root string) ([]VM, error) {
	return discover(root, filepath.Join("tmp", AttachDirName))
}

// DiscoverDir lists the JVMs advertised in the attach directory dir. A
// missing directory means no JVMs (nil, nil). Entries that cannot be read
// are skipped and reported together as *AdvertError values joined in the
// error, next to the VMs that could be read.
func DiscoverDir(dir string) ([]VM, error) { return discover(dir, ".") }

// discover lists the VMs in the attach directory rel below root; no
// component of rel, nor anything in it, is followed as a symlink.
func discover(root, rel string) ([]VM, error) {
	dir := filepath.Join(root, rel)
	rootfd, err := safefs.OpenRoot(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("openj9 discover: %w", err)
	}
	fd, err := safefs.OpenAt(rootfd, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	unix.Close(rootfd)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("openj9 discover %s: %w", dir, err)
	}
	d := os.NewFile(uintptr(fd), dir)
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("openj9 discover: %w", err)
	}
	var vms []VM
	var errs []error
	for _, e := range entries {
		if !isVMDir(e) {
			continue
		}
		vmDir := filepath.Join(dir, e.Name())
		data, err := readAdvert(root, filepath.Join(rel, e.Name(), "attachInfo"))
		if err != nil {
			errs = append(errs, &AdvertError{Dir: vmDir, Err: err})
			continue
		}
		vm, err := ParseAttachInfo(data)
		if err != nil {
			errs = append(errs, &AdvertError{Dir: vmDir, Err: err})
			continue
		}
		vm.Dir, vm.CommonDir, vm.root, vm.rel = vmDir, dir, root, rel
		vms = append(vms, vm)
	}
	sort.Slice(vms, func(i, j int) bool { return vms[i].PID < vms[j].PID })
	return vms, errors.Join(errs...)
}

// isVMDir reports whether an attach directory entry is a VM's directory:
// the control files (_attachlock, _notifier, _master) start with '_'.
func isVMDir(e os.DirEntry) bool {
	n := e.Name()
	return e.IsDir() && n != "" && n[0] != '_' && n[0] != '.'
}

// ParseAttachInfo parses an attachInfo advertisement. Like OpenJ9, it
// requires vmId and displayName; processId must be a number.
func ParseAttachInfo(data []byte) (VM, error) {
	props, err := ParseProperties(data)
	if err != nil {
		return VM{}, fmt.Errorf("parse attachInfo: %w", err)
	}
	vm := VM{
		ID:          props["vmId"],
		User:        props["userId"],
		DisplayName: props["displayName"],
		Version:     props["version"],
		Props:       props,
	}
	if vm.ID == "" {
		return vm, fmt.Errorf("parse attachInfo: no vmId")
	}
	if _, ok := props["displayName"]; !ok {
		return vm, fmt.Errorf("parse attachInfo: no displayName")
	}
	if vm.PID, err = strconv.Atoi(props["processId"]); err != nil || vm.PID <= 0 {
		return vm, fmt.Errorf("parse attachInfo: processId %q is not a process id", props["processId"])
	}
	if s, ok := props["userUid"]; ok {
		if vm.UID, err = strconv.Atoi(s); err != nil || vm.UID < 0 {
			return vm, fmt.Errorf("parse attachInfo: userUid %q is not a uid", s)
		}
	}
	return vm, nil
}

// ParseProperties parses the java.util.Properties text format: '#' and '!'
// comments, key=value, key:value or key value, backslash escapes (\t \n \r
// \f \uXXXX and escaped separators) and lines continued by a trailing
// backslash. Later keys win, as in Java.
func ParseProperties(data []byte) (map[string]string, error) {
	props := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	var logical strings.Builder
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimLeft(strings.TrimSuffix(sc.Text(), "\r"), " \t\f")
		if logical.Len() == 0 && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		if trailingBackslashes(line)%2 == 1 {
			logical.WriteString(line[:len(line)-1])
			continue
		}
		logical.WriteString(line)
		k, v, err := splitProperty(logical.String())
		logical.Reset()
		if err != nil {
			return nil, fmt.Errorf("properties line %d: %w", lineNo, err)
		}
		props[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if logical.Len() > 0 {
		k, v, err := splitProperty(logical.String())
		if err != nil {
			return nil, fmt.Errorf("properties line %d: %w", lineNo, err)
		}
		props[k] = v
	}
	return props, nil
}

func trailingBackslashes(s string) int {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n
}

// splitProperty splits a logical line at the first unescaped '=', ':' or
// whitespace, and unescapes both halves.
func splitProperty(line string) (string, string, error) {
	end := len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			end = i
			break
		}
	}
	key, rest := line[:end], line[end:]
	rest = strings.TrimLeft(rest, " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	k, err := unescape(key)
	if err != nil {
		return "", "", fmt.Errorf("key %q: %w", key, err)
	}
	v, err := unescape(rest)
	if err != nil {
		return "", "", fmt.Errorf("value of %q: %w", k, err)
	}
	return k, v, nil
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, "\\") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("truncated \\u escape")
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("bad \\u escape %q", s[i-1:i+5])
			}
			if utf8.ValidRune(rune(r)) {
				b.WriteRune(rune(r))
			} else {
				b.WriteRune(utf8.RuneError)
			}
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}
