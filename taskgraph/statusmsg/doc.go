// Package statusmsg holds the texts of a task's status message
// (taskgraph.Task.StatusMessage) and of a claim's conflict detail, as the
// store writes them.
//
// Invariants:
//   - Pure functions of their arguments: no clock is read (times come in,
//     rendered in UTC, RFC 3339 with nanoseconds), nothing is stored.
//   - The texts are read by people and by tests, never parsed by the
//     store: a task's state and times live in their own fields.
//   - It imports only taskview of this module, never package taskgraph or
//     a driver (taskgraph/seam_test.go keeps it so).
package statusmsg
