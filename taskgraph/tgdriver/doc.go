// Package tgdriver is the seam between the task-graph domain (package
// taskgraph) and the databases that store it. The domain keeps every rule:
// readiness, propagation, fencing decisions, lease time, history hashing and
// the public Store API. A driver keeps the SQL: it runs write transactions,
// answers the domain-level operations of Tx and Reads, and says when another
// process or replica changed the data. The drivers are tgsqlite (one
// embedded SQLite file, one writer goroutine, group commit) and tgpostgres
// (PostgreSQL through pgx/v5, many replicas on one database).
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
//   - Every guarded write (Tx.UpdateTask with a TaskGuard, AppendEvent's
//     compare-and-set of the chain head, PruneWorkflow) puts its guard in the
//     write's own predicate, so it holds however many writers there are: zero
//     rows is the answer "the guard did not hold", never an error.
//   - LockWorkflow serialises writers of one workflow (its chain head is a
//     total order). Every operation that writes tasks of a workflow calls it
//     before it writes them, so locks are always taken workflow first, then
//     tasks, and concurrent transactions cannot deadlock on one another.
//     LockAuditHead (the database-wide audit chain, advanced by AppendAudit's
//     compare and set) comes last, after any workflow and task row.
//   - ErrNoRows is returned, unwrapped or wrapped, for a lookup that found
//     nothing; errors of the database's environment match ErrUnavailable.
//   - Reads see committed state only.
package tgdriver
