package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/djx-bpf/djx-bpf/discover"
	"github.com/djx-bpf/djx-bpf/report"
)

// listed is one row of `djx-bpf list`.
type listed struct {
	discover.JVM
	discover.Details
}

// cmdList lists the JVMs on the host with what /proc and their attach
// listeners say, like jps -l plus jcmd VM.info.
func cmdList(args []string) int {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	format := fs.String("format", "table", "output format: table or json")
	quick := fs.Bool("quick", false, "read /proc only: do not ask the JVMs (no version, GC or heap)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage:\n  djx-bpf list [flags]\n\nLists every JVM on this host, containers included.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *format != "table" && *format != "json" {
		fmt.Fprintf(os.Stderr, "djx-bpf list: unknown --format %q: use table or json\n", *format)
		return 2
	}
	jvms, err := discover.Find()
	if err != nil {
		fmt.Fprintf(os.Stderr, "djx-bpf list: %v\n", err)
		return 1
	}
	rows := make([]listed, len(jvms))
	var wg sync.WaitGroup
	for i, j := range jvms {
		rows[i].JVM = j
		if *quick {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows[i].Details = discover.Describe(context.Background(), j)
		}()
	}
	wg.Wait()
	if *format == "json" {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if rows == nil {
			rows = []listed{}
		}
		if err := enc.Encode(rows); err != nil {
			fmt.Fprintf(os.Stderr, "djx-bpf list: %v\n", err)
			return 1
		}
		return 0
	}
	if err := writeList(os.Stdout, rows); err != nil {
		fmt.Fprintf(os.Stderr, "djx-bpf list: %v\n", err)
		return 1
	}
	return 0
}

func writeList(w io.Writer, rows []listed) error {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no JVMs found")
		return nil
	}
	t := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off))
	t.Header("PID", "USER", "VM", "GC", "HEAP MAX / COMMITTED", "COMPRESSED OOPS", "ATTACH", "AGENT", "MAIN")
	for _, r := range rows {
		pid := strconv.Itoa(r.PID)
		if r.Container {
			pid += " (" + strconv.Itoa(r.NSPID) + " in container)"
		}
		vm := r.Kind
		if r.VM != "" {
			vm = r.VM
		}
		heap := "-"
		if r.MaxHeap > 0 {
			heap = report.Bytes(r.MaxHeap) + " / " + report.Bytes(r.Committed)
		}
		oops := r.Oops
		if oops != "" && oops != "off" {
			if r.OopBase != 0 {
				oops += fmt.Sprintf(" 0x%x", r.OopBase)
			}
			oops += ", shift " + strconv.Itoa(r.OopShift)
		}
		agent := "no"
		if r.AgentLoaded {
			agent = "loaded"
		}
		if err := t.Append([]string{pid, r.User, vm, r.GC, heap, oops, r.Attach, agent, r.Main}); err != nil {
			return fmt.Errorf("render list: %w", err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("render list: %w", err)
	}
	return nil
}
