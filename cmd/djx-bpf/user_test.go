package main

import (
	"os"
	"testing"
)

// TestLaunchUser: under sudo, launch mode runs the application as the
// invoking user, not root; --user chooses another.
func TestLaunchUser(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if os.Geteuid() != 0 {
		r, err := launchUser("", env(map[string]string{"SUDO_UID": "65534", "SUDO_GID": "65534"}))
		if r != nil || err != nil {
			t.Errorf("not root: %+v, %v; want djx-bpf's own user", r, err)
		}
		return
	}
	r, err := launchUser("", env(map[string]string{"SUDO_UID": "65534", "SUDO_GID": "65533"}))
	if err != nil || r == nil || r.UID != 65534 || r.GID != 65533 {
		t.Errorf("under sudo: %+v, %v; want uid 65534 gid 65533", r, err)
	}
	if r, err := launchUser("", env(nil)); r != nil || err != nil {
		t.Errorf("root, no sudo: %+v, %v; want nil", r, err)
	}
	if r, err := launchUser("", env(map[string]string{"SUDO_UID": "0"})); r != nil || err != nil {
		t.Errorf("sudo from root: %+v, %v; want nil", r, err)
	}
	for _, u := range []string{"nobody", "65534"} {
		r, err := launchUser(u, env(map[string]string{"SUDO_UID": "1000"}))
		if err != nil || r == nil || r.UID != 65534 {
			t.Errorf("--user %s: %+v, %v; want uid 65534", u, r, err)
		}
	}
	if _, err := launchUser("no-such-user-djx", env(nil)); err == nil {
		t.Error("--user of an unknown user accepted")
	}
}
