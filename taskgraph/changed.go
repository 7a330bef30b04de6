package taskgraph

import "github.com/graph-engineering/graph-engineering-mcp/taskgraph/broadcast"

// changeSignal tells watchers that the store's committed state may have
// changed: a write of this store committed, or its driver reported another
// process's or replica's commit (tgdriver.Driver.Changes). It is a
// broadcast.Hint: it never blocks the writer, and any number of watchers
// wake.
type changeSignal struct{ broadcast.Hint }

// wait returns the channel the next signal closes.
func (c *changeSignal) wait() <-chan struct{} { return c.Wait() }

// signal wakes every watcher waiting on a channel from wait.
func (c *changeSignal) signal() { c.Notify() }

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
