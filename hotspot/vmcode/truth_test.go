package vmcode

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// truth is what the tests expect of one JVM running testdata/Hot.java,
// each part from a source independent of this package: the JVM's own
// code list (jcmd Compiler.codelist), javap's line number tables, and
// the MARK comments of Hot.java.
type truth struct {
	Code  []codeEntry            // compiled methods, as the JVM lists them
	Lines map[string][]linePairJ // javap -c -l: method name → (bci, line)
	Chain []string               // leaf ← mid ← outer at the call to sink, innermost first
	// Pinned queries a capture made, replayed against its fixture:
	// Hot's methods by Method*, the interpreter's and an adapter's pcs,
	// and per Hot.outer nmethod the pc whose frames are Chain.
	Methods   map[string]uint64
	Interp    uint64
	Adapter   uint64
	ChainPCs  map[int64]uint64 // compile id → pc
	LineCount int              // lines of Hot.java, to bound every Hot frame
	Marks     map[string]int   // Hot.java's MARK comments: name → line
	Parked    parked           // the parked thread's interpreter frame
	// ICMiss is SharedRuntime::_ic_miss_blob, a RuntimeStub* whose
	// name HotSpot's sources give ("ic_miss_stub"); 0 where vmStructs
	// do not export it (JDK 25).
	ICMiss uint64
}

type linePairJ struct{ BCI, Line int }

// codeEntry is one line of jcmd Compiler.codelist: "id level state
// Class.method(sig) [header, code begin - code end]".
type codeEntry struct {
	ID, Level, State          int64
	Method                    string // "Hot.outer(I)J"
	Start, CodeBegin, CodeEnd uint64
}

var codelistLine = regexp.MustCompile(`^(\d+) (-?\d+) (-?\d+) (\S+) \[0x([0-9a-f]+), 0x([0-9a-f]+) - 0x([0-9a-f]+)\]$`)

func parseCodelist(out string) []codeEntry {
	var es []codeEntry
	for _, line := range strings.Split(out, "\n") {
		m := codelistLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		var e codeEntry
		e.ID, _ = strconv.ParseInt(m[1], 10, 64)
		e.Level, _ = strconv.ParseInt(m[2], 10, 64)
		e.State, _ = strconv.ParseInt(m[3], 10, 64)
		e.Method = m[4]
		e.Start, _ = strconv.ParseUint(m[5], 16, 64)
		e.CodeBegin, _ = strconv.ParseUint(m[6], 16, 64)
		e.CodeEnd, _ = strconv.ParseUint(m[7], 16, 64)
		es = append(es, e)
	}
	return es
}

// javapLines runs javap -p -c -l on Hot.class: each method's LineNumberTable.
func javapLines(t testing.TB, javap, classDir string) map[string][]linePairJ {
	t.Helper()
	out, err := exec.Command(javap, "-p", "-c", "-l", "-cp", classDir, "Hot").CombinedOutput()
	if err != nil {
		t.Fatalf("javap: %v: %s", err, out)
	}
	lines := make(map[string][]linePairJ)
	method := ""
	lineRe := regexp.MustCompile(`^\s+line (\d+): (\d+)$`)
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "   ") && strings.HasSuffix(l, ";") {
			method = javapName(l)
			continue
		}
		if m := lineRe.FindStringSubmatch(l); m != nil && method != "" {
			line, _ := strconv.Atoi(m[1])
			bci, _ := strconv.Atoi(m[2])
			lines[method] = append(lines[method], linePairJ{bci, line})
		}
	}
	if len(lines) < 5 {
		t.Fatalf("javap listed line tables of %d methods: %s", len(lines), out)
	}
	return lines
}

// javapName is the JVM name of a javap method line: "  static long
// leaf(long);" → "leaf", "  public Hot();" → "<init>".
func javapName(l string) string {
	head, _, ok := strings.Cut(strings.TrimSpace(l), "(")
	if !ok {
		return ""
	}
	f := strings.Fields(head)
	name := f[len(f)-1]
	if name == "Hot" {
		return "<init>"
	}
	return name
}

// marks reads the MARK comments of Hot.java: name → line.
func marks(t testing.TB) (map[string]int, int) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "Hot.java"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := make(map[string]int)
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		if _, mark, ok := strings.Cut(sc.Text(), "// MARK "); ok {
			out[strings.TrimSpace(mark)] = n
		}
	}
	return out, n
}

// expectedChain is the frames at leaf's call to sink, innermost first,
// with Hot.java's marks and its line count.
func expectedChain(t testing.TB) ([]string, map[string]int, int) {
	m, n := marks(t)
	for _, k := range []string{"leaf-call", "mid-call", "outer-call"} {
		if m[k] == 0 {
			t.Fatalf("Hot.java lacks the mark %s", k)
		}
	}
	return []string{
		fmt.Sprintf("Hot.leaf:%d", m["leaf-call"]),
		fmt.Sprintf("Hot.mid:%d", m["mid-call"]),
		fmt.Sprintf("Hot.outer:%d", m["outer-call"]),
	}, m, n
}

func frameStrings(fs []Frame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	return out
}
