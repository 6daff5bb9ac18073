package pmu

import "strings"

// Bit layout of union perf_mem_data_src, little-endian bitfields
// (include/uapi/linux/perf_event.h): mem_op:5 @0, mem_lvl:14 @5,
// mem_snoop:5 @19, mem_lock:2 @24, mem_dtlb:7 @26, mem_lvl_num:4 @33,
// mem_remote:1 @37, mem_snoopx:2 @38, mem_blk:3 @40, mem_hops:3 @43.
const (
	memOpShift     = 0
	memLvlShift    = 5
	memSnoopShift  = 19
	memLockShift   = 24
	memTLBShift    = 26
	memLvlNumShift = 33
	memRemoteShift = 37
	memSnoopXShift = 38
	memBlkShift    = 40
	memHopsShift   = 43
)

// PERF_MEM_* values, same header.
const (
	memOpNA, memOpLoad, memOpStore, memOpPfetch, memOpExec = 0x01, 0x02, 0x04, 0x08, 0x10

	memLvlNA      = 0x01
	memLvlHit     = 0x02
	memLvlMiss    = 0x04
	memLvlL1      = 0x08
	memLvlLFB     = 0x10
	memLvlL2      = 0x20
	memLvlL3      = 0x40
	memLvlLocRAM  = 0x80
	memLvlRemRAM1 = 0x100
	memLvlRemRAM2 = 0x200
	memLvlRemCCE1 = 0x400
	memLvlRemCCE2 = 0x800
	memLvlIO      = 0x1000
	memLvlUnc     = 0x2000

	memLvlNumL1       = 0x01
	memLvlNumL2       = 0x02
	memLvlNumL3       = 0x03
	memLvlNumL4       = 0x04
	memLvlNumCXL      = 0x09
	memLvlNumIO       = 0x0a
	memLvlNumAnyCache = 0x0b
	memLvlNumLFB      = 0x0c
	memLvlNumRAM      = 0x0d
	memLvlNumPMEM     = 0x0e
	memLvlNumNA       = 0x0f

	memSnoopNA, memSnoopNone, memSnoopHit, memSnoopMiss, memSnoopHitM = 0x01, 0x02, 0x04, 0x08, 0x10
	memSnoopXFwd, memSnoopXPeer                                       = 0x01, 0x02

	memLockNA, memLockLocked = 0x01, 0x02

	memTLBNA, memTLBHit, memTLBMiss, memTLBL1, memTLBL2, memTLBWalker, memTLBOS = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40

	memBlkNA, memBlkData, memBlkAddr = 0x01, 0x02, 0x04
)

// Level is the memory level that served an access.
type Level string

// Levels, from nearest to farthest.
const (
	LevelUnknown     Level = ""
	LevelL1          Level = "L1"
	LevelLFB         Level = "LFB" // line fill buffer: the line was already in flight
	LevelL2          Level = "L2"
	LevelL3          Level = "L3"
	LevelL4          Level = "L4"
	LevelAnyCache    Level = "cache"
	LevelRemoteCache Level = "remote cache"
	LevelLocalDRAM   Level = "local DRAM"
	LevelRemoteDRAM  Level = "remote DRAM"
	LevelPMEM        Level = "PMEM"
	LevelCXL         Level = "CXL"
	LevelIO          Level = "IO"
	LevelUncached    Level = "uncached"
)

// Op is the kind of access.
type Op string

// Ops.
const (
	OpUnknown  Op = ""
	OpLoad     Op = "load"
	OpStore    Op = "store"
	OpPrefetch Op = "prefetch"
	OpExec     Op = "exec"
)

// TLBLevel is the TLB level (or walker) that resolved the translation.
type TLBLevel string

// TLB levels.
const (
	TLBUnknown TLBLevel = ""
	TLBL1      TLBLevel = "L1"
	TLBL2      TLBLevel = "L2"
	TLBWalker  TLBLevel = "walker"
	TLBOS      TLBLevel = "OS"
)

