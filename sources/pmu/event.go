package pmu

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kind is the family of a sample source.
type Kind string

// Source kinds.
const (
	KindSoftware Kind = "software" // decode (cpu-clock), page-faults
	KindPEBS     Kind = "pebs"     // Intel precise events on the cpu/cpu_core PMU
	KindIBS      Kind = "ibs"      // AMD IBS op
	KindSPE      Kind = "spe"      // ARM Statistical Profiling Extension
	KindRaw      Kind = "raw"      // a raw event on another PMU, as written
)

// Measures says which per-sample values a source fills in, so reports can
// show only the columns the chosen source measures.
type Measures struct {
	Addr     bool // data address (ctx->addr), or decoded from the instruction
	Weight   bool // access latency in cycles (perf_sample_weight)
	DataSrc  bool // perf_mem_data_src: level, TLB, snoop
	PhysAddr bool // physical address
}

// Event is a sample source ready to open: Attr is the complete
// perf_event_attr, with Size set and sampling left disabled (the loader
// attaches the BPF program, then enables it).
type Event struct {
	Name string // catalog name or the raw string as given
	PMU  string // sysfs PMU name: cpu, cpu_core, ibs_op, arm_spe_0, software
	Kind Kind
	Attr unix.PerfEventAttr
	// Leader, when set, must be opened first on the same CPU and passed as
	// group_fd: Sapphire Rapids and hybrid cpu_core refuse mem-loads unless
	// the mem-loads-aux event leads its group.
	Leader *unix.PerfEventAttr
	// CPUs is the PMU's cpus/cpumask list ("" = every online CPU); on
	// hybrid parts cpu_core events open only on the P-cores.
	CPUs string
	// AUX: the PMU writes its records to the AUX area of a perf mmap ring
	// (ARM SPE), not as overflow samples, so a BPF perf_event program sees
	// no per-record address; consuming them needs an AUX-ring reader.
	AUX      bool
	Measures Measures
	// Unit of Attr.Sample: "ns" (cpu-clock), "events", "ops", "cycles".
	PeriodUnit string
	// FreqAllowed is false where the PMU rejects frequency mode (SPE).
	FreqAllowed bool
}

// ErrFreq is returned by WithFreq for sources that need a fixed period.
var ErrFreq = errors.New("frequency mode not supported")

// WithPeriod returns a copy of e sampling every period events (ns for
// cpu-clock).
func (e Event) WithPeriod(period uint64) Event {
	e.Attr.Sample = period
	e.Attr.Bits &^= unix.PerfBitFreq
	return e
}

// WithFreq returns a copy of e sampling about hz times per second.
// cpu-clock is turned into the equivalent period in ns, which is exact.
func (e Event) WithFreq(hz uint64) (Event, error) {
	if hz == 0 {
		return e, fmt.Errorf("event %s: frequency must be positive", e.Name)
	}
	if e.Attr.Type == unix.PERF_TYPE_SOFTWARE && e.Attr.Config == unix.PERF_COUNT_SW_CPU_CLOCK {
		return e.WithPeriod(1e9 / hz), nil
	}
	if !e.FreqAllowed {
		return e, fmt.Errorf("event %s: %w: the %s PMU needs a fixed period (--period)", e.Name, ErrFreq, e.PMU)
	}
	e.Attr.Sample = hz
	e.Attr.Bits |= unix.PerfBitFreq
	return e, nil
}

// PreciseIP returns the precise_ip level (0-3) encoded in the flags word.
func (e Event) PreciseIP() int { return PreciseIP(&e.Attr) }

// perf_event_attr flags word: precise_ip is the 2-bit field after the 15
// one-bit flags disabled..watermark, i.e. bits 15-16 (include/uapi/linux/
// perf_event.h); x/sys names them PerfBitPreciseIPBit1/2.
const preciseShift = 15

// PreciseIP returns the precise_ip level encoded in a.Bits.
func PreciseIP(a *unix.PerfEventAttr) int { return int(a.Bits>>preciseShift) & 3 }

func setPrecise(a *unix.PerfEventAttr, p int) {
	a.Bits = a.Bits&^(3<<preciseShift) | uint64(p&3)<<preciseShift
}

// attrSize is sizeof(struct perf_event_attr) as x/sys lays it out: 128
// bytes, PERF_ATTR_SIZE_VER7 (through sig_data). config3 (VER8) is not
// part of it, so format fields in config3 cannot be set.
const attrSize = uint32(unsafe.Sizeof(unix.PerfEventAttr{}))

// Sample types. Only what is requested is filled into perf_sample_data,
// which the BPF program reads:
//   - ADDR: the PEBS/IBS drivers copy the data linear address into
//     data->addr only when asked (ctx->addr is 0 otherwise); software
//     page-faults always carry it. Requested everywhere for uniformity.
//   - WEIGHT_STRUCT rather than WEIGHT: var1_dw is the load latency,
//     var2_w the instruction latency where the PMU reports one (Intel
//     PMU_FL_INSTR_LATENCY, AMD IBS), var3_w the retire latency; the two
//     are mutually exclusive and WEIGHT_STRUCT exists since Linux 5.12.
//   - DATA_SRC: union perf_mem_data_src (level, TLB, snoop, remote).
//   - PHYS_ADDR is left out: it costs a page-table walk in the NMI, and
//     the NUMA node comes from move_pages(2) in user space instead.
const (
	sampleBase = unix.PERF_SAMPLE_ADDR
	sampleMem  = sampleBase | unix.PERF_SAMPLE_WEIGHT_STRUCT | unix.PERF_SAMPLE_DATA_SRC
)

// Flags every sampling event starts with: disabled until the BPF program
// is attached; kernel and hypervisor excluded because a kernel-mode sample
// carries kernel registers and no user data address of the profiled JVM.
const baseBits = unix.PerfBitDisabled | unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv

func newAttr(typ uint32, config uint64) unix.PerfEventAttr {
	return unix.PerfEventAttr{Type: typ, Size: attrSize, Config: config, Sample_type: sampleBase, Bits: baseBits}
}
