package walkplan

import (
	"fmt"
	"strings"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/heapwalk"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// walkNote says what a user should know of a walk cut short (how far it
// got, and what it waited for) or one that collections kept overlapping.
func walkNote(st *heapwalk.Stats, overlapped bool, tries int) string {
	var cut []string
	if overlapped && tries >= walkTries {
		cut = append(cut, fmt.Sprintf("a collection ran during each of its %d tries: objects it moved as the walk read them may be counted twice or named by another holder", tries))
	}
	if st.Canceled {
		s := fmt.Sprintf("the profile ended before the walk did: it named %d objects (%.1f MiB), those on the pages the samples hit first, and had found %d more it did not reach",
			st.Objects, float64(st.Bytes)/(1<<20), st.Pending)
		if st.Waited >= time.Millisecond {
			s += fmt.Sprintf("; it waited %.1fs of its %.1fs for the other JVMs' walks", st.Waited.Seconds(), st.Time.Seconds())
		}
		cut = append(cut, s)
	}
	if n := st.ObjectsCapped + st.QueueDropped + st.BitmapDropped; n > 0 {
		cut = append(cut, fmt.Sprintf("%d objects past its caps were not visited", n))
	}
	if st.RefsCapped {
		cut = append(cut, fmt.Sprintf("it stopped at its cap of references read, after %d objects (%.1f MiB), with %d found and not reached",
			st.Objects, float64(st.Bytes)/(1<<20), st.Pending))
	}
	if st.Stale > 0 {
		cut = append(cut, fmt.Sprintf("%d objects found before a collection moved them were not visited (what they held is named by another walk)", st.Stale))
	}
	if st.LookupLost > 0 {
		cut = append(cut, fmt.Sprintf("%d small objects have no address entry", st.LookupLost))
	}
	return strings.Join(cut, "; ")
}

// structureIndex is a walk's address lookup, as the join asks it.
type structureIndex struct{ res *heapwalk.Result }

func (x structureIndex) Lookup(addr, klass uint64) int {
	row, _ := x.res.LookupClass(addr, klass)
	return row
}

// chainPaths numbers the walks' chains as the join's holder chains,
// parents first: each prefix of hops once across walks, and out holds the
// ones a walk added.
type chainPaths struct {
	res  *heapwalk.Result
	ids  map[heapwalk.ChainID]uint32 // of res's chains
	out  []agentwire.CensusPath
	pre  map[string]uint32 // a prefix of hops → its ID
	next uint32
}

// id interns chain c's hops.
func (p *chainPaths) id(c heapwalk.ChainID) uint32 {
	if id, ok := p.ids[c]; ok {
		return id
	}
	var parent uint32
	key := ""
	for _, h := range p.res.Hops(c) {
		key += h + "\x00"
		id, ok := p.pre[key]
		if !ok {
			p.next++
			id = p.next
			p.out = append(p.out, agentwire.CensusPath{ID: id, Parent: parent, Hop: h})
			p.pre[key] = id
		}
		parent = id
	}
	p.ids[c] = parent
	return parent
}

// typeSig is the JVM signature of a Java type name: long[] → [J,
// java.util.HashMap$Node → Ljava/util/HashMap$Node;.
func typeSig(name string) string {
	dims := 0
	for strings.HasSuffix(name, "[]") {
		name = strings.TrimSuffix(name, "[]")
		dims++
	}
	base, ok := primitiveSigs[name]
	if !ok {
		base = "L" + strings.ReplaceAll(name, ".", "/") + ";"
	}
	return strings.Repeat("[", dims) + base
}

var primitiveSigs = map[string]string{
	"boolean": "Z", "byte": "B", "char": "C", "short": "S",
	"int": "I", "long": "J", "float": "F", "double": "D",
}
