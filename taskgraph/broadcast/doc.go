// Package broadcast holds Hint, a wake-up that any number of goroutines
// wait on and that its sender never blocks on: the store's signal that its
// committed state may have changed (taskgraph.Store.Changed).
//
// Invariants:
//   - Notify never blocks and never sends: it closes the one channel Wait
//     handed out since the last Notify, so every waiter of that round wakes
//     exactly once, and a waiter that calls Wait after Notify waits for the
//     next one.
//   - A wake-up is a hint, never a delivery: it carries no value, and
//     several Notify calls between two Waits are one wake-up.
//   - It imports nothing of this module (taskgraph/seam_test.go keeps it
//     so).
package broadcast
