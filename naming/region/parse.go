package region

import (
	"strconv"
	"strings"

	"github.com/djx-bpf/djx-bpf/safety/procfs"
)

// Every text this package parses is written by the target (its
// /proc/PID/maps names its own files; VM.info, NMT and Thread.print are
// replies of its attach listener), and djx-bpf runs as root. So every
// parser caps its line length and count, skips what it does not
// understand, treats every number as hostile (a range must be
// start < end <= MaxAddr) and never opens a path it reads.
const (
	// MaxAddr is the end of the largest user address space on x86-64
	// (5-level paging). A range past it is refused.
	MaxAddr = 1 << 56
	// maxLine is the longest line read; a longer line is skipped whole.
	// A maps line is ~73 bytes and a path (PATH_MAX 4096, newlines
	// escaped as \012 by the kernel).
	maxLine = 16 << 10
	// maxLines caps the lines read from one text (a JVM with 100k threads
	// has 200k maps lines and ~3M NMT detail lines; past the cap the rest
	// is ignored).
	maxLines = 1 << 22
	// maxClaims caps the ranges taken from one JVM text.
	maxClaims = 1 << 18
	// maxName caps a thread name (Java names are unbounded).
	maxName = 256
)

// mapping is one line of /proc/PID/maps.
type mapping struct {
	start, end uint64
	perms      string // "rw-p"
	inode      uint64
	path       string // as the kernel prints it, "" for anonymous
}

// lines calls fn for every line of text no longer than maxLine, at most
// maxLines of them.
func lines(text string, fn func(string)) {
	n := 0
	for len(text) > 0 && n < maxLines {
		i := strings.IndexByte(text, '\n')
		var l string
		if i < 0 {
			l, text = text, ""
		} else {
			l, text = text[:i], text[i+1:]
		}
		n++
		if len(l) <= maxLine {
			fn(l)
		}
	}
}

// parseMaps parses /proc/PID/maps text. Malformed lines and inverted or
// out-of-range ranges are skipped; the result is sorted and without
// overlaps (a line that overlaps its predecessor is dropped).
func parseMaps(text string) []mapping {
	var out []mapping
	lines(text, func(l string) {
		m, ok := parseMapsLine(l)
		if !ok {
			return
		}
		if n := len(out); n > 0 && m.start < out[n-1].end {
			return // the kernel prints them sorted; anything else is not the kernel
		}
		out = append(out, m)
	})
	return out
}

// parseMapsLine parses "start-end perms offset dev inode [path]" with
// procfs, and refuses what no kernel writes: an empty range, one past
// MaxAddr, odd permissions.
func parseMapsLine(l string) (mapping, bool) {
	pm, err := procfs.ParseMapsLine(l)
	if err != nil || pm.Start >= pm.End || pm.End > MaxAddr || len(pm.Perms) != 4 {
		return mapping{}, false
	}
	return mapping{start: pm.Start, end: pm.End, perms: pm.Perms, inode: pm.Inode, path: pm.Path}, true
}

// field splits off the first space-separated field of s.
func field(s string) (f, rest string, ok bool) {
	s = strings.TrimLeft(s, " ")
	if s == "" {
		return "", "", false
	}
	if i := strings.IndexByte(s, ' '); i >= 0 {
		return s[:i], s[i:], true
	}
	return s, "", true
}

// claim is a range the JVM states, with its region.
type claim struct {
	start, end uint64
	name       string
}

// stackClaim is a thread stack the JVM states (hs_err style
// `stack(0x...,0x...)`), or a stack pointer of a thread: sp set, start
// and end zero.
type stackClaim struct {
	start, end uint64
	sp         uint64
	tid        uint32
	name       string
}

// vmInfo is what VM.info says about the JVM's own ranges.
type vmInfo struct {
	claims []claim
	stacks []stackClaim
	// granule is the metaspace commit granule (commit_granule_bytes);
	// 0 when not printed.
	granule uint64
	// metaspaceNodes is the number of non-class metaspace nodes
	// ("Non-class space: ... N nodes."), -1 when not printed.
	metaspaceNodes int
}

