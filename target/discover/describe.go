package discover

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/target/attach"
)

// Details is what a JVM says about itself through its attach listener
// (HotSpot diagnostic commands). Fields it could not read stay zero.
type Details struct {
	VM        string `json:"vm"`             // java.vm.name and version
	GC        string `json:"gc,omitempty"`   // G1, Parallel, Serial, Z, Shenandoah, Epsilon
	MaxHeap   uint64 `json:"max_heap"`       // -XX:MaxHeapSize, bytes
	Reserved  uint64 `json:"reserved_heap"`  // sum of the heap's reserved ranges, bytes
	Committed uint64 `json:"committed_heap"` // committed heap, bytes
	// Oops is the compressed-oops mode as HotSpot names it ("32-bit",
	// "Zero based", "Non-zero disjoint base", "Non-zero based"), or "off".
	Oops     string `json:"compressed_oops,omitempty"`
	OopBase  uint64 `json:"oop_base,omitempty"` // heap-based modes: the base
	OopShift int    `json:"oop_shift"`
	// Geometry is the heap model read from VM.info (nil if unreadable).
	Geometry  *heap.Geometry `json:"geometry,omitempty"`
	Attach    string         `json:"attach"` // "ok", or why attaching failed
	AttachErr error          `json:"-"`
}

// describeReplyCap bounds each reply Describe reads: list asks several
// JVMs at once, and VM.info of a JVM with thousands of threads is a few
// hundred KiB.
const describeReplyCap = 8 << 20

// Describe asks a HotSpot JVM for its version, flags and heap through the
// attach protocol (VM.version, VM.flags, GC.heap_info, VM.info). The
// diagnostic commands only read VM state: the JVM runs on undisturbed.
// OpenJ9 JVMs are asked through OpenJ9's attach protocol for their system
// properties and a javacore (see OpenJ9Geometry).
func Describe(ctx context.Context, j JVM) Details {
	var d Details
	if j.Kind == OpenJ9 {
		return describeOpenJ9(ctx, j)
	}
	t, err := attach.Inspect(j.PID)
	if err != nil {
		d.Attach, d.AttachErr = err.Error(), err
		return d
	}
	t.MaxReply = describeReplyCap
	jcmd := func(cmd string) string {
		if d.AttachErr != nil {
			return ""
		}
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		out, err := t.Jcmd(c, cmd)
		if err != nil {
			d.Attach, d.AttachErr = err.Error(), err
			return ""
		}
		return out
	}
	d.VM = firstLine(jcmd("VM.version"))
	if d.AttachErr != nil {
		return d
	}
	d.Attach = "ok"
	flags := jcmd("VM.flags")
	d.MaxHeap = flagValue(flags, "MaxHeapSize")
	if info, err := heap.ParseHeapInfo(jcmd("GC.heap_info")); err == nil {
		d.GC = info.GC
		for _, r := range info.Ranges {
			d.Reserved += r.End - r.Start
		}
		d.Committed = committed(info.Text)
	}
	d.Oops, d.OopBase, d.OopShift, d.Geometry = oopsMode(jcmd("VM.info"))
	if d.AttachErr != nil && d.Attach == "ok" {
		d.Attach = "ok (" + d.AttachErr.Error() + ")"
	}
	return d
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	// "12345:" prefixes jcmd output from some JDKs.
	return strings.TrimSpace(s)
}

// flagValue reads -XX:NAME=VALUE from VM.flags output.
func flagValue(flags, name string) uint64 {
	re := regexp.MustCompile(`-XX:` + name + `=(\d+)`)
	if m := re.FindStringSubmatch(flags); m != nil {
		v, _ := strconv.ParseUint(m[1], 10, 64)
		return v
	}
	return 0
}

var (
	totalK     = regexp.MustCompile(`total (\d+)K`)
	committedK = regexp.MustCompile(`committed (\d+)K`) // JDK 21+: "total reserved NK, committed NK"
	shenCommit = regexp.MustCompile(`(\d+)M committed`)
	zCapacity  = regexp.MustCompile(`capacity (\d+)M`)
)

// committed sums the committed sizes GC.heap_info prints: "total NK" per
// generation (Serial, Parallel, G1), "NM committed" (Shenandoah),
// "capacity NM" (Z).
func committed(text string) uint64 {
	// Metaspace lines print "committed NK" too: only heap lines count.
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if !strings.Contains(l, "Metaspace") && !strings.Contains(l, "class space") {
			lines = append(lines, l)
		}
	}
	text = strings.Join(lines, "\n")
	var n uint64
	re := totalK
	if committedK.MatchString(text) {
		re = committedK
	}
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		v, _ := strconv.ParseUint(m[1], 10, 64)
		n += v << 10
	}
	if n == 0 {
		for _, re := range []*regexp.Regexp{shenCommit, zCapacity} {
			if m := re.FindStringSubmatch(text); m != nil {
				v, _ := strconv.ParseUint(m[1], 10, 64)
				return v << 20
			}
		}
	}
	return n
}

// hotspotModes names the geometry's reference modes the way HotSpot's own
// logs and VM.info do.
var hotspotModes = map[heap.RefMode]string{
	heap.RefsFull:         "off",
	heap.RefsUnscaled:     "32-bit",
	heap.RefsZeroBased:    "Zero based",
	heap.RefsDisjointBase: "Non-zero disjoint base",
	heap.RefsHeapBased:    "Non-zero based",
}

// oopsMode reads the compressed-oops mode, base and shift from VM.info
// through the heap geometry model.
func oopsMode(vmInfo string) (mode string, base uint64, shift int, g *heap.Geometry) {
	geo, err := heap.ParseVMInfo(vmInfo)
	if err != nil {
		return "", 0, 0, nil
	}
	return hotspotModes[geo.Mode], geo.Base, int(geo.Shift), &geo
}

// String formats a one-line summary for errors and logs.
func (d Details) String() string {
	return fmt.Sprintf("%s, %s, max heap %d", d.VM, d.GC, d.MaxHeap)
}
