package decode

import (
	"bufio"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// corpusSamples turns the JIT listings of testdata/corpus.txt (real C1/C2
// code from JDK 17 and 25) into decode inputs as the BPF program delivers
// them: for every instruction, the 64 bytes before it and the 16 bytes at
// it, so that the benchmark sees the real mix of at-ip hits, look-backs,
// misses and encodings (legacy, VEX, EVEX).
func corpusSamples(b *testing.B) (before, at [][]byte) {
	f, err := os.Open(corpusPath)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var code []byte
	var starts []int
	flush := func() {
		for _, s := range starts {
			lo, hi := max(0, s-maxBefore), min(len(code), s+16)
			before = append(before, code[lo:s])
			at = append(at, code[s:hi])
		}
		code, starts = nil, nil
	}
	jit := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "src ") {
			flush()
			jit = !strings.HasPrefix(l, "src synth")
			continue
		}
		if !jit || l == "" || l[0] == '#' {
			continue
		}
		h, _, _ := strings.Cut(l, "\t")
		bs, err := hex.DecodeString(h)
		if err != nil {
			continue
		}
		starts = append(starts, len(code))
		code = append(code, bs...)
	}
	flush()
	if len(at) == 0 {
		b.Fatal("no JIT instructions in the corpus")
	}
	return before, at
}

// BenchmarkDecodeCorpus decodes every instruction of the JIT corpus in
// turn, as if a timer sample had landed on each: ns/op is the cost of one
// sample's decode, whatever it finds.
func BenchmarkDecodeCorpus(b *testing.B) {
	before, at := corpusSamples(b)
	r := testRegs()
	var d Decoder
	found := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		k := i % len(at)
		if d.Decode(before[k], at[k], &r).Method != None {
			found++
		}
	}
	b.ReportMetric(float64(len(at)), "insns")
}
