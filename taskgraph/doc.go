// Package taskgraph is the durable task-graph store: workflows are DAGs of
// tasks, claimed by workers under exclusive, fenced leases (package lease),
// with every transition recorded in a hash-chained history. The domain
// lives here; the database is a driver beneath the seam of package tgdriver:
// tgsqlite (one embedded SQLite file in WAL mode, the default) or tgpostgres
// (PostgreSQL, many stateless replicas on one database). The caller opens a
// driver and hands it to OpenDriver (sqlitestore.Open does both for a SQLite
// file). The behaviour suite in package storetest runs unchanged against both.
//
// # The seam
//
// This package imports no driver (go list -deps names neither tgsqlite nor
// tgpostgres; a test in seam_test.go keeps it so) and holds no SQL. It
// knows a driver only through tgdriver: its facts (tgdriver.Info) and its
// optional capabilities (tgdriver's caps.go, today SharedClock and
// ReplicaCounter), asserted once, in OpenDriver, and never by name or
// concrete type elsewhere. What only one database has and the domain never
// uses (SQLite's backup, integrity check, checkpoint, read-only file
// opening, sync mode) belongs to that driver and is called there by the
// composition root (the CLI).
//
// # Readiness
//
// A task is blocked while any dependency has not completed, and pending
// (claimable) once all have. Claim-next takes the pending task of highest
// priority (NodeSpec.Priority, -100..100, default 0), the oldest first within
// a priority, read from the first entry of a partial index ordered so on both
// drivers (the query plans are pinned by the drivers' tests).
//
// # Routing and retry timing
//
// A task may require capabilities (NodeSpec.Requires: at most MaxRequires tags
// of TagPattern, stored sorted and deduplicated); claim-next gives it only to
// a claim whose Capabilities include every tag (a claim without capabilities
// takes only tasks that require nothing), and a claim by id of it by a caller
// lacking some fails with *MissingCapabilitiesError before anything is
// written. A pending task may not be due yet (a retryable failure's backoff:
// NodeSpec.RetryDelay doubled per retry up to MaxRetryDelay, or
// FailRetryAfter's delay; NodeSpec.NotBefore): it is pending with DueAt set
// and a status message "waiting until …", outside the ready indexes, skipped
// by claim-next and refused to a claim by id. It becomes claimable by
// promotion (due_at_ms := 0, guarded in the update by the state and the due
// time, under its workflow's lock) by claim-next at its arrival, by a claim by
// id in passing, and by the sweeper, whose timer wakes at the earliest lease
// expiry or due time (or when a write sets a new due time); a promotion wakes
// a parked claim that can take the task, here and on other replicas. Releases,
// first expiries, Requeue and revivals are claimable at once.
//
// # Poison tasks
//
// Each expiry counts a lease loss on the task (TaskRow.LeaseLosses). The
// first loss reclaims at once (usually a worker died); from the second on
// the task waits its retry backoff (leaseLossDelay) before it is claimable
// again, and at Options.MaxLeaseLosses (default 3) a task that still has
// attempts left fails as a poison task, with that cause, cascading as a
// failure does, instead of taking worker after worker. Requeue resets the
// count. The count is written by the expiry's own guarded update.
//
// Each task keeps a count of unmet dependencies;
// completing a task decrements its dependents' counts and makes ready those
// that reach zero, in the same transaction, at O(out-degree) cost. A task
// created after all its dependencies completed starts pending.
//
// # Propagation
//
// A task that fails terminally (including a lease that lapses on its last
// attempt) or is cancelled cancels every unfinished transitive dependent, with
// a status message naming the upstream task, so nothing waits forever on a
// dependency that can no longer complete. A task created on a dependency that
// already failed or was cancelled starts cancelled. Only the operator
// operations Requeue and Skip change a terminal task; they revive the
// dependents that the task's failure cancelled. RequeueFailed is Requeue of
// every failed task of a workflow, under the same rules, in transactions of
// at most RequeueFailedBatch tasks; its dry run runs each batch and rolls it
// back, writing nothing.
//
// CreateWorkflow creates many nodes of one workflow in one transaction, all
// or nothing: a cycle (named by a node on it and its path), an unknown
// dependency or a node that exists with different content refuses the whole
// call with no task, event, workflow or audit entry written. The order of
// a create's nodes and the cycle's path are package dag's.
//
// # Claims
//
// Claiming grants a lease (generation + 1, attempts + 1, a fresh secret token
// returned only to the claimant). Heartbeat, Complete, Fail and Cancel are
// accepted only from the live claim: the write is one conditional update whose
// predicate carries the task, owner, generation, token digest and a lease live
// at the request's arrival (fencing as data), so it holds with any number of
// writers; zero rows means the claim is not held, and a read in the same
// transaction (lease.Check, the last event) explains why. Both judge the lease
// at the server time the request arrived (the store call, or WithArrival),
// never at commit time: time queued inside the server behind the writer or
// another process's write lock never costs a lease. Claims, sweeps and reads
// likewise expire only leases that had lapsed when they arrived, so one queued
// ahead of a holder write cannot expire the lease that write renews. An
// expired lease goes back to pending (or to failed on the last attempt) no
// later than the next claim scan, read of the task, or sweep.
//
// # Pausing
//
// An operator pauses claiming in a workflow or on the whole database
// (PauseClaims) and resumes it (ResumeClaims); pauses are rows of the
// driver's claim_pauses, recorded in the audit chain. A pause is exact:
// claim-next's scan excludes paused work in its own statement (two
// uncorrelated subqueries, evaluated once per statement, so the scan costs
// what it did while nothing is paused), a claim by id tests it in its
// update's predicate (TaskGuard.NotPaused), and on PostgreSQL SetPause
// takes tasks in EXCLUSIVE mode, so claims in flight commit before it and
// later ones take their snapshot after it. Leases granted before run on.
// A claim-next that finds nothing while a pause holds it says so
// (Claimed.Paused); a resume wakes parked claims here (wakeForPending) and
// on other replicas (NotifyReady of no workflow: a Change Unknown). The
// claim-nexts of one workflow and capabilities that find nothing at once
// share the reads that say why (package sharedread): each is answered by
// a read that started after it asked, never by one already under way, so
// a claim made after a resume is never told of the pause.
//
// # Concurrency keys
//
// A task may name a concurrency key (NodeSpec.ConcurrencyKey); the key's
// limit (KeyLimit: claimed at once, claims per interval of server time)
// is set at create while the key has none, and changed by an operator
// (SetKeyLimit, in the audit chain). Every key with a limit or a claim has
// a row of the driver's concurrency_keys (a create makes it; the end of
// the key's last claim prunes it when it has no limit and no ready task,
// the server's sweeper prunes every such row once a minute, for keys
// whose tasks are never claimed, walking the keys in order
// (PruneIdleKeys), and a claim makes a missing one again: keysFreed,
// lockKeyRow); a transaction that locks several keys' rows locks them in
// key order (lockKeys), after the task rows it waits for ("Lock order"
// below). A key without a cap keeps no count of its claims (Key.Claimed
// is 0; its row is what a missing row means, and goes when it has no
// limit and no claimable task), so that a claim of a key without a limit
// writes nothing to the row and takes it shared (tgpostgres: FOR KEY
// SHARE): such claims never wait for one another. A change of the limit
// (SetKeyLimit, or a create that sets a key's first limit) takes the row
// exclusively, so it waits for the claims in flight and those after wait
// for it, counts the key's claimed tasks after its lock and stores the
// count with a cap (LockKeyForLimit); whatever ends a claim lowers the
// count only when the key is capped. SQLite keeps the same meaning. The
// guard is in the key's row: a claim of a limited key
// takes a slot in its own transaction by locking the row (LockKey) and a
// compare-and-set update (UpdateKey; a hot batch, which holds the rows of
// its claims' keys locked, sends its claims' updates together with its
// next round: tgdriver.KeyUpdate) that raises claimed (capped) and appends the
// claim's time (the transaction's server time, as its history records it)
// to the last Rate claim times; it is refused when claimed is at the cap
// or Rate claims lie within the interval that ends at it, so the rate
// holds over any window. Whatever ends a claim gives the slot back in its
// own transaction: a trigger of the schema on the task's state, so no
// path can forget it. Claim-next's scan passes over the tasks of a closed
// key (full, or rate-limited at the scan's time: KeyRow.Closed) with one
// uncorrelated subquery that reads only the closed keys (two indexes:
// the keys at their cap, and the range of the rate-held ones past the
// scan's time), so a claim's cost does not grow with the number of keys,
// and tasks without a key never read it. A closed key's queued tasks are
// parked out of the ready indexes by the schema's triggers (migrations
// 0018 and 0025 say how), all but the first K of each (key, workflow,
// requires) group, K the least of max(1, free slots) with a cap and the
// rate's count with a rate: no scan can take more of a group, and K does
// not change as time opens a rate. So a scan walks one task per group of
// a full key (10,000 queued: 1 index entry, was 10,000;
// TestClaimScanReadsOnlyClosedKeys) and at most Rate per group of a key
// its rate holds back (storetest Key: KeyRateParkedTasksLeaveTheScan;
// BenchmarkClaimPastRateHeldKey). A
// batch whose candidates' keys closed under it (its own claims,
// or another transaction's) scans again for those claims. A claim whose
// capped key's slot freed wakes one parked claim-next for the key's next
// task (FreeKeys, through the ready notifications; a key without a cap
// holds no claim back, so it wakes none); a parked claim held back by
// a rate sleeps until the rate opens, and a claim-next that finds nothing
// because of a rate says when (Claimed.NextClaimableAt, on a completion's
// next claim too): the earliest key held back by its rate that has a task
// of the claim's workflow and capabilities, read through an index of when
// the keys' rates open (RateHeldKeys), at most 100 keys; past them the
// time is marked a lower bound (NextClaimableAtLowerBound). The limit and the
// arithmetic of a claim on the key's row (its last claim times, when the
// rate opens) are package keyrate's; the locking and the guarded update
// are here (keys.go).
//
// # Approval gates
//
// A node of kind gate (NodeSpec.Kind) is never claimed: once its
// dependencies completed it awaits a decision (blocked, AwaitingApproval),
// and an operator or a principal with the approve role approves it
// (completed: its dependents become ready) or rejects it (failed: its
// dependents are cancelled), by DecideGate, under its workflow's lock with
// the state guard in the update; at its timeout the sweeper decides as its
// on_timeout says. What a gate is (its fields' checks, a decision's check,
// the texts and result a decision leaves) is package gate's.
//
// # Upstream results and release
//
// A claim carries the claimed task's direct dependencies (Claimed.
// Dependencies, read in the claim's transaction) with their states and
// results; Dependencies reads them for any task from one snapshot, and
// TaskByNode finds a task by workflow and node id. One answer carries at
// most MaxDependencyResultBytes of results: they are taken in dependency
// creation order while they fit in what is left, and one that does not fit
// is marked ResultOmitted (Task returns it whole). Release gives a claim back
// without penalty: one fenced update (the holder's full predicate) returns
// the task to pending with attempts lowered by one and the token cleared, at
// the same generation, so the released claim is fenced out like any ended
// claim; nothing downstream is touched.
//
// # Waiting claims
//
// Wake-ups match work. A claim-next with a wait parks in a queue, oldest
// first; a task that becomes ready wakes one parked call that may claim it
// (one waiting on any workflow or on the task's, whose capabilities cover
// the task's requires), and a call that leaves with a wake it did not use
// passes it on to another that may. Waiters do not wake at lease expiries:
// the server's sweeper expires leases and wakes one waiter per task returned
// to pending. After a write by another process (PRAGMA data_version) the
// watcher wakes at most as many waiters as there are pending tasks they may
// claim (CountClaimable per kind of waiter: workflow and capabilities), with
// lookups bounded by the number of waiters. At most
// Options.MaxWaiters calls park; beyond that a claim-next that finds no task
// answers at once with ErrWaitLimit. The queue and its matching are
// package waitq's; the count of claimable tasks per kind is here.
//
// # Lease time
//
// Lease time runs only while the server's store (Options.Sweep) runs. Each
// claim stores its lease duration; the server's stores record the wall time
// they were last alive (with their commits, once a second while leases are
// live, and at Close). The first batch after Open moves live leases by the
// time since then (forward or backward). While running, each store compares
// its wall clock with a monotonic source every ClockCheckInterval and at the
// start of every write batch (before any of its operations is judged); when
// it finds it was paused (a monotonic gap beyond 2 s) or its clock stepped,
// it moves live leases by that time, but only by as much as no server kept
// the alive time fresh, so that several servers on one database apply a step
// once and a server paused while another served moves nothing. Every move is
// clamped to at most now + the lease's duration, so a worker that really died
// is reclaimed within one lease after the server is back, and is recorded as
// a lease_shift event with the new expiry. One-shot stores never move leases.
//
// With a driver whose clock is shared by replicas (PostgreSQL), a replica's
// own pause or clock step moves nothing: the other replicas kept serving and
// the shared clock did not step. Only the time no replica ran at all is given
// back: at Open, when the alive time every replica refreshes once a second
// while leases are live is at least 2 s old.
//
// # Several writers
//
// Every guard of a write is in the write's own predicate: a claim updates
// only a task still pending at the generation read; an expiry only a task
// still claimed at that generation whose lease had lapsed at arrival; a
// task becomes ready only while blocked with no unmet dependency; a cascade
// cancels only unfinished tasks; unmet counts change by atomic decrement;
// a chain head advances by compare and set. Writers of tasks lock task
// rows only, several of them in one order (seq, or task id within a
// batch); the workflow row (tgdriver.Tx.LockWorkflow) is locked by what
// must see a workflow whole or extend its chain (creation, prune, operator
// interventions, linking), always before any task. A create locks the
// dependencies it counts, so a dependency completing meanwhile either
// counts as completed or sees the new edge. A driver may re-run an
// operation after a serialization failure or a deadlock; only the run
// that committed has effects outside the database (counters, wake-ups).
//
// # Lock order
//
// One order of row locks, for the drivers whose writers wait for one
// another's (PostgreSQL; SQLite has one writer): a workflow's row, then
// task rows, then concurrency keys' rows in key order, then the audit
// head. The workflow's row is locked in a mode that does not block the
// check of a task's foreign key to it (tgpostgres: FOR NO KEY UPDATE), so
// a writer of tasks never waits for it. Keys come after tasks because
// whatever ends a claim holds the task's row when the schema's trigger
// locks its key's row to give the slot back; so a create locks the
// dependencies it will count, all at once in task id order as a batch
// takes tasks (lockDeps), before its keys' rows (lockKeys); a batch locks
// the tasks it updates, then the keys of the claims they end, then its
// candidates' keys, waiting only for those after every key it holds and
// passing over the candidates of a key before them that another
// transaction holds (lockKeysAfter); an operator's change of a limit
// locks the key's row, then its parked tasks (a raised cap unparks them),
// as a freed slot unparks after the key's row: the other order made the
// change of a limit lose a deadlock to every claim of the key that ended
// meanwhile, ten tries in a row under load (storetest's
// KeyLimitChangeBesideClaimEndsLocksInOrder fails on any). Gaps remain, where PostgreSQL may
// detect a deadlock (40P01) and the driver runs the whole transaction
// again (tgpostgres: Write, MaxWriteTries; TestWriteRetriesDeadlock), a
// retry, never a wrong answer; tgpostgres's doc gives each path's order
// and the mode each takes a key's row in (shared for a key without a
// limit, so its claims and ends do not order against one another at all):
//   - a dependent a batch makes ready while its key is closed takes the
//     key's row when its update is applied, after the keys the batch
//     holds; a key without a row is made and locked after those held;
//   - a freed slot, a claim of an unparked task and a change of limit
//     unpark a parked task after the key's row, while a claim by id of it
//     or a create that depends on it holds the task and waits for the key
//     (both rare beside the ends of claims);
//   - task rows are locked by seq in the sweeps.
//
// The storetest group Key's lock-order tests drive each path against the
// others at once: every operation succeeds; the retries are counted.
//
// # Writes and durability
//
// Claim-next, heartbeat and complete go through the hot lane (hot.go): the
// operations waiting at a moment run as one batch in one transaction, in
// two driver rounds (tgdriver.Tx.Fetch and Apply) and one commit whatever
// their number, each doing and answering exactly what it would alone.
// CompleteAndClaim puts a completion and a claim-next into one batch, so a
// worker's loop costs one call and one commit per task; the claim is
// granted only if the completion was accepted (the lane never splits the
// two between batches). Other writes run one operation per transaction. With SQLite every
// transaction runs on one writer goroutine that owns the only write
// connection and commits the transactions waiting at that moment together,
// each in its own savepoint: group commit (see tgsqlite). With PostgreSQL
// each transaction is its own, on a bounded pool, and up to HotBatches run at
// once, a second only for enough callers (hotpace). An operation is answered only
// once it has committed: with SQLite's SyncFull (the default) and
// PostgreSQL's defaults an answered write is on disk. Reads see only
// committed state. Server time comes from the store's Clock; clients'
// clocks are never used.
//
// With PostgreSQL, leases are judged by the database's clock, read at each
// request's arrival through a per-replica offset (tgpostgres Clock): every
// replica judges a lease against the same time, so a replica whose own
// clock is off by seconds neither shortens nor lengthens anybody's lease.
//
// # Read-only stores
//
// A store on a driver opened read-only (tgsqlite.OpenReadOnly: SQLite's
// read-only mode and query_only; tgpostgres with Options.ReadOnly) reads a
// database at exactly this binary's schema version: no migration, no
// writer, sweeper, watcher or linker, and no write of any kind. Every write
// returns ErrReadOnlyStore; Task shows a lapsed lease as stored rather than
// processing it.
//
// # Availability
//
// A write the database's environment refuses fails with an error matching
// ErrUnavailable, never a bare SQLite error: ErrBusy when another process
// holds the write lock beyond the driver's busy timeout (SQLite's
// tgsqlite.DefaultBusyTimeout, 10 s),
// ErrDiskFull, ErrReadOnly, ErrFilesReplaced, ErrUnreachable (PostgreSQL),
// and ErrUnknownOutcome when the commit was sent and its answer lost;
// UnavailableReason names the cause and whether a retry can help, and
// MayHaveApplied whether the write may have taken effect anyway (then the
// caller must inspect before retrying, or retry with its request id). The store records the identity
// (device and inode) of the database file, its -wal and its -shm at Open and
// checks it before every batch's BEGIN, after its COMMIT and before the
// callers are answered, and every WatchInterval. Once a file was removed or
// replaced the store trips: the batch is not acknowledged, every later write
// and checkpoint fails with ErrFilesReplaced, and Close neither checkpoints
// nor closes the SQLite connections (SQLite's last-connection checkpoint
// would use the stale -shm index) and returns the error, so an acknowledged
// write stays in the WAL for the next opener. Ready commits a probe write
// that leaves the data unchanged and reports any of these conditions.
//
// # Request ids
//
// Every write a worker or submitter makes (create, claim, heartbeat,
// complete, fail, cancel, release, the protocol cancel) may carry a
// request id (WithRequestID, at most MaxRequestIDLen bytes). The answer of
// a write that took effect is kept with its id, in the write's own
// transaction, for RequestRetention: a retry with the same id, by the same
// principal and owner, is answered with it and does nothing (a retried
// claim returns the same lease and token, a retried complete its first
// acknowledgement), so a write whose answer was lost (ErrUnknownOutcome)
// is retried safely. Concurrent calls with one id get one answer. An id
// reused for another operation or other arguments is refused with
// ErrInvalid naming what differs; a refused write is not kept. A kept
// claim's token is sealed under the request id, which the database holds
// only as a hash (package idempotency: the key, the argument digests and
// the seal): someone who reads the database learns a kept token only for
// a request id they can guess, so use a random one (a UUID). The sweeper
// keeps at most Options.MaxRequestsPerPrincipal answers per principal,
// removing the oldest beyond; it runs once a minute, so a principal may
// pass the bound by what it writes meanwhile. It is a bound, never a
// refusal: no write is refused for the ids its principal keeps, and a
// retry comes long before its answer is among a busy principal's oldest.
//
// # Workers' reports
//
// A heartbeat, completion or failure may carry the holder's report on its
// attempt (WithReport, report.go; package workreport holds the report,
// its bounds and its form in an event): progress, a short status message and
// the attempt's usage so far, each bounded (CheckReport names the field
// and the rule). It is stored in the write's own fenced update, never in a
// statement of its own: a write without one builds exactly the update it
// built before. A later report of the attempt replaces the earlier whole;
// the next claim clears it and folds its usage into the task's prior
// usage, from the row the claim read anyway, so Task.TotalUsage and
// WorkflowUsage count every attempt exactly once. Each report is recorded
// in its event's detail, which the event's hash covers; the task state an
// event leaves does not include it, so verify compares no report column
// and histories written before migration 0009 verify unchanged.
//
// # Speed
//
// A durable commit costs an fsync, so throughput comes from committing many
// operations at once (hot.go, hotpace); scripts/bench-store.sh runs
// bench_test.go's benchmarks and scripts/bench-store.md records them.
//
// # History
//
// Each workflow's events form a hash chain, and every workflow's creation,
// prune, pause and resume is an entry of one database-wide audit chain
// (appendAudit; its head is locked last, after the workflow and task rows).
// Package audit owns the hash format and the history's readers and linker;
// this package writes the history and opens the readers' doors
// (VerifyHistory, ExportAudit, AuditHead, CheckAnchor, RecentWorkflowHeads,
// CheckWorkflowAnchor, LinkHistory), each linking what is journaled first.
//
// Invariants: a v2 event is recorded (linked or journaled) in the same
// transaction as the task change it describes, with the state the updated
// row holds, so that a task row and its last event agree whenever a
// transaction commits; every stored detail, state and content text is
// canonical JSON; the events of an operation are recorded when its
// transaction ends, in the order they happened, linked there by the
// driver with the hash format's audit.Link (tgdriver.Apply.Link: SQLite) or
// journaled and linked soon after the commit by an audit.Linker
// (tgdriver.Info.JournalEvents, PostgreSQL).
//
// # Principals
//
// A task records the principal whose request created it (Task.CreatedBy,
// from PrincipalFrom at creation; "" when the request carried none). It is
// set once, in the insert, and never changed: an idempotent repeat of the
// creation by anyone returns the task with its original creator. The store
// holds principal names only, never a credential.
//
// # Leaves
//
// What needs no store state lives in leaf packages that import neither
// this package nor a driver (seam_test.go keeps it so): limits (the
// bounds), rules (checks of plain values, ValidationError), jcs (RFC 8785
// JSON), jsonvalue (payload rules), nodespec (a node to create and its
// validation), dag (a create's order), gate (approval gates), keyrate (a
// key's limit and rate), pause (a pause of claiming), taskview (the views
// of tasks and workflows the store returns, the task states, the
// not-found and conflict errors), statusmsg (the texts of status
// messages), storeopts (a store's Options), broadcast (the wake-up of
// Changed), hotlane (the hot lane's batching of operations), hotpace (its
// pacing), retry (backoff), waitq (parked claims), idempotency
// (request-id keys and seals), workreport (workers' reports) and audit
// (the history's format, its events, readers and linker).
//
// # Portability
//
// The API speaks in tasks, workflows and time.Time; this package holds no
// SQL. Each driver owns its statements and its numbered, embedded migration
// series, applied by package schema's one runner.
package taskgraph
