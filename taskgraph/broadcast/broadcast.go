package broadcast

import "sync"

// Hint is a broadcast that never blocks its sender: each Notify closes the
// channel that Wait returned and starts a new one, so any number of
// waiters wake and none of them is ever sent to. The zero Hint is ready
// to use; a Hint must not be copied after first use.
type Hint struct {
	mu sync.Mutex
	ch chan struct{}
}

// Wait returns the channel the next Notify closes.
func (h *Hint) Wait() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ch == nil {
		h.ch = make(chan struct{})
	}
	return h.ch
}

// Notify wakes every waiter waiting on a channel from Wait. It does not
// block and allocates nothing when nobody waits.
func (h *Hint) Notify() {
	h.mu.Lock()
	if h.ch != nil {
		close(h.ch)
		h.ch = nil
	}
	h.mu.Unlock()
}
