// Package tgdriver is the seam between the task-graph domain (package
// taskgraph) and the databases that store it. The domain keeps every rule:
// readiness, propagation, fencing decisions, lease time, history hashing and
// the public Store API. A driver keeps the SQL: it runs write transactions,
// answers the domain-level operations of Tx and Reads, and says when another
// process or replica changed the data. The drivers are tgsqlite (one
// embedded SQLite file, one writer goroutine, group commit) and tgpostgres
// (PostgreSQL through pgx/v5, many replicas on one database). The contract
// test in package drivertest calls every method of Driver, Tx and Reads
// directly, with one body run against every driver, so that the drivers
// mean the same by each.
//
// # Invariants every driver keeps
//
//   - Write runs fn in one transaction and returns nil only once that
//     transaction has committed durably; an error means none of fn's writes
//     are visible, ever, unless it matches ErrUnknownOutcome (the commit was
//     sent and its answer lost) or ErrFilesReplaced: then they may be
//     (MayHaveApplied). A driver may run fn more than once (a PostgreSQL
//     serialization failure or deadlock is retried); fn must therefore keep
//     no state across runs other than what it recomputes.
//   - Every guarded write (Tx.UpdateTask and the updates of Fetch and Apply
//     with a TaskGuard, the compare-and-set of a chain head by AppendEvents
//     and LinkJournaled, PruneWorkflow) puts its guard in the write's own
//     predicate, so it holds however many writers there are: zero rows is
//     the answer "the guard did not hold", never an error (Apply, whose
//     updates the caller decided on rows it locked, turns it into
//     ErrGuardFailed).
//   - An update means the same on every driver: Shape gives its SQL shape
//     and values, Opt's Null is NULL and Val is exactly its value.
//   - LockWorkflow serialises what must see a workflow whole or extend its
//     chain: creation, prune, operator interventions, the linking of
//     journaled events. Writers of tasks lock task rows only, several in one
//     order. LockAuditHead (the database-wide audit chain, advanced by
//     AppendAudit's compare and set) comes last, after any workflow and task
//     row.
//   - Fetch and Apply are each one round trip where the database is remote:
//     the hot path's batches cost two round trips and a commit however many
//     operations they hold.
//   - A driver with Info.JournalEvents keeps the journal (JournalEvents,
//     JournaledEvents, LinkJournaled) in the order events were journaled,
//     and its reads of a task's or a workflow's events show journaled ones
//     after the linked ones.
//   - "Workflow id order" and "task id order" are the ids' byte order (Go's
//     strings.Compare), whatever the database's collation: the domain sorts
//     ids itself to keep one lock order, and a database whose locale sorts
//     "a" before "B" must not lock or list in another (PostgreSQL: COLLATE
//     "C" on every ORDER BY of an id).
//   - ErrNoRows is returned, unwrapped or wrapped, for a lookup that found
//     nothing; errors of the database's environment match ErrUnavailable.
//   - Reads see committed state only.
//
// # Optional capabilities
//
// What every driver does is Driver, Tx and Reads. What only some drivers
// can do and the domain uses is an optional interface (caps.go): today
// SharedClock (replicas judge leases by the database's clock: PostgreSQL).
// A driver has a capability by implementing its interface, and the domain
// finds it in one place: taskgraph.OpenDriver asserts each interface once
// and keeps what it found. Info holds facts about the driver (its name,
// location, pool size, read-only mode, whether it journals events), never
// a capability; no code outside a driver branches on its name or concrete
// type, except the composition root (the CLI), which opened the driver and
// calls what only that database has (SQLite's Backup, Check, Checkpoint)
// on it. A new capability the domain needs is a new interface there,
// asserted in OpenDriver.
package tgdriver
