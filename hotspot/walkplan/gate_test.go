package walkplan

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestWalkGateShares: walks through one gate take turns of about its
// slice, so that each progresses while the others wait, and one at a
// time; a walk whose context ends while it waits stops.
func TestWalkGateShares(t *testing.T) {
	g := NewGate(1, 5*time.Millisecond)
	const walks, steps = 3, 40
	var mu sync.Mutex
	inside, most := 0, 0
	progress := make([]int, walks)
	var wg sync.WaitGroup
	for i := range walks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			turn, ok := g.enter(context.Background())
			if !ok {
				t.Error("enter failed")
				return
			}
			defer turn.leave()
			for range steps {
				if !turn.pace(context.Background()) {
					t.Error("pace failed")
					return
				}
				mu.Lock()
				inside++
				most = max(most, inside)
				progress[i]++
				mu.Unlock()
				time.Sleep(time.Millisecond) // a batch
				mu.Lock()
				inside--
				mu.Unlock()
			}
		}()
	}
	// Half way through the work, every walk has had turns.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		total, least := 0, steps
		for _, p := range progress {
			total += p
			least = min(least, p)
		}
		mu.Unlock()
		if total >= walks*steps/2 {
			if least == 0 {
				t.Errorf("half the work done with a walk at 0 steps: %v", progress)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no progress: %v", progress)
		}
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	if most != 1 {
		t.Errorf("%d walks at once, want 1", most)
	}

	turn, _ := g.enter(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool)
	go func() {
		_, ok := g.enter(ctx)
		done <- ok
	}()
	cancel()
	if ok := <-done; ok {
		t.Error("a walk whose context ended entered a held gate")
	}
	turn.leave()
	if _, ok := g.enter(context.Background()); !ok {
		t.Error("the gate is not free after leave")
	}

	// A gate of two lets two in at once, and a third waits.
	g2 := NewGate(2, time.Hour)
	ctx3, cancel3 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel3()
	_, ok1 := g2.enter(context.Background())
	_, ok2 := g2.enter(context.Background())
	_, ok3 := g2.enter(ctx3)
	if !ok1 || !ok2 || ok3 {
		t.Errorf("gate of two: entered %v %v %v, want true true false", ok1, ok2, ok3)
	}
}
