// Command perfshare tells what share of one JVM's CPU samples a profiler
// costs, djx-bpf's agent or JFR, from `perf record -a -g` output:
//
//	perf script -F comm,pid,tid,ip,sym,dso -i perf.data | perfshare [-agent libdjxagent.so]
//
// The JVM is the process with the most samples. Each of its samples goes to
// one class: by thread name (JFR's threads, djx-bpf's writer), else by its
// outermost frame that names a profiler. What perf cannot see (the BPF
// program, JFR's Java code and the JIT work for it) is in no class.
package main

import (
	"bufio"
	"debug/elf"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// cmlClass is HotSpot's side of the CompiledMethodLoad events the agent
// takes; a sample with the agent's callback below it is the agent's.
const cmlClass = "djx: HotSpot's CompiledMethodLoad records"

// rules name HotSpot's frames, outermost first wins.
var rules = []struct {
	class string
	re    *regexp.Regexp
}{
	{"JFR: start-up", regexp.MustCompile(`Jfr::on_create_vm|JfrRecorder::(create|on_create)`)},
	{"JFR: allocation samples", regexp.MustCompile(`JfrAllocationTracer|JfrObjectAllocationSample|ObjectSampler::`)},
	{"JFR: other in-thread", regexp.MustCompile(`Jfr[A-Z]\w*::|SR_handler`)},
	{cmlClass, regexp.MustCompile(`JvmtiExport::post_compiled_method_load|JvmtiCodeBlobEvents`)},
	{"djx: census heap walk", regexp.MustCompile(`VM_HeapWalkOperation|VM_HeapIterateOperation|JvmtiTagMap::`)},
}

const agentDSO = "libdjxagent"

type frame struct {
	ip       uint64
	sym, dso string
}

type sample struct {
	comm   string
	pid    int
	frames []frame // leaf first, as perf prints them
}

var headRE = regexp.MustCompile(`^\s*(.*?)\s+(\d+)/(\d+)\s*$`)

// parse reads perf script's blocks: a "comm pid/tid" line, frame lines
// "ip sym (dso)", a blank line.
func parse(r io.Reader, each func(*sample)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cur *sample
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if cur != nil {
				each(cur)
			}
			cur = nil
			continue
		}
		if cur == nil {
			m := headRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			pid, _ := strconv.Atoi(m[2])
			cur = &sample{comm: m[1], pid: pid}
			continue
		}
		cur.frames = append(cur.frames, parseFrame(line))
	}
	if cur != nil {
		each(cur)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read perf script: %w", err)
	}
	return nil
}

func parseFrame(line string) frame {
	s := strings.TrimSpace(line)
	var f frame
	if i := strings.IndexByte(s, ' '); i > 0 {
		f.ip, _ = strconv.ParseUint(s[:i], 16, 64)
		s = strings.TrimSpace(s[i+1:])
	}
	if i := strings.LastIndex(s, " ("); i >= 0 && strings.HasSuffix(s, ")") {
		f.dso = s[i+2 : len(s)-1]
		s = s[:i]
	}
	if i := strings.LastIndex(s, "+0x"); i > 0 {
		s = s[:i]
	}
	f.sym = s
	return f
}

// symtab names offsets in the agent's library, whose loaded copy is gone
// when the profile ends (the repository's is the same file).
type symtab struct {
	addr []uint64
	name []string
}

func loadSyms(path string) (*symtab, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open agent library: %w", err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("read agent symbols: %w", err)
	}
	sort.Slice(syms, func(i, j int) bool { return syms[i].Value < syms[j].Value })
	t := &symtab{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
			t.addr = append(t.addr, s.Value)
			t.name = append(t.name, s.Name)
		}
	}
	return t, nil
}

func (t *symtab) lookup(ip uint64) string {
	if t == nil {
		return "[unknown]"
	}
	i := sort.Search(len(t.addr), func(i int) bool { return t.addr[i] > ip }) - 1
	if i < 0 {
		return "[unknown]"
	}
	return t.name[i]
}

func classify(s *sample, syms *symtab) string {
	switch {
	case strings.HasPrefix(s.comm, "JFR "):
		return "JFR: thread " + s.comm
	case strings.HasPrefix(s.comm, "djx-bpf"):
		return "djx: writer thread"
	}
	for i := len(s.frames) - 1; i >= 0; i-- {
		f := s.frames[i]
		if strings.Contains(f.dso, agentDSO) {
			name := f.sym
			if name == "" || name == "[unknown]" {
				name = syms.lookup(f.ip)
			}
			return "djx: agent " + name
		}
		for _, r := range rules {
			if r.re.MatchString(f.sym) {
				if r.class == cmlClass && agentBelow(s.frames[:i]) {
					break
				}
				return r.class
			}
		}
	}
	return ""
}

func agentBelow(fs []frame) bool {
	for _, f := range fs {
		if strings.Contains(f.dso, agentDSO) {
			return true
		}
	}
	return false
}

type result struct {
	pid     int
	total   int
	classes map[string]int
}

func run(r io.Reader, syms *symtab) (*result, error) {
	per := map[int]*result{}
	err := parse(r, func(s *sample) {
		res := per[s.pid]
		if res == nil {
			res = &result{pid: s.pid, classes: map[string]int{}}
			per[s.pid] = res
		}
		res.total++
		if c := classify(s, syms); c != "" {
			res.classes[c]++
		}
	})
	if err != nil {
		return nil, err
	}
	var best *result
	for _, res := range per {
		if best == nil || res.total > best.total {
			best = res
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no samples: record with perf record -a -g, print with perf script -F comm,pid,tid,ip,sym,dso")
	}
	return best, nil
}

func (res *result) write(w io.Writer) {
	type kv struct {
		k string
		v int
	}
	var rows []kv
	for k, v := range res.classes {
		rows = append(rows, kv{k, v})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].v != rows[j].v {
			return rows[i].v > rows[j].v
		}
		return rows[i].k < rows[j].k
	})
	pct := func(n int) float64 { return 100 * float64(n) / float64(res.total) }
	fmt.Fprintf(w, "pid %d: %d samples\n", res.pid, res.total)
	sums := map[string]int{}
	for _, r := range rows {
		fmt.Fprintf(w, "%7d %6.2f%%  %s\n", r.v, pct(r.v), r.k)
		group := strings.SplitN(r.k, ":", 2)[0]
		if strings.HasSuffix(r.k, "start-up") {
			group += " start-up"
		}
		sums[group] += r.v
	}
	for _, g := range []string{"djx", "JFR", "JFR start-up"} {
		if n, ok := sums[g]; ok {
			fmt.Fprintf(w, "%7d %6.2f%%  all %s\n", n, pct(n), g)
		}
	}
}

func main() {
	agent := flag.String("agent", "", "libdjxagent.so, to name the agent's frames")
	flag.Parse()
	var syms *symtab
	if *agent != "" {
		var err error
		if syms, err = loadSyms(*agent); err != nil {
			fmt.Fprintln(os.Stderr, "perfshare:", err)
			os.Exit(1)
		}
	}
	res, err := run(os.Stdin, syms)
	if err != nil {
		fmt.Fprintln(os.Stderr, "perfshare:", err)
		os.Exit(1)
	}
	res.write(os.Stdout)
}
