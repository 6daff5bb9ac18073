package agent

import (
	"encoding/binary"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/heapwalk"
	"github.com/djx-bpf/djx-bpf/hotspot/targetmem"
	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/sources/agentwire"
)

// typesStream collects the data-type records of a stream.
type typesStream struct {
	info    *agentwire.TypesInfo
	classes map[string]*agentwire.Class // by signature, the latest
	byKlass map[uint64]*agentwire.Class
	stats   *agentwire.Stats
	nclass  int
	bytes   int // CLASS records, headers included
}

func (s *typesStream) add(t *testing.T, bs []*agentwire.Batch) {
	t.Helper()
	if s.classes == nil {
		s.classes, s.byKlass = map[string]*agentwire.Class{}, map[uint64]*agentwire.Class{}
	}
	for _, b := range bs {
		for _, r := range b.Records {
			switch r := r.(type) {
			case *agentwire.TypesInfo:
				if s.info != nil {
					t.Fatal("second TYPES_INFO")
				}
				s.info = r
			case *agentwire.Class:
				if s.info == nil || !s.info.OK {
					t.Fatalf("CLASS %s before an OK TYPES_INFO", r.Sig)
				}
				p, _ := agentwire.AppendRecord(nil, r)
				s.bytes += len(p)
				s.nclass++
				s.classes[r.Sig] = r
				s.byKlass[r.Klass] = r
			case *agentwire.Stats:
				s.stats = r
			case *agentwire.ErrorRec:
				t.Logf("agent error: %s", r.Message)
			}
		}
	}
}

// collect reads batches until have says the stream has what the test waits for.
func (s *typesStream) collect(t *testing.T, v *jvm, what string, have func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !have() {
		select {
		case be, ok := <-v.batches:
			if !ok || be.err != nil {
				t.Fatalf("stream ended waiting for %s: %v", what, be.err)
			}
			s.add(t, []*agentwire.Batch{be.b})
		case <-deadline:
			t.Fatalf("timeout waiting for %s", what)
		}
	}
}

type unsafeField struct {
	class, name string
	off         uint32
}

// unsafeStatic is a STATIC line: a static's offset in its class's mirror,
// the mirror's and (kind L) the value's references as the heap holds them,
// or (kind I, J) the value.
type unsafeStatic struct {
	unsafeField
	kind          string
	mirror, value int64
}

// fieldLines reads the workload's FIELD lines up to READY.
func fieldLines(t *testing.T, v *jvm) []unsafeField {
	t.Helper()
	fields, _ := siteLines(t, v)
	return fields
}