// parseVMInfo reads `jcmd PID VM.info` text (JDK 17 and 25, any GC):
//
//	CDS archive(s) mapped at: [0x...-0x...-0x...), size ...
//	Compressed class space mapped at: 0x...-0x..., reserved size: ...
//	Card table byte_map: [0x...,0x...] _byte_map_base: 0x...
//	Marking Bits ...           then  " Bits: [0x..., 0x...)" (G1 25)
//	                                 " Prev Bits: [...)", " Next Bits: [...)" (G1 17)
//	                                 " Begin Bits: [...)", " End Bits: [...)" (Parallel)
//	CodeHeap 'profiled nmethods': size=...  then  " bounds [0x..., 0x..., 0x...]"
//	CodeCache: size=...                     then  " bounds [...]" (unsegmented)
//	JavaThread "name" [_thread_blocked, id=N, stack(0x...,0x...)] (hs_err only)
//
// VM.info does not print the non-class metaspace's addresses (NMT does),
// nor the Java threads' stacks (an hs_err file does; its lines are read if
// the caller passes one).
func parseVMInfo(text string) vmInfo {
	v := vmInfo{metaspaceNodes: -1}
	prev := ""
	inBits := 0
	add := func(c claim) {
		if c.start < c.end && c.end <= MaxAddr && len(v.claims) < maxClaims {
			v.claims = append(v.claims, c)
		}
	}
	lines(text, func(l string) {
		t := strings.TrimSpace(l)
		defer func() { prev = t }()
		if inBits > 0 {
			inBits--
		}
		switch {
		case strings.HasPrefix(t, "CDS archive(s) mapped at: ["):
			// [base-static end-dynamic end)
			r := strings.TrimPrefix(t, "CDS archive(s) mapped at: [")
			if i := strings.IndexByte(r, ')'); i >= 0 {
				ns := hexList(r[:i], '-')
				if len(ns) == 3 {
					add(claim{ns[0], max(ns[1], ns[2]), CDS})
				}
			}
		case strings.HasPrefix(t, "Compressed class space mapped at: "):
			r := strings.TrimPrefix(t, "Compressed class space mapped at: ")
			if i := strings.IndexByte(r, ','); i >= 0 {
				if ns := hexList(r[:i], '-'); len(ns) == 2 {
					add(claim{ns[0], ns[1], ClassSpace})
				}
			}
		case strings.HasPrefix(t, "Card table byte_map: ["):
			r := strings.TrimPrefix(t, "Card table byte_map: [")
			if i := strings.IndexByte(r, ']'); i >= 0 {
				if ns := hexList(r[:i], ','); len(ns) == 2 {
					add(claim{ns[0], ns[1], CardTable})
				}
			}
		case strings.HasPrefix(t, "Marking Bits"):
			inBits = 4
		case inBits > 0 && strings.Contains(t, "Bits:") && strings.HasSuffix(t, ")"):
			r := t[strings.IndexByte(t, ':')+1:]
			r = strings.TrimSpace(r)
			if strings.HasPrefix(r, "[") {
				if ns := hexList(r[1:len(r)-1], ','); len(ns) == 2 {
					add(claim{ns[0], ns[1], MarkBitmap})
				}
			}
		case strings.HasPrefix(t, "bounds [") && strings.HasSuffix(t, "]") &&
			(strings.HasPrefix(prev, "CodeHeap ") || strings.HasPrefix(prev, "CodeCache:")):
			if ns := hexList(t[len("bounds ["):len(t)-1], ','); len(ns) == 3 {
				add(claim{ns[0], ns[2], CodeCache})
			}
		case strings.HasPrefix(t, "- commit_granule_bytes: "):
			n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(t, "- commit_granule_bytes: "), "."), 10, 64)
			if err == nil && n > 0 && n <= 1<<30 && n&(n-1) == 0 {
				v.granule = n
			}
		case strings.HasPrefix(t, "Non-class space: ") && strings.HasSuffix(t, " nodes."):
			fs := strings.Fields(t)
			if n, err := strconv.Atoi(fs[len(fs)-2]); err == nil && n >= 0 {
				v.metaspaceNodes = n
			}
		case strings.Contains(t, "stack(0x"):
			if s, ok := parseErrThread(t); ok && len(v.stacks) < maxClaims {
				v.stacks = append(v.stacks, s)
			}
		}
	})
	return v
}

// parseErrThread parses an hs_err thread line:
//
//	0x00007f... JavaThread "main" [_thread_blocked, id=1234, stack(0x00007f...,0x00007f...)] _threads_hazard_ptr=...
func parseErrThread(t string) (stackClaim, bool) {
	var s stackClaim
	q1 := strings.IndexByte(t, '"')
	open := strings.Index(t, "\" [")
	if q1 < 0 || open <= q1 {
		return s, false
	}
	s.name = capName(t[q1+1 : open])
	r := t[open+3:]
	if i := strings.Index(r, "id="); i >= 0 {
		j := i + 3
		for j < len(r) && r[j] >= '0' && r[j] <= '9' {
			j++
		}
		if n, err := strconv.ParseUint(r[i+3:j], 10, 32); err == nil {
			s.tid = uint32(n)
		}
	}
	i := strings.Index(r, "stack(")
	if i < 0 {
		return s, false
	}
	r = r[i+len("stack("):]
	j := strings.IndexByte(r, ')')
	if j < 0 {
		return s, false
	}
	ns := hexList(r[:j], ',')
	if len(ns) != 2 || ns[0] >= ns[1] || ns[1] > MaxAddr {
		return s, false
	}
	s.start, s.end = ns[0], ns[1]
	return s, true
}

