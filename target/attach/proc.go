package attach

import (
	"bytes"
	"strings"

	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// procRoot is where /proc is read; tests point it at a fake tree.
var procRoot = procfs.Mount

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
