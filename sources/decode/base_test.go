package decode

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// baseCases are loads that overwrite their own index register, ending at
// ip, then the instruction at ip. The first is C2's code for
// DirectByteBuffer.getLong in big-endian order (JDK 17), as sampled.
var baseCases = []struct {
	name, before, at string
	want             Method // Base, or None where only the index survives or nothing is consumed
}{
	{"mov (%rdi,%r10,1),%r10; bswap %r10", "41 83 c5 05 4d 63 d2 4e 8b 14 17", "49 0f ca", Base},
	{"mov 0x10(%r8,%r11,8),%r11; add %r11,%rax", "4d 63 d2 4f 8b 5c d8 10", "4c 01 d8", Base},
	{"movslq 0x10(%rsi,%rcx,4),%rcx; add %rcx,%rax", "4d 63 d2 48 63 4c 8e 10", "48 01 c8", Base},
	{"heap base: mov 0x10(%r12,%r11,8),%r11; add %r11,%rax", "4d 63 d2 4f 8b 5c dc 10", "4c 01 d8", None},
	{"base overwritten: mov (%r10,%rdi,1),%r10; bswap %r10", "41 83 c5 05 4d 63 d2 4d 8b 14 3a", "49 0f ca", None},
	{"spill slot: mov 0x8(%rsp,%rax,8),%rax; add %rax,%rcx", "4d 63 d2 48 8b 44 c4 08", "48 01 c1", None},
	{"not consumed: mov (%rdi,%r10,1),%r10; add $1,%rax", "41 83 c5 05 4d 63 d2 4e 8b 14 17", "48 83 c0 01", None},
}

// objdumpBase returns objdump's base+disp of the memory operand of the last
// instruction in code, with regs.
var lastMem = regexp.MustCompile(`(-?0x[0-9a-f]+)?\(%([a-z0-9]+),%([a-z0-9]+)(?:,[1248])?\)`)

func objdumpBase(t *testing.T, code []byte, r *Regs) (uint64, string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "code.bin")
	if err := os.WriteFile(bin, code, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("objdump", "-D", "-b", "binary", "-mi386:x86-64", "-w", bin).Output()
	if err != nil {
		t.Fatalf("objdump: %v", err)
	}
	var last string
	for _, l := range strings.Split(string(out), "\n") {
		if m := objdumpLine.FindStringSubmatch(l); m != nil {
			last = m[3]
		}
	}
	m := lastMem.FindStringSubmatch(last)
	if m == nil {
		t.Fatalf("objdump: no base+index operand in %q", last)
	}
	var disp uint64
	if m[1] != "" {
		d, err := parseInt(m[1])
		if err != nil {
			t.Fatal(err)
		}
		disp = uint64(d)
	}
	return r.GPR[gprNum[m[2]]] + disp, last
}

func parseInt(s string) (int64, error) {
	var v int64
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "0x")
	for _, c := range s {
		v *= 16
		switch {
		case c >= '0' && c <= '9':
			v += int64(c - '0')
		default:
			v += int64(c-'a') + 10
		}
	}
	if neg {
		v = -v
	}
	return v, nil
}

func TestDecodeBase(t *testing.T) {
	_, errObjdump := exec.LookPath("objdump")
	r := testRegs()
	r.IP = 0x7f0000001000
	var d Decoder
	for _, c := range baseCases {
		t.Run(c.name, func(t *testing.T) {
			before := hx(t, c.before)
			got := d.Decode(before, hx(t, c.at), &r)
			if got.Method != c.want {
				t.Fatalf("method %v, want %v (%+v)", got.Method, c.want, got)
			}
			if c.want != Base {
				return
			}
			if got.Size != 0 || got.Index != NoReg {
				t.Errorf("a base result claims an access: size %d index %d", got.Size, got.Index)
			}
			if errObjdump != nil {
				t.Skipf("objdump, the independent disassembler, is missing: %v", errObjdump)
			}
			// The load is the last instruction of before: objdump must
			// agree on its base and displacement.
			want, asm := objdumpBase(t, before, &r)
			if got.Addr != want {
				t.Errorf("addr %#x, objdump's %q gives %#x", got.Addr, asm, want)
			}
		})
	}
}
