package pmu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// MarshalAttr returns the bytes of a as the kernel reads them on a
// little-endian machine (x86-64, arm64).
func MarshalAttr(a *unix.PerfEventAttr) []byte {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, a) // fixed-size struct: cannot fail
	return b.Bytes()
}

var flagNames = []string{"disabled", "inherit", "pinned", "exclusive", "exclude_user", "exclude_kernel", "exclude_hv", "exclude_idle",
	"mmap", "comm", "freq", "inherit_stat", "enable_on_exec", "task", "watermark"}

// DescribeAttr renders the fields of a that the catalog sets, one line, for
// `djx-bpf events` and golden files.
func DescribeAttr(a *unix.PerfEventAttr) string {
	var flags []string
	for i, n := range flagNames {
		if a.Bits&(1<<uint(i)) != 0 {
			flags = append(flags, n)
		}
	}
	if p := PreciseIP(a); p > 0 {
		flags = append(flags, fmt.Sprintf("precise_ip=%d", p))
	}
	if rest := a.Bits &^ (1<<17 - 1); rest != 0 {
		flags = append(flags, fmt.Sprintf("other=%#x", rest))
	}
	period := "sample_period"
	if a.Bits&unix.PerfBitFreq != 0 {
		period = "sample_freq"
	}
	return fmt.Sprintf("type=%d size=%d config=%#x %s=%d sample_type=%#x (%s) flags=%#x (%s) config1=%#x config2=%#x",
		a.Type, a.Size, a.Config, period, a.Sample, a.Sample_type, sampleTypeNames(a.Sample_type), a.Bits, strings.Join(flags, " "), a.Ext1, a.Ext2)
}

func sampleTypeNames(t uint64) string {
	names := map[uint64]string{
		unix.PERF_SAMPLE_IP: "IP", unix.PERF_SAMPLE_TID: "TID", unix.PERF_SAMPLE_TIME: "TIME", unix.PERF_SAMPLE_ADDR: "ADDR",
		unix.PERF_SAMPLE_PERIOD: "PERIOD", unix.PERF_SAMPLE_WEIGHT: "WEIGHT", unix.PERF_SAMPLE_DATA_SRC: "DATA_SRC",
		unix.PERF_SAMPLE_PHYS_ADDR: "PHYS_ADDR", unix.PERF_SAMPLE_WEIGHT_STRUCT: "WEIGHT_STRUCT",
	}
	var out []string
	for bit := uint64(1); bit != 0 && bit <= t; bit <<= 1 {
		if t&bit == 0 {
			continue
		}
		if n, ok := names[bit]; ok {
			out = append(out, n)
		} else {
			out = append(out, fmt.Sprintf("%#x", bit))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "|")
}
