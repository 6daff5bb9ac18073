package agentwire

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The C agent's wire constants, as its header djx.h defines them, are the
// ones this package reads: a change on one side alone fails here.
func TestConstantsMatchAgentHeader(t *testing.T) {
	b, err := os.ReadFile("../../agent/src/djx.h")
	if err != nil {
		t.Fatal(err)
	}
	c := map[string]int64{}
	var num func(s string) int64
	num = func(s string) int64 {
		s = strings.Trim(s, "() ")
		if a, b, ok := strings.Cut(s, "<<"); ok {
			return num(a) << num(b)
		}
		v, err := strconv.ParseInt(strings.TrimRight(s, "uUlL"), 0, 64)
		if err != nil {
			t.Fatalf("djx.h: value %q: %v", s, err)
		}
		return v
	}
	for _, m := range regexp.MustCompile(`(?m)^#define (DJX_\w+) +(\(?-?(?:0x[0-9A-Fa-f]+|\d+)[uUlL]*(?: << \d+)?\)?)\s*(?:/\*.*)?$`).FindAllStringSubmatch(string(b), -1) {
		c[m[1]] = num(m[2])
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*(REC_\w+) = (\d+),`).FindAllStringSubmatch(string(b), -1) {
		c[m[1]] = num(m[2])
	}
	same := map[string]int64{
		"DJX_MAGIC": Magic, "DJX_VERSION": Version, "DJX_PROTO": ProtoVersion,
		"DJX_HDR_LEN": HeaderLen, "DJX_REC_HDR": RecHeaderLen,
		"DJX_STACK_NO_ENV": StackNoEnv, "DJX_RC_SAMPLER_BUSY": RCSamplerBusy,
		"DJX_CENSUS_ATTACH": int64(CensusAttach), "DJX_CENSUS_AFTER_GC": int64(CensusAfterGC),
		"DJX_CENSUS_OVER_BUDGET": int64(CensusOverBudget), "DJX_CENSUS_CANCELLED": int64(CensusCancelled),
		"DJX_CENSUS_FAILED": int64(CensusFailed), "DJX_CENSUS_HOLDERS": int64(CensusHolders),
		"DJX_CENSUS_HOLDERS_SKIPPED": int64(CensusHoldersSkipped), "DJX_CENSUS_HOLDERS_PARTIAL": int64(CensusHoldersPartial),
		"DJX_CENSUS_HOLDERS_FAILED": int64(CensusHoldersFailed), "DJX_CENSUS_PARTIAL": int64(CensusPartial),
		"REC_HELLO": int64(TypeHello), "REC_METHOD": int64(TypeMethod), "REC_ALLOC": int64(TypeAlloc),
		"REC_STATS": int64(TypeStats), "REC_BYE": int64(TypeBye), "REC_ERROR": int64(TypeError),
		"REC_INTERVAL": int64(TypeInterval), "REC_FREE": int64(TypeFree), "REC_GC_START": int64(TypeGCStart),
		"REC_GC_FINISH": int64(TypeGCFinish), "REC_RECONCILE": int64(TypeReconcile), "REC_STACK": int64(TypeStack),
		"REC_CODE": int64(TypeCode), "REC_CODE_UNLOAD": int64(TypeCodeUnload), "REC_STUB": int64(TypeStub),
		"REC_CENSUS_START": int64(TypeCensusStart), "REC_CENSUS_PATH": int64(TypeCensusPath),
		"REC_CENSUS": int64(TypeCensus), "REC_CENSUS_END": int64(TypeCensusEnd),
		"REC_TYPES_INFO": int64(TypeTypesInfo), "REC_CLASS": int64(TypeClass),
		"REC_ROOT": int64(TypeRoot), "REC_ROOTS_END": int64(TypeRootsEnd), "REC_ALLOC_RAW": int64(TypeAllocRaw),
		"DJX_ROOTS_FAILED": int64(RootsFailed), "DJX_ROOTS_CAPPED": int64(RootsCapped),
		"DJX_ROOTS_REFUSED": int64(RootsRefused), "DJX_ROOTS_NO_VM": int64(RootsNoVM),
	}
	for name, want := range same {
		got, ok := c[name]
		if !ok {
			t.Errorf("djx.h defines no %s", name)
		} else if got != want {
			t.Errorf("%s is %d in djx.h, %d in Go", name, got, want)
		}
	}
	for name := range c {
		if _, ok := same[name]; !ok && (strings.HasPrefix(name, "REC_") || strings.HasPrefix(name, "DJX_CENSUS_") ||
			strings.HasPrefix(name, "DJX_ROOTS_")) {
			t.Errorf("djx.h's %s has no Go counterpart: add it to the wire format", name)
		}
	}
	// What the agent sends fits what the Reader keeps.
	for name, limit := range map[string]int64{"DJX_MAX_FRAMES": MaxFrames, "DJX_STACK_FRAMES": MaxFrames,
		"DJX_MAX_LINES": MaxLines, "DJX_CLASS_MAX_FIELDS": MaxFields, "DJX_BUF_CAP": MaxPayload} {
		if v, ok := c[name]; !ok || v > limit {
			t.Errorf("djx.h's %s is %d (found %v), past the Reader's %d", name, v, ok, limit)
		}
	}
}
