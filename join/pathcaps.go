package join

import (
	"fmt"
	"unsafe"

	"github.com/djx-bpf/djx-bpf/hotspot/vmcode"
	"github.com/djx-bpf/djx-bpf/jvmsym"
	"github.com/djx-bpf/djx-bpf/naming/bpfstack"
)

// Caps on what the names of a target's frames make the join keep. A
// target names its methods (up to 65,535 bytes each, cut to
// jvmsym.MaxName) and shapes its stacks: two methods of 60,000-character
// names calling each other at random 100 deep made every sample a new
// path of 6 MB of names, and root grew 130 MiB/s. Names are interned,
// paths kept by the names' ids; what a cap cuts ends in a placeholder
// frame and is counted in the report's caps_cut. Each is far above a real
// JVM's. Variables so that tests can lower them.
var (
	// maxPathFrames cuts a path deeper than it (bpfstack.MaxFrames with
	// BPF stacks; the agent sends 64 at most).
	maxPathFrames = bpfstack.MaxFrames
	// maxSetPaths bounds the distinct paths of one object, data type or
	// the remainder; past it new paths share one placeholder path.
	maxSetPaths = 1 << 15
	// maxAccessBytes bounds what the access sets hold together, each
	// path's names counted as the report prints them.
	maxAccessBytes = 64 << 20
	// maxNameBytes bounds the interned names.
	maxNameBytes = 32 << 20
	// maxPendingBytes bounds the samples waiting for the agent's
	// watermark, their named stacks included; past it the oldest are
	// judged at once.
	maxPendingBytes = 64 << 20
)

// Placeholder frames of cut paths.
var (
	depthCutName = fmt.Sprintf("[stack cut: deeper than %d frames]", maxPathFrames)
	pathsCutName = "[path not kept: paths past the cap]"
)

// countCap counts something a cap cut, by reason, for the report.
func (j *JVM) countCap(reason string) {
	if j.stats.CapsCut == nil {
		j.stats.CapsCut = make(map[string]uint64)
	}
	j.stats.CapsCut[reason]++
}

// internFrame returns the id of the name of f, a Java frame named from
// the JVM's memory, built in j.nameBuf.
func (j *JVM) internFrame(f *vmcode.Frame) uint32 {
	j.nameBuf = f.Append(j.nameBuf[:0])
	return j.names.Intern(j.nameBuf)
}

// namedFrame is the path frame of the interned name id.
func (j *JVM) namedFrame(id uint32) pathFrame { return pathFrame{name: j.names.Name(id), id: id} }

// capPath cuts fr at maxPathFrames, counting the cut, and interns its
// names, as pathKey needs them.
func (j *JVM) capPath(fr []pathFrame) []pathFrame {
	if len(fr) > maxPathFrames {
		fr = append(fr[:maxPathFrames-1], pathFrame{name: depthCutName})
		j.countCap(fmt.Sprintf("access paths cut at %d frames", maxPathFrames))
	}
	for i := range fr {
		if f := &fr[i]; f.name != "" && f.id == 0 {
			f.id = j.names.InternString(f.name)
			f.name = j.names.Name(f.id)
		}
	}
	return fr
}

// accessBytes estimates what a new access path holds, its names counted
// as the report prints them: they are shared in memory, not in a report.
func pathBytes(key []byte, where, dtype string, fr []pathFrame) int {
	n := 160 + len(key) + len(where) + len(dtype) + int(unsafe.Sizeof(pathFrame{}))*len(fr)
	for _, f := range fr {
		n += len(f.name)
	}
	return n
}

// addAccess counts one sample on the path fr (capPath'd) in set, copying
// fr when new; a new path past the caps counts on the set's placeholder
// path instead.
func (j *JVM) addAccess(set accessSet, where, dtype string, fr []pathFrame) *access {
	j.pathKeyBuf = pathKey(j.pathKeyBuf, where, dtype, fr)
	if a, ok := set[string(j.pathKeyBuf)]; ok {
		a.samples++
		return a
	}
	n := pathBytes(j.pathKeyBuf, where, dtype, fr)
	switch {
	case len(set) >= maxSetPaths:
		j.countCap(fmt.Sprintf("samples on paths past %d of one object, type or the remainder", maxSetPaths))
	case j.accessBytes+n > maxAccessBytes:
		j.countCap(fmt.Sprintf("samples on paths past %d MiB of access paths", maxAccessBytes>>20))
	default:
		a := &access{where: where, dtype: dtype, frames: append([]pathFrame(nil), fr...), samples: 1}
		set[string(j.pathKeyBuf)] = a
		j.accessBytes += n
		return a
	}
	fr = []pathFrame{j.namedFrame(j.names.InternString(pathsCutName))}
	j.pathKeyBuf = pathKey(j.pathKeyBuf, where, dtype, fr)
	if a, ok := set[string(j.pathKeyBuf)]; ok {
		a.samples++
		return a
	}
	a := &access{where: where, dtype: dtype, frames: fr, samples: 1}
	set[string(j.pathKeyBuf)] = a
	j.accessBytes += pathBytes(j.pathKeyBuf, where, dtype, fr)
	return a
}

// pendingBytes estimates what a waiting sample holds.
func pendingBytes(p *pending) int {
	return int(unsafe.Sizeof(*p)) + 4*len(p.bpf.frames) + int(unsafe.Sizeof(pathFrame{}))*(len(p.bpf.leaf)+len(p.path))
}

// newNames is a JVM's interner of frame names.
func newNames() *jvmsym.Names { return jvmsym.NewNames(maxNameBytes) }