// DataSrc is a decoded perf_mem_data_src.
type DataSrc struct {
	Raw   uint64
	Op    Op
	Level Level
	// Hit and Miss come from mem_lvl's HIT/MISS bits; both false means the
	// source did not say. A miss names the level that was missed.
	Hit, Miss bool
	// Remote: another NUMA node or socket served it (mem_remote, or the
	// legacy REM_* levels); Hops is mem_hops (0 unknown, 1 remote core
	// same node, 2 remote node same socket, 3 remote socket, 4 remote board).
	Remote bool
	Hops   int
	// TLB: TLBHit/TLBMiss and the level (L1/L2 for hits, walker/OS where
	// the translation came from); all zero when not reported.
	TLBHit, TLBMiss bool
	TLB             TLBLevel
	// Snoop results; HitM means the line was modified in another core's
	// cache: the signature of true or false sharing.
	SnoopHit, SnoopMiss, SnoopHitM, SnoopNone bool
	SnoopFwd, SnoopPeer                       bool
	Locked                                    bool
	BlockedData, BlockedAddr                  bool
}

func field(v uint64, shift, bits uint) uint64 { return v >> shift & (1<<bits - 1) }

// DecodeDataSrc decodes the raw data_src value of a sample. A zero value
// (source did not fill it) decodes to all-unknown.
func DecodeDataSrc(v uint64) DataSrc {
	d := DataSrc{Raw: v}
	if v == 0 {
		return d
	}
	op := field(v, memOpShift, 5)
	switch {
	case op&memOpLoad != 0:
		d.Op = OpLoad
	case op&memOpStore != 0:
		d.Op = OpStore
	case op&memOpPfetch != 0:
		d.Op = OpPrefetch
	case op&memOpExec != 0:
		d.Op = OpExec
	}
	lvl := field(v, memLvlShift, 14)
	d.Hit = lvl&memLvlHit != 0
	d.Miss = lvl&memLvlMiss != 0
	num := field(v, memLvlNumShift, 4)
	d.Remote = field(v, memRemoteShift, 1) != 0
	d.Hops = int(field(v, memHopsShift, 3))
	d.Level = levelFromNum(num, d.Remote)
	if d.Level == LevelUnknown {
		// Legacy encoding (older drivers): pick the farthest level named.
		switch {
		case lvl&(memLvlRemRAM1|memLvlRemRAM2) != 0:
			d.Level, d.Remote = LevelRemoteDRAM, true
		case lvl&(memLvlRemCCE1|memLvlRemCCE2) != 0:
			d.Level, d.Remote = LevelRemoteCache, true
		case lvl&memLvlLocRAM != 0:
			d.Level = LevelLocalDRAM
		case lvl&memLvlIO != 0:
			d.Level = LevelIO
		case lvl&memLvlUnc != 0:
			d.Level = LevelUncached
		case lvl&memLvlL3 != 0:
			d.Level = LevelL3
		case lvl&memLvlL2 != 0:
			d.Level = LevelL2
		case lvl&memLvlLFB != 0:
			d.Level = LevelLFB
		case lvl&memLvlL1 != 0:
			d.Level = LevelL1
		}
	}
	if d.Hops > 0 && d.Hops != 1 {
		d.Remote = true // hops 2+ leave the node
	}
	snoop := field(v, memSnoopShift, 5)
	d.SnoopNone = snoop&memSnoopNone != 0
	d.SnoopHit = snoop&memSnoopHit != 0
	d.SnoopMiss = snoop&memSnoopMiss != 0
	d.SnoopHitM = snoop&memSnoopHitM != 0
	sx := field(v, memSnoopXShift, 2)
	d.SnoopFwd = sx&memSnoopXFwd != 0
	d.SnoopPeer = sx&memSnoopXPeer != 0
	d.Locked = field(v, memLockShift, 2)&memLockLocked != 0
	tlb := field(v, memTLBShift, 7)
	d.TLBHit = tlb&memTLBHit != 0
	d.TLBMiss = tlb&memTLBMiss != 0
	switch {
	case tlb&memTLBOS != 0:
		d.TLB = TLBOS
	case tlb&memTLBWalker != 0:
		d.TLB = TLBWalker
	case tlb&memTLBL2 != 0:
		d.TLB = TLBL2
	case tlb&memTLBL1 != 0:
		d.TLB = TLBL1
	}
	blk := field(v, memBlkShift, 3)
	d.BlockedData = blk&memBlkData != 0
	d.BlockedAddr = blk&memBlkAddr != 0
	return d
}

