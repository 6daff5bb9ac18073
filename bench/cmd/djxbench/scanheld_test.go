package main

import (
	"strings"
	"testing"

	"github.com/djx-bpf/djx-bpf/report"
)

// Held counts rows named by a holder chain, not rows named by their site.
func TestScanheld(t *testing.T) {
	r := &report.Report{PID: 7, JVM: "Temurin 25"}
	r.Stats.InHeap, r.Stats.Attributed = 200, 150
	r.Objects = []report.Object{
		{Type: "Node", Origin: report.OriginStructure, Holder: []string{"Svc.index (static)"}, Samples: 100},
		{Type: "long[]", Origin: report.OriginCensus, Samples: 30},
		{Type: "byte[]", Origin: "allocation", Site: "Svc.load:9", Samples: 20},
	}
	var b strings.Builder
	writeScanheld(&b, &report.Scan{JVMs: []*report.Report{r}})
	want := "pid 7 Temurin 25: in heap 200, held 50.0%, attributed 75.0%; top Node @  / Svc.index (static) (100)"
	if !strings.Contains(b.String(), want) {
		t.Errorf("got\n%s\nwant a line %q", b.String(), want)
	}
}
