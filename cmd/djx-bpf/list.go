package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/safety/termsafe"
	"github.com/djx-bpf/djx-bpf/target/discover"
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
		eprintf(os.Stderr, "djx-bpf list: unknown --format %q: use table or json\n", *format)
		return 2
	}
	jvms, err := discover.Find()
	if err != nil {
		eprintf(os.Stderr, "djx-bpf list: %v\n", err)
		return 1
	}
	rows := make([]listed, len(jvms))
	for i, j := range jvms {
		rows[i].JVM = j
	}
	if !*quick {
		if n := describeAll(context.Background(), rows, discover.Describe); n > 0 {
			// Said after the list, where it is read.
			defer eprintf(os.Stderr, "djx-bpf list: %d JVMs not asked (see their ATTACH): list asks %d at a time, at most %d of one user, for %v in all; --quick reads /proc only\n",
				n, listParallel, listPerUser, listBudget)
		}
	}
	if *format == "json" {
		if rows == nil {
			rows = []listed{}
		}
		err := jsonSafe(os.Stdout, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(rows)
		})
		if err != nil {
			eprintf(os.Stderr, "djx-bpf list: %v\n", err)
			return 1
		}
		return 0
	}
	if err := writeList(os.Stdout, rows); err != nil {
		eprintf(os.Stderr, "djx-bpf list: %v\n", err)
		return 1
	}
	return 0
}

// Anyone can start processes that look like JVMs, each of which may answer
// slowly and at length: list asks at most listParallel of them at a time
// (each one's jcmds one after another), at most listPerUser of one user,
// and none after listBudget. Users take turns, so that one user's many
// JVMs do not use up the budget before another's first is asked.
const (
	listParallel = 4
	listPerUser  = 32
)

// listBudget bounds the whole of list's questions; tests shorten it.
var listBudget = 60 * time.Second

// describeAll fills in the rows' details with describe under the caps
// above; a row left out says why in its Attach field. It returns how many
// were left out.
func describeAll(ctx context.Context, rows []listed, describe func(context.Context, discover.JVM) discover.Details) int {
	ctx, cancel := context.WithTimeout(ctx, listBudget)
	defer cancel()
	// Each user's first JVM, then each one's second, and so on.
	rank := make([]int, len(rows))
	perUser := make(map[int]int)
	for i := range rows {
		perUser[rows[i].UID]++
		rank[i] = perUser[rows[i].UID]
	}
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return rank[order[a]] < rank[order[b]] })
	sem := make(chan struct{}, listParallel)
	skipped := 0
	var wg sync.WaitGroup
	for _, i := range order {
		r := &rows[i]
		if rank[i] > listPerUser {
			r.Attach = fmt.Sprintf("not asked: user %s has more than %d JVMs", r.User, listPerUser)
			skipped++
			continue
		}
		held := false
		select {
		case sem <- struct{}{}:
			held = true
		case <-ctx.Done():
		}
		if ctx.Err() != nil { // either may have been ready: the budget wins
			if held {
				<-sem
			}
			r.Attach = fmt.Sprintf("not asked: list's %v were up", listBudget)
			skipped++
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r.Details = describe(ctx, r.JVM)
		}()
	}
	wg.Wait()
	return skipped
}

// writeList writes the rows as a table. Every cell but the numbers comes
// from the JVM (its command line, its user's name, its VM name, its attach
// reply): each is escaped so that none reaches the terminal as a control
// sequence.
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
		row := []string{pid, r.User, vm, r.GC, heap, oops, r.Attach, agent, r.Main}
		for k := range row {
			row[k] = termsafe.String(row[k])
		}
		if err := t.Append(row); err != nil {
			return fmt.Errorf("render list: %w", err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("render list: %w", err)
	}
	return nil
}