func levelFromNum(num uint64, remote bool) Level {
	switch num {
	case memLvlNumL1, memLvlNumL2, memLvlNumL3, memLvlNumL4, memLvlNumAnyCache:
		if remote {
			return LevelRemoteCache
		}
		return map[uint64]Level{memLvlNumL1: LevelL1, memLvlNumL2: LevelL2, memLvlNumL3: LevelL3, memLvlNumL4: LevelL4, memLvlNumAnyCache: LevelAnyCache}[num]
	case memLvlNumLFB:
		return LevelLFB
	case memLvlNumRAM:
		if remote {
			return LevelRemoteDRAM
		}
		return LevelLocalDRAM
	case memLvlNumPMEM:
		return LevelPMEM
	case memLvlNumCXL:
		return LevelCXL
	case memLvlNumIO:
		return LevelIO
	}
	return LevelUnknown // 0 (not set) or NA
}

// String renders the decoded source like perf's mem-info columns.
func (d DataSrc) String() string {
	if d.Raw == 0 {
		return "N/A"
	}
	var parts []string
	if d.Op != OpUnknown {
		parts = append(parts, string(d.Op))
	}
	lvl := string(d.Level)
	if lvl == "" {
		lvl = "level N/A"
	}
	switch {
	case d.Hit:
		lvl += " hit"
	case d.Miss:
		lvl += " miss"
	}
	parts = append(parts, lvl)
	if d.Hops > 0 {
		parts = append(parts, "hops "+string(rune('0'+d.Hops)))
	}
	switch {
	case d.SnoopHitM:
		parts = append(parts, "snoop HITM")
	case d.SnoopHit:
		parts = append(parts, "snoop hit")
	case d.SnoopMiss:
		parts = append(parts, "snoop miss")
	}
	if d.TLBHit || d.TLBMiss {
		t := "TLB"
		if d.TLB != TLBUnknown {
			t += " " + string(d.TLB)
		}
		if d.TLBMiss {
			t += " miss"
		} else {
			t += " hit"
		}
		parts = append(parts, t)
	}
	if d.Locked {
		parts = append(parts, "locked")
	}
	return strings.Join(parts, ", ")
}

// Weight is a decoded sample weight.
type Weight struct {
	Full uint64
	// Latency is the access latency in cycles: the whole value for
	// PERF_SAMPLE_WEIGHT, var1_dw for PERF_SAMPLE_WEIGHT_STRUCT.
	Latency uint64
	// InsnLatency (var2_w) and RetireLatency (var3_w) exist only with
	// WEIGHT_STRUCT and only where the PMU reports them; 0 otherwise.
	InsnLatency   uint16
	RetireLatency uint16
}

// DecodeWeight decodes a raw weight value; structured says whether the
// event asked for PERF_SAMPLE_WEIGHT_STRUCT (union perf_sample_weight:
// var1_dw bits 0-31, var2_w bits 32-47, var3_w bits 48-63 on little
// endian) rather than PERF_SAMPLE_WEIGHT (one u64).
func DecodeWeight(raw uint64, structured bool) Weight {
	if !structured {
		return Weight{Full: raw, Latency: raw}
	}
	return Weight{Full: raw, Latency: raw & 0xffffffff, InsnLatency: uint16(raw >> 32), RetireLatency: uint16(raw >> 48)}
}

// Structured reports whether e samples PERF_SAMPLE_WEIGHT_STRUCT.
func (e Event) Structured() bool { return e.Attr.Sample_type&sampleWeightStruct != 0 }

const sampleWeightStruct = 1 << 24 // PERF_SAMPLE_WEIGHT_STRUCT
