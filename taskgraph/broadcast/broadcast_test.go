package broadcast

import (
	"sync"
	"testing"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A Notify closes the channel of its round for every waiter, and a Wait
// after it gets a new, open channel.
func TestHintWakesEveryWaiterOfItsRound(t *testing.T) {
	t.Parallel()
	var h Hint
	h.Notify() // nobody waits: must not block
	a, b := h.Wait(), h.Wait()
	if a != b {
		t.Fatal("two Waits of one round returned different channels")
	}
	if closed(a) {
		t.Fatal("the channel is closed before any Notify")
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { <-a })
	}
	h.Notify()
	wg.Wait()
	if !closed(b) {
		t.Fatal("Notify did not close the round's channel")
	}
	next := h.Wait()
	if next == a || closed(next) {
		t.Fatal("a Wait after Notify did not start a new, open round")
	}
	h.Notify()
	h.Notify() // two Notifys, one wake-up: the second finds nobody
	if !closed(next) {
		t.Fatal("Notify did not close the second round's channel")
	}
}
