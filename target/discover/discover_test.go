package discover

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/djx-bpf/djx-bpf/internal/testenv"
)

func TestMainOf(t *testing.T) {
	for _, c := range []struct {
		args string
		want string
	}{
		{"java -Xmx1g -cp a.jar:b com.example.Main arg", "com.example.Main"},
		{"java -classpath x -jar app.jar --port 8080", "-jar app.jar"},
		{"java --add-opens java.base/java.lang=ALL-UNNAMED -m mod/com.x.Main", "-m mod/com.x.Main"},
		{"java -XX:+UseG1GC", ""},
	} {
		if got := MainOf(strings.Fields(c.args)); got != c.want {
			t.Errorf("MainOf(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}

func TestCommittedAndOops(t *testing.T) {
	jdk17 := " garbage-first heap   total 524288K, used 2048K [0x00000000e0000000, 0x0000000100000000)\n  region size 1024K\n Metaspace       used 6K, committed 64K, reserved 1056768K\n  class space    used 0K, committed 0K, reserved 1048576K\n"
	jdk25 := "garbage-first heap   total reserved 262144K, committed 262144K, used 111854K [0x00000000f0000000, 0x0000000100000000)\n Metaspace       used 6K, committed 64K, reserved 1114112K\n"
	parallel := " PSYoungGen      total 305664K, used 15729K [...)\n ParOldGen       total 699392K, used 0K [...)\n Metaspace       used 6K, committed 64K, reserved 1056768K\n"
	for _, c := range []struct {
		text string
		want uint64
	}{{jdk17, 524288 << 10}, {jdk25, 262144 << 10}, {parallel, (305664 + 699392) << 10}} {
		if got := committed(c.text); got != c.want {
			t.Errorf("committed = %d, want %d for\n%s", got, c.want, c.text)
		}
	}
}

// Live: list's view of JVMs with different heaps matches what each JVM
// logs about itself at startup (-Xlog:gc+init prints "Compressed Oops:
// Enabled (32-bit)" or "Disabled", and "Heap Max Capacity: 256M").
func TestDescribeMatchesJVMsOwnView(t *testing.T) {
	if testing.Short() {
		t.Skip("live JVM test skipped in -short mode")
	}
	testenv.Root(t)
	var homes []string
	for _, j := range testenv.JDKs(t) {
		homes = append(homes, j.Home)
	}
	jdk := homes[0]
	dir := t.TempDir()
	src := filepath.Join(dir, "Idle.java")
	if err := os.WriteFile(src, []byte(`public class Idle { public static void main(String[] a) throws Exception { System.out.println("ready"); Thread.sleep(60000); } }`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(jdk, "bin", "javac"), "-d", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	coops := regexp.MustCompile(`Compressed Oops: (?:Enabled \(([^)]+)\)|(Disabled))`)
	maxCap := regexp.MustCompile(`Heap Max Capacity: (\d+)([MG])`)
	for _, home := range homes {
		for _, flags := range [][]string{{"-Xmx256m"}, {"-Xmx2g", "-XX:+UseParallelGC"}, {"-Xmx512m", "-XX:-UseCompressedOops"}, {"-Xmx31g"}} {
			args := append(append([]string{"-Xlog:gc+init=info"}, flags...), "-cp", dir, "Idle")
			cmd := exec.Command(filepath.Join(home, "bin", "java"), args...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the test binary
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := cmd.Process.Pid
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			var logged []string
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				logged = append(logged, sc.Text())
				if sc.Text() == "ready" {
					break
				}
			}
			go func() {
				for sc.Scan() {
				}
			}()
			j, ok := Inspect(pid)
			if !ok || j.Kind != HotSpot || j.Main != "Idle" || j.Age <= 0 || j.Age > time.Minute {
				t.Fatalf("%s %v: /proc view %+v ok=%v", home, flags, j, ok)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			d := Describe(ctx, j)
			cancel()
			if d.Attach != "ok" {
				t.Fatalf("%s %v: attach: %s", home, flags, d.Attach)
			}
			log := strings.Join(logged, "\n")
			own, capm := coops.FindStringSubmatch(log), maxCap.FindStringSubmatch(log)
			if own == nil || capm == nil {
				t.Fatalf("%s %v: the JVM logged no compressed-oops mode or max capacity:\n%s", home, flags, log)
			}
			want := own[1]
			if own[2] != "" {
				want = "off"
			}
			wantMax := parseU(capm[1]) << 20
			if capm[2] == "G" {
				wantMax <<= 10
			}
			t.Logf("%s %v: list says %s, %s, oops %q shift %d, max %d committed %d; the JVM logged %q, %q", filepath.Base(home), flags, d.VM, d.GC, d.Oops, d.OopShift, d.MaxHeap, d.Committed, own[0], capm[0])
			if d.Oops != want {
				t.Errorf("%s %v: compressed oops %q, the JVM says %q", home, flags, d.Oops, want)
			}
			if d.MaxHeap != wantMax {
				t.Errorf("%s %v: max heap %d, the JVM says %d", home, flags, d.MaxHeap, wantMax)
			}
			if d.Committed == 0 || d.Committed > d.MaxHeap || d.Reserved < d.MaxHeap/2 {
				t.Errorf("%s %v: committed %d reserved %d max %d", home, flags, d.Committed, d.Reserved, d.MaxHeap)
			}
			if (flags[len(flags)-1] == "-XX:+UseParallelGC") != (d.GC == "Parallel") {
				t.Errorf("%s %v: GC %q", home, flags, d.GC)
			}
		}
	}
}

func parseU(s string) uint64 {
	var n uint64
	for _, c := range s {
		n = n*10 + uint64(c-'0')
	}
	return n
}

// fakeJVM writes /proc/PID of a JVM whose maps hold libs below root.
func fakeJVM(t *testing.T, root string, pid int, libs ...string) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var maps string
	for _, l := range libs {
		maps += "7f0000000000-7f0000100000 r-xp 00000000 08:01 1234   " + l + "\n"
	}
	files := map[string]string{
		"status":  "Name:\tjava\nState:\tS (sleeping)\nTgid:\t" + strconv.Itoa(pid) + "\nUid:\t1000\t1001\t1001\t1001\nGid:\t50\t51\t51\t51\nNSpid:\t" + strconv.Itoa(pid) + "\t7\n",
		"stat":    strconv.Itoa(pid) + " (java) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 20 0 4200 1000 100\n",
		"maps":    maps,
		"cmdline": "/opt/jdk/bin/java\x00-Xmx1g\x00-cp\x00app.jar\x00com.example.Main\x00",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestInspectVMKind: an OpenJ9 JVM maps lib/j9vm/libjvm.so beside
// libj9vm29.so; it is OpenJ9, as attach says (TestInspectVMKind there).
func TestInspectVMKind(t *testing.T) {
	saved := ProcRoot
	ProcRoot = t.TempDir()
	defer func() { ProcRoot = saved }()
	os.WriteFile(filepath.Join(ProcRoot, "uptime"), []byte("100.00 150.00\n"), 0o644)
	fakeJVM(t, ProcRoot, 4242, "/opt/openj9/lib/j9vm/libjvm.so", "/opt/openj9/lib/default/libj9vm29.so")
	fakeJVM(t, ProcRoot, 4243, "/usr/lib/jvm/java-17/lib/server/libjvm.so", "/tmp/djx/libdjxagent.so")
	fakeJVM(t, ProcRoot, 4244, "/usr/bin/sleep")
	if j, ok := Inspect(4242); !ok || j.Kind != OpenJ9 {
		t.Errorf("OpenJ9: Inspect = %+v, %v; want kind %q", j, ok, OpenJ9)
	}
	j, ok := Inspect(4243)
	if !ok || j.Kind != HotSpot || j.UID != 1001 || j.GID != 51 || j.NSPID != 7 || !j.Container || !j.AgentLoaded ||
		j.Main != "com.example.Main" || j.Java != "/opt/jdk/bin/java" || j.Age != 58*time.Second {
		t.Errorf("HotSpot: Inspect = %+v, %v", j, ok)
	}
	if j, ok := Inspect(4244); ok {
		t.Errorf("sleep: Inspect = %+v, want no JVM", j)
	}
	jvms, err := Find()
	if err != nil || len(jvms) != 2 || jvms[0].PID != 4242 || jvms[1].PID != 4243 {
		t.Errorf("Find = %+v, %v", jvms, err)
	}
}

// A Finder reads a process it has seen before again only when it is
// another one (another start time, or an exec: another executable), when
// it was too young to be believed, or past Recheck.
func TestFinderRemembers(t *testing.T) {
	saved := ProcRoot
	ProcRoot = t.TempDir()
	defer func() { ProcRoot = saved }()
	os.WriteFile(filepath.Join(ProcRoot, "uptime"), []byte("100.00 150.00\n"), 0o644)
	libjvm := "/usr/lib/jvm/java-17/lib/server/libjvm.so"
	fakeJVM(t, ProcRoot, 4243, libjvm)
	fakeJVM(t, ProcRoot, 4244, "/usr/bin/sleep") // started 58 s ago
	fakeJVM(t, ProcRoot, 4245, "/usr/bin/sh")
	dir := func(pid int) string { return filepath.Join(ProcRoot, strconv.Itoa(pid)) }
	// 4245 started 5 s ago: too young to be believed no JVM.
	os.WriteFile(filepath.Join(dir(4245), "stat"), []byte("4245 (sh) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 20 0 9500 1000 100\n"), 0o644)
	os.Symlink("/usr/bin/sleep", filepath.Join(dir(4244), "exe"))
	now := time.Unix(1000, 0)
	f := &Finder{Recheck: time.Minute, now: func() time.Time { return now }}
	find := func(want ...int) {
		t.Helper()
		jvms, err := f.Find()
		var got []int
		for _, j := range jvms {
			got = append(got, j.PID)
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("Find = %v, %v; want %v", got, err, want)
		}
	}
	find(4243)
	// A process whose maps cannot be read is believed no JVM, as one that
	// maps no libjvm.
	fakeJVM(t, ProcRoot, 4246, "/usr/bin/sleep")
	os.Remove(filepath.Join(dir(4246), "maps"))
	os.Mkdir(filepath.Join(dir(4246), "maps"), 0o755)
	find(4243)
	if p, ok := f.seen[4246]; !ok || p.jvm != nil {
		t.Errorf("pid 4246, unreadable: the Finder remembers %+v, %v; want no JVM", p, ok)
	}
	os.RemoveAll(dir(4246))
	// A JVM found is not read again: its maps are not needed.
	os.Remove(filepath.Join(dir(4243), "maps"))
	// 4244 loads libjvm late (as an embedding launcher does); 4245 execs
	// java, still young.
	maps := "7f0000000000-7f0000100000 r-xp 00000000 08:01 1234   " + libjvm + "\n"
	os.WriteFile(filepath.Join(dir(4244), "maps"), []byte(maps), 0o644)
	os.WriteFile(filepath.Join(dir(4245), "maps"), []byte(maps), 0o644)
	find(4243, 4245)
	// 4244 is believed no JVM until Recheck has passed.
	now = now.Add(30 * time.Second)
	find(4243, 4245)
	now = now.Add(31 * time.Second)
	find(4243, 4244, 4245)
	// An exec is another process: 4244 execs sleep again.
	os.WriteFile(filepath.Join(dir(4244), "maps"), []byte("7f0000000000-7f0000100000 r-xp 00000000 08:01 1234   /usr/bin/sleep\n"), 0o644)
	find(4243, 4244, 4245)
	os.Remove(filepath.Join(dir(4244), "exe"))
	os.Symlink("/usr/bin/sleep2", filepath.Join(dir(4244), "exe"))
	find(4243, 4245)
	// A pid reused is another process: the new 4243 has no maps to read.
	os.WriteFile(filepath.Join(dir(4243), "stat"), []byte("4243 (java) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 20 0 4300 1000 100\n"), 0o644)
	find(4245)
	// A process gone is forgotten, and a zombie is no JVM.
	os.WriteFile(filepath.Join(dir(4245), "stat"), []byte("4245 (java) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 20 0 9500 1000 100\n"), 0o644)
	find()
	os.RemoveAll(dir(4244))
	f.Find()
	if _, ok := f.seen[4244]; ok {
		t.Error("the Finder still remembers pid 4244, gone")
	}
}
