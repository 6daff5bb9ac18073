package main

import (
	"fmt"
	"strings"
)

const cmdlineAbout = `Prints the java command line a workload runs with, -java, -cp and
-jvm-flags included, for running it under another tool (scripts/perfshare.sh
runs it under perf). Runs nothing.`

func cmdCmdline(args []string) int {
	fs := newFlagSet("cmdline", " WORKLOAD", cmdlineAbout)
	var c common
	c.registerJava(fs)
	if code, ok := parse(fs, args, 1); !ok {
		return code
	}
	w, ok := findWorkload(fs.Arg(0))
	if !ok {
		fatal("unknown workload %q", fs.Arg(0))
	}
	h := &harness{java: c.java, cp: c.cp, jvmFlags: strings.Fields(c.jvmFlags)}
	fmt.Println(strings.Join(h.javaArgs(w, false), " "))
	return 0
}
