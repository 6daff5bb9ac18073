package vmcode

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/hotspot/vmstructs"
	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

func itoa(i int) string { return strconv.Itoa(i) }

// pin makes the queries a fixture replays: Hot's methods (through its
// InstanceKlass's _methods), the parked thread's interpreter frame
// (findParked), the interpreter (Hot.outer's i2i entry), an
// adapter (an uncompiled method's compiled entry), and per Hot.outer
// nmethod the pc of its PcDesc whose frames are the expected chain.
func pin(t testing.TB, s *Symbolizer, tab *vmstructs.Table, tr *truth, jdk testenv.JDK, pid int) {
	t.Helper()
	var outer *codeEntry
	for i, e := range tr.Code {
		if e.Method == "Hot.outer(I)J" {
			outer = &tr.Code[i]
			break
		}
	}
	if outer == nil {
		t.Fatal("the JVM compiled no Hot.outer")
	}
	b, err := s.Blob(outer.CodeBegin)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := klassMethods(s, tab, b.Method)
	if err != nil {
		t.Fatal(err)
	}
	tr.Methods = make(map[string]uint64)
	for _, m := range ms {
		mi, err := s.Method(m)
		if err != nil {
			t.Fatalf("Hot's method %#x: %v", m, err)
		}
		tr.Methods[mi.Name] = m
	}
	tr.Parked = findParked(t, s, jdk, pid, tr.Methods["waitHere"])
	if f, ok := tab.FirstField("SharedRuntime::_ic_miss_blob"); ok && f.Static {
		tr.ICMiss = word(t, s, tab, f.Address+s.bias, "")
	}
	tr.Interp = word(t, s, tab, b.Method, "Method::_i2i_entry")
	tr.Adapter = word(t, s, tab, tr.Methods["<init>"], "Method::_from_compiled_entry")
	tr.ChainPCs = make(map[int64]uint64)
	for _, e := range tr.Code {
		if e.Method != "Hot.outer(I)J" {
			continue
		}
		pcs, err := s.PCs(e.CodeBegin)
		if err != nil {
			t.Fatalf("nmethod %d: %v", e.ID, err)
		}
		for _, pc := range pcs {
			fs, _, err := s.Frames(pc)
			if err != nil {
				t.Fatalf("nmethod %d at %#x: %v", e.ID, pc, err)
			}
			if slices.Equal(frameStrings(fs), tr.Chain) {
				tr.ChainPCs[e.ID] = pc
				break
			}
		}
		if tr.ChainPCs[e.ID] == 0 {
			t.Errorf("nmethod %d (level %d) of Hot.outer: no PcDesc gives %v", e.ID, e.Level, tr.Chain)
		}
	}
}

// word reads the 8-byte field name of the struct at addr, or the word at
// addr for no name.
func word(t testing.TB, s *Symbolizer, tab *vmstructs.Table, addr uint64, name string) uint64 {
	t.Helper()
	var f vmstructs.Field
	if name != "" {
		var ok bool
		if f, ok = tab.FirstField(name); !ok {
			t.Fatalf("no %s", name)
		}
	}
	var b [8]byte
	if _, err := s.mem.ReadAt(b[:], int64(addr+f.Offset)); err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return binary.LittleEndian.Uint64(b[:])
}

// klassMethods lists the methods of method's class: Method →
// ConstMethod → ConstantPool → InstanceKlass::_methods.
func klassMethods(s *Symbolizer, tab *vmstructs.Table, method uint64) ([]uint64, error) {
	var out []uint64
	err := s.query(func(r *reader) error {
		cm, err := r.u64(method + s.l.methodConst.off)
		if err != nil {
			return err
		}
		cp, err := r.u64(cm + s.l.cmConstants.off)
		if err != nil {
			return err
		}
		k, err := r.u64(cp + s.l.cpHolder.off)
		if err != nil {
			return err
		}
		f, ok := tab.FirstField("InstanceKlass::_methods")
		if !ok {
			return fmt.Errorf("no InstanceKlass::_methods")
		}
		arr, err := r.u64(k + f.Offset)
		if err != nil {
			return err
		}
		n, err := r.u64(arr)
		if err != nil {
			return err
		}
		ms, err := r.bytesAt(arr+8, uint64(uint32(n))*8, 1<<16, "methods")
		if err != nil {
			return err
		}
		for i := 0; i+8 <= len(ms); i += 8 {
			out = append(out, binary.LittleEndian.Uint64(ms[i:]))
		}
		return nil
	})
	return out, err
}

// check asserts what s answers against tr. live allows the JIT to have
// freed a few nmethods of the JDK's own since jcmd listed them.
func check(t *testing.T, s *Symbolizer, tr *truth, live bool) {
	checkCode(t, s, tr, live)
	checkMethods(t, s, tr)
	checkStubs(t, s, tr)
	checkParked(t, s, tr)
	if len(tr.ChainPCs) == 0 {
		t.Errorf("no Hot.outer nmethod with the chain %v", tr.Chain)
	}
	for id, pc := range tr.ChainPCs {
		fs, b, err := s.Frames(pc)
		if err != nil {
			t.Errorf("nmethod %d at %#x: %v", id, pc, err)
			continue
		}
		if got := frameStrings(fs); !slices.Equal(got, tr.Chain) || b.CompileID != id {
			t.Errorf("nmethod %d at %#x: frames %v in nmethod %d, want %v", id, pc, got, b.CompileID, tr.Chain)
			continue
		}
		if fs[0].Method != tr.Methods["leaf"] || fs[1].Method != tr.Methods["mid"] || fs[2].Method != tr.Methods["outer"] {
			t.Errorf("nmethod %d: chain's Method*s are not Hot's leaf, mid, outer", id)
		}
	}
}

