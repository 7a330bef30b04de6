// Package waitq is the queue of parked claim-next calls of one process
// (Queue) and how wake-ups find them: a task made claimable (Ref: its
// workflow and stored requires) wakes one waiter that may claim it, the
// oldest first; a wake for a kind of waiter (Filter: workflow and
// capabilities) wakes waiters of exactly that kind.
//
// It is a leaf (rules and the standard library): package taskgraph parks
// its claim-next calls here (Store.Waiters is Len), wakes them after each
// commit and, after another process's write, counts the claimable tasks of
// each Filter to wake that many.
//
// Invariants: a waiter holds at most one wake (its channel has room for
// one, a full one is skipped); a waiter that may take a task is one
// waiting on any workflow or on the task's, whose capabilities include
// every tag the task requires (rules.SubsetOf); a waiter that leaves with
// a wake it did not use passes it on to the next that may use it; the
// queue never holds more than the maximum given to Init (Add returns nil).
package waitq
