package agentwire

import (
	"testing"
	"time"
)

// TestOptionsString: the options in the order the agent's parser was
// written against, each left out when off.
func TestOptionsString(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Sock: "/s", Interval: 256, MinSize: 1024, Budget: 500}, "sock=/s,interval=256,minsize=1024,budget=500"},
		{Options{Sock: "/s", Interval: 256, MinSize: 1024, Reconcile: true, StackSignal: 23, NoJITCode: true, Census: 2,
			CensusBudget: 500 * time.Millisecond, Recensus: time.Second, Types: true},
			"sock=/s,interval=256,minsize=1024,budget=0,reconcile=1,stacks=23,code=2,census=2,census_budget=500000,recensus=1000,types=1"},
		{Options{Sock: "/s", StackSignal: -1, Census: 1, Recensus: time.Second}, "sock=/s,interval=0,minsize=0,budget=0,census=1,census_budget=0,recensus=1000"},
		{Options{Sock: "/s", Recensus: time.Second}, "sock=/s,interval=0,minsize=0,budget=0"},
	} {
		if got := c.o.String(); got != c.want {
			t.Errorf("%+v:\n got %s\nwant %s", c.o, got, c.want)
		}
	}
}
