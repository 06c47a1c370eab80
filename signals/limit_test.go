package signals

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestLimiterHoldsEachKeyToItsBound(t *testing.T) {
	l := newLimiter(3)
	var now, peak atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := l.acquire(context.Background(), "s1")
			if err != nil {
				t.Error(err)
				return
			}
			n := now.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(time.Millisecond)
			now.Add(-1)
			release()
		}()
	}
	wg.Wait()
	if p := peak.Load(); p != 3 {
		t.Fatalf("peak %d in flight, want 3", p)
	}
	if len(l.sems) != 0 {
		t.Fatalf("%d keys left after every release", len(l.sems))
	}
}

func TestLimiterKeysAreIndependentAndWaitsEndWithTheContext(t *testing.T) {
	l := newLimiter(1)
	release, err := l.acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	other, err := l.acquire(context.Background(), "b")
	if err != nil {
		t.Fatal("another key has its own slots:", err)
	}
	other()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := l.acquire(ctx, "a"); err == nil {
		t.Fatal("a full key waits until the context ends")
	}
	release()
	if len(l.sems) != 0 {
		t.Fatalf("%d keys left", len(l.sems))
	}
}
