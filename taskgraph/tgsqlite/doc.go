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
//   - Prepared once means compiled once: a statement binds no bare
//     parameter whose value SQLite's planner reads. A LIMIT is written
//     LIMIT CAST(? AS INTEGER), and a value compared with a column that a
//     partial index's predicate or a join's plan could use (a workflow, a
//     state, a concurrency key, a principal, a seq in edges, a cancel
//     cause) CAST(? AS TEXT) or CAST(? AS INTEGER). SQLite plans with the
//     bound value of a bare LIMIT ? or of such a comparison, so it marks
//     the statement to be compiled again whenever that parameter is bound:
//     at every execution. The casts give the plan SQLite makes without the
//     values, the one the plan tests pin (TestClaimAndLeaseQueries).
//     TestWriterCompilesEachStatementOnce runs the writer's operations
//     twice with other values and counts the compiles of the second run
//     (the connection's authorizer, which SQLite calls only while
//     compiling): none. A new statement with parameters belongs in it: a
//     lookup by rowid or unique key did not recompile, a scan or a join of
//     tasks did.
//   - The read pool keeps its statements prepared too (readStmts: one
//     database/sql Stmt per text, compiled once on each connection it runs
//     on; TestReadsCompileEachStatementOnce). A read in a snapshot never
//     prepares, since preparing takes a pool connection and the snapshot
//     already holds one (with every connection held by snapshots it would
//     wait for ever): it runs a kept statement or its text, and the next
//     snapshot prepares that text before it takes its connection. A
//     TaskByID and a ListTasks of 20 tasks together took 145-151 us before,
//     104-108 us with it (a benchmark not kept, three runs each).
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
// instead, until the domain promotes it), not parked behind a closed
// concurrency key, full or held back by its rate (key_parked = 0:
// migrations 0018 and 0025 say how their triggers keep it; their
// statements' plans are pinned by TestKeyParkingPlans). Every claim-next statement names
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
//     the unique index), the claim's UPDATE (by seq, the rowid; Apply
//     reads nothing back since 2026-12-05: bench --tasks 20000
//     --workers 8 --sync full, three alternated pairs at load 2.1-2.5,
//     5,496 -> 5,875, 5,514 -> 5,842 and 5,756 -> 6,429 cycles/s, the
//     process's CPU 140-144 -> 127-133 us and its allocations 239 -> 199
//     a cycle) and two event INSERTs; per commit: BEGIN, one claim scan
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
//     page-cache mutexes. (go-sqlite3 also closes a leaked statement from
//     a finalizer, on another thread, which multi-thread mode would leave
//     unguarded.)
//   - SQLite's memory statistics are off (memstatus.go: sqlite3_config(
//     SQLITE_CONFIG_MEMSTATUS, 0) as the package initializes, before
//     SQLite's first use; go-sqlite3 compiles SQLite with them on). With
//     them on, every sqlite3_malloc and sqlite3_free takes a global mutex
//     to count: perf record of bench --tasks 20000 --workers 8 --sync full
//     (2026-12-06) put pthread_mutex_lock and unlock at 9.2% of the
//     process's samples, 4.9% after, the rest being the connection's own
//     mutex (taken by every column accessor). Nothing reads the
//     statistics: they feed sqlite3_memory_used and the soft heap limit,
//     which the driver does not set (TestMemoryStatisticsOff). Alternated
//     pairs of that bench (load 0.3-1.3): N=20000, six pairs with the old
//     binary first, 0.92, 1.06, 1.03, 1.26, 0.85 and 1.04 times its
//     cycles a second; N=40000, five pairs with the new first, 1.10, 1.32,
//     1.14, 1.04 and 1.11 (the process's CPU 117-128 against 132-169 us a
//     cycle); with the same setting compiled in (CGO_CFLAGS
//     -DSQLITE_DEFAULT_MEMSTATUS=0), seven pairs, median 1.06.
//   - A task's events were indexed by events_by_task (task_id, event_id).
//     Task ids are ULIDs (48 bits of creation time, then 80 random, so
//     unguessable on purpose), and the tasks of one CreateTasks call share
//     their millisecond: in the bench's database each workflow's 1,000
//     tasks had one time prefix, so within it their entries were in random
//     order. The events of the tasks claimed and completed together
//     (consecutive seqs) went onto as many random leaves, each a page the
//     commit writes to the WAL and a checkpoint copies again, and random
//     splits left the index at 631 pages for 60,000 events. Migration 0020
//     keys it by the task's seq instead (events.task_seq,
//     events_by_task_seq): the same entries go onto the last leaves, 221
//     pages. The event's INSERT takes the seq from tasks' unique index on
//     task_id (about 0.5 us an event, timed in the sqlite3 shell); the
//     readers (TaskEvents, LastEventOfGeneration) search by the task's
//     seq, or by 0 for an id without a task row, and their plans are
//     pinned by TestTaskEventsBySeq. Bytes written over the measured phase
//     (bench --json write_bytes_per_cycle), main then this, alternated
//     in five pairs at load 25-33: 18.2-19.2 -> 12.6-13.3 KiB a cycle
//     (-30%; 4.6 -> 3.2 pages of 4 KiB, WAL frames and checkpoint copies
//     together); the whole process, seeding included, 20.0-21.9 ->
//     14.2-15.2 KiB in eleven pairs at load 10-33. CPU per cycle at that
//     load did not settle (main/this: 319/360, 323/249, 313/279, 518/379,
//     350/342, 370/318, 332/361, 316/402, 327/383, 471/280, 295/306 us;
//     it rises when batches shrink under load): measure it again on a
//     quiet machine.
//   - In the CPU profile after that (load 20) the writer is 82% of the
//     process and 63% of the process is inside SQLite (cgo): the task
//     UPDATEs 22%, the claim scan and the completion's UPDATE in Fetch
//     28%, the event INSERTs 8%, the background checkpointer 6%, the file
//     checks (three stats before BEGIN and after COMMIT) 5%; Go's own
//     allocation 7%. What is left to cut is mostly SQLite's work per row
//     and bytes per event: an event is about 520 bytes (hashes as hex, the
//     task state and the content digests repeat the result's digest).
//   - "Every statement is prepared once" above was not so: the claim scan
//     bound its LIMIT as a bare parameter, and SQLite compiled it again at
//     every Fetch (sqlite3Reprepare, the parser and the planner: 8.9% of
//     the process's perf samples over the measured phase of bench --tasks
//     40000 --workers 8; perf record --call-graph dwarf, since the Go
//     profile ends at the cgo call). With the casts (see the invariants)
//     bench --tasks 20000 --workers 8, old and new alternated in six pairs
//     at load 0.6-1.6, ran 1.02-1.47x the cycles a second (median 1.14) at
//     133-150 us of process CPU a cycle against 154-159. ../peerbench
//     (5 rounds, N=20000, W=8, FULL, River W=100 fetch 1ms/1s, load
//     1.2-1.5): 2.88x the naive loop and 2.46x River, where the same
//     harness gave 2.12x and 1.46x on the old binary an hour before (3
//     rounds, load 0.3-1.2). After it the commit is a fifth of the
//     process's samples: SQLite writes each WAL frame as two pwrite calls
//     (its 24-byte header, then the page), some 20 frames a commit, and
//     syncs the WAL once.
package tgsqlite
