// Package storetest is the behaviour suite of the task-graph store: every
// rule of the public taskgraph.Store API that does not depend on which
// database holds the graph, written once and run against every driver.
//
// A driver's tests call Run with a Harness that opens stores on fresh,
// empty databases. The suite uses only the public taskgraph API (Store
// methods, Options, NodeSpec, ClaimRequest, lease.Holder and the sentinel
// errors), and reaches the database itself only through Database: Exec and
// Query for portable SQL (tampering with the history, reading what a read
// through the store would change), Snapshot to show that an operation wrote
// nothing.
//
// # Invariants of the suite
//
//   - Every subtest opens its own fresh database: no subtest depends on
//     another or on the order they run in.
//   - Time is injected: every store runs on a lease.ManualClock that the
//     suite advances; no subtest sleeps to wait for a lease, and none asserts
//     on wall-clock durations. (Claim-next waits are real timers bounded by
//     ClaimRequest.Wait; the suite only uses them to park a call.)
//   - The SQL the suite runs through Database is valid on SQLite and
//     PostgreSQL alike, with ? placeholders, and names only the tables and
//     columns of the store's schema (workflows, tasks, edges, events,
//     pruned_workflows), which every driver keeps.
//   - Behaviour that belongs to one database (SQLite's pragmas, group commit,
//     VACUUM INTO backups, crashes of a child process, PostgreSQL's
//     LISTEN/NOTIFY) is tested in that driver's own package, not here.
package storetest
