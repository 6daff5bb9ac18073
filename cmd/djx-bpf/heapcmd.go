package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/djx-bpf/djx-bpf/hotspot/heap"
	"github.com/djx-bpf/djx-bpf/report"
	"github.com/djx-bpf/djx-bpf/safety/termsafe"
	"github.com/djx-bpf/djx-bpf/target/attach"
	"github.com/djx-bpf/djx-bpf/target/discover"
)

// cmdHeap prints a JVM's heap geometry: where the heap is reserved, its
// regions, and how compressed references decode to addresses.
func cmdHeap(args []string) int {
	fs := flag.NewFlagSet("heap", flag.ContinueOnError)
	pid := fs.Int("pid", 0, "`PID` of the JVM")
	format := fs.String("format", "table", "output format: table or json")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage:\n  djx-bpf heap --pid PID\n\nPrints the heap geometry of a HotSpot or OpenJ9 JVM.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *pid <= 0 {
		fmt.Fprintln(os.Stderr, "djx-bpf heap: give --pid PID of a JVM (djx-bpf list shows them)")
		return 2
	}
	if *format != "table" && *format != "json" {
		eprintf(os.Stderr, "djx-bpf heap: unknown --format %q: use table or json\n", *format)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	geo, err := geometryOf(ctx, *pid)
	if err != nil {
		eprintf(os.Stderr, "djx-bpf heap: %v\n", err)
		return 1
	}
	if *format == "json" {
		err := jsonSafe(os.Stdout, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(geo)
		})
		if err != nil {
			eprintf(os.Stderr, "djx-bpf heap: %v\n", err)
			return 1
		}
		return 0
	}
	writeGeometry(os.Stdout, *pid, &geo)
	return 0
}

// geometryOf reads the geometry of pid: VM.info through HotSpot's attach
// listener, or a javacore through OpenJ9's attach protocol.
func geometryOf(ctx context.Context, pid int) (heap.Geometry, error) {
	j, ok := discover.Inspect(pid)
	if !ok {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return heap.Geometry{}, fmt.Errorf("pid %d: %w", pid, attach.ErrNoProcess)
		}
		return heap.Geometry{}, fmt.Errorf("pid %d: %w", pid, attach.ErrNotJVM)
	}
	if j.Kind == discover.OpenJ9 {
		geo, _, err := discover.OpenJ9Geometry(ctx, j)
		return geo, err
	}
	t, err := attach.Inspect(pid)
	if err != nil {
		return heap.Geometry{}, err
	}
	info, err := t.Jcmd(ctx, "VM.info")
	if err != nil {
		return heap.Geometry{}, err
	}
	geo, err := heap.ParseVMInfo(info)
	if err != nil {
		return heap.Geometry{}, fmt.Errorf("pid %d: VM.info: %w", pid, err)
	}
	return geo, nil
}

// writeGeometry prints g; the VM's version and the regions' names are
// the target's text, escaped (termsafe) like the rest of the lines.
func writeGeometry(w io.Writer, pid int, g *heap.Geometry) {
	w = termsafe.NewWriter(w)
	fmt.Fprintf(w, "pid %d: %s\n", pid, termsafe.String(g.String()))
	if g.Version != "" {
		fmt.Fprintf(w, "  VM: %s\n", termsafe.String(g.Version))
	}
	if g.Reserved.End > g.Reserved.Start {
		fmt.Fprintf(w, "  reserved: [%#x, %#x) %s\n", g.Reserved.Start, g.Reserved.End, report.Bytes(g.Reserved.End-g.Reserved.Start))
	}
	if g.Mode.Compressed() {
		fmt.Fprintf(w, "  compressed references: %s, base %#x, shift %d: address = base + (ref << %d), up to %#x\n",
			g.Mode, g.Base, g.Shift, g.Shift, g.DecodeLimit())
	}
	if g.HasKlass {
		fmt.Fprintf(w, "  compressed class pointers: base %#x, shift %d\n", g.KlassBase, g.KlassShift)
	}
	for _, r := range g.Regions {
		fmt.Fprintf(w, "  region %-28s [%#x, %#x) %s\n", termsafe.String(r.Name), r.Start, r.End, report.Bytes(r.End-r.Start))
	}
}
