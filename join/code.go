package join

import "github.com/djx-bpf/djx-bpf/jvmsym"

// CodeLookup is what the join asks of a JVM's JIT code, besides the
// stacks: whether a pc is in JIT code or a stub (retry.go), the blob
// holding it with its name or its Java frames at the pc (the leaf of a
// path without a stack, stacks.go; the code past an allocation, types.go).
// With the agent's stacks it is the agent's CompiledMethodLoad and
// DynamicCodeGenerated records (jvmsym.CodeTable, frames as jmethodIDs);
// with stacks unwound in BPF the code cache read from the JVM
// (bpfstack.CodeMap, frames already named in CodeHit.Named) and the
// agent reports no JIT code.
type CodeLookup interface {
	// Contains says whether pc is in JIT code or a stub, without reading
	// the JVM where it can.
	Contains(pc uint64) bool
	// Lookup finds the code blob holding pc.
	Lookup(pc uint64) (jvmsym.CodeHit, bool)
}

// appendHitFrames appends the Java frames of a code hit, raw or named.
func appendHitFrames(fr []pathFrame, hit jvmsym.CodeHit) []pathFrame {
	for _, f := range hit.Frames {
		fr = append(fr, pathFrame{method: f.Method, bci: f.BCI})
	}
	for _, n := range hit.Named {
		fr = append(fr, pathFrame{name: n})
	}
	return fr
}

// codeLeaf appends what code names at ip: a stub's name, or the Java
// frames of compiled code at the access (accessPC, when in the same blob;
// 0: ip). ok is false when ip is in no code code knows.
func codeLeaf(code CodeLookup, fr []pathFrame, ip, accessPC uint64) ([]pathFrame, bool) {
	hit, ok := code.Lookup(ip)
	if !ok {
		return fr, false
	}
	if hit.Stub == "" && accessPC != 0 {
		if h2, ok := code.Lookup(accessPC); ok && h2.Start == hit.Start {
			hit = h2
		}
	}
	if hit.Stub != "" {
		return append(fr, pathFrame{name: "[" + hit.Stub + "]"}), true
	}
	return appendHitFrames(fr, hit), true
}
