package decode

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The oracle test compares the decoder with GNU objdump, an independent
// disassembler. testdata/corpus.txt holds objdump's linear-sweep listing of
// (a) testdata/synth.s, assembled by llvm-mc, and (b) real HotSpot JIT code in
// testdata/jit.txt, dumped by testdata/jitdump. Regenerate it with
//
//	go test ./decode -run TestOracle -update
//
// which needs llvm-mc and objdump; the test itself needs neither.

var update = flag.Bool("update", false, "regenerate testdata/corpus.txt with llvm-mc and objdump")

const corpusPath = "testdata/corpus.txt"

type oracleInsn struct {
	src   string // corpus section
	off   int    // offset in the section's byte stream
	bytes []byte
	asm   string
}

type section struct {
	name   string
	stream []byte
	insns  []oracleInsn
}

func TestOracle(t *testing.T) {
	if *update {
		if err := regenerate(); err != nil {
			t.Fatalf("regenerate corpus: %v", err)
		}
	}
	secs, err := readCorpus(corpusPath)
	if err != nil {
		t.Fatalf("read corpus: %v", err)
	}
	regs := testRegs()
	var d Decoder
	type stats struct{ mem, same, none, wrong, lenBad, total int }
	st := map[bool]*stats{false: {}, true: {}} // by isJIT
	noneBy := map[string]int{}
	lb := struct{ tries, hit, wrong, constHit, boundaryOK, boundaryBad, boundaryNone int }{}
	// Boundaries in the Lucene service's hot methods (sections lucene-*),
	// where 16 bytes before ip left 12% undecided.
	luc := struct{ ok, bad, none int }{}
	for _, s := range secs {
		jit := s.name != "synth"
		ss := st[jit]
		for k, in := range s.insns {
			if strings.Contains(in.asm, "(bad)") || strings.HasPrefix(in.asm, ".byte") || mnemonic(in.asm) == "" { // undecodable, or a lone prefix at a cut
				continue
			}
			ss.total++
			at := s.stream[in.off:]
			var x insn
			if !x.decode(at) || x.n != len(in.bytes) {
				ss.lenBad++
				if !jit || ss.lenBad <= 20 {
					t.Errorf("%s+%#x %x %q: length %d, oracle %d", s.name, in.off, in.bytes, in.asm, x.n, len(in.bytes))
				}
				continue
			}
			r := regs
			r.IP = 0x7f0000000000 + uint64(in.off)
			want, wantOK, access := oracleEA(in, &r)
			got := d.Decode(nil, at, &r)
			if access {
				ss.mem++
			}
			switch {
			case !access:
				if got.Method == AtIP {
					ss.wrong++
					t.Errorf("%s+%#x %x %q: got %v %#x, oracle has no access", s.name, in.off, in.bytes, in.asm, got.Method, got.Addr)
				}
			case !wantOK: // fs/gs or gather: None is the right answer
				if got.Method != None {
					ss.wrong++
					t.Errorf("%s+%#x %x %q: got %v %#x, want none", s.name, in.off, in.bytes, in.asm, got.Method, got.Addr)
				} else {
					ss.same++
				}
			case got.Method == None:
				ss.none++
				noneBy[mnemonic(in.asm)]++
			case got.Method != AtIP || got.Addr != want:
				ss.wrong++
				t.Errorf("%s+%#x %x %q: got %v %#x, oracle %#x", s.name, in.off, in.bytes, in.asm, got.Method, got.Addr, want)
			default:
				ss.same++
			}

			// Look-back: the decoder must find the previous instruction's
			// boundary, and any address it rebuilds must be the oracle's.
			if !jit || k == 0 {
				continue
			}
			prev := s.insns[k-1]
			if strings.Contains(prev.asm, "(bad)") {
				continue
			}
			lo := in.off - maxBefore
			if lo < 0 {
				lo = 0
			}
			before := s.stream[lo:in.off]
			lucene := strings.HasPrefix(s.name, "lucene")
			switch b, ok := d.boundary(before); {
			case !ok:
				lb.boundaryNone++
				luc.none += b2i(lucene)
			case lo+b == prev.off:
				lb.boundaryOK++
				luc.ok += b2i(lucene)
			default:
				lb.boundaryBad++
				luc.bad += b2i(lucene)
			}
			if access {
				continue
			}
			lb.tries++
			got = d.Decode(before, at, &r)
			if got.Method != LookBack {
				continue
			}
			pr := regs
			pr.IP = r.IP - uint64(len(prev.bytes))
			constBaseTruth(s.insns[:k], &pr)
			pw, pok, pacc := oracleEA(prev, &pr)
			if !pacc || !pok || pw != got.Addr {
				// Backward decoding is inherently ambiguous; a
				// small rate of wrong boundaries is tolerated below.
				lb.wrong++
				t.Logf("%s+%#x look-back %q after %q: got %#x, oracle %#x (ok %v)", s.name, in.off, in.asm, prev.asm, got.Addr, pw, pok && pacc)
				continue
			}
			lb.hit++
			if got.Base == NoReg {
				lb.constHit++ // constBase: a constant put in the base just before
			}
		}
	}
	for _, jit := range []bool{false, true} {
		s := st[jit]
		name := map[bool]string{false: "synthetic", true: "JIT"}[jit]
		t.Logf("%s: %d insns, %d length mismatches; %d with memory access: %d agree (%.2f%%), %d none, %d wrong",
			name, s.total, s.lenBad, s.mem, s.same, pct(s.same, s.mem), s.none, s.wrong)
	}
	var keys []string
	for k := range noneBy {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("none: %s ×%d", k, noneBy[k])
	}
	nb := lb.boundaryOK + lb.boundaryBad + lb.boundaryNone
	t.Logf("look-back boundary on JIT code: %d positions, %.2f%% right, %.2f%% wrong, %.2f%% undecided",
		nb, pct(lb.boundaryOK, nb), pct(lb.boundaryBad, nb), pct(lb.boundaryNone, nb))
	nl := luc.ok + luc.bad + luc.none
	t.Logf("look-back boundary on Lucene's code: %d positions, %.2f%% right, %.2f%% wrong, %.2f%% undecided",
		nl, pct(luc.ok, nl), pct(luc.bad, nl), pct(luc.none, nl))
	t.Logf("look-back at non-memory ips: %d tries, %d addresses (%.1f%%), %d wrong; %d right through a constant base", lb.tries, lb.hit+lb.wrong, pct(lb.hit+lb.wrong, lb.tries), lb.wrong, lb.constHit)
	if got := lb.hit + lb.wrong; pct(lb.wrong, got) > 0.5 {
		t.Errorf("look-back: %d of %d addresses wrong, want at most 0.5%%", lb.wrong, got)
	}
	if lb.constHit < 8 { // 9 in the corpus, Hot's and StandardTokenizerImpl's tables
		t.Errorf("look-back through a constant base: %d addresses, want at least 8", lb.constHit)
	}
	if pct(lb.boundaryBad, nb) > 0.2 || pct(luc.bad, nl) > 0.2 {
		t.Errorf("look-back boundaries wrong: %d of %d, on Lucene's code %d of %d; want at most 0.2%%", lb.boundaryBad, nb, luc.bad, nl)
	}
	// Coverage floors. The corpus is recorded bytes, so these figures are
	// the same on every CPU; they sit below the measured ones (synthetic
	// 306/307, JIT 11885/11885, look-back 3007 addresses and 99.6% right
	// boundaries, on Lucene's code 99.7%) by a margin for new cases the
	// corpus may gain, not for noise. A decoder that loses one encoding
	// (VEX memory operands: 668 of the JIT's accesses) falls through them,
	// and so does the look-back with 16 bytes before ip (84.4% and 87.1%
	// right).
	for _, f := range []struct {
		what    string
		got, of int
		floor   float64 // percent
		minOf   int     // the corpus must not shrink under the floor
	}{
		{"synthetic accesses computed", st[false].same, st[false].mem, 99, 300},
		{"JIT accesses computed", st[true].same, st[true].mem, 99.5, 11500},
		{"look-back boundaries right", lb.boundaryOK, nb, 98, 34000},
		{"look-back boundaries right on Lucene's code", luc.ok, nl, 98, 15000},
		{"look-back addresses at non-memory ips", lb.hit, lb.tries, 12, 22000},
	} {
		if f.of < f.minOf || pct(f.got, f.of) < f.floor {
			t.Errorf("%s: %d of %d (%.2f%%), want at least %.1f%% of at least %d", f.what, f.got, f.of, pct(f.got, f.of), f.floor, f.minOf)
		}
	}
}