// siteLines reads the workload's FIELD and STATIC lines up to READY.
func siteLines(t *testing.T, v *jvm) ([]unsafeField, []unsafeStatic) {
	t.Helper()
	var out []unsafeField
	var statics []unsafeStatic
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for {
		select {
		case l, ok := <-v.lines:
			if !ok {
				t.Fatalf("java exited early; stderr:\n%s", v.stderr.String())
			}
			f := strings.Fields(l)
			switch {
			case len(f) == 2 && f[0] == "READY":
				return out, statics
			case len(f) == 4 && f[0] == "FIELD":
				out = append(out, unsafeField{f[1], f[2], uint32(num(f[3]))})
			case len(f) == 7 && f[0] == "STATIC":
				statics = append(statics, unsafeStatic{unsafeField{f[1], f[2], uint32(num(f[3]))}, f[4], num(f[5]), num(f[6])})
			default:
				t.Fatalf("unexpected output %q", l)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("timeout waiting for READY")
		}
	}
}

// checkStatics: every static the JVM lists is in its class's CLASS record
// at the offset Unsafe gives, and no other; the JVM's memory at the
// mirror's address + that offset holds the static's value (read from
// /proc/PID/mem, the references decoded as TYPES_INFO says).
func checkStatics(t *testing.T, v *jvm, s *typesStream, statics []unsafeStatic) {
	t.Helper()
	in := s.info
	if !in.Statics {
		t.Fatalf("TYPES_INFO without statics: %q", in.Reason)
	}
	mem := targetmem.Open(v.cmd.Process.Pid)
	// ZGC's colored references: decoded as the heap walk does.
	l, _, err := heapwalk.Open(v.cmd.Process.Pid, heapwalk.Options{})
	if err != nil {
		t.Fatalf("heap layout: %v", err)
	}
	decode := func(raw uint64) uint64 {
		if in.OopBytes == 4 && raw != 0 {
			return in.OopBase + raw<<in.OopShift
		}
		return l.DecodeRef(raw)
	}
	read := func(addr uint64, n int) uint64 {
		b := make([]byte, 8)
		if _, err := mem.ReadAt(b[:n], int64(addr)); err != nil {
			t.Fatalf("read %#x: %v", addr, err)
		}
		return binary.LittleEndian.Uint64(b)
	}
	want := map[string]int{}
	for _, st := range statics {
		want[st.class]++
		c := s.classes[sigOf(st.class)]
		var got *agentwire.Field
		for i := range c.Statics {
			if c.Statics[i].Name == st.name {
				got = &c.Statics[i]
			}
		}
		if got == nil || got.Offset != st.off || !got.Static {
			t.Errorf("%s.%s: Unsafe says offset %d, CLASS has %+v", st.class, st.name, st.off, c.Statics)
			continue
		}
		slot := decode(uint64(st.mirror)) + uint64(got.Offset)
		switch st.kind {
		case "L":
			raw := read(slot, int(in.OopBytes))
			if in.OopBytes == 4 {
				raw &= 0xffffffff
			}
			if decode(raw) != decode(uint64(st.value)) {
				t.Errorf("%s.%s: the mirror's slot at +%d holds %#x, the static is %#x", st.class, st.name, got.Offset, decode(raw), decode(uint64(st.value)))
			}
		case "I":
			if v := int32(read(slot, 4)); int64(v) != st.value {
				t.Errorf("%s.%s: the mirror's slot at +%d holds %d, the static is %d", st.class, st.name, got.Offset, v, st.value)
			}
		case "J":
			if v := int64(read(slot, 8)); v != st.value {
				t.Errorf("%s.%s: the mirror's slot at +%d holds %d, the static is %d", st.class, st.name, got.Offset, v, st.value)
			}
		}
	}
	for class, n := range want {
		if c := s.classes[sigOf(class)]; len(c.Statics) != n {
			t.Errorf("%s: %d statics in CLASS, the JVM lists %d: %+v", class, len(c.Statics), n, c.Statics)
		}
	}
	for _, c := range s.classes {
		if strings.HasPrefix(c.Sig, "[") && len(c.Statics) != 0 {
			t.Errorf("%s: an array class with statics %+v", c.Sig, c.Statics)
		}
		for i := 1; i < len(c.Statics); i++ {
			if c.Statics[i].Offset <= c.Statics[i-1].Offset {
				t.Fatalf("%s: statics not sorted: %+v", c.Sig, c.Statics)
			}
		}
		for _, f := range c.Fields {
			if f.Static {
				t.Fatalf("%s: a static among the instance fields: %+v", c.Sig, f)
			}
		}
	}
	t.Logf("%d statics of %d classes at Unsafe's offsets, their values in the mirrors' memory", len(statics), len(want))
	if d := s.classes["LTypesSite$Statics;"]; len(d.Fields) != 1 || d.Fields[0].Name != "inst" {
		t.Errorf("Statics' instance fields: %+v, want inst only", d.Fields)
	}
}

func sigOf(class string) string { return "L" + strings.ReplaceAll(class, ".", "/") + ";" }

var (
	coopsRe = regexp.MustCompile(`Compressed Oops mode: ([^,\n]+)(?:, Oop shift amount: (\d+))?`)
	klassRe = regexp.MustCompile(`Narrow klass base: 0x([0-9a-f]+), Narrow klass shift: (\d+)`)
)

// TestTypes: with types=1 the agent sends a CLASS for every class, whose
// field offsets are those Unsafe.objectFieldOffset gives, whose statics'
// offsets are those Unsafe.staticFieldOffset gives and hold the statics'
// values in the mirror's memory, TYPES_INFO's
// bases and shifts are those the JVM logs, a class loaded later comes with
// its ClassPrepare and a new array class on 'K'.
func TestTypes(t *testing.T) {
	for _, j := range availableJDKs(t) {
		// ZGC: mirrors and statics read through colored references.
		for _, gc := range []string{"-XX:+UseG1GC", "-XX:+UseParallelGC", "-XX:+UseZGC"} {
			t.Run(j.name+strings.TrimPrefix(gc, "-XX:+Use"), func(t *testing.T) {
				zgc := gc == "-XX:+UseZGC"
				flags := []string{gc, "-Xmx4g", "-Xlog:disable", "-Xlog:all=warning:stderr", "-Xlog:gc+heap+coops=debug,gc+metaspace=info:stderr"}
				v := startMain(t, j, "types=1,interval=1g,minsize=1g", true, flags, "TypesSite")
				fields, statics := siteLines(t, v)
				var s typesStream
				s.collect(t, v, "the workload's classes", func() bool {
					for _, f := range fields {
						if s.classes[sigOf(f.class)] == nil {
							return false
						}
					}
					for _, f := range statics {
						if s.classes[sigOf(f.class)] == nil {
							return false
						}
					}
					return s.classes["[J"] != nil && s.classes["[Ljava/lang/Object;"] != nil
				})
				checkStatics(t, v, &s, statics)
				in := s.info
				if !in.OK || !in.Fields {
					t.Fatalf("TYPES_INFO %+v", in)
				}
				for _, f := range fields {
					c := s.classes[sigOf(f.class)]
					found := false
					for _, cf := range c.Fields {
						found = found || cf.Name == f.name && cf.Offset == f.off
					}
					if !found {
						t.Errorf("%s.%s: Unsafe says offset %d, CLASS has %+v", f.class, f.name, f.off, c.Fields)
					}
				}
				if d := s.classes["LTypesSite$Derived;"]; len(d.Fields) != 7 || d.Fields[0].Offset < 8 {
					t.Errorf("Derived: %+v, want 7 fields (3 inherited) sorted by offset", d.Fields)
				}
				for _, c := range s.classes {
					for i := 1; i < len(c.Fields); i++ {
						if c.Fields[i].Offset < c.Fields[i-1].Offset {
							t.Fatalf("%s: fields not sorted: %+v", c.Sig, c.Fields)
						}
					}
					if in.KlassBytes == 4 && in.KlassBase+uint64(c.Narrow)<<in.KlassShift != c.Klass {
						t.Fatalf("%s: narrow %#x does not decode to klass %#x", c.Sig, c.Narrow, c.Klass)
					}
				}
				if wantOop := map[bool]uint32{false: 4, true: 8}[zgc]; in.KlassBytes != 4 || in.OopBytes != wantOop {
					t.Errorf("klass/oop bytes %d/%d, want 4/%d by default", in.KlassBytes, in.OopBytes, wantOop)
				}
				// What the JVM itself logs (ZGC: no compressed oops).
				log := v.stderr.String()
				if m := coopsRe.FindStringSubmatch(log); zgc {
					if m != nil {
						t.Errorf("compressed oops under ZGC: %q", m[0])
					}
				} else if m == nil {
					t.Errorf("no compressed oops mode in the JVM's log:\n%s", log)
				} else if sh, _ := strconv.Atoi("0" + m[2]); uint32(sh) != in.OopShift || (m[1] == "Zero based" || m[1] == "32-bit") != (in.OopBase == 0) {
					t.Errorf("JVM: oops mode %q shift %s; TYPES_INFO base %#x shift %d", m[1], m[2], in.OopBase, in.OopShift)
				}
				if m := klassRe.FindStringSubmatch(log); m == nil {
					t.Errorf("no narrow klass base in the JVM's log:\n%s", log)
				} else if b, _ := strconv.ParseUint(m[1], 16, 64); b != in.KlassBase || m[2] != strconv.Itoa(int(in.KlassShift)) {
					t.Errorf("JVM: narrow klass base %#x shift %s; TYPES_INFO %#x %d", b, m[2], in.KlassBase, in.KlassShift)
				}

				// A class loaded later, by its ClassPrepare.
				v.send("load")
				loaded := v.line("LOADED")
				s.collect(t, v, "TypesSite$Late", func() bool { return s.classes["LTypesSite$Late;"] != nil })
				late := s.classes["LTypesSite$Late;"]
				if late.Time > loaded || len(late.Fields) != 3 {
					t.Errorf("Late: time %d (loaded at %d), fields %+v", late.Time, loaded, late.Fields)
				}
				// A new array class has no event: 'K' brings it.
				v.send("array")
				v.line("ARRAY")
				if _, err := v.conn.Write([]byte{agentwire.CommandClasses}); err != nil {
					t.Fatal(err)
				}
				s.collect(t, v, "[[LTypesSite$Later;", func() bool {
					return s.classes["[[LTypesSite$Later;"] != nil && s.classes["[LTypesSite$Later;"] != nil
				})
				v.stdin.Close()
				rest, _ := v.rest()
				s.add(t, rest)
				v.exit()
				if s.stats == nil || s.stats.ClassesSent != uint64(s.nclass) {
					t.Errorf("STATS classes sent %+v, stream has %d", s.stats, s.nclass)
				}
				t.Logf("%d CLASS records, %d bytes, %d dropped, types %.1f ms",
					s.nclass, s.bytes, s.stats.ClassesDropped, float64(s.stats.TypesNanos)/1e6)
			})
		}
	}
}

// TestTypesOtherHeaders: without compressed class pointers the klass word
// is 8 bytes; with compact object headers (JDK 25) it is in the mark word,
// and TYPES_INFO says where (KlassInMark). Either the feature works or it
// says why not, and the JVM stays up; with compact headers it works.
func TestTypesOtherHeaders(t *testing.T) {
	for _, j := range availableJDKs(t) {
		cases := [][]string{{"-XX:-UseCompressedClassPointers"}}
		if j.name != "jdk17" {
			cases = append(cases, []string{"-XX:+UseCompactObjectHeaders"})
		}
		for _, flags := range cases {
			t.Run(j.name+flags[0], func(t *testing.T) {
				v := startMain(t, j, "types=1,interval=1g,minsize=1g", true, append(flags, "-XX:+UseG1GC", "-Xlog:disable", "-Xlog:all=warning:stderr"), "TypesSite")
				fields := fieldLines(t, v)
				var s typesStream
				s.collect(t, v, "TYPES_INFO", func() bool { return s.info != nil })
				in := s.info
				t.Logf("%v: TYPES_INFO %+v", flags, in)
				compact := flags[0] == "-XX:+UseCompactObjectHeaders"
				if compact && (!in.OK || !in.Fields || in.KlassInMark != 42 || in.KlassBytes != 4) {
					t.Errorf("compact headers: TYPES_INFO %+v, want OK with fields, the narrow klass at bit 42 of the mark", in)
				}
				if !in.OK {
					if in.Reason == "" {
						t.Error("TYPES_INFO not OK without a reason")
					}
				} else {
					if flags[0] == "-XX:-UseCompressedClassPointers" && (in.KlassBytes != 8 || in.KlassInMark != 0) {
						t.Errorf("klass bytes %d (in the mark at %d) without compressed class pointers", in.KlassBytes, in.KlassInMark)
					}
					s.collect(t, v, "TypesSite$Derived", func() bool { return s.classes["LTypesSite$Derived;"] != nil })
					for _, f := range fields {
						c := s.classes[sigOf(f.class)]
						if c == nil || !in.Fields {
							continue
						}
						found := false
						for _, cf := range c.Fields {
							found = found || cf.Name == f.name && cf.Offset == f.off
						}
						if !found {
							t.Errorf("%s.%s: Unsafe says %d, CLASS has %+v", f.class, f.name, f.off, c.Fields)
						}
					}
				}
				v.send("load")
				v.line("LOADED")
				v.stdin.Close()
				v.rest()
				v.exit()
			})
		}
	}
}

// typesAttachFlags: a heap that fits j's TLAB flags, quiet JVM logs.
func typesAttachFlags(j jdk) []string {
	fl := []string{"-Xmx4g", "-Xlog:disable", "-Xlog:all=warning:stderr"}
	if !strings.Contains(j.name, "17") {
		fl = append(fl, "-XX:+EnableDynamicAgentLoading")
	}
	return fl
}

// TestTypesAttachCost: the first dump in attach mode on a JVM with a few
// thousand classes; logs its time and size.
func TestTypesAttachCost(t *testing.T) {
	for _, j := range availableJDKs(t) {
		t.Run(j.name, func(t *testing.T) {
			var s typesStream
			v := startJava(t, j, "types=1,interval=1g,minsize=1g,code=0", true, func(v *jvm, lib, opts string) {
				fieldLines(t, v) // up to READY, after the classes are loaded
				v.lines <- "READY 0"
				attachAgent(v, lib, opts)
			}, typesAttachFlags(j), "TypesSite", "many")
			s.collect(t, v, "the dump", func() bool { return s.stats != nil && s.stats.ClassesSent > 2500 })
			v.stdin.Close()
			rest, _ := v.rest()
			s.add(t, rest)
			v.exit()
			fs := 0
			for _, c := range s.classes {
				fs += len(c.Fields)
			}
			t.Logf("%s attach: %d CLASS records (%d fields), %d bytes, build time %.1f ms, dropped %d",
				j.name, s.nclass, fs, s.bytes, float64(s.stats.TypesNanos)/1e6, s.stats.ClassesDropped)
		})
	}
}

// seccompLib builds testdata/SeccompReadv.c, an agent that makes
// process_vm_readv fail with EPERM on every thread of the JVM.
func seccompLib(t *testing.T, j jdk) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		testenv.Skip(t, "no gcc to build the seccomp agent: %v", err)
	}
	lib := filepath.Join(t.TempDir(), "libseccompreadv.so")
	out, err := exec.Command(gcc, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-I"+filepath.Join(j.home, "include"),
		"-I"+filepath.Join(j.home, "include", "linux"), "-o", lib, "testdata/SeccompReadv.c").CombinedOutput()
	if err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return lib
}

