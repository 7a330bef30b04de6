// Package tgpostgres is the PostgreSQL driver of the task store
// (tgdriver.Driver on github.com/jackc/pgx/v5): many server processes
// (replicas) share one database, each with its own connection pool.
//
// # Invariants
//
//   - Open migrates the database inside one transaction under
//     pg_advisory_xact_lock, so replicas starting together migrate once and
//     the others find the work done. A database at a newer schema is refused
//     (schema.ErrTooNew), and so is one whose schema holds tables but no
//     schema_version table (schema.ErrForeign); neither is written to.
//   - Write runs its function in one READ COMMITTED transaction on a pooled
//     connection and commits. A serialization failure (40001), a deadlock
//     (40P01) or a unique violation (23505: two transactions creating the
//     same workflow or node at once) rolls back and runs the function again,
//     at most MaxWriteTries times with a small jittered backoff. Every
//     error of the environment maps to a tgdriver sentinel: no pooled
//     connection within AcquireTimeout is ErrBusy, 53100 is ErrDiskFull,
//     25006 (a standby, a read-only transaction) is ErrReadOnly, a failed or
//     dropped connection is ErrUnreachable, a lock not granted within the
//     session's lock_timeout (55P03) is ErrBusy. A COMMIT that fails other
//     than by the server's own ERROR (the connection lost once it was sent,
//     the server shutting down or crashing) is ErrUnknownOutcome: the
//     transaction may have committed, and is never run again.
//   - Every pooled session bounds how long a transaction of this replica
//     may hold locks while it stalls (idle_in_transaction_session_timeout)
//     and how long a statement waits for another's lock (lock_timeout), and
//     keeps TCP keepalives on both sides (Options; the README's replica
//     section gives the numbers).
//   - Locks are taken workflow row first, then task rows (LockWorkflow,
//     EnsureWorkflow and ChainHead take the workflow row FOR UPDATE;
//     LockDependency takes a task FOR SHARE), so writers of one workflow
//     serialise on its chain head and do not deadlock on one another. The
//     database-wide audit head (LockAuditHead, FOR UPDATE) is locked last,
//     after any workflow and task row: workflow creations and prunes
//     serialise on it. A deadlock that slips through anyway is retried.
//   - Every guard is in the write's own predicate: UpdateTask's UPDATE ...
//     WHERE seq = $1 AND <guard> RETURNING, AppendEvent's compare-and-set of
//     (head_hash, event_count) and AppendAudit's of the audit head (zero
//     rows is ErrChainMoved), PruneWorkflow's
//     DELETE ... WHERE <still finished and unchanged>.
//   - The password of the URL never appears in an error or a log line:
//     Info().Location is the URL without it, and error texts are scrubbed.
//   - Info().SharedClock is true: Hooks.BatchStart is never called, and
//     Hooks.OnBatch is called after every commit attempt with size 1.
//
// # Claim-next
//
// NextPending must lock a task and its workflow row, but the lock order is
// workflow first. Locking the workflow first would mean choosing it before
// knowing which task is first and free; taking the task first and then
// waiting for its workflow would invert the order and deadlock against a
// writer of that workflow that waits for the task. So, inside a SAVEPOINT,
// it takes the first claimable task by (priority DESC, seq) (see "Ready
// indexes"), FOR UPDATE SKIP LOCKED (tasks another
// claimer holds are skipped: concurrent claimers get different tasks and do
// not wait for each other), then its workflow row FOR UPDATE SKIP LOCKED,
// which never waits. When the workflow row is busy it rolls back to the
// savepoint (releasing the task) and looks again, skipping that workflow, a
// bounded number of times: a claimer is not held up by one busy workflow
// while another has a task ready, and a transaction that already holds a
// workflow lock does not wait for a second one while others are free. Only
// when every pending task it found belongs to a busy workflow does it wait,
// in lock order: it locks that workflow row (blocking) and then takes the
// workflow's first pending task FOR UPDATE SKIP LOCKED, or reports none.
//
// # Ready indexes
//
// The ready indexes hold only claimable tasks: pending with due_at_ms = 0
// (a task waiting for its retry delay or not_before is in tasks_due,
// until the domain promotes it under its workflow's lock; DueTasks is a
// plain SELECT like ExpiredLeases). A claim without capabilities reads
// tasks_ready_plain (requires = ”), so it costs the same however many
// routed tasks wait; a claim with capabilities reads tasks_ready_by_priority
// (every claimable task) in order and filters requires = ” OR
// string_to_array(requires, ' ') <@ capabilities in the scan: its cost is
// the claimable routed tasks it cannot take that rank ahead of the first it
// can. Within one workflow both use tasks_ready_by_workflow_priority. The
// plans (index scan, no sort) are pinned by TestClaimNextPlanIsIndexServed.
// NotifyReady's payload carries the task's requires after the workflow, so
// another replica wakes a waiter that can take the task.
//
// ExpiredLeases is a plain SELECT: the domain locks each workflow and
// expires its tasks with a guarded UpdateTask, so a sweeper on every replica
// at once expires each lease exactly once.
//
// # Notifications
//
// NotifyReady runs pg_notify('graph_engineering_ready', '<replica> <workflow>[ <requires>]')
// inside the transaction; PostgreSQL delivers it at commit. A listener
// goroutine holds a dedicated connection that LISTENs, and puts what other
// replicas sent (never this replica's own) on Changes, coalesced without
// blocking: while the reader is busy, changes merge (beyond
// maxPendingWorkflows entries into Unknown). A lost listener connection is
// re-established with backoff and then reported as Unknown, since
// notifications sent meanwhile were missed. A database that does not
// implement LISTEN gets a poll of PendingWorkflows every WatchInterval
// instead; the poll never runs where LISTEN works.
//
// # Lease time
//
// With several replicas, leases are judged by the database's clock. Clock()
// returns the local clock (by default the monotonic clock anchored to the
// wall clock at Open) plus an offset to clock_timestamp(), measured at the
// midpoint of a round trip at Open and every CalibrateInterval (of several
// samples the one with the smallest round trip). A replica whose own wall
// clock is off by seconds judges leases as the others do. Its readings
// never go backwards.
//
// # PostgreSQL-compatible engines
//
// The schema and statements avoid extensions, triggers, functions and jsonb.
// The driver relies on: identity columns, partial indexes, ON CONFLICT,
// FOR UPDATE / FOR SHARE / SKIP LOCKED, SAVEPOINT, RETURNING, pg_notify
// and LISTEN (optional: see Notifications), pg_advisory_xact_lock (an engine
// that accepts it as a no-op loses only the single-migrator guarantee; the
// migration is one transaction either way), information_schema.tables and
// clock_timestamp(). CockroachDB runs READ COMMITTED only when enabled and
// may report 40001 more often; those are retried.
//
// pgx prepares and caches each statement per connection (UpdateTask has one
// text per shape of update, so the cache stays small). Behind a pooler in
// transaction mode (PgBouncer) add default_query_exec_mode=exec to the URL;
// LISTEN needs a session, so point the driver at the server or a
// session-mode pool.
//
// # Backups
//
// Backup refuses with ErrBackupUnsupported: use pg_dump.
package tgpostgres
