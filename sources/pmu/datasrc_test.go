package pmu

import "testing"

func TestDecodeDataSrc(t *testing.T) {
	cases := []struct {
		name string
		v    uint64
		want DataSrc
		str  string
	}{{
		// Intel PEBS "L3 hit, snoop HITM" (another core held the line
		// modified: sharing). mem_op LOAD 0x02 @0 = 0x2; mem_lvl HIT|L3
		// 0x42 @5 = 0x840; mem_snoop HITM 0x10 @19 = 0x800000; mem_lock NA
		// 0x01 @24 = 0x1000000; mem_dtlb HIT|L1|L2 0x1a @26 = 0x68000000;
		// mem_lvl_num L3 3 @33 = 0x600000000.
		name: "intel L3 hit HITM",
		v:    0x669800842,
		want: DataSrc{Op: OpLoad, Level: LevelL3, Hit: true, SnoopHitM: true, TLBHit: true, TLB: TLBL2},
		str:  "load, L3 hit, snoop HITM, TLB L2 hit",
	}, {
		// AMD IBS load from DRAM of another node in the socket: mem_op LOAD
		// 0x2; mem_lvl HIT 0x02 @5 = 0x40; mem_dtlb MISS|WALKER 0x24 @26 =
		// 0x90000000; mem_lvl_num RAM 0xd @33 = 0x1a00000000; mem_remote 1
		// @37 = 0x2000000000; mem_hops HOPS_1 (remote node, same socket) 2
		// @43 = 0x100000000000.
		name: "amd remote dram",
		v:    0x103a90000042,
		want: DataSrc{Op: OpLoad, Level: LevelRemoteDRAM, Hit: true, Remote: true, Hops: 2, TLBMiss: true, TLB: TLBWalker},
		str:  "load, remote DRAM hit, hops 2, TLB walker miss",
	}, {
		// Legacy encoding without mem_lvl_num, a local DRAM hit: mem_lvl
		// HIT|LOC_RAM 0x82 @5 = 0x1040; snoop MISS 0x08 @19 = 0x400000;
		// op LOAD 0x2.
		name: "legacy local dram",
		v:    0x401042,
		want: DataSrc{Op: OpLoad, Level: LevelLocalDRAM, Hit: true, SnoopMiss: true},
		str:  "load, local DRAM hit, snoop miss",
	}, {
		// Legacy remote cache (1 hop) HITM: mem_lvl HIT|REM_CCE1 0x402 @5 =
		// 0x8040; snoop HITM @19 = 0x800000; op LOAD.
		name: "legacy remote cache",
		v:    0x808042,
		want: DataSrc{Op: OpLoad, Level: LevelRemoteCache, Hit: true, Remote: true, SnoopHitM: true},
		str:  "load, remote cache hit, snoop HITM",
	}, {
		// Locked load served by the line fill buffer: mem_lvl HIT|LFB 0x12
		// @5 = 0x240, lvl_num LFB 0xc @33 = 0x1800000000, lock LOCKED 0x2
		// @24 = 0x2000000, op LOAD 0x2.
		name: "lfb locked",
		v:    0x1802000242,
		want: DataSrc{Op: OpLoad, Level: LevelLFB, Hit: true, Locked: true},
		str:  "load, LFB hit, locked",
	}, {
		// Store that missed L1 (mem_lvl MISS|L1 0x0c @5 = 0x180), op STORE
		// 0x4, lvl_num L1 1 @33 = 0x200000000, blocked DATA 0x2 @40.
		name: "store l1 miss blocked",
		v:    0x20200000184,
		want: DataSrc{Op: OpStore, Level: LevelL1, Miss: true, BlockedData: true},
		str:  "store, L1 miss",
	}, {
		// PMEM via lvl_num 0xe, snoopx FWD @38, and the NA level of old
		// drivers (lvl NA 0x01 @5 = 0x20) ignored.
		name: "pmem",
		v:    0xe<<33 | 1<<38 | 0x20 | 0x2,
		want: DataSrc{Op: OpLoad, Level: LevelPMEM, SnoopFwd: true},
		str:  "load, PMEM",
	}, {
		name: "zero",
		v:    0,
		want: DataSrc{},
		str:  "N/A",
	}}
	for _, c := range cases {
		got := DecodeDataSrc(c.v)
		c.want.Raw = c.v
		if got != c.want {
			t.Errorf("%s: %#x\n got  %+v\n want %+v", c.name, c.v, got, c.want)
		}
		if got.String() != c.str {
			t.Errorf("%s: String() = %q, want %q", c.name, got.String(), c.str)
		}
	}
}

// TestDataSrcShifts ties the shifts to the header's PERF_MEM_*_SHIFT values
// and field widths: mem_op:5, mem_lvl:14, mem_snoop:5, mem_lock:2,
// mem_dtlb:7, mem_lvl_num:4, mem_remote:1, mem_snoopx:2, mem_blk:3, mem_hops:3.
func TestDataSrcShifts(t *testing.T) {
	widths := []uint{5, 14, 5, 2, 7, 4, 1, 2, 3, 3}
	shifts := []uint{memOpShift, memLvlShift, memSnoopShift, memLockShift, memTLBShift, memLvlNumShift, memRemoteShift, memSnoopXShift, memBlkShift, memHopsShift}
	var at uint
	for i, w := range widths {
		if shifts[i] != at {
			t.Errorf("field %d at bit %d, want %d", i, shifts[i], at)
		}
		at += w
	}
	if at != 46 {
		t.Errorf("fields end at %d, want 46 (then mem_rsvd:18)", at)
	}
}

func TestDecodeWeight(t *testing.T) {
	// WEIGHT_STRUCT: var3_w=5 (retire) @48, var2_w=12 (instruction) @32,
	// var1_dw=310 (load latency) @0.
	w := DecodeWeight(5<<48|12<<32|310, true)
	if w.Latency != 310 || w.InsnLatency != 12 || w.RetireLatency != 5 {
		t.Errorf("struct: %+v", w)
	}
	// Plain WEIGHT: the whole u64 is the latency.
	w = DecodeWeight(1<<33|7, false)
	if w.Latency != 1<<33|7 || w.InsnLatency != 0 {
		t.Errorf("full: %+v", w)
	}
	if (Event{Attr: newAttr(4, 0)}).Structured() {
		t.Error("base attr reported structured")
	}
	e := Event{}
	e.Attr.Sample_type = sampleMem
	if !e.Structured() {
		t.Error("sampleMem not structured")
	}
}
