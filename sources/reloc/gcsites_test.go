package reloc

import (
	"os"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
)

func TestMatchGCFunc(t *testing.T) {
	for sym, want := range map[string]string{
		"_ZN16DefNewGeneration22copy_to_survivor_spaceEP7oopDesc":                                         "Serial young",
		"_ZN10Generation7promoteEP7oopDescm":                                                              "Serial young",
		"_ZN10Generation7compactEv":                                                                       "",
		"_ZN16CompactibleSpace7compactEv":                                                                 "Serial full",
		"_ZN18PSPromotionManager31copy_unmarked_to_survivor_spaceILb0EEEP7oopDescS2_8markWord":            "Parallel young",
		"_ZN17PSParallelCompact9copy_backEPP12HeapWordImplS2_":                                            "Parallel full",
		"_ZN17PSParallelCompact11fill_regionEP20ParCompactionManagerR20MoveAndUpdateClosurem.constprop.0": "Parallel full",
		"_ZN19G1FullGCCompactTask22G1CompactRegionClosure5applyEP7oopDesc":                                "G1 full",
		"_ZNK20G1ParScanThreadState3fooEv":                                                                "G1 young",
		"_ZN15G1RemSetSummary3setEPS_":                                                                    "",
		"_Z16copy_annotationsP15ClassLoaderDataP5ArrayIhEP10JavaThread":                                   "",
		"_ZN4Copy22conjoint_memory_atomicEPKvPvm":                                                         "",
	} {
		g, ok := matchGCFunc(sym)
		got := ""
		if ok {
			got = g.gc + " " + string(g.phase)
		}
		if got != want {
			t.Errorf("matchGCFunc(%s) = %q, want %q", sym, got, want)
		}
	}
}

// TestRealLibJVM finds the copy sites of the installed JDKs' libjvm.so and
// checks what holds across builds of a JDK (a Debian point release moves
// addresses and may split or merge a call): every collector's young and full
// copies are covered, each site's function is one matchGCFunc picks for
// that collector and phase, the known copy functions (objdump -d of the
// builds this was written on) each hold a few sites, and the total is in
// range.
func TestRealLibJVM(t *testing.T) {
	for _, c := range []struct {
		path     string
		required bool
		known    []string // mangled functions that hold copy sites
	}{
		{testenv.JDK17.Home + "/lib/server/libjvm.so", true, []string{
			"_ZN16DefNewGeneration22copy_to_survivor_spaceEP7oopDesc",
			"_ZN10Generation7promoteEP7oopDescm",
			"_ZN16CompactibleSpace7compactEv",
			"_ZN17PSParallelCompact9copy_backEPP12HeapWordImplS2_",
			"_ZN20MoveAndUpdateClosure7do_addrEPP12HeapWordImplm",
			"_ZN19G1FullGCCompactTask22G1CompactRegionClosure5applyEP7oopDesc",
		}},
		{testenv.JDK25.Home + "/lib/server/libjvm.so", false, []string{
			"_ZN16DefNewGeneration22copy_to_survivor_spaceEP7oopDesc",
			"_ZN12SerialFullGC19invoke_at_safepointEb",
			"_ZN17PSParallelCompact9copy_backEPP12HeapWordImplS2_",
			"_ZN19G1FullGCCompactTask27copy_object_to_new_locationEP7oopDesc",
		}},
	} {
		f, err := elfsafe.OpenPath(c.path)
		if err != nil {
			if c.required {
				testenv.Skip(t, "no JDK 17 libjvm.so (make deps installs openjdk-17-jdk-headless): %v", err)
			}
			t.Logf("Temurin 25 not installed: %v", err)
			continue
		}
		sites, err := gcCopySites(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if err := checkSites(sites); err != nil {
			t.Errorf("%s: %v", c.path, err)
		}
		// 19 sites in JDK 17, 17 in Temurin 25 when this was written.
		if n := len(sites); n < 8 || n > 64 {
			t.Errorf("%s: %d copy sites, want 8 to 64", c.path, n)
		}
		per := map[string]int{}
		at := map[uint64]bool{}
		for _, s := range sites {
			per[s.Func]++
			t.Logf("%s %-8s %-5s %#x %-7s tail=%v %s", c.path[9:30], s.GC, s.Phase, s.Addr, s.Callee, s.Tail, s.Func)
			if g, ok := matchGCFunc(s.Func); !ok || g.gc != s.GC || g.phase != s.Phase {
				t.Errorf("%s: site %#x in %s is %s %s, matchGCFunc says %+v (%v)", c.path, s.Addr, s.Func, s.GC, s.Phase, g, ok)
			}
			if s.Callee != "memcpy" && s.Callee != "memmove" || s.Offset == 0 || at[s.Addr] {
				t.Errorf("%s: site %+v: want a memcpy or memmove call at a file offset, once", c.path, s)
			}
			at[s.Addr] = true
		}
		for _, fn := range c.known {
			if n := per[fn]; n < 1 || n > 4 {
				t.Errorf("%s: %d sites in %s, want 1 to 4 (one when this was written)", c.path, n, fn)
			}
		}
	}
}

func TestCopyProbes(t *testing.T) {
	sites := Info{LibJVM: "/x/libjvm.so", Sites: []Site{{Func: "a"}, {Func: "a"}, {Func: "b"}}}
	if got, want := sites.CopyProbes(), "3 memcpy/memmove calls in 2 copy functions of the Serial, Parallel and G1 collectors in libjvm.so (trap only in GC pauses)"; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	libc := Info{Copies: []CopyTarget{{Imports: []string{"memmove", "memcpy"}, Lib: "/lib/libc.so.6", Offset: 0x1234}}, SitesErr: ErrNoSymtab}
	if got, want := libc.CopyProbes(), "libc /lib/libc.so.6+0x1234 (memmove/memcpy), libjvm's memmove/memcpy: every copy of every thread traps; fallback because libjvm.so has no symbol table (stripped)"; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestPrepare(t *testing.T) {
	const p = "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no %s", p)
	}
	if err := Prepare(p); err != nil {
		t.Fatal(err)
	}
	// The same file through another path, as AddJVM reaches it.
	f, err := elfsafe.OpenPath("/proc/self/root" + p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	sites, err := siteCache.sites(f)
	if err != nil || len(sites) == 0 {
		t.Fatalf("cached sites %d, %v", len(sites), err)
	}
	if d := time.Since(start); d > 10*time.Millisecond {
		t.Errorf("cached lookup took %v", d)
	}
	if err := PrepareJava("/usr/lib/jvm/java-17-openjdk-amd64/bin/java"); err != nil {
		t.Errorf("PrepareJava: %v", err)
	}
	if err := PrepareJava("/bin/sh"); err == nil {
		t.Error("PrepareJava(/bin/sh) succeeded")
	}
	if err := Prepare("/nonexistent/libjvm.so"); err == nil {
		t.Error("Prepare of a missing file succeeded")
	}
}
