// Package tgsqlite is the SQLite driver of the task graph: it implements
// tgdriver.Driver, tgdriver.Tx and tgdriver.Reads on one WAL-mode SQLite
// file through mattn/go-sqlite3.
//
// # Invariants
//
//   - The driver owns its schema: migrations/*.sql, embedded, applied by
//     package schema's runner in this driver's dialect (Schema, migrate.go)
//     inside one BEGIN IMMEDIATE transaction at Open; OpenReadOnly and
//     Checkpoint only inspect it. Backup, Check and Checkpoint are this
//     driver's own, called by the CLI on the driver it opened: the domain
//     (package taskgraph) never sees them.
//   - One writer goroutine owns the only write connection. Every Write is one
//     operation of a group-committed batch: the writer takes the first
//     waiting operation and every other one already waiting (up to
//     Options.MaxBatch), runs them in one BEGIN IMMEDIATE transaction, each
//     in its own savepoint (a batch of one uses the transaction itself), and
//     commits once. Write returns only after that commit; a failed commit
//     fails every operation of the batch. Because the writer serialises
//     everything, LockWorkflow only checks existence, Fetch's locks are
//     reads, and events are linked as they are recorded: Apply reads each
//     workflow's chain head and links the batch's events onto it with the
//     domain's Apply.Link (the journal of
//     tgdriver.Info.JournalEvents is kept for the drivers' common contract
//     but the store does not use it on SQLite).
//   - Hooks.BatchStart runs once per batch inside the transaction before any
//     operation; its after function runs only after the batch committed.
//   - The statements of an operation run on the writer's connection through
//     statements prepared once (stmtCache) and ignore the caller's context:
//     an operation the writer reached runs to its end. An operation whose
//     context ended before the writer reached it is skipped with ctx.Err().
//   - Before BEGIN, after COMMIT and on every watcher tick the device and
//     inode of the database file, its -wal and its -shm are compared with
//     those recorded at Open (fileGuard). Once one differs every later write
//     fails with tgdriver.ErrFilesReplaced, a commit made meanwhile is not
//     acknowledged, and Close runs no checkpoint.
//   - SQLite errors of the environment are classified into
//     tgdriver.ErrBusy, ErrDiskFull, ErrReadOnly and ErrFilesReplaced. A
//     COMMIT that fails once its commit frame may have been written (an
//     I/O error syncing the WAL or updating its index) is
//     tgdriver.ErrUnknownOutcome for every operation of the batch.
//   - Open waits for another process's lock up to Options.BusyTimeout, also
//     where SQLite answers SQLITE_BUSY at once instead of waiting (several
//     servers turning a new file to WAL mode or migrating it together): it
//     repeats its all-or-nothing steps until then. ErrBusy from Open means
//     the timeout really passed.
//   - ListTasks with NoBodies selects constants in place of payload and
//     result, so a view of a workflow never copies them out of the rows.
//   - Reads outside a transaction use a separate pool of query-only
//     connections; Snapshot runs on one read transaction of that pool.
//   - A driver opened with OpenReadOnly uses connections opened with
//     SQLITE_OPEN_READONLY, starts no writer and no watcher, and every Write
//     fails with tgdriver.ErrReadOnlyStore.
//   - Every guarded write keeps its guard in the statement's own predicate
//     (the TaskGuard of every update, the compare-and-set of the chain head
//     by AppendEvents, PruneWorkflow's finished-and-old test in the DELETE).
//
// # Claim-next
//
// The ready indexes hold only claimable tasks: pending with due_at_ms = 0
// (a task waiting for its retry delay or not_before is in tasks_due
// instead, until the domain promotes it), not parked behind a full
// concurrency key (key_parked = 0: migration 0018 says how its triggers
// keep it; their statements' plans are pinned by TestKeyParkingPlans). Every claim-next statement names
// its index with INDEXED BY, so a schema change that drops one fails to
// prepare rather than silently scanning, and reads it in (priority DESC,
// seq) order without a sort (pinned by TestClaimAndLeaseQueries):
//
//   - without capabilities: the first entry of tasks_ready_plain (claimable
//     tasks with requires = ”), O(1) however many routed tasks wait;
//   - with capabilities: tasks_ready_by_priority (every claimable task),
//     scanned in order until the first task that requires nothing or whose
//     requires (tags joined by one space, turned into a JSON array) are all
//     in the capabilities (bound as a JSON array, tested with json_each).
//     The cost is the number of claimable routed tasks this claim cannot
//     take that rank ahead of the first it can;
//   - within one workflow: tasks_ready_by_workflow_priority, filtered the
//     same way (without capabilities, requires = ”), bounded by the
//     workflow's tasks.
//
// CountClaimable runs the same scans, counting up to a limit.
//
// # The writer's time per cycle (issue 23)
//
// The writer is single-threaded, so its time per claim+complete cycle
// (CPU, then the commit's fsync) bounds throughput. Measured with
// `bench --mode store --sync full` (N=20,000, W=8, combined loop), the
// statement counts from a counter on stmtCache, the plans with EXPLAIN
// QUERY PLAN on the bench's database:
//
//   - Per cycle: the completion's UPDATE ... RETURNING (by task_id, through
//     the unique index), the claim's UPDATE ... RETURNING (by seq, the
//     rowid) and two event INSERTs; per commit: BEGIN, one claim scan
//     (tasks_ready_plain, no sort), the workflow's chain head read and its
//     compare-and-set, COMMIT. 4 + 5/7.6 = 4.7 statements a cycle. Nothing
//     is read back after a write (RETURNING), every statement is prepared
//     once.
//   - Commits: the hot lane runs one batch at a time here and waited after
//     a batch only until as many operations queued as it had answered;
//     those left out of a batch are queued by then, so batches settled
//     into two alternating halves of the workers: 3,650-4,050 commits for
//     20,000 cycles (5.3 cycles a commit, of 8 possible). It now waits for
//     the answered ones on top of those queued (same bound): 2,610-2,670
//     commits (7.6 cycles a commit).
//   - Checkpoints: the checkpointer ran every 20 ms once the -wal file had
//     passed 4 MiB (the file never shrinks): about 430 a run, each syncing
//     the WAL and the database file and copying the hot pages again. At
//     100 ms: 135-190 a run; bytes the process wrote 451-457 MB -> 413-423
//     MB (/proc/self/io, seeding included). The WAL takes about 5 frames a
//     cycle, 38 a commit.
//   - Before/after, alternated A B A B A B on the shared machine at load
//     13-15 (so the rates are not the quiet machine's): cycles/s 912, 1,072,
//     887 -> 1,261, 1,291, 935; whole-process CPU per cycle 380, 312, 402
//     -> 268, 276, 345 us; allocations 256 -> 250 a cycle. Three more pairs
//     at load 24-26: 545, 847, 1,071 -> 970, 1,338, 974 cycles/s; 417, 455,
//     363 -> 420, 291, 373 us (too loaded to settle the CPU). In the CPU
//     profile the writer is 85% of the process: the batch's domain work
//     (hotTx) 54%, of which the task UPDATEs 26%, the event INSERTs 7%, the
//     claim scan 7%; BEGIN/COMMIT 27%; the file checks 3%.
//   - Tried and not kept: opening the write connections with _mutex=no
//     (SQLite's multi-thread mode): the pthread mutex samples fell only from
//     4.5% to 3.8% of the process, most being SQLite's global memory and
//     page-cache mutexes.
//   - The largest cost left is events_by_task (task_id, event_id).
//     Dropping the index in an experiment cut the bytes written from 411
//     to 255 MB, CPU per cycle from 285 to 239 us and raised throughput 22%
//     (two pairs, load 13). Why so much is not settled: task ids are ULIDs,
//     48 bits of creation time then 80 random (unguessable on purpose), so
//     tasks made in the same millisecond land on random leaves of the
//     index, but tasks claimed together were mostly made close in time.
//     Keying it by the task's seq would make the inserts strictly local; a
//     migration on both drivers, to be measured before it is taken.
package tgsqlite
