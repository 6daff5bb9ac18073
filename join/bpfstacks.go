package join

import (
	"github.com/djx-bpf/djx-bpf/naming/bpfstack"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// UseBPFStacks names each sample's access path from its own stack, as the
// sampling program unwound it (--stacks bpf), through r: no stack signal,
// no borrowed callers. The JIT code the join asks about (a leaf without a
// Java stack, allocation scans, retries) is then read from the JVM's code
// cache too (bpfstack.CodeMap): the agent sends no CompiledMethodLoad
// records with BPF stacks.
func (j *JVM) UseBPFStacks(r *bpfstack.Resolver) {
	j.bpfStacks = r
	if j.bpfCode == nil {
		j.UseCodeMap(r.CodeMap())
	}
}

// UseCodeMap answers the join's questions about JIT code from m, the
// JVM's code cache, instead of the agent's CODE and STUB records.
func (j *JVM) UseCodeMap(m *bpfstack.CodeMap) {
	m.UseNames(j.names)
	j.bpfCode = m
	j.codeMap = m
}

// BPFStacks returns the resolver UseBPFStacks set, or nil.
func (j *JVM) BPFStacks() *bpfstack.Resolver { return j.bpfStacks }

// bpfPath names the BPF stack of sample s now, while the JVM still holds
// the code and methods it read: the path is kept by name. ok is false
// when stacks do not come from BPF.
func (j *JVM) bpfPath(s *sample.Sample, accessPC uint64) (bpfResult, bool) {
	if j.bpfStacks == nil || s.Stack == nil {
		return bpfResult{}, false
	}
	p := j.bpfStacks.Resolve(s.Stack, bpfstack.Sample{IP: s.IP(), AccessPC: accessPC, R13: s.Regs[2]})
	r := bpfResult{native: p.NativePC, missing: p.Missing}
	if len(p.Frames) > 0 {
		// Interned: a sample holds 4 bytes a frame, and a name repeated
		// across samples is kept once.
		r.frames = make([]uint32, len(p.Frames))
		for i := range p.Frames {
			r.frames[i] = j.internFrame(&p.Frames[i])
		}
	} else if leaf, ok := codeLeaf(j.bpfCode, nil, s.IP(), accessPC); ok {
		// No Java frames, yet in the code cache (a walk that could not
		// start, a stub): named now, while the code is there.
		r.leaf = leaf
	}
	return r, true
}

// bpfResult is a sample's BPF stack, named.
type bpfResult struct {
	native  uint64   // native code the sample was in below its Java frames (0: none)
	frames  []uint32 // Java frames' names (stackStore.names), innermost first
	missing string   // why the stack is not whole ("": it is)
	// leaf is what the code cache named at the pc of a stack without
	// Java frames (nil: the pc is not in the code cache).
	leaf []pathFrame
}

// bpfAccessPath builds the access path of p from its BPF stack: a native
// leaf by its symbol, the Java frames, and a placeholder when the walk
// stopped short of the thread's entry. A stack without Java frames keeps
// what the pc alone tells.
func (j *JVM) bpfAccessPath(p *pending, fr []pathFrame) []pathFrame {
	b := p.bpf
	if len(b.frames) == 0 {
		if b.leaf != nil {
			fr = append(fr, b.leaf...)
		} else {
			fr = j.leafFrames(p, fr)
		}
		j.countBPFEnd(b.missing)
		return append(fr, pathFrame{name: "[no Java stack: " + b.missing + "]"})
	}
	j.stats.SamplesWithStack++
	j.stats.SamplesJavaStack++
	j.stats.SamplesBPFStack++
	if b.native != 0 {
		if nf, ok := j.nativeFrame(b.native); ok {
			fr = append(fr, pathFrame{name: nf})
		}
	}
	for _, id := range b.frames {
		fr = append(fr, j.namedFrame(id))
	}
	if b.missing != "" {
		j.countBPFEnd(b.missing)
		return append(fr, pathFrame{name: "[stack cut: " + b.missing + "]"})
	}
	j.stats.SamplesBPFComplete++
	return fr
}

func (j *JVM) countBPFEnd(reason string) {
	if j.stats.BPFStackEnds == nil {
		j.stats.BPFStackEnds = make(map[string]uint64)
	}
	j.stats.BPFStackEnds[reason]++
}
