package vmstructs

import (
	"os"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

// TestLive reads the tables of a running JVM of each installed JDK and
// compares them with that JDK's fixture: entry for entry when the release
// is the fixture's, else (the JDK was updated since) what a heap walker
// needs.
func TestLive(t *testing.T) {
	testenv.Root(t)
	for _, jdk := range testenv.JDKs(t) {
		t.Run(jdk.Name, func(t *testing.T) {
			pid := startIdle(t, jdk)
			start := time.Now()
			tab, err := Open(pid)
			d := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: Open took %v: %d reads, %d KiB", tab.Release, d.Round(10*time.Microsecond), tab.Stats.Reads, tab.Stats.Bytes>>10)
			if err := tab.Require(heapNeeds...); err != nil {
				t.Error(err)
			}
			fx, err := loadFixtureFile(jdk.Name)
			if err != nil {
				t.Fatal(err)
			}
			fixed, err := Read(fx, fx.symbols())
			if err != nil {
				t.Fatal(err)
			}
			if tab.Major() != fixed.Major() {
				t.Fatalf("live JVM is JDK %d (%s), its fixture JDK %d (%s)", tab.Major(), tab.Release, fixed.Major(), fixed.Release)
			}
			if tab.Release != fixed.Release {
				t.Logf("live %s, fixture %s: compared by Require only; refresh with -record", tab.Release, fixed.Release)
				return
			}
			want, err := os.ReadFile(listingPath(jdk.Name))
			if err != nil {
				t.Fatal(err)
			}
			if got := listing(tab); got != string(want) {
				t.Errorf("live JVM differs from %s: %s", listingPath(jdk.Name), firstDiff(got, string(want)))
			}
		})
	}
}

// BenchmarkOpen opens a live JDK 17 JVM: maps, ELF symbols, the tables.
func BenchmarkOpen(b *testing.B) {
	testenv.Root(b)
	pid := startIdle(b, testenv.JDKs(b)[0])
	for b.Loop() {
		if _, err := Open(pid); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadFixture is Read alone, on JDK 17's fixture.
func BenchmarkReadFixture(b *testing.B) {
	fx := loadFixture(b, "jdk17")
	for b.Loop() {
		if _, err := Read(fx, fx.symbols()); err != nil {
			b.Fatal(err)
		}
	}
}
