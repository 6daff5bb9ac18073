package region

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: the maps, VM.info, NMT and Thread.print texts are written by
// the target. Build must not panic, and every segment it makes must be a
// non-empty range inside one mapping, sorted and disjoint.
func FuzzParse(f *testing.F) {
	paths, _ := filepath.Glob("testdata/*.maps")
	for _, p := range paths {
		base := p[:len(p)-len(".maps")]
		var s [4]string
		for i, ext := range []string{".maps", ".vminfo", ".nmt", ".threads"} {
			b, _ := os.ReadFile(base + ext)
			if len(b) > 8<<10 {
				b = b[:8<<10] // keep seeds small; the fuzzer grows them
			}
			s[i] = string(b)
		}
		f.Add(s[0], s[1], s[2], s[3], uint64(0x7f0000001000))
	}
	f.Add("1000-2000 rw-p 0 0:0 0\nffffffffffffffff-0 rw-p 0 0:0 0 [heap]\n",
		"Card table byte_map: [0x2000,0x1000]\nCDS archive(s) mapped at: [0x1000-0x0-0xffffffffffffffff), size",
		"[0x1000 - 0x1800] reserved 4KB for Thread Stack from", "\"x\" nid=0x1 [0x1800]", uint64(0x1800))
	f.Fuzz(func(t *testing.T, maps, vminfo, nmt, threads string, sp uint64) {
		m := Build(maps, JVMText{VMInfo: vminfo, NMT: nmt, Threads: threads}, []Task{{TID: 1, Comm: "x", SP: sp}}, 1)
		for i := range m.starts {
			if m.starts[i] >= m.ends[i] || (i > 0 && m.starts[i] < m.ends[i-1]) {
				t.Fatalf("segment %d [%#x,%#x) after [%#x,%#x)", i, m.starts[i], m.ends[i], m.starts[max(i-1, 0)], m.ends[max(i-1, 0)])
			}
			mi := m.mapIdx[i]
			if m.starts[i] < m.mstart[mi] || m.ends[i] > m.mend[mi] {
				t.Fatalf("segment %d outside its mapping", i)
			}
			m.Lookup(m.starts[i])
		}
		m.Lookup(sp)
		ParseSyscallSP(threads)
	})
}
