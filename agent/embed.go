// Package agent holds the thin C JVMTI agent (src/) and embeds the library
// it builds to; its wire format is package agentwire.
package agent

import (
	"embed"
	"errors"
)

// LibraryName is the agent library's file name, as it appears in a target's
// memory maps.
const LibraryName = "libdjxagent.so"

// The folder, not the file, is embedded: a fresh clone has only its README,
// so the Go tree compiles before `make` builds the library (see Makefile.inc).
//
//go:embed lib
var lib embed.FS

// ErrNoLibrary says this djx-bpf was built without the agent library.
var ErrNoLibrary = errors.New("this djx-bpf was built without its JVMTI agent (agent/lib/" + LibraryName + "): build it with make")

// Library returns the JVMTI agent shared library (Linux, the build host's
// architecture), or ErrNoLibrary. Callers must not modify the returned
// slice. The loader writes a fresh copy per profile, so each profile gets
// an independent instance inside the JVM.
func Library() ([]byte, error) {
	b, err := lib.ReadFile("lib/" + LibraryName)
	if err != nil || len(b) == 0 {
		return nil, ErrNoLibrary
	}
	return b, nil
}