var (
	movImmRe  = regexp.MustCompile(`^(?:movabs|mov) \$0x([0-9a-f]+),%([a-z0-9]+)$`)
	lastRegRe = regexp.MustCompile(`,%([a-z0-9]+)$`)
)

// constBaseTruth sets, in r, the base register of the load ending insns
// as it was when the load ran, from objdump's text: when the load
// overwrote it and the instruction before put a constant in it (`movabs
// $0x687854a50,%r11; mov 0x10(%r11,%r8,4),%r11d`), it held the constant.
func constBaseTruth(insns []oracleInsn, r *Regs) {
	if len(insns) < 2 {
		return
	}
	m := movImmRe.FindStringSubmatch(insns[len(insns)-2].asm)
	load := insns[len(insns)-1].asm
	d := lastRegRe.FindStringSubmatch(load)
	mem := memRe.FindStringSubmatch(load)
	if m == nil || d == nil || mem == nil || mem[3] == "" {
		return
	}
	reg, ok1 := gprNum[m[2]]
	dst, ok2 := gprNum[d[1]]
	base, ok3 := gprNum[strings.TrimPrefix(mem[3], "%")]
	if !ok1 || !ok2 || !ok3 || reg != dst || reg != base {
		return
	}
	v, err := strconv.ParseUint(m[1], 16, 64)
	if err == nil {
		r.GPR[reg] = v
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// testRegs gives every register a distinct value above 4 GiB, so that
// wrong registers, scales and 32-bit truncation all show.
func testRegs() Regs {
	var r Regs
	for i := range r.GPR {
		r.GPR[i] = 0x100000000*uint64(i+1) + 0x10101*uint64(i+3)
	}
	return r
}

var gprNum = map[string]int{
	"rax": 0, "rcx": 1, "rdx": 2, "rbx": 3, "rsp": 4, "rbp": 5, "rsi": 6, "rdi": 7,
	"eax": 0, "ecx": 1, "edx": 2, "ebx": 3, "esp": 4, "ebp": 5, "esi": 6, "edi": 7,
}

func init() {
	for i := 8; i < 16; i++ {
		gprNum[fmt.Sprintf("r%d", i)] = i
		gprNum[fmt.Sprintf("r%dd", i)] = i
	}
}

var (
	memRe = regexp.MustCompile(`(?:%([a-z]s):)?(-?0x[0-9a-f]+|-?[0-9]+)?\((%[a-z0-9]+)?(?:,(%[a-z0-9]+)(?:,([1248]))?)?\)`)
	absRe = regexp.MustCompile(`^(?:%([a-z]s):)?(0x[0-9a-f]+)$`)
)

// prefixWords are objdump's prefix mnemonics printed before the instruction.
var prefixWords = map[string]bool{
	"lock": true, "rep": true, "repz": true, "repnz": true, "repe": true, "repne": true,
	"data16": true, "addr32": true, "cs": true, "ds": true, "es": true, "ss": true,
	"fs": true, "gs": true, "notrack": true, "bnd": true, "xacquire": true, "xrelease": true,
}

func mnemonic(asm string) string {
	for _, f := range strings.Fields(asm) {
		if !prefixWords[f] && !strings.HasPrefix(f, "rex") {
			return f
		}
	}
	return ""
}

// oracleEA parses objdump's AT&T text and computes the effective address.
// access reports an explicit data access (not LEA/NOP); ok=false means the
// right answer is None (fs/gs segment, vector index).
func oracleEA(in oracleInsn, r *Regs) (ea uint64, ok, access bool) {
	asm := in.asm
	if i := strings.Index(asm, "#"); i >= 0 {
		asm = asm[:i]
	}
	mn := mnemonic(asm)
	rest := strings.TrimSpace(asm[strings.Index(asm, mn)+len(mn):])
	if mn == "lea" || strings.HasPrefix(mn, "nop") || strings.HasPrefix(mn, "bnd") ||
		strings.HasPrefix(mn, "endbr") || strings.HasPrefix(mn, "prefetchit") {
		return 0, false, false
	}
	strOp := ""
	if strings.Contains(rest, ":(%rsi)") || strings.Contains(rest, ":(%rdi)") ||
		strings.Contains(rest, ":(%esi)") || strings.Contains(rest, ":(%edi)") {
		switch mn[:min(4, len(mn))] {
		case "movs", "lods", "cmps":
			strOp = "si"
		case "stos", "scas":
			strOp = "di"
		}
	}
	if strings.HasPrefix(mn, "ins") || strings.HasPrefix(mn, "outs") || mn == "xlat" || mn == "xlatb" {
		return 0, false, false // implicit forms we do not decode
	}
	ops := splitOperands(rest)
	for _, op := range ops {
		m := memRe.FindStringSubmatch(op)
		if m == nil {
			if a := absRe.FindStringSubmatch(op); a != nil && !branchy(mn) && !strings.HasPrefix(op, "$") {
				v, _ := strconv.ParseUint(a[2][2:], 16, 64)
				if a[1] == "fs" || a[1] == "gs" {
					return 0, false, true
				}
				if strings.Contains(rest, "addr32") {
					v &= 0xffffffff
				}
				return v, true, true
			}
			continue
		}
		if strOp != "" && !strings.Contains(m[3], strOp) {
			continue
		}
		if m[1] == "fs" || m[1] == "gs" {
			if !(strOp == "di") {
				return 0, false, true
			}
		}
		var disp int64
		if m[2] != "" {
			s := m[2]
			neg := strings.HasPrefix(s, "-")
			s = strings.TrimPrefix(s, "-")
			v, _ := strconv.ParseUint(strings.TrimPrefix(s, "0x"), map[bool]int{true: 16, false: 10}[strings.HasPrefix(s, "0x")], 64)
			disp = int64(v)
			if neg {
				disp = -disp
			}
		}
		var a uint64
		mask := ^uint64(0)
		base := strings.TrimPrefix(m[3], "%")
		idx := strings.TrimPrefix(m[4], "%")
		if strings.HasPrefix(base, "e") || strings.HasSuffix(base, "d") && base != "" || strings.HasPrefix(idx, "e") || strings.HasSuffix(idx, "d") && idx != "" {
			mask = 0xffffffff
		}
		if strings.Contains(idx, "mm") {
			return 0, false, true // VSIB gather/scatter
		}
		switch {
		case base == "":
		case base == "rip":
			a = r.IP + uint64(len(in.bytes))
		case base == "eip":
			a = (r.IP + uint64(len(in.bytes))) & mask
		default:
			n, found := gprNum[base]
			if !found {
				return 0, false, true
			}
			a = r.GPR[n] & mask
		}
		if idx != "" && idx != "riz" && idx != "eiz" {
			n, found := gprNum[idx]
			if !found {
				return 0, false, true
			}
			sc := uint64(1)
			if m[5] != "" {
				sc, _ = strconv.ParseUint(m[5], 10, 64)
			}
			a += (r.GPR[n] & mask) * sc
		}
		a += uint64(disp)
		return a & mask, true, true
	}
	return 0, false, false
}

func branchy(mn string) bool {
	return strings.HasPrefix(mn, "j") || strings.HasPrefix(mn, "call") || strings.HasPrefix(mn, "loop") ||
		strings.HasPrefix(mn, "xbegin")
}

// splitOperands splits at commas outside parentheses and braces.
func splitOperands(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(', '{':
			depth++
		case ')', '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

func readCorpus(path string) ([]*section, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var secs []*section
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "src "):
			secs = append(secs, &section{name: strings.TrimPrefix(line, "src ")})
		default:
			h, asm, _ := strings.Cut(line, "\t")
			b, err := hex.DecodeString(h)
			if err != nil || len(secs) == 0 {
				return nil, fmt.Errorf("bad corpus line %q: %w", line, err)
			}
			s := secs[len(secs)-1]
			s.insns = append(s.insns, oracleInsn{src: s.name, off: len(s.stream), bytes: b, asm: asm})
			s.stream = append(s.stream, b...)
		}
	}
	return secs, sc.Err()
}

// regenerate rebuilds corpus.txt from synth.s and jit.txt.
func regenerate() error {
	for _, tool := range []string{"llvm-mc", "objdump"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: %w", tool, err)
		}
	}
	var out bytes.Buffer
	out.WriteString("# Generated by `go test ./decode -run TestOracle -update`: objdump listings of\n")
	out.WriteString("# synth.s (assembled by llvm-mc) and of the JIT code in jit.txt. Do not edit.\n")
	enc, err := exec.Command("llvm-mc", "-triple=x86_64", "-show-encoding", "testdata/synth.s").CombinedOutput()
	if err != nil {
		return fmt.Errorf("llvm-mc: %w: %s", err, enc)
	}
	encRe := regexp.MustCompile(`encoding: \[([^\]]*)\]`)
	var synth []byte
	for _, m := range encRe.FindAllStringSubmatch(string(enc), -1) {
		for _, b := range strings.Split(m[1], ",") {
			v, err := strconv.ParseUint(strings.TrimPrefix(b, "0x"), 16, 8)
			if err != nil {
				return fmt.Errorf("llvm-mc encoding %q: %w", m[1], err)
			}
			synth = append(synth, byte(v))
		}
	}
	if err := objdumpSection(&out, "synth", synth); err != nil {
		return err
	}
	jit, err := os.ReadFile("testdata/jit.txt")
	if err != nil {
		return err
	}
	lines := strings.Split(string(jit), "\n")
	for i := 0; i+1 < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "method ") {
			continue
		}
		code, err := hex.DecodeString(lines[i+1])
		if err != nil {
			return fmt.Errorf("jit.txt line %d: %w", i+2, err)
		}
		if err := objdumpSection(&out, strings.TrimPrefix(lines[i], "method "), code); err != nil {
			return err
		}
	}
	return os.WriteFile(corpusPath, out.Bytes(), 0o644)
}

