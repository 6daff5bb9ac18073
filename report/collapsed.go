package report

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/djx-bpf/djx-bpf/safety/termsafe"
)

// ObjectFrame names an object as one stack frame, "[object] long[] @
// HotArrays.allocHot:12": the frame between its allocation path and its
// access paths in collapsed stacks and pprof profiles.
func ObjectFrame(o *Object) string { return "[object] " + o.Type + " @ " + o.Site }

// HolderFrame is the root frame of a census object's lineage: under it
// hangs the holder chain from its GC root down to the object.
const HolderFrame = "[held by]"

// Lineage is what stands under an object's frame in stacks, innermost
// first: its allocation path, or for a census object with a known holder
// its holder chain from the last hop up to the root, then HolderFrame.
func (o *Object) Lineage() []string {
	if !o.Held() {
		return o.AllocPath
	}
	l := make([]string, 0, len(o.Holder)+1)
	for k := len(o.Holder) - 1; k >= 0; k-- {
		l = append(l, o.Holder[k])
	}
	return append(l, HolderFrame)
}

// TypeFrame names the root frame of remainder samples whose data type is
// known, "[type] java.util.TreeMap$Entry.left" (dataType as in
// Access.DataType), in place of RemainderFrame.
func TypeFrame(dataType string) string { return TypeFramePrefix + dataType }

// TypeFramePrefix starts a TypeFrame.
const TypeFramePrefix = "[type] "

// RemainderRoot is the root frame of a remainder path: its TypeFrame when
// its data type is known, else its RemainderFrame.
func RemainderRoot(a *Access) string {
	if a.DataType != "" {
		return TypeFrame(a.DataType)
	}
	return RemainderFrame(a.Where)
}

// RemainderFrame names the frame under which the access paths of samples in
// no tracked object hang, "[not in a tracked object: outside the heap]".
func RemainderFrame(where string) string { return "[not in a tracked object: " + where + "]" }

// WriteCollapsed writes the report as folded stacks for flame graph tools
// (Brendan Gregg's collapsed format): one line per access path, frames root
// first and separated by ";", then a space and the path's samples. The root
// is the outermost frame of the allocation path, then come the object frame
// (ObjectFrame) and the access path down to its innermost frame, so that a
// flame graph groups cost by object first. Samples of an object with no
// access path end at the object frame; samples in no tracked object hang
// under RemainderFrame, or under their TypeFrame when their data type is
// known. opt.Top limits the objects (0: all), opt.Depth the
// access frames kept, innermost first (0: all); opt.AccessTop is ignored:
// every path is written so that the counts add up.
func WriteCollapsed(w io.Writer, r *Report, opt TableOptions) error {
	bw := bufio.NewWriter(w)
	var line []byte
	emit := func(root []string, path []string, n uint64) {
		if n == 0 {
			return
		}
		line = line[:0]
		for _, f := range root {
			line = appendFolded(line, f)
		}
		for i := len(path) - 1; i >= 0; i-- {
			line = appendFolded(line, path[i])
		}
		line[len(line)-1] = ' ' // the last separator
		line = strconv.AppendUint(line, n, 10)
		line = append(line, '\n')
		bw.Write(line)
	}
	shown := 0
	var root []string
	for i := range r.Objects {
		o := &r.Objects[i]
		if o.Samples == 0 {
			continue
		}
		if opt.Top > 0 && shown == opt.Top {
			break
		}
		shown++
		root = root[:0]
		lin := o.Lineage()
		for k := len(lin) - 1; k >= 0; k-- {
			root = append(root, lin[k])
		}
		root = append(root, ObjectFrame(o))
		var onPaths uint64
		for _, a := range MergeAccesses(o.Accesses, opt.Depth, o.Samples) {
			emit(root, a.Path, a.Samples)
			onPaths += a.Samples
		}
		if onPaths < o.Samples {
			emit(root, nil, o.Samples-onPaths)
		}
	}
	for _, a := range MergeAccesses(r.Remainder, opt.Depth, r.Stats.Samples) {
		emit([]string{RemainderRoot(&a)}, a.Path, a.Samples)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write collapsed stacks: %w", err)
	}
	return nil
}

// appendFolded appends frame f and a separator. The format has no quoting:
// ";" would split the frame and a newline the line, so they become ":" and a
// space.
func appendFolded(b []byte, f string) []byte {
	if f == "" {
		f = "[unknown]"
	}
	if strings.ContainsAny(f, ";\n\r") {
		f = strings.NewReplacer(";", ":", "\n", " ", "\r", " ").Replace(f)
	}
	// Folded stacks are often read on a terminal: a frame the target named
	// must not carry control sequences.
	f = termsafe.String(f)
	b = append(b, f...)
	return append(b, ';')
}
