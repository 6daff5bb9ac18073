// Package agent holds the thin C JVMTI agent (src/) and embeds the library
// it builds to; its wire format is package agentwire.
package agent

import _ "embed"

// The library is built by `make agent/libdjxagent.so` (see Makefile.inc) and
// is not committed; the package does not compile until it has been built.
//
//go:embed libdjxagent.so
var library []byte

// Library returns the JVMTI agent shared library (Linux, the build host's
// architecture). Callers must not modify the returned slice. The loader
// writes a fresh copy per profile, so each profile gets an independent
// instance inside the JVM.
func Library() []byte { return library }
