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
// # Adding a driver
//
// A harness needs a fresh database per call of NewDatabase (the suite calls
// it once per subtest, about 65 times) and a way to open a store on it. With
// a database/sql driver, sqldb.DB does the rest; for PostgreSQL, something like:
//
//	func newPGDatabase(t testing.TB) storetest.Database {
//		url := freshSchema(t) // CREATE SCHEMA, dropped in t.Cleanup
//		db, _ := sql.Open("pgx", url)
//		t.Cleanup(func() { db.Close() })
//		return &pgDatabase{url: url, DB: sqldb.DB{DB: db,
//			Rebind:      sqldb.DollarPlaceholders,
//			TablesQuery: `SELECT tablename FROM pg_tables WHERE schemaname = current_schema()`}}
//	}
//	func (d *pgDatabase) Open(t testing.TB, opts taskgraph.Options) *taskgraph.Store {
//		// taskgraph.OpenDriver on d.url; Close in t.Cleanup
//	}
//
// The tables and columns the suite's SQL names are those of the SQLite
// schema (tgsqlite/migrations): workflows (workflow_id, task_count,
// event_count, head_hash), tasks (seq, task_id, workflow_id, node_id, state, created_by,
// unmet, cancel_cause, lease_expires_at_ms, token_hash), edges (dep_seq,
// task_seq), events (workflow_id, wseq, task_id, kind, owner, generation,
// at_ms, detail, prev_hash, hash, with its own key filled in by default on
// INSERT) and pruned_workflows (workflow_id, head_hash, task_count,
// event_count, pruned_at_ms), plus the audit trail's columns and tables of
// migration 0003: events (hash_version, actor_kind, actor_name,
// actor_principal, task_state, content), tasks (payload, result, error,
// owner, generation, attempts), audit_chain (seq, kind, workflow_id, at_ms,
// detail, prev_hash, hash) and audit_head (entry_count, head_hash). Times are
// integer milliseconds.
//
// # Invariants of the suite
//
//   - Every subtest opens its own fresh database: no subtest depends on
//     another or on the order they run in, so they run in parallel
//     (t.Parallel), at most Harness.Parallel at once when the harness sets
//     it. Nothing in the suite touches process-wide state.
//   - Time is injected: every store runs on a lease.ManualClock that the
//     suite advances; no subtest sleeps to wait for a lease, and none asserts
//     on wall-clock durations. (Claim-next waits are real timers bounded by
//     ClaimRequest.Wait; the suite uses them to park a call, and tells that
//     an event woke a parked call by its answering before its own wait ran
//     out.) Every wait for the store's progress goes through testwait: it
//     gives up only at the test binary's deadline.
//   - The SQL the suite runs through Database is valid on SQLite and
//     PostgreSQL alike, with ? placeholders, and names only the tables and
//     columns of the store's schema (workflows, tasks, edges, events,
//     pruned_workflows, audit_chain, audit_head), which every driver keeps.
//   - Behaviour that belongs to one database (SQLite's pragmas, group commit,
//     VACUUM INTO backups, crashes of a child process, PostgreSQL's
//     LISTEN/NOTIFY) is tested in that driver's own package, not here.
package storetest
