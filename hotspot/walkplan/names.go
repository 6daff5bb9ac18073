package walkplan

import (
	"strings"
	"sync"

	"github.com/djx-bpf/djx-bpf/hotspot/heapwalk"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// fieldNames are the reference fields and statics of the classes the agent
// described, by Klass* and offset, for the walk's goroutine to name hops by.
type fieldNames struct {
	mu      sync.RWMutex
	fields  map[uint64]map[uint32]string // Klass* → offset → field name
	statics map[uint64]map[uint32]string // Klass* → offset in its mirror → static's name
	// bufs are the java.nio and jdk.internal.foreign classes' fields the
	// walk reads to find direct buffers and native segments (heapwalk's
	// Config.FieldOffset).
	bufs  map[uint64]map[string]uint32
	bytes int // of names kept (the loop's goroutine only)
}

func newFieldNames() *fieldNames {
	return &fieldNames{fields: map[uint64]map[uint32]string{}, statics: map[uint64]map[uint32]string{},
		bufs: map[uint64]map[string]uint32{}}
}

// maxNamedClasses and maxNameBytes bound what the agent's stream, which
// the target controls, can make the names hold.
const (
	maxNamedClasses = 1 << 18
	maxNameBytes    = 64 << 20
)

func (n *fieldNames) add(c *agentwire.Class) {
	size := 0
	for _, fs := range [][]agentwire.Field{c.Fields, c.Statics} {
		for _, f := range fs {
			size += 16 + len(f.Name)
		}
	}
	if len(n.fields) >= maxNamedClasses || n.bytes+size > maxNameBytes {
		return // its hops read Class+OFFSET
	}
	n.bytes += size
	fields, statics, bufs := refFields(c.Fields), refFields(c.Statics), bufferFields(c)
	n.mu.Lock()
	n.fields[c.Klass] = fields
	if bufs != nil {
		n.bufs[c.Klass] = bufs
	}
	if len(statics) > 0 {
		n.statics[c.Klass] = statics
	}
	n.mu.Unlock()
}

// refFields maps the reference fields of fs by offset.
func refFields(fs []agentwire.Field) map[uint32]string {
	m := make(map[uint32]string, len(fs))
	for _, f := range fs {
		if len(f.Sig) > 0 && (f.Sig[0] == 'L' || f.Sig[0] == '[') {
			m[f.Offset] = f.Name
		}
	}
	return m
}

// bufferFields are the fields of a java.nio class that locate a direct
// buffer's memory, or of a jdk.internal.foreign class that locate a native
// segment's, by name; nil for other classes.
func bufferFields(c *agentwire.Class) map[string]uint32 {
	var want map[string]string
	switch {
	case strings.HasPrefix(c.Sig, "Ljava/nio/"):
		want = map[string]string{"address": "J", "capacity": "I", "att": "Ljava/lang/Object;", "fd": "Ljava/io/FileDescriptor;"}
	case strings.HasPrefix(c.Sig, "Ljdk/internal/foreign/"):
		want = map[string]string{"min": "J", "length": "J"}
	default:
		return nil
	}
	var m map[string]uint32
	for _, f := range c.Fields {
		if sig, ok := want[f.Name]; ok && sig == f.Sig {
			if m == nil {
				m = make(map[string]uint32, len(want))
			}
			m[f.Name] = f.Offset
		}
	}
	return m
}

// offset is heapwalk's Config.FieldOffset.
func (n *fieldNames) offset(klass uint64, name string) (uint32, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	off, ok := n.bufs[klass][name]
	return off, ok
}

// name is heapwalk's Config.FieldName: "java.util.TreeMap.root", and for
// a static "ServiceTruth.table" (the walk adds " (static)").
func (n *fieldNames) name(f heapwalk.FieldRef) string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	var name string
	var ok bool
	if f.Static {
		name, ok = n.statics[f.Klass][f.Offset]
	} else if name, ok = n.fields[f.Klass][f.Offset]; !ok {
		name, ok = n.fields[f.Declaring][f.Offset]
	}
	if !ok {
		return ""
	}
	return f.Class + "." + name
}
