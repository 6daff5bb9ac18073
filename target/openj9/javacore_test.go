package openj9

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFetchJavacoreHostile plays targets whose Dump.java reply or file try
// to make root read or delete something else: root must read and remove
// only the file it asked for.
func TestFetchJavacoreHostile(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "passwd")
	cases := []struct {
		name string
		dump func(root, file string) string // returns the path reported
		ok   bool
	}{
		{"honest", func(root, file string) string {
			os.WriteFile(filepath.Join(root, file), []byte(fakeJavacore), 0o644)
			return file
		}, true},
		{"names another file", func(root, file string) string {
			return "/etc/passwd"
		}, false},
		{"names a path out of its root", func(root, file string) string {
			return "/../../../" + outside
		}, false},
		{"symlink at the name", func(root, file string) string {
			os.Symlink(outside, filepath.Join(root, file))
			return file
		}, false},
		{"fifo at the name", func(root, file string) string {
			unix.Mkfifo(filepath.Join(root, file), 0o666)
			return file
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(outside, []byte("root:x:0:0::/root:/bin/sh\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			root := t.TempDir()
			victim := filepath.Join(root, "etc", "passwd")
			os.MkdirAll(filepath.Dir(victim), 0o755)
			os.WriteFile(victim, []byte("root:x:0:0::/root:/bin/sh\n"), 0o644)
			common, sem := attachDir(t, root)
			f := newFake(t, root, common, sem, "4242", 4242, os.Getuid())
			f.dump = func(file string) string { return tc.dump(root, file) }
			f.serve()
			vms, err := Discover(root)
			if err != nil || len(vms) != 1 {
				t.Fatalf("discover: %v, %v", vms, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn, err := vms[0].Attach(ctx, AttachOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			data, err := conn.FetchJavacore(ctx, root, os.Getuid())
			if tc.ok != (err == nil) {
				t.Errorf("FetchJavacore: %d bytes, %v; want success %v", len(data), err, tc.ok)
			}
			if err != nil && strings.Contains(string(data), "root:x") {
				t.Errorf("read the file a hostile target pointed at: %q", data)
			}
			for _, p := range []string{victim, outside} {
				if _, err := os.Stat(p); err != nil {
					t.Errorf("%s was removed: %v", p, err)
				}
			}
			if tc.ok {
				if !strings.Contains(string(data), "1STHEAPREGION") {
					t.Errorf("javacore %q", data)
				}
				left, _ := filepath.Glob(filepath.Join(root, "tmp", "djx-bpf-javacore-*"))
				if len(left) != 0 {
					t.Errorf("javacore left behind: %v", left)
				}
			}
		})
	}
}

// TestFetchJavacoreForeignOwner refuses a javacore that is not the
// target's own (root runs this: only root can make one).
func TestFetchJavacoreForeignOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "tmp"), 0o1777)
	os.WriteFile(filepath.Join(root, "tmp", "x"), []byte(fakeJavacore), 0o644)
	os.Chown(filepath.Join(root, "tmp", "x"), 65534, 65534)
	if _, err := readAndRemove(root, "tmp", "x", 1000); err == nil {
		t.Error("read a javacore owned by another user than the target's")
	}
	if _, err := os.Stat(filepath.Join(root, "tmp", "x")); err != nil {
		t.Errorf("removed a file not the target's: %v", err)
	}
}

// TestDiscoverRefusesSymlinkedAttachDir: an attach directory reached through
// a symlink (to a root-owned directory, say) is not used: root would
// create _attachlock and a target-owned replyInfo there.
func TestDiscoverRefusesSymlinkedAttachDir(t *testing.T) {
	root := t.TempDir()
	elsewhere := t.TempDir()
	os.MkdirAll(filepath.Join(elsewhere, "4242"), 0o755)
	os.WriteFile(filepath.Join(elsewhere, "4242", "attachInfo"), []byte("vmId=4242\nprocessId=4242\ndisplayName=x\n"), 0o644)
	os.Mkdir(filepath.Join(root, "tmp"), 0o1777)
	os.Symlink(elsewhere, filepath.Join(root, "tmp", AttachDirName))
	vms, err := Discover(root)
	if len(vms) != 0 || !(errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)) {
		t.Errorf("Discover through a symlinked attach directory: %v, %v; want ELOOP or ENOTDIR", vms, err)
	}
	// An advertisement that is a symlink is skipped too.
	os.Remove(filepath.Join(root, "tmp", AttachDirName))
	os.MkdirAll(filepath.Join(root, "tmp", AttachDirName, "4242"), 0o755)
	os.Symlink(filepath.Join(elsewhere, "4242", "attachInfo"), filepath.Join(root, "tmp", AttachDirName, "4242", "attachInfo"))
	if vms, err := Discover(root); len(vms) != 0 || err == nil {
		t.Errorf("Discover with a symlinked attachInfo: %v, %v", vms, err)
	}
}
