package loader

import (
	"testing"

	"github.com/djx-bpf/djx-bpf/bpf"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// TestSampleFlagsMatchBPF: package sample keeps BPF out of the join, so it
// restates the flags that bpf2go generates from sample.bpf.c's enum.
func TestSampleFlagsMatchBPF(t *testing.T) {
	for _, c := range []struct {
		name string
		got  uint32
		want bpf.DjxSampleFlag
	}{
		{"FlagBeforeOK", sample.FlagBeforeOK, bpf.DjxSampleFlagSAMPLE_BEFORE_OK},
		{"FlagAtOK", sample.FlagAtOK, bpf.DjxSampleFlagSAMPLE_AT_OK},
		{"FlagMemOK", sample.FlagMemOK, bpf.DjxSampleFlagSAMPLE_MEM_OK},
		{"FlagNoStack", sample.FlagNoStack, bpf.DjxSampleFlagSAMPLE_NO_STACK},
		{"FlagHdrMasked", sample.FlagHdrMasked, bpf.DjxSampleFlagSAMPLE_HDR_MASKED},
		{"FlagBeforeShort", sample.FlagBeforeShort, bpf.DjxSampleFlagSAMPLE_BEFORE_SHORT},
	} {
		if c.got != uint32(c.want) {
			t.Errorf("sample.%s = %#x, sample.bpf.c says %#x", c.name, c.got, uint32(c.want))
		}
	}
}
