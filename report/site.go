package report

import (
	"strconv"
	"strings"
)

// The table's SITE names the code a user owns. When the innermost
// allocation frames are JDK helpers (Arrays.copyOf, ArrayList.grow,
// StringBuilder's), it shows the first frame outside the JDK and the
// helper after it:
//
//	org.h2.store.Data.expand:341 ← Arrays.copyOf
//
// read "Data.expand, through Arrays.copyOf": each "←" stands before the
// frame the one on its left called. Rows that would still print alike
// (same type and text) show more frames until they differ: first the JDK
// frames in between, then the callers, outermost on the left, and last
// every frame with its line. JSON's site stays the innermost frame.

// jdkPrefixes are the packages of the JDK's own code.
var jdkPrefixes = []string{"java.", "javax.", "jdk.", "sun.", "com.sun."}

// IsJDKFrame says whether frame is code of the JDK (java.*, javax.*, jdk.*,
// sun.*, com.sun.*).
func IsJDKFrame(frame string) bool {
	for _, p := range jdkPrefixes {
		if strings.HasPrefix(frame, p) {
			return true
		}
	}
	return false
}

// shortFrame is a JDK frame without its package and line:
// "java.util.Arrays.copyOf:3681" → "Arrays.copyOf".
func shortFrame(frame string) string {
	f := frame
	if i := strings.LastIndexByte(f, ':'); i > 0 {
		if _, err := strconv.Atoi(f[i+1:]); err == nil {
			f = f[:i]
		}
	}
	m := strings.LastIndexByte(f, '.')
	if m <= 0 {
		return f
	}
	if c := strings.LastIndexByte(f[:m], '.'); c >= 0 {
		return f[c+1:]
	}
	return f
}

// siteLevels is how many ways o's site can be shown, from the shortest
// (level 0) to every frame (the last).
func (o *Object) siteLevels() int {
	if o.Held() {
		return len(o.Holder) + 1
	}
	return len(o.AllocPath) + 2
}

// siteAt is o's site as the table shows it at level (0: the shortest;
// see siteLevels), census objects' holder chains cut to depth hops plus
// level.
func (o *Object) siteAt(depth, level int) string {
	if o.Held() {
		if depth <= 0 {
			return HolderText(o.Holder, 0)
		}
		return HolderText(o.Holder, depth+level)
	}
	p := o.AllocPath
	if len(p) == 0 {
		return o.Site
	}
	// u: the user's frame, the first outside the JDK (0 when the
	// innermost is the user's, or when every frame is the JDK's).
	u := 0
	if IsJDKFrame(p[0]) {
		for k := 1; k < len(p); k++ {
			if !IsJDKFrame(p[k]) {
				u = k
				break
			}
		}
	}
	if level >= len(p)+1 { // last: every frame, lines and all
		return joinSite(p, len(p)-1, func(f string) string { return f })
	}
	short := func(f string) string {
		if IsJDKFrame(f) && u > 0 {
			return shortFrame(f)
		}
		return f
	}
	if level == 0 {
		if u == 0 {
			return o.Site
		}
		return p[u] + " ← " + shortFrame(p[0])
	}
	// Level 1 shows the frames between the user's and the helper; each
	// level after it adds a caller on the left.
	top := min(u+level-1, len(p)-1)
	return joinSite(p, top, short)
}

// joinSite shows frames p[top] down to p[0], outermost on the left.
func joinSite(p []string, top int, name func(string) string) string {
	var b strings.Builder
	for k := top; k >= 0; k-- {
		b.WriteString(name(p[k]))
		if k > 0 {
			b.WriteString(" ← ")
		}
	}
	return b.String()
}

// siteTexts is the SITE column of objs: each its siteAt(depth, 0), except
// that rows of one group (one type, in one table) that would print alike
// show more frames until they differ, and, if their whole paths print
// alike, a number.
func siteTexts(objs []*Object, depth int, group func(i int) string) []string {
	levels := make([]int, len(objs))
	text := make([]string, len(objs))
	for i, o := range objs {
		text[i] = o.siteAt(depth, 0)
	}
	for {
		seen := make(map[string][]int)
		for i := range objs {
			k := group(i) + "\x00" + text[i]
			seen[k] = append(seen[k], i)
		}
		moved := false
		for _, rows := range seen {
			if len(rows) < 2 {
				continue
			}
			for _, i := range rows {
				if levels[i]+1 < objs[i].siteLevels() {
					levels[i]++
					text[i] = objs[i].siteAt(depth, levels[i])
					moved = true
				}
			}
		}
		if !moved {
			break
		}
	}
	// Rows alike at every level (census objects of one chain cut alike by
	// --depth 0, merged profiles): numbered, so that no two print alike.
	count := make(map[string]int)
	for i := range objs {
		count[group(i)+"\x00"+text[i]]++
	}
	nth := make(map[string]int)
	for i := range objs {
		k := group(i) + "\x00" + text[i]
		if count[k] > 1 {
			nth[k]++
			text[i] += " (" + strconv.Itoa(nth[k]) + ")"
		}
	}
	return text
}