// hexList parses "0xA<sep> 0xB..." into numbers; nil if any is not hex.
func hexList(s string, sep byte) []uint64 {
	parts := strings.Split(s, string(sep))
	if len(parts) > 4 {
		return nil
	}
	out := make([]uint64, 0, len(parts))
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if !strings.HasPrefix(p, "0x") {
			return nil
		}
		n, err := strconv.ParseUint(p[2:], 16, 64)
		if err != nil {
			return nil
		}
		out = append(out, n)
	}
	return out
}

// nmtTags maps NMT's memory tags to regions. Tags not here (Internal,
// Safepoint, Other, ...) leave the mapping's own name.
var nmtTags = map[string]string{
	"Java Heap":          JavaHeap,
	"Class":              ClassSpace,
	"Metaspace":          Metaspace,
	"Shared class space": CDS,
	"Code":               CodeCache,
	"GC":                 GCOther,
	"Thread Stack":       Stack,
}

// parseNMT reads `jcmd PID VM.native_memory detail`: its virtual memory
// map has one line per reservation,
//
//	[0x00007f0be4000000 - 0x00007f0be8000000] reserved 65536KB for Metaspace from
//	[0x00007f0c07e00000 - 0x00007f0c08200000] reserved and committed 4096KB for GC from
//
// NMT's tag says what a reservation is for, but not which GC structure:
// those are "GC data" unless VM.info names them.
func parseNMT(text string) []claim {
	var out []claim
	lines(text, func(l string) {
		if !strings.HasPrefix(l, "[0x") || len(out) >= maxClaims {
			return
		}
		end := strings.IndexByte(l, ']')
		if end < 0 {
			return
		}
		ns := hexList(strings.Replace(l[1:end], " - ", ",", 1), ',')
		if len(ns) != 2 || ns[0] >= ns[1] || ns[1] > MaxAddr {
			return
		}
		r := l[end+1:]
		if !strings.HasPrefix(r, " reserved ") {
			return // a committed sub-range
		}
		i := strings.Index(r, " for ")
		if i < 0 {
			return
		}
		tag := strings.TrimSuffix(strings.TrimSpace(r[i+len(" for "):]), " from")
		if name, ok := nmtTags[tag]; ok {
			out = append(out, claim{ns[0], ns[1], name})
		}
	})
	return out
}

// javaThread is a thread of Thread.print: its native id, name, and the
// page of its last Java frame's sp (0 if it has none).
type javaThread struct {
	tid  uint32
	name string
	sp   uint64
}

// parseThreads reads `jcmd PID Thread.print`. A thread's line is
//
//	"main" #1 prio=5 os_prio=0 cpu=... tid=0x... nid=0x4d86 waiting on condition  [0x00007fce04c45000]   (JDK 17)
//	"main" #3 [15684] prio=5 ... tid=0x... nid=15684 runnable  [0x00007fc02e11e000]                      (JDK 25)
//	"VM Thread" os_prio=0 cpu=... tid=0x... nid=0x4d7b runnable                                             (no Java frames)
//
// The bracket at the end is the thread's last Java sp rounded down to a
// page: an address inside its stack.
func parseThreads(text string) []javaThread {
	var out []javaThread
	lines(text, func(l string) {
		if !strings.HasPrefix(l, "\"") || len(out) >= maxClaims {
			return
		}
		nid := strings.LastIndex(l, " nid=")
		if nid < 0 {
			return
		}
		q := strings.LastIndexByte(l[:nid], '"')
		if q <= 0 {
			return
		}
		t := javaThread{name: capName(l[1:q])}
		v, _, _ := field(l[nid+len(" nid="):])
		var n uint64
		var err error
		if strings.HasPrefix(v, "0x") {
			n, err = strconv.ParseUint(v[2:], 16, 32)
		} else {
			n, err = strconv.ParseUint(v, 10, 32)
		}
		if err != nil || n == 0 {
			return
		}
		t.tid = uint32(n)
		if strings.HasSuffix(l, "]") {
			if i := strings.LastIndexByte(l, '['); i > nid {
				if ns := hexList(l[i+1:len(l)-1], ','); len(ns) == 1 && ns[0] < MaxAddr {
					t.sp = ns[0]
				}
			}
		}
		out = append(out, t)
	})
	return out
}

// ParseSyscallSP returns the user stack pointer in the text of
// /proc/PID/task/TID/syscall: "nr a1 a2 a3 a4 a5 a6 sp pc" while in a
// system call, "-1 sp pc" while blocked outside one, "running" (no sp)
// while running.
func ParseSyscallSP(text string) (uint64, bool) {
	f := strings.Fields(strings.TrimSpace(text))
	var s string
	switch len(f) {
	case 9:
		s = f[7]
	case 3:
		s = f[1]
	default:
		return 0, false
	}
	if !strings.HasPrefix(s, "0x") {
		return 0, false
	}
	sp, err := strconv.ParseUint(s[2:], 16, 64)
	if err != nil || sp == 0 || sp >= MaxAddr {
		return 0, false
	}
	return sp, true
}

// capName cuts a thread name to maxName bytes.
func capName(s string) string {
	if len(s) > maxName {
		s = s[:maxName]
	}
	return strings.Clone(s)
}
