package report

import (
	"strings"
	"testing"
)

// TestTextsAreTheTables checks that the texts other renderers take are
// the table's own lines.
func TestTextsAreTheTables(t *testing.T) {
	r := sample()
	var b strings.Builder
	if err := WriteTable(&b, r, DefaultTableOptions); err != nil {
		t.Fatal(err)
	}
	table := b.String()
	if h := HeaderText(r); !strings.HasPrefix(table, h+"\n") {
		t.Errorf("HeaderText %q is not the table's first line", h)
	}
	for _, l := range StatsLines(r) {
		if !strings.Contains(table, "\n"+l+"\n") {
			t.Errorf("stats line %q is not in the table", l)
		}
	}
	objs := []*Object{&r.Objects[0]}
	if s := SiteTexts(objs, 0); len(s) != 1 || !strings.Contains(table, s[0]) {
		t.Errorf("SiteTexts %q is not the table's site", s)
	}
}
