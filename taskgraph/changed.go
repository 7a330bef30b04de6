package taskgraph

import "sync"

// changeSignal tells watchers that the store's committed state may have
// changed: a write of this store committed, or its driver reported another
// process's or replica's commit (tgdriver.Driver.Changes). It is a
// broadcast that never blocks the writer: each signal closes the channel
// that Changed returned and starts a new one, so any number of watchers
// wake and none of them is ever sent to.
type changeSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns the channel the next signal closes.
func (c *changeSignal) wait() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// signal wakes every watcher waiting on a channel from wait. It does not
// block and allocates nothing when nobody waits.
func (c *changeSignal) signal() {
	c.mu.Lock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
	c.mu.Unlock()
}

// Changed returns a channel that is closed once the store's committed state
// may have changed after the call: a write of this store committed, or the
// driver reported a commit of another process or replica (a task made
// claimable there, or an unknown change such as SQLite's data_version).
// Another replica's commits that make nothing claimable are not reported
// by every driver (PostgreSQL's notifications name only tasks made ready),
// so a watcher that must see every change also reads again on a timer of
// its own. Closing is a hint, never a delivery: the watcher reads the state
// it cares about after it is closed, and calls Changed again first.
func (s *Store) Changed() <-chan struct{} { return s.changes.wait() }