var objdumpLine = regexp.MustCompile(`^\s*([0-9a-f]+):\t([0-9a-f ]+?)\s*\t(.*)$`)

func objdumpSection(out *bytes.Buffer, name string, code []byte) error {
	dir, err := os.MkdirTemp("", "decode-oracle")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "code.bin")
	if err := os.WriteFile(bin, code, 0o644); err != nil {
		return err
	}
	dis, err := exec.Command("objdump", "-D", "-b", "binary", "-mi386:x86-64", "-w", "--insn-width=15", bin).Output()
	if err != nil {
		return fmt.Errorf("objdump: %w", err)
	}
	fmt.Fprintf(out, "src %s\n", name)
	n := 0
	for _, l := range strings.Split(string(dis), "\n") {
		m := objdumpLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		off, _ := strconv.ParseUint(m[1], 16, 64)
		if int(off) != n {
			return fmt.Errorf("objdump %s: offset %#x, expected %#x", name, off, n)
		}
		h := strings.ReplaceAll(m[2], " ", "")
		n += len(h) / 2
		fmt.Fprintf(out, "%s\t%s\n", h, strings.Join(strings.Fields(m[3]), " "))
	}
	// A method cut at the dump size limit may end in a partial instruction
	// that objdump does not list.
	if n > len(code) || n < len(code)-15 {
		return fmt.Errorf("objdump %s: listed %d of %d bytes", name, n, len(code))
	}
	return nil
}