// TestTypesReadvRefused: under a seccomp filter that refuses
// process_vm_readv (as a container's may), the agent turns the data types
// off and says why in TYPES_INFO, rather than reading class mirrors with
// plain loads that a GC uncommitting memory could make fault; the JVM
// runs on, and classes it prepares later send nothing.
func TestTypesReadvRefused(t *testing.T) {
	for _, j := range availableJDKs(t) {
		t.Run(j.name, func(t *testing.T) {
			flags := []string{"-XX:+UseG1GC", "-Xmx4g", "-agentpath:" + seccompLib(t, j)}
			v := startMain(t, j, "types=1,interval=1g,minsize=1g", true, flags, "TypesSite")
			siteLines(t, v)
			var s typesStream
			s.collect(t, v, "TYPES_INFO", func() bool { return s.info != nil })
			if s.info.OK || !strings.Contains(s.info.Reason, "process_vm_readv on the JVM itself refused (EPERM") {
				t.Fatalf("TYPES_INFO %+v, want off for the refused process_vm_readv", s.info)
			}
			v.send("load")
			v.line("LOADED")
			v.stdin.Close()
			rest, _ := v.rest()
			s.add(t, rest) // a CLASS after a TYPES_INFO that is not OK fails here
			v.exit()
			if s.nclass != 0 {
				t.Errorf("%d CLASS records", s.nclass)
			}
		})
	}
}
