package report

import (
	"bytes"
	"strings"
	"testing"
)

func allocObj(typ string, samples uint64, path ...string) Object {
	return Object{Type: typ, Site: path[0], AllocPath: path, Origin: OriginAllocation, Holder: []string{}, Objects: 1, Samples: samples}
}

func TestSiteNamesTheUsersCode(t *testing.T) {
	for _, tc := range []struct {
		path []string
		want string
	}{
		{[]string{"java.util.Arrays.copyOf:3537", "org.h2.store.Data.expand:341", "org.h2.store.Data.checkCapacity:300"}, "org.h2.store.Data.expand:341 ← Arrays.copyOf"},
		{[]string{"java.util.Arrays.copyOf:3512", "java.util.ArrayList.grow:237", "java.util.ArrayList.add:467", "com.acme.Foo.bar:12"}, "com.acme.Foo.bar:12 ← Arrays.copyOf"},
		{[]string{"java.lang.AbstractStringBuilder.ensureCapacityInternal:228", "java.lang.StringBuilder.append:173", "sun.nio.cs.X.y:1", "javax.a.B.c:2", "jdk.internal.D.e:3", "com.sun.F.g:4", "Main.run:5"},
			"Main.run:5 ← AbstractStringBuilder.ensureCapacityInternal"},
		{[]string{"HotArrays.allocHot:12", "HotArrays.main:61"}, "HotArrays.allocHot:12"}, // the user's own frame: as today
		{[]string{"java.lang.Thread.run:833"}, "java.lang.Thread.run:833"},                // all JDK: as today
	} {
		o := allocObj("byte[]", 1, tc.path...)
		if got := o.siteAt(4, 0); got != tc.want {
			t.Errorf("%v: site %q, want %q", tc.path, got, tc.want)
		}
	}
}

// siteColumn renders objs and returns the TYPE and SITE cells of each row.
func siteColumn(t *testing.T, objs []Object, depth int) []string {
	t.Helper()
	r := &Report{PID: 1, Mode: "launch", Event: "decode", Objects: objs, Stats: Stats{SampleStats: SampleStats{Attributed: 100}}}
	r.Finish()
	var b bytes.Buffer
	if err := WriteTable(&b, r, TableOptions{Top: 20, Depth: depth}); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(b.String(), "\n") {
		cells := strings.Split(l, "│")
		if len(cells) < 4 || strings.TrimSpace(cells[1]) == "#" {
			continue
		}
		rows = append(rows, strings.TrimSpace(cells[2])+" "+strings.TrimSpace(cells[3]))
	}
	if len(rows) != len(objs) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(objs), b.String())
	}
	seen := make(map[string]bool)
	for _, row := range rows {
		if seen[row] {
			t.Errorf("two rows print %q:\n%s", row, b.String())
		}
		seen[row] = true
	}
	return rows
}

func TestSiteNoTwoRowsAlike(t *testing.T) {
	// Batik: two double[] sites with the innermost frame
	// java.util.Arrays.copyOf:3681, and the same user frame; their callers
	// differ.
	rows := siteColumn(t, []Object{
		allocObj("double[]", 30, "java.util.Arrays.copyOf:3681", "org.apache.batik.ext.awt.geom.Polygon2D.addPoint:201", "org.apache.batik.parser.PathParser.parseL:300"),
		allocObj("double[]", 20, "java.util.Arrays.copyOf:3681", "org.apache.batik.ext.awt.geom.Polygon2D.addPoint:201", "org.apache.batik.bridge.SVGPolygonElementBridge.buildShape:90"),
		// The same user frame but another type: no clash, stays short.
		allocObj("float[]", 10, "java.util.Arrays.copyOf:3681", "org.apache.batik.ext.awt.geom.Polygon2D.addPoint:201", "org.apache.batik.parser.PathParser.parseL:300"),
		// Through different JDK frames to the same user frame.
		allocObj("java.lang.Object[]", 9, "java.util.Arrays.copyOf:3512", "java.util.ArrayList.grow:237", "java.util.ArrayList.add:467", "com.acme.Foo.bar:12"),
		allocObj("java.lang.Object[]", 8, "java.util.Arrays.copyOf:3512", "java.util.ArrayList.grow:237", "java.util.ArrayList.addAll:700", "com.acme.Foo.bar:12"),
		// Only the helper's line differs.
		allocObj("char[]", 7, "java.util.Arrays.copyOf:3537", "com.acme.Foo.baz:13"),
		allocObj("char[]", 6, "java.util.Arrays.copyOf:3538", "com.acme.Foo.baz:13"),
	}, 4)
	want := []string{
		"double[] org.apache.batik.parser.PathParser.parseL:300 ← org.apache.batik.ext.awt.geom.Polygon2D.addPoint:201 ← Arrays.copyOf",
		"double[] org.apache.batik.bridge.SVGPolygonElementBridge.buildShape:90 ← org.apache.batik.ext.awt.geom.Polygon2D.addPoint:201 ← Arrays.copyOf",
		"float[] org.apache.batik.ext.awt.geom.Polygon2D.addPoint:201 ← Arrays.copyOf",
		"java.lang.Object[] com.acme.Foo.bar:12 ← ArrayList.add ← ArrayList.grow ← Arrays.copyOf",
		"java.lang.Object[] com.acme.Foo.bar:12 ← ArrayList.addAll ← ArrayList.grow ← Arrays.copyOf",
		"char[] com.acme.Foo.baz:13 ← java.util.Arrays.copyOf:3537",
		"char[] com.acme.Foo.baz:13 ← java.util.Arrays.copyOf:3538",
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d: %q, want %q", i+1, rows[i], want[i])
		}
	}
}

func TestSiteCensusRowsAsTodayButDistinct(t *testing.T) {
	census := func(samples uint64, holder ...string) Object {
		return Object{Type: "long[]", Site: "[allocated before attach]", Origin: OriginCensus, Holder: holder, Objects: 1, Samples: samples}
	}
	tail := []string{"java.util.HashMap.table", "[]", "java.util.HashMap$Node.value"}
	rows := siteColumn(t, []Object{
		census(30, append([]string{"App.index (static)"}, tail...)...),
		census(20, append([]string{"App.cache (static)"}, tail...)...),
		census(10, "App.hot (static)"),
	}, 3)
	want := []string{
		"long[] App.index (static) → java.util.HashMap.table → [] → java.util.HashMap$Node.value",
		"long[] App.cache (static) → java.util.HashMap.table → [] → java.util.HashMap$Node.value",
		"long[] App.hot (static)",
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d: %q, want %q", i+1, rows[i], want[i])
		}
	}
	// Apart, a chain is cut to --depth as today.
	o := census(1, append([]string{"App.index (static)"}, tail...)...)
	if got := o.siteAt(3, 0); got != "… → java.util.HashMap.table → [] → java.util.HashMap$Node.value" {
		t.Errorf("census site %q", got)
	}
}
