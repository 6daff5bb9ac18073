package vmstructs

import "testing"

// ReadFixture gives the same table as the tests' own fixture reader.
func TestReadFixture(t *testing.T) {
	for _, jdk := range fixtureJDKs {
		got, err := ReadFixture(fixturePath(jdk))
		if err != nil {
			t.Fatal(err)
		}
		if want := fixtureTable(t, jdk); listing(got) != listing(want) {
			t.Errorf("%s: ReadFixture differs: %s", jdk, firstDiff(listing(got), listing(want)))
		}
	}
	if _, err := ReadFixture("testdata/none.json.gz"); err == nil {
		t.Error("a missing fixture read without an error")
	}
}
