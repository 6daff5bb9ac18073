package main

import (
	"fmt"
	"os"
	"os/user"
	"strconv"

	"github.com/djx-bpf/djx-bpf/target/launch"
)

// launchUser says whom launch mode runs the application as: the --user
// flag's user (a name or a uid), else under sudo the invoking user
// (SUDO_UID, SUDO_GID), else nil (djx-bpf's own user). Running a user's
// application as root because djx-bpf needs root would surprise them.
func launchUser(flagVal string, getenv func(string) string) (*launch.RunAs, error) {
	if flagVal != "" {
		u, err := user.Lookup(flagVal)
		if err != nil {
			if _, nerr := strconv.ParseUint(flagVal, 10, 32); nerr != nil {
				return nil, fmt.Errorf("--user %s: %w", flagVal, err)
			}
			if u, err = user.LookupId(flagVal); err != nil {
				return nil, fmt.Errorf("--user %s: %w", flagVal, err)
			}
		}
		return runAsOf(u)
	}
	if os.Geteuid() != 0 || getenv("SUDO_UID") == "" {
		return nil, nil
	}
	uid, err := strconv.ParseUint(getenv("SUDO_UID"), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("SUDO_UID %q is not a uid; give --user", getenv("SUDO_UID"))
	}
	if uid == 0 {
		return nil, nil
	}
	if u, err := user.LookupId(strconv.FormatUint(uid, 10)); err == nil {
		r, err := runAsOf(u)
		if err == nil && getenv("SUDO_GID") != "" {
			if gid, err := strconv.ParseUint(getenv("SUDO_GID"), 10, 32); err == nil {
				r.GID = uint32(gid)
			}
		}
		return r, err
	}
	gid, err := strconv.ParseUint(getenv("SUDO_GID"), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("SUDO_GID %q is not a gid; give --user", getenv("SUDO_GID"))
	}
	return &launch.RunAs{UID: uint32(uid), GID: uint32(gid), Name: strconv.FormatUint(uid, 10)}, nil
}

func runAsOf(u *user.User) (*launch.RunAs, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: uid %q: %w", u.Username, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: gid %q: %w", u.Username, u.Gid, err)
	}
	r := &launch.RunAs{UID: uint32(uid), GID: uint32(gid), Name: u.Username}
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.ParseUint(s, 10, 32); err == nil {
				r.Groups = append(r.Groups, uint32(g))
			}
		}
	}
	return r, nil
}
