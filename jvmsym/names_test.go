package jvmsym

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCutName(t *testing.T) {
	if s := "pkg.Class.method"; CutName(s) != s {
		t.Errorf("a short name changed: %q", CutName(s))
	}
	exact := strings.Repeat("x", MaxName)
	if CutName(exact) != exact {
		t.Error("a name of MaxName bytes was cut")
	}
	// Cut inside a 3-byte character, 60,000 bytes long as javac allows.
	long := strings.Repeat("x", MaxName-4) + strings.Repeat("€", 20000)
	got := CutName(long)
	if len(got) > MaxName || !strings.HasSuffix(got, NameCut) || !utf8.ValidString(got) || !strings.HasPrefix(got, strings.Repeat("x", MaxName-4)) {
		t.Errorf("cut to %d bytes: …%q", len(got), got[len(got)-12:])
	}
	if b := AppendCut([]byte("a."), []byte(long)); string(b) != "a."+got {
		t.Errorf("AppendCut differs from CutName")
	}
}

// Names keeps a name once however often it is interned, and within its
// byte budget however many names come: past it they are all NamesFull.
func TestNamesInternAndBudget(t *testing.T) {
	n := NewNames(64 << 10)
	long := []byte(strings.Repeat("p", 60000))
	a, b := n.Intern(long), n.Intern(long)
	if a != b || n.Len() != 2 {
		t.Errorf("one name interned twice: ids %d %d, %d names", a, b, n.Len())
	}
	if s := n.Name(a); len(s) > MaxName || !strings.HasSuffix(s, NameCut) {
		t.Errorf("a 60,000-byte name kept as %d bytes", len(s))
	}
	if n.InternString(string(long)) != a {
		t.Error("InternString gives another id")
	}
	before := n.Bytes()
	for i := range 10000 {
		n.Intern(fmt.Appendf(nil, "Class%d.method:%d%s", i, i, strings.Repeat("q", 500)))
	}
	if n.Bytes() > 64<<10 {
		t.Errorf("%d bytes held, budget %d", n.Bytes(), 64<<10)
	}
	if n.Refused() == 0 || n.Name(n.Intern([]byte("new.name:1"+strings.Repeat("r", 600)))) != NamesFull {
		t.Errorf("past the budget: %d refused", n.Refused())
	}
	if n.Bytes() <= before || n.Name(a) == "" {
		t.Errorf("names kept before the budget was reached are gone")
	}
	if n.Name(0) != "" || n.Name(1<<30) != "" {
		t.Error("an id not given names something")
	}
}

// The names of a method the agent describes are cut as they are kept.
func TestTableCutsNames(t *testing.T) {
	tab := NewTable()
	tab.Add(1, Method{ClassSig: "LA;", Name: strings.Repeat("m", 60000), Sig: "()V"})
	f := tab.Resolve(1, -1)
	if len(f.Method) > MaxName || !strings.HasSuffix(f.Method, NameCut) {
		t.Errorf("method name kept as %d bytes", len(f.Method))
	}
	if tab.Bytes() > 2*MaxName+256 {
		t.Errorf("table holds %d bytes for one method", tab.Bytes())
	}
}

// A process's maps keep a bounded total of paths, whatever the target
// names its mappings.
func TestParseMapsPathBudget(t *testing.T) {
	var b strings.Builder
	path := "/" + strings.Repeat("d", 4000)
	for i := range 8000 {
		fmt.Fprintf(&b, "%x-%x r-xp 0 08:01 %d %s\n", 0x10000+i*0x1000, 0x11000+i*0x1000, i+1, path)
	}
	maps, err := parseMaps(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, m := range maps {
		total += len(m.path)
	}
	if len(maps) != 8000 || total > maxMapsPathBytes {
		t.Errorf("%d mappings, %d bytes of paths kept (budget %d)", len(maps), total, maxMapsPathBytes)
	}
}
