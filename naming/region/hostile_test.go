package region

import (
	"strings"
	"testing"
)

// Hostile numbers are refused: inverted ranges, ranges past the address
// space, overlapping maps lines, overlong lines.
func TestHostile(t *testing.T) {
	maps := strings.Join([]string{
		"1000-3000 rw-p 00000000 00:00 0",
		"2000-4000 rw-p 00000000 00:00 0 [heap]", // overlaps: not the kernel
		"5000-4000 rw-p 00000000 00:00 0",        // inverted
		"ffffffffffff0000-ffffffffffffffff rw-p 00000000 00:00 0",
		"10000-11000 r--p 00000000 fe:00 12 /a path with spaces (deleted)",
		"20000-21000 r--p 00000000 fe:00 12 /" + strings.Repeat("x", maxLine),
		"30000-31000 rw-p 00000000 00:00 0 [stack]",
	}, "\n")
	vminfo := strings.Join([]string{
		"Card table byte_map: [0x3000,0x1000] _byte_map_base: 0x0", // inverted
		"Compressed class space mapped at: 0x1000-0xffffffffffffffffff, reserved size: 1",
		"CDS archive(s) mapped at: [0x1000-0x2000-0x2000), size 4096",
	}, "\n")
	m := Build(maps, JVMText{VMInfo: vminfo, Threads: "\"a\" nid=0x30 [0x30800]\n\"evil\" nid=0x31 [0x10800]"}, nil, 0x30)
	for _, c := range []struct {
		addr uint64
		want Region
	}{
		{0x1000, Region{Name: CDS}},
		{0x2800, Region{Name: Anonymous}},
		{0x3800, Region{Name: Unknown}},
		{0x4800, Region{Name: Unknown}},
		{0xffffffffffff0000, Region{Name: Unknown}},
		{0x10000, Region{Name: MappedFile + "/a path with spaces (deleted)"}},
		{0x20000, Region{Name: Unknown}},
		{0x30000, Region{Name: Stack, Thread: "a", TID: 0x30}},
	} {
		if got := m.Lookup(c.addr); got != c.want {
			t.Errorf("%#x: %+v, want %+v", c.addr, got, c.want)
		}
	}
}

// An arena is a 64 MiB-aligned reservation of 64 MiB with one committed
// prefix; a granule-multiple prefix may be a metaspace node, unless NMT
// says where the metaspace is.
func TestArena(t *testing.T) {
	maps := "7f0008000000-7f0008021000 rw-p 00000000 00:00 0\n" +
		"7f0008021000-7f000c000000 ---p 00000000 00:00 0\n" +
		"7f0010000000-7f0010010000 rw-p 00000000 00:00 0\n" + // 64 KiB: a granule
		"7f0010010000-7f0014000000 ---p 00000000 00:00 0\n" +
		"7f0016000000-7f0016021000 rw-p 00000000 00:00 0\n" + // not aligned
		"7f0016021000-7f001a000000 ---p 00000000 00:00 0\n"
	vminfo := "  Non-class space:       64.00 MB reserved,     64.00 KB ( <1%) committed,  1 nodes.\n - commit_granule_bytes: 65536.\n"
	m := Build(maps, JVMText{VMInfo: vminfo}, nil, 1)
	for addr, want := range map[uint64]string{0x7f0008000000: Malloc, 0x7f000bffffff: Malloc, 0x7f0010000000: Anonymous, 0x7f0016000000: Anonymous} {
		if got := m.Lookup(addr).Name; got != want {
			t.Errorf("no NMT: %#x: %q, want %q", addr, got, want)
		}
	}
	nmt := "[0x00007f0016000000 - 0x00007f001a000000] reserved 65536KB for Metaspace from\n"
	m = Build(maps, JVMText{VMInfo: vminfo, NMT: nmt}, nil, 1)
	for addr, want := range map[uint64]string{0x7f0008000000: Malloc, 0x7f0010000000: Malloc, 0x7f0016000000: Metaspace} {
		if got := m.Lookup(addr).Name; got != want {
			t.Errorf("NMT: %#x: %q, want %q", addr, got, want)
		}
	}
}

func TestParseSyscallSP(t *testing.T) {
	for in, want := range map[string]uint64{
		"202 0x7f0c201bfb78 0x89 0x0 0x7f0c04ffa670 0x0 0xffffffff 0x7f0c04ffa560 0x7f0c265b5f16\n": 0x7f0c04ffa560,
		"-1 0x7ffd1000 0x401000": 0x7ffd1000,
		"running":                0,
		"1 2 3 4 5 6 7 zz 9":     0,
	} {
		if got, _ := ParseSyscallSP(in); got != want {
			t.Errorf("%q: %#x, want %#x", in, got, want)
		}
	}
}

// BenchmarkName is the cost of one lookup in a JDK 17 G1 map (~200
// segments), over every segment in turn: with a stack pointer (a second
// search when it is not in the address's mapping) and without.
func BenchmarkName(b *testing.B) {
	f := loadFixtures(b)[0]
	m := Build(f.maps, JVMText{VMInfo: f.vminfo, NMT: f.nmt, Threads: f.threads}, f.tasks, f.pid)
	n := &Namer{m: m, hints: map[uint32]uint64{}}
	addrs := make([]uint64, 0, len(m.starts))
	for i := range m.starts {
		addrs = append(addrs, m.starts[i]+(m.ends[i]-m.starts[i])/2)
	}
	tk := f.tasks[len(f.tasks)-1]
	for _, c := range []struct {
		name string
		sp   uint64
	}{{"rsp", tk.SP}, {"no-rsp", 0}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				n.Name(addrs[i%len(addrs)], tk.TID, c.sp)
			}
		})
	}
}

// In a container the JVM prints its namespace's TIDs: Thread.print's nid
// 7 is host thread 1007.
func TestNamespacedTIDs(t *testing.T) {
	maps := "1000-2000 rw-p 00000000 00:00 0\n3000-4000 rw-p 00000000 00:00 0\n"
	tasks := []Task{{TID: 1000, Comm: "java", NSTID: 1}, {TID: 1007, Comm: "worker", NSTID: 7}}
	m := Build(maps, JVMText{Threads: "\"the worker\" #9 prio=5 tid=0x1 nid=7 waiting  [0x1000]\n\"ghost\" nid=9 [0x3000]"}, tasks, 1000)
	if got, want := m.Lookup(0x1800), (Region{Name: Stack, Thread: "the worker", TID: 1007}); got != want {
		t.Errorf("worker: %+v, want %+v", got, want)
	}
	if got := m.Lookup(0x3800); got.Name != Anonymous {
		t.Errorf("a namespaced TID with no host thread: %+v, want anonymous", got)
	}
	if got := parseNSpid("Name:\tx\nNSpid:\t1007\t7\n"); got != 7 {
		t.Errorf("parseNSpid = %d", got)
	}
}

// ZGC's heap is views of one memfd it names java_heap: the Java heap, not
// a mapped file.
func TestZGCHeap(t *testing.T) {
	maps := "40000000000-40040000000 rw-s 00000000 00:01 1033 /memfd:java_heap (deleted)\n" +
		"7f0008000000-7f0008021000 r--s 00000000 00:01 1034 /memfd:other (deleted)\n"
	m := Build(maps, JVMText{}, nil, 1)
	if got := m.Lookup(0x40000001000).Name; got != JavaHeap {
		t.Errorf("ZGC heap view: %q, want %q", got, JavaHeap)
	}
	if got := m.Lookup(0x7f0008000000).Name; got != MappedFile+"/memfd:other (deleted)" {
		t.Errorf("another memfd: %q", got)
	}
}
