package loader

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/djx-bpf/djx-bpf/bpf"
)

// The agent's in-process unwinder (agent/src/unwind.h) writes its frames and
// its end reasons onto the wire (REC_ALLOC_RAW) in the BPF unwinder's terms,
// which the join reads through this package's constants: a change on one
// side alone fails here, as djx.h's constants do in agentwire.
func TestConstantsMatchAgentUnwindHeader(t *testing.T) {
	b, err := os.ReadFile("../agent/src/unwind.h")
	if err != nil {
		t.Fatal(err)
	}
	c := map[string]uint64{}
	for _, m := range regexp.MustCompile(`(?m)^#define (DJX_UW_\w+) +(\d+)u?\b`).FindAllStringSubmatch(string(b), -1) {
		v, err := strconv.ParseUint(m[2], 10, 64)
		if err != nil {
			t.Fatalf("unwind.h: %s %q: %v", m[1], m[2], err)
		}
		c[m[1]] = v
	}
	same := map[string]uint64{
		"DJX_UW_SIZED": FrameSized, "DJX_UW_FP": FrameFP,
		"DJX_UW_END_DEPTH": uint64(UnwindDepth), "DJX_UW_END_ENTRY": uint64(UnwindEntry),
		"DJX_UW_END_NO_JAVA": uint64(UnwindNoJava), "DJX_UW_END_READ": uint64(UnwindRead),
		"DJX_UW_END_SEGMAP": uint64(UnwindSegmap), "DJX_UW_END_FRAME": uint64(UnwindFrame),
	}
	for name, want := range same {
		got, ok := c[name]
		if !ok {
			t.Errorf("unwind.h defines no %s", name)
		} else if got != want {
			t.Errorf("%s is %d in unwind.h, %d in Go (bpf/hotspot_unwind.h)", name, got, want)
		}
	}
	// Codes the agent keeps to itself: a walk that ends so is redone with
	// GetStackTrace and never reaches the wire.
	agentOnly := map[string]bool{"DJX_UW_END_FROZEN": true}
	for name := range c {
		if _, ok := same[name]; !ok && !agentOnly[name] {
			t.Errorf("unwind.h's %s has no Go counterpart: add it to loader's unwind constants and to this test", name)
		}
	}
	// A kind fits the low bits a blob start (16-byte aligned) leaves free.
	for _, k := range []string{"DJX_UW_SIZED", "DJX_UW_FP"} {
		if c[k]&^FrameKinds != 0 {
			t.Errorf("%s = %d does not fit the kind mask %d", k, c[k], FrameKinds)
		}
	}
	// struct djx_raw_frame is the BPF unwinder's frame: three u64s.
	m := regexp.MustCompile(`(?s)struct djx_raw_frame \{(.*?)\};`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatal("unwind.h defines no struct djx_raw_frame")
	}
	fields := regexp.MustCompile(`uint64_t\s+(\w+(?:,\s*\w+)*);`).FindAllStringSubmatch(m[1], -1)
	var names []string
	for _, f := range fields {
		for _, n := range strings.Split(f[1], ",") {
			names = append(names, strings.TrimSpace(n))
		}
	}
	if strings.Join(names, " ") != "blob a b" || unsafe.Sizeof(bpf.DjxUnwindUnwindFrame{}) != 24 {
		t.Errorf("struct djx_raw_frame holds u64 %v; the BPF frame is %d bytes (blob, a, b)", names, unsafe.Sizeof(bpf.DjxUnwindUnwindFrame{}))
	}
}
