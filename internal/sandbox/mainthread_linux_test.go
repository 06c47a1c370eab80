package sandbox

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The thread a sandbox confines is never the main one: with the main thread (tid = pid) in
// an agent's Landlock domain, the agent could signal the worker. Which thread a goroutine
// locks is the runtime's choice, so this asks many times.
func TestOffMainThreadNeverRunsOnTheMainThread(t *testing.T) {
	pid := unix.Getpid()
	for i := range 3000 {
		tid := make(chan int, 1)
		offMainThread(func() { tid <- unix.Gettid() })
		if got := <-tid; got == pid {
			t.Fatalf("start %d ran on the main thread", i)
		}
	}
}
