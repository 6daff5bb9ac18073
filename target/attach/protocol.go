package attach

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Limits of HotSpot's version 1 attach protocol (attachListener.hpp:
// name_length_max, arg_length_max, arg_count_max). The JVM drops a request
// that exceeds them without a useful reply, so they are checked here.
const (
	maxNameLen = 16
	maxArgLen  = 1024
	maxArgs    = 3
)

// encodeRequest builds a version 1 request: "1\0<cmd>\0<a1>\0<a2>\0<a3>\0".
// HotSpot reads exactly three arguments, so missing ones are sent empty.
func encodeRequest(cmd string, args ...string) ([]byte, error) {
	if cmd == "" || len(cmd) > maxNameLen {
		return nil, fmt.Errorf("command %q: name must be 1-%d bytes", cmd, maxNameLen)
	}
	if len(args) > maxArgs {
		return nil, fmt.Errorf("command %s: %d arguments, the protocol allows %d", cmd, len(args), maxArgs)
	}
	var b bytes.Buffer
	b.WriteString("1\x00")
	for i, s := range append([]string{cmd}, args...) {
		if strings.IndexByte(s, 0) >= 0 {
			return nil, fmt.Errorf("command %s: argument %d contains a NUL byte", cmd, i)
		}
		if i > 0 && len(s) > maxArgLen {
			return nil, fmt.Errorf("command %s: argument %d is %d bytes, the protocol allows %d", cmd, i, len(s), maxArgLen)
		}
		b.WriteString(s)
		b.WriteByte(0)
	}
	for i := len(args); i < maxArgs; i++ {
		b.WriteByte(0)
	}
	return b.Bytes(), nil
}

// parseReply splits a reply into the JVM's return code (first line) and the
// rest of the output.
func parseReply(reply []byte) (int, string, error) {
	head, rest, _ := bytes.Cut(reply, []byte("\n"))
	code, err := strconv.Atoi(strings.TrimSpace(string(head)))
	if err != nil {
		return 0, "", fmt.Errorf("%w: first line %q is not a return code", ErrProtocol, truncate(string(head), 64))
	}
	return code, string(rest), nil
}

// AgentError reports a "load" operation that did not leave the agent loaded.
type AgentError struct {
	Path string
	// Attached is true when Agent_OnAttach ran; ReturnCode is then its
	// (nonzero) result. Otherwise the library was not loaded or has no
	// Agent_OnAttach, and Message holds the JVM's explanation.
	Attached   bool
	ReturnCode int
	// JVMCode is the reply's first line: JDK 17 answers -1 when the library
	// cannot be loaded, JDK 21+ answers 0 and only explains in Message.
	JVMCode int
	Message string
}

func (e *AgentError) Error() string {
	if e.Attached {
		return fmt.Sprintf("Agent_OnAttach returned %d", e.ReturnCode)
	}
	msg := strings.Join(strings.Fields(e.Message), " ")
	if msg == "" {
		msg = "no explanation from the JVM"
	}
	return fmt.Sprintf("agent not loaded (JVM code %d): %s", e.JVMCode, msg)
}

// loadResult interprets the reply to "load". The forms seen on real JVMs:
//
//	JDK 17 loaded, Agent_OnAttach=N  "0\nreturn code: N\n"
//	JDK 17 library not loadable      "-1\n<path> was not loaded.\n<dlerror>\n"
//	JDK 25 loaded, Agent_OnAttach=N  "0\nreturn code: N\n"
//	JDK 25 library not loadable      "0\n<path> was not loaded.\n<dlerror>\n"
//	JDK 8 (per jattach)              "0\nN\n"
//
// JDK 21+ (JDK-8307478 reworked agent loading) answers 0 even when nothing was
// loaded, so success requires an explicit agent return code of 0; jattach
// 2.1 reads the JDK 25 failure as success because it atoi()s the message.
func loadResult(path string, code int, out string) error {
	if strings.Contains(out, "Dynamic agent loading is not enabled") {
		return fmt.Errorf("%s: %w", strings.TrimSuffix(strings.TrimSpace(out), "."), ErrRefused)
	}
	first, _, _ := strings.Cut(out, "\n")
	first = strings.TrimSpace(first)
	if code == 0 {
		num, ok := strings.CutPrefix(first, "return code:")
		if n, err := strconv.Atoi(strings.TrimSpace(num)); err == nil && (ok || num == first) {
			if n == 0 {
				return nil
			}
			return &AgentError{Path: path, Attached: true, ReturnCode: n}
		}
	}
	return &AgentError{Path: path, JVMCode: code, Message: strings.TrimSpace(out)}
}

// CommandError is a reply with a nonzero return code to a jcmd command.
type CommandError struct {
	Code   int
	Output string
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("JVM returned %d: %s", e.Code, truncate(strings.Join(strings.Fields(e.Output), " "), 512))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
