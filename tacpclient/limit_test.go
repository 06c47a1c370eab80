package tacpclient

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// Tests of the per-session in-flight bound. No sleeps: holders hold until the test lets
// them go, and "a full key admits no one" is probed with contexts that are already done.

// cancelled is a context that is already done.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestLimiterHoldsEachKeyToItsBound(t *testing.T) {
	l := newLimiter(3)
	var releases []func()
	for range 3 {
		release, err := l.acquire(context.Background(), "s1")
		if err != nil {
			t.Fatal("a key has 3 slots:", err)
		}
		releases = append(releases, release)
	}
	// A done context races a free slot in acquire's select, so one probe could miss a
	// fourth slot half the time; 64 probes miss it with odds of 2^-64.
	for range 64 {
		if release, err := l.acquire(cancelled(), "s1"); err == nil {
			release()
			t.Fatal("a fourth holder got in while 3 hold the key")
		}
	}
	releases[0]()
	release, err := l.acquire(cancelled(), "s1")
	for i := 0; err != nil && i < 64; i++ { // a free slot: some probe takes it
		release, err = l.acquire(cancelled(), "s1")
	}
	if err != nil {
		t.Fatal("a released slot is free again:", err)
	}
	release()
	for _, r := range releases[1:] {
		r()
	}
	if len(l.sems) != 0 {
		t.Fatalf("%d keys left after every release", len(l.sems))
	}
}

func TestLimiterAdmitsWaitersAsSlotsFreeNeverMoreThanItsBound(t *testing.T) {
	l := newLimiter(3)
	var now atomic.Int32
	in := make(chan int32)      // a holder got in, with the count of holders it saw
	gate := make(chan struct{}) // lets one holder go
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
			in <- now.Add(1)
			<-gate
			now.Add(-1)
			release()
		}()
	}
	for i := range 50 {
		if i >= 3 {
			gate <- struct{}{} // one holder leaves: one waiter may come in
		}
		if n := <-in; n > 3 {
			t.Fatalf("%d holders at once, want at most 3", n)
		}
	}
	close(gate)
	wg.Wait()
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
	if _, err := l.acquire(cancelled(), "a"); err == nil {
		t.Fatal("a full key waits until the context ends")
	}
	release()
	if len(l.sems) != 0 {
		t.Fatalf("%d keys left", len(l.sems))
	}
}
