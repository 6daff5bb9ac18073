package join

import (
	"github.com/djx-bpf/djx-bpf/naming/bpfstack"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// rawAlloc is an ALLOC_RAW with its stack named: the agent walked the
// allocating thread's frames itself, and they are named as the record
// arrives, from the JVM's memory (bpfstack), while the code is there.
type rawAlloc struct {
	rec *agentwire.AllocRaw
	ids []uint32 // the frames' names (stackStore.names), innermost first
}

func (*rawAlloc) Type() agentwire.RecordType { return agentwire.TypeAllocRaw }

// nameRawAlloc names r's frames as an access path's: Java frames with
// their inlining, and where the walk or the naming stopped short, the
// reason as the last frame.
func (j *JVM) nameRawAlloc(r *agentwire.AllocRaw) *rawAlloc {
	a := &rawAlloc{rec: r}
	if j.bpfStacks == nil {
		a.ids = []uint32{j.names.InternString("[allocation stack not named: no code cache reader]")}
		return a
	}
	st := &sample.Stack{Frames: make([]sample.RawFrame, len(r.Frames)), End: uint16(min(r.End, 0xffff))}
	for i, f := range r.Frames {
		st.Frames[i] = sample.RawFrame{Blob: f.Blob, A: f.A, B: f.B}
	}
	p := j.bpfStacks.Resolve(st, bpfstack.Sample{Calls: true})
	a.ids = make([]uint32, 0, len(p.Frames)+1)
	for i := range p.Frames {
		a.ids = append(a.ids, j.internFrame(&p.Frames[i]))
	}
	if p.Missing != "" {
		a.ids = append(a.ids, j.names.InternString("[stack cut: "+p.Missing+"]"))
	}
	return a
}