// checkCode checks every nmethod jcmd listed: bounds, compile id, level,
// state, and the method's name and signature.
func checkCode(t *testing.T, s *Symbolizer, tr *truth, live bool) {
	bad := 0
	for _, e := range tr.Code {
		err := checkEntry(s, e, tr.LineCount)
		if err == nil {
			continue
		}
		if !live || strings.HasPrefix(e.Method, "Hot.") {
			t.Errorf("%s (%d): %v", e.Method, e.ID, err)
		} else {
			t.Logf("%s (%d), freed since listed? %v", e.Method, e.ID, err)
			bad++
		}
	}
	if bad > len(tr.Code)/10 {
		t.Errorf("%d of %d nmethods listed by jcmd do not match", bad, len(tr.Code))
	}
}

func checkEntry(s *Symbolizer, e codeEntry, hotLines int) error {
	for _, pc := range []uint64{e.CodeBegin, (e.CodeBegin + e.CodeEnd) / 2, e.CodeEnd - 1} {
		fs, b, err := s.Frames(pc)
		if err != nil {
			return err
		}
		if b.Kind != KindNMethod || b.Start != e.Start || b.CodeBegin != e.CodeBegin || b.CodeEnd != e.CodeEnd {
			return fmt.Errorf("pc %#x: %s %q %#x [%#x-%#x], want nmethod %#x [%#x-%#x]", pc, b.Kind, b.Name, b.Start, b.CodeBegin, b.CodeEnd, e.Start, e.CodeBegin, e.CodeEnd)
		}
		if b.CompileID != e.ID || int64(b.Level) != e.Level || b.State != e.State {
			return fmt.Errorf("compile id %d level %d state %d, want %d %d %d", b.CompileID, b.Level, b.State, e.ID, e.Level, e.State)
		}
		if want := map[int64]string{1: "c1", 2: "c1", 3: "c1", 4: "c2"}[e.Level]; b.Compiler != want {
			return fmt.Errorf("compiler %q at level %d", b.Compiler, e.Level)
		}
		m, err := s.Method(b.Method)
		if err != nil {
			return err
		}
		if got := m.Class + "." + m.Name + m.Signature; got != e.Method {
			return fmt.Errorf("method %s, want %s", got, e.Method)
		}
		if len(fs) == 0 || fs[len(fs)-1].Method != b.Method {
			return fmt.Errorf("pc %#x: frames %v do not end in the nmethod's method", pc, frameStrings(fs))
		}
		for _, f := range fs {
			if f.Class == "Hot" && (f.Line < 0 || f.Line > hotLines || f.Source != "Hot.java") {
				return fmt.Errorf("pc %#x: frame %v (%s) outside Hot.java's %d lines", pc, f, f.Source, hotLines)
			}
		}
	}
	return nil
}

// checkMethods checks Hot's methods against javap: names, and the line
// of every bci javap lists, as a compiled and as an interpreted frame.
func checkMethods(t *testing.T, s *Symbolizer, tr *truth) {
	for name, lines := range tr.Lines {
		addr, ok := tr.Methods[name]
		if !ok {
			t.Errorf("javap lists Hot.%s, the JVM's class has no such method", name)
			continue
		}
		m, err := s.Method(addr)
		if err != nil {
			t.Errorf("Hot.%s: %v", name, err)
			continue
		}
		if m.Class != "Hot" || m.Name != name || m.Source != "Hot.java" || !strings.HasPrefix(m.Signature, "(") {
			t.Errorf("Hot.%s at %#x: %+v", name, addr, m)
		}
		for _, p := range lines {
			if got := m.Line(p.BCI); got != p.Line {
				t.Errorf("Hot.%s bci %d: line %d, javap says %d", name, p.BCI, got, p.Line)
			}
			f, err := s.InterpretedFrame(addr, m.CodeBase+uint64(p.BCI))
			if err != nil || f.Line != p.Line || f.BCI != p.BCI || f.String() != fmt.Sprintf("Hot.%s:%d", name, p.Line) {
				t.Errorf("Hot.%s interpreted at bci %d: %v %v, want line %d", name, p.BCI, f, err, p.Line)
			}
		}
	}
}

// checkStubs checks the interpreter's and an adapter's blobs.
func checkStubs(t *testing.T, s *Symbolizer, tr *truth) {
	fs, b, err := s.Frames(tr.Interp)
	if err != nil || b.Kind != KindInterpreter || b.Name != "Interpreter" || len(fs) != 0 || tr.Interp < b.CodeBegin || tr.Interp >= b.CodeEnd {
		t.Errorf("i2i entry %#x: %s %q [%#x-%#x] %v, %v; want the interpreter", tr.Interp, b.Kind, b.Name, b.CodeBegin, b.CodeEnd, fs, err)
	}
	if tr.ICMiss != 0 {
		b, err := s.Blob(tr.ICMiss + 8)
		if err != nil || b.Kind != KindStub || b.Name != "ic_miss_stub" || b.Start != tr.ICMiss {
			t.Errorf("SharedRuntime::_ic_miss_blob %#x: %s %q at %#x, %v", tr.ICMiss, b.Kind, b.Name, b.Start, err)
		}
	}
	b, err = s.Blob(tr.Adapter)
	if err != nil || b.Kind != KindStub || !strings.Contains(b.Name, "adapters") || tr.Adapter < b.CodeBegin || tr.Adapter >= b.CodeEnd {
		t.Errorf("uncompiled <init>'s compiled entry %#x: %s %q %v; want the I2C/C2I adapters", tr.Adapter, b.Kind, b.Name, err)
	}
}
