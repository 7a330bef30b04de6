package taskgraph

import (
	"errors"
	"testing"
	"time"
)

// Regression: Close held the submit mutex while it waited for the background
// loops, so a loop that submitted a write after Close began (the sweeper
// expiring a lapsed lease at shutdown) blocked on that mutex and Close waited
// for it forever. A write submitted during Close must get ErrClosed instead.
func TestCloseDoesNotDeadlockWithBackgroundWrite(t *testing.T) {
	b := setup(t)
	got := make(chan error, 1)
	// Stand in for the sweeper: a background loop tracked by the store's
	// WaitGroup that submits a write once shutdown has begun.
	b.s.wg.Add(1)
	go func() {
		defer b.s.wg.Done()
		<-b.s.quit
		got <- b.s.do(b.ctx, func(*wtx) error { return nil })
	}()
	closed := make(chan error, 1)
	go func() { closed <- b.s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close deadlocked with a background loop that submitted a write")
	}
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Fatalf("write submitted during Close: %v, want ErrClosed", err)
	}
}
