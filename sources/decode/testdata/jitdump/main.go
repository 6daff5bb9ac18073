// Command jitdump runs Hot.java (or another program, -src) on a JDK until C2
// has compiled its loops and appends the machine code of selected compiled
// methods to an output file,
// one "method" header plus hex line per method. It reads the code cache
// through `jcmd PID Compiler.perfmap` (JDK 17+) and /proc/PID/mem, so it must
// run as root or as the JVM's owner.
//
//	go run . -jdk /usr/lib/jvm/java-17-openjdk-amd64 -label jdk17 -o ../jit.txt
package main

import (
	"bufio"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

func main() {
	jdk := flag.String("jdk", "/usr/lib/jvm/java-17-openjdk-amd64", "JDK home")
	label := flag.String("label", "jdk17", "corpus label")
	out := flag.String("o", "../jit.txt", "output file (appended)")
	jflags := flag.String("jflags", "", "extra JVM flags, space separated")
	match := flag.String("match", `Hot::|HashMap::get|HashMap::hash|arraycopy|Integer::`, "method name regexp")
	maxBytes := flag.Int("max", 2048, "max code bytes per method (keeps the corpus small)")
	maxSame := flag.Int("same", 2, "max methods with the same name (C1 and C2 versions)")
	flag.StringVar(&prog.src, "src", "Hot.java", "the program's source")
	flag.StringVar(&prog.cp, "cp", "", "its class path besides its own class")
	flag.StringVar(&prog.args, "args", "", "its arguments, space separated")
	flag.DurationVar(&prog.settle, "settle", 0, "how long to let it run after it printed ready")
	flag.Parse()
	if err := run(*jdk, *label, *out, *jflags, regexp.MustCompile(*match), *maxBytes, *maxSame); err != nil {
		log.Fatal(err)
	}
}

// prog is the program whose code is dumped: it prints "ready" once its
// hot code is compiled (Hot.java waits on stdin after).
var prog struct {
	src, cp, args string
	settle        time.Duration
}

func run(jdk, label, out, jflags string, re *regexp.Regexp, maxBytes, maxSame int) error {
	dir, err := os.MkdirTemp("", "jitdump")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cp := dir
	if prog.cp != "" {
		cp += ":" + prog.cp
	}
	if b, err := exec.Command(filepath.Join(jdk, "bin/javac"), "-d", dir, "-cp", cp, prog.src).CombinedOutput(); err != nil {
		return fmt.Errorf("javac: %w: %s", err, b)
	}
	args := append(strings.Fields(jflags), "-cp", cp, strings.TrimSuffix(filepath.Base(prog.src), ".java"))
	args = append(args, strings.Fields(prog.args)...)
	cmd := exec.Command(filepath.Join(jdk, "bin/java"), args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "ready") {
	}
	go func() {
		for sc.Scan() { // keep its stdout flowing while it settles
		}
	}()
	time.Sleep(prog.settle)
	pid := cmd.Process.Pid
	if b, err := exec.Command(filepath.Join(jdk, "bin/jcmd"), strconv.Itoa(pid), "Compiler.perfmap").CombinedOutput(); err != nil {
		return fmt.Errorf("jcmd: %w: %s", err, b)
	}
	mapPath := fmt.Sprintf("/tmp/perf-%d.map", pid)
	defer os.Remove(mapPath)
	mf, err := os.ReadFile(mapPath)
	if err != nil {
		return err
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return err
	}
	defer mem.Close()
	f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	n := 0
	seen := map[string]int{}
	for _, line := range strings.Split(string(mf), "\n") {
		fs := strings.SplitN(line, " ", 3)
		if len(fs) != 3 || !re.MatchString(fs[2]) || seen[fs[2]] >= maxSame {
			continue
		}
		seen[fs[2]]++
		addr, err1 := strconv.ParseUint(strings.TrimPrefix(fs[0], "0x"), 16, 64)
		size, err2 := strconv.ParseUint(strings.TrimPrefix(fs[1], "0x"), 16, 64)
		if err1 != nil || err2 != nil || size == 0 {
			continue
		}
		if size > uint64(maxBytes) {
			size = uint64(maxBytes)
		}
		buf := make([]byte, size)
		if _, err := mem.ReadAt(buf, int64(addr)); err != nil {
			return fmt.Errorf("read %s: %w", fs[2], err)
		}
		name := strings.Join(strings.Fields(fs[2]), "_")
		fmt.Fprintf(f, "method %s %s\n%s\n", label, name, hex.EncodeToString(buf))
		n++
	}
	log.Printf("%s: %d methods", label, n)
	return nil
}
