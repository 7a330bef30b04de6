// Package tgsqlite is the SQLite driver of the task graph: it implements
// tgdriver.Driver, tgdriver.Tx and tgdriver.Reads on one WAL-mode SQLite
// file through mattn/go-sqlite3.
//
// # Invariants
//
//   - One writer goroutine owns the only write connection. Every Write is one
//     operation of a group-committed batch: the writer takes the first
//     waiting operation and every other one already waiting (up to
//     Options.MaxBatch), runs them in one BEGIN IMMEDIATE transaction, each
//     in its own savepoint (a batch of one uses the transaction itself), and
//     commits once. Write returns only after that commit; a failed commit
//     fails every operation of the batch. Because the writer serialises
//     everything, LockWorkflow only checks existence.
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
//     tgdriver.ErrBusy, ErrDiskFull, ErrReadOnly and ErrFilesReplaced.
//   - Reads outside a transaction use a separate pool of query-only
//     connections; Snapshot runs on one read transaction of that pool.
//   - A driver opened with OpenReadOnly uses connections opened with
//     SQLITE_OPEN_READONLY, starts no writer and no watcher, and every Write
//     fails with tgdriver.ErrReadOnlyStore.
//   - Every guarded write keeps its guard in the statement's own predicate
//     (UpdateTask's TaskGuard, AppendEvent's compare-and-set of the chain
//     head, PruneWorkflow's finished-and-old test in the DELETE).
package tgsqlite
