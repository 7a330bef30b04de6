// Package tgpostgres is the PostgreSQL driver of the task store
// (tgdriver.Driver on github.com/jackc/pgx/v5): many server processes
// (replicas) share one database, each with its own connection pool.
//
// # Invariants
//
//   - The driver owns its schema: migrations/*.sql, embedded, applied by
//     package schema's runner in this driver's dialect (Schema, migrate.go).
//     Open migrates the database inside one transaction under
//     pg_advisory_xact_lock, so replicas starting together migrate once and
//     the others find the work done. A database at a newer schema is refused
//     (schema.ErrTooNew), and so is one whose schema holds tables but no
//     schema_version table (schema.ErrForeign); neither is written to.
//   - Write runs its function in one READ COMMITTED transaction on a pooled
//     connection and commits. BEGIN is not a round trip of its own: it
//     travels with the transaction's first statements. A COMMIT that the
//     server answers with ROLLBACK (a statement of the transaction failed)
//     is an error. A serialization failure (40001), a deadlock (40P01) or a
//     unique violation (23505: two transactions creating the same workflow
//     or node at once) rolls back and runs the function again, at most
//     MaxWriteTries times with a small jittered backoff; so does a guarded
//     update that found its row changed since the function read it
//     (tgdriver.ErrRowChanged: a hot batch, which locks task rows only,
//     ended a task a cancel had read; TestCancelRacingAnotherWriterRunsAgain). Every error of the
//     environment maps to a tgdriver sentinel: no pooled connection within
//     AcquireTimeout is ErrBusy, 53100 is ErrDiskFull, 25006 (a standby, a
//     read-only transaction) is ErrReadOnly, a failed or dropped connection
//     is ErrUnreachable, a lock not granted within the session's
//     lock_timeout (55P03) is ErrBusy. A COMMIT that fails other than by the
//     server's own ERROR (the connection lost once it was sent, the server
//     shutting down or crashing) is ErrUnknownOutcome: the transaction may
//     have committed, and is never run again.
//   - Every pooled session bounds how long a transaction of this replica
//     may hold locks while it stalls (idle_in_transaction_session_timeout)
//     and how long a statement waits for another's lock (lock_timeout), and
//     keeps TCP keepalives on both sides (Options; the README's replica
//     section gives the numbers).
//   - Locks. Writers of tasks (claims, heartbeats, completions, failures,
//     expiries, cascades) lock task rows, and the rows of the concurrency
//     keys of the claims they take or end (the schema's trigger, after the
//     task's row): every guard is in the write's own predicate, and
//     writers that lock several tasks take them in one order (Fetch: by
//     task id; the domain's sweeps: by seq). The workflow row is locked
//     (LockWorkflow, EnsureWorkflow, ChainHead, LockChains: FOR NO KEY
//     UPDATE) by what must see a workflow whole or extend its chain: a
//     creation (with LockDependencies taking its dependencies FOR SHARE), a
//     prune, an operator's intervention and the linking of journaled
//     events; each takes it before any task row. FOR NO KEY UPDATE, not FOR
//     UPDATE: a task updated twice in one transaction has its foreign key
//     checked (FOR KEY SHARE of its workflow's row), which FOR UPDATE
//     would block while that transaction holds task rows the creation
//     waits for (a deadlock the storetest group Key's
//     KeyCreateBesideEndingClaimLocksInOrder met 17 times in 3 rounds).
//     Keys' rows come after task rows, in key order (package taskgraph,
//     "Lock order", which names the gaps left). The database-wide audit
//     head (LockAuditHead, FOR UPDATE) is locked last. A deadlock that
//     slips through anyway is retried.
//   - Every guard is in the write's own predicate: the UPDATE ... WHERE
//     <key> AND <guard> of every update shape, the compare-and-set of
//     (head_hash, event_count) when events are linked (zero rows is
//     ErrChainMoved), AppendAudit's of the audit head, PruneWorkflow's
//     DELETE ... WHERE <still finished, unchanged and with nothing
//     journaled>.
//   - The password of the URL never appears in an error or a log line:
//     Info().Location is the URL without it, and error texts are scrubbed.
//   - The driver is a tgdriver.SharedClock (Clock, see Lease time):
//     Hooks.BatchStart is never called, and Hooks.OnBatch is called after
//     every commit attempt with size 1. Info().JournalEvents is true: see
//     Events.
//
// # Lock order, path by path
//
// The one order is package taskgraph's ("Lock order"): the workflow's row,
// task rows by task id, concurrency keys' rows by key, the audit head.
// A key's row is taken in a mode by its limit (migration 0024): a claim
// of a key without a limit (no cap, no rate), and the end of any claim,
// take it FOR KEY SHARE and write nothing to it (no count is kept while
// uncapped), so claims of one uncapped key in different batches do not
// wait for one another (TestKeyLockModes); a claim of a limited key takes
// it FOR NO KEY UPDATE (LockKey, one statement that picks the mode by the
// row's latest version) before its guarded update, as does the end of a
// claim of a capped key (the trigger's update); only a change of the
// limit takes it FOR UPDATE (LockKeyForLimit), which waits for all of
// them, then counts the key's claimed tasks in a statement of its own (it
// reads only the live leases, through tasks_leases) and
// stores the count with a cap. Every path that makes or ends a claim holds
// the row in one of these modes to its COMMIT, so that count is right,
// and a claim after it sees the cap (storetest Key:
// KeyCapSetOnClaimedKeyCountsThem, KeyClaimsRacingLimitChanges). No path
// takes FOR UPDATE besides the change of a limit: it conflicts with the
// FOR KEY SHARE a claim or an end takes before it writes, and two such
// would wait for each other. What each path takes, in the order it takes
// it:
//
//   - A creation: its workflow's row (EnsureWorkflow); its existing
//     dependencies FOR SHARE, all in one statement in task id order
//     (LockDependencies); the keys it names in key order, in one
//     statement (LockKeys: each lock mode's arm in key order; a key
//     without a row is made and locked after them, LockKey); then the
//     rows it inserts (tasks_key_park_insert
//     locks a full key's row again: held) and its dependencies' edge
//     counts (held), then the audit head.
//   - A hot batch: its claims by id FOR UPDATE in task id order
//     (lockTasksSQL); with two updates or more, their rows in task id
//     order (lockUpdatedSQL) and then the capped keys' rows of those that
//     may end a claim (completions, not heartbeats) in key order
//     (lockUpdatedKeysSQL), so that the trigger that gives a slot back
//     (one update statement per shape) finds its key's row held (an
//     uncapped key's it share-locks then); the scans (SKIP LOCKED: they
//     never wait); its candidates' keys, then each rescan's, each wave
//     split at the last key the batch holds (the domain's
//     lockKeysAfter), in one statement (LockKeys, as a creation does):
//     those after it waited for in key order, those up to it taken only
//     when free (SKIP LOCKED), a candidate whose key another transaction
//     holds being passed over as the scans pass over a locked task, so
//     that a batch never waits for a key before one it holds;
//     in Apply the claimed rows (held), whose tasks_key_leave
//     unparks the next parked task of the group after the key's row (of
//     a key with a cap or a rate: migration 0025; the row of a key with
//     neither it only share-locks). A release whose task becomes ready
//     while its key is closed takes the key's row in the update, after
//     the batch's other keys (tasks_key_park_entry), when the key has a
//     rate and no cap (lockUpdatedKeysSQL takes only capped keys, so that
//     ending claims of a rate-limited key do not queue on its row).
//   - An operator's change of a key's limit: the key's row FOR UPDATE
//     (LockKeyForLimit), the count of its claimed tasks, the key's parked
//     ready tasks in task id order (LockParkedOfKey), its update (a cap
//     raised unparks the rows held), the audit head. The parked tasks
//     come after the key's row, as in every other unpark: taken before
//     it, every claim of the key that ended meanwhile (its trigger holds
//     the key's row and unparks) closed a deadlock with the change, which
//     lost it ten tries in a row under CI's load
//     (KeyLimitChangeBesideClaimEndsLocksInOrder: none now; 39-56 retries
//     a run in that order). A create that sets the
//     first limit of a key takes its row the same way (a key without a
//     limit has nothing parked).
//   - The end of a claim whose key's row is then idle (FreeKeys): the
//     row's delete takes it FOR UPDATE SKIP LOCKED, leaving a row that
//     another transaction holds to the sweeper (PruneIdleKeys), since it
//     holds task rows that those transactions may wait for.
//   - Any other end of a claim (fail, release, cancel, expiry): the task's
//     row, its key's row (the trigger), and when the slot freed raises the
//     number of tasks each group keeps unparked (migration 0025: the
//     least of the free slots, at least 1, and the rate), the first
//     parked task of each group of the key (concurrency_keys_unpark). A
//     cancel of a queued task of a key with a cap or a rate takes the
//     key's row FOR NO KEY UPDATE after the task's (tasks_key_leave). The
//     sweeps lock tasks by seq.
//
// Gaps left, each a deadlock the server detects after its deadlock_timeout
// and Write runs again (a retry, never a wrong answer), counted by the
// storetest group Key's lock-order tests:
//
//   - a dependent a batch makes ready while its key is closed takes the
//     key's row in Apply (tasks_key_park_entry), in the order of the
//     update statements, after the keys the batch holds;
//   - a key without a row (a prune raced a candidate of its key) is made
//     and locked after the keys a batch or a creation holds;
//   - a slot freed (concurrency_keys_unpark) and a claim of an unparked
//     task (tasks_key_leave) unpark a task row after the key's, while a
//     claim by id of that parked task, or a creation that depends on it,
//     holds the task and waits for the key (KeyUnparkBesideTaskLockers:
//     1-2 retries a run);
//   - the sweeps lock tasks by seq, a batch by task id; a batch's probe
//     (expiries, promotions) runs before its Fetch, so the keys' rows its
//     expiries take (the trigger) come before the batch's task rows (its
//     candidates' keys it then takes only when free).
//
// # Batches
//
// The store's hot path (claim-next, heartbeat, complete) runs the
// operations waiting at a moment as one transaction in two rounds, Fetch
// and Apply, each one round trip (a pgx batch, pipelined), the second
// with the COMMIT:
//
//   - Fetch: the kept answers of the batch's request ids, if any (see
//     Request ids below); the fenced updates of the heartbeats and
//     completions, one statement per update shape however many tasks it
//     updates (the values
//     are arrays joined to tasks through unnest, sorted by task id), each
//     returning the rows it changed (a row not returned is a claim that is
//     not live, which the domain explains in the same transaction); then
//     one claim scan per kind of claim (workflow, capabilities), each
//     locking the first N claimable tasks FOR UPDATE SKIP LOCKED.
//   - Apply: the slots the claims took of their concurrency keys (one
//     guarded UPDATE of the keys' rows, updateKeysSQL: a batch holds
//     those rows locked and keeps what its claims take in memory, so a
//     claim of a key with a limit costs no round trip of its own; a
//     rescan's Fetch sends those taken so far first, so that its scans
//     see them), the claims' guarded updates (again one statement per
//     shape), the events (one statement: their bodies into packs and a
//     journal row per pack listing them, see Events), the
//     notifications (one pg_notify over an array), the kept answers of
//     request ids, and the COMMIT.
//
// The COMMIT travels in Apply's round (tgdriver.Apply.Commit: the domain
// sets it when nothing follows, i.e. no answer of the batch is to be kept
// under a request id, and refreshes the shared alive time before), so a
// batch costs two round trips, not three. A statement that fails in that
// round makes the server pass over the rest of it, the COMMIT included:
// the transaction is aborted and Write rolls it back, nothing written. So
// no check can wait for the client: each update of the round runs in its
// checked form (checkedText), which fails with SQLSTATE TG001
// (apply_guard, migration 0022; ErrGuardFailed) unless it changed a row
// for every element it was given, and events linked by compare and set
// (AppendEvents' checks, read from command tags) keep the COMMIT apart.
// Once the round is sent, only the server's ERROR in it means nothing was
// written: a connection lost while its answers are read, or the caller's
// context ending, may have come after the COMMIT ran, and is
// ErrUnknownOutcome (failCommitted; TestApplyCommitsInItsRound cuts the
// connection after the round reached the server, pgtest's
// CutAfterCommitRound). bench --tasks 5000 --workers 8, three alternated
// pairs at load 1.6-1.8: 2,293-2,812 -> 2,511-2,744 cycles/s (ratios
// 1.17, 1.10, 0.98), CPU per cycle 156-189 -> 149-160 us; at W=32 no
// change (3,454-4,237 against 3,417-4,151: the machine's CPU decides).
//
// Request ids. A batch reads the kept answers of all its operations'
// request ids in one statement (requestsSQL), in Fetch's round since
// 2026-12-05 (tgdriver.Fetch.Requests; before, in a round of its own
// before Fetch), and keeps the answers it
// gives in its last rounds (Apply.Requests: one INSERT from unnest):
// those of heartbeats and completions, known after Fetch, and since
// 2026-12-05 the claims' too, in Apply's round with the COMMIT (a claim
// answers with its task as granted, which Apply writes: see
// tgdriver.Tx.Apply; until then a claim's answer held the task as Apply
// returned it, and was kept in a third round). Before any of this, each
// operation with a request id cost a lookup and an insert, a round trip
// each, and kept the COMMIT apart. bench --request-ids (every claim and
// completion with a fresh request id, the separate loop), N=5000, W=8,
// load about 8: statements per task over the whole run 7.57 -> 4.41. The
// third round's end, three alternated pairs (load 1.2-1.9): 943 -> 1,139,
// 844 -> 846 and 915 -> 1,010 cycles/s. The lookup's own round's end,
// bench --request-ids --tasks 5000, alternated (load 1.3-2.1): W=8,
// seven pairs, 1,117 -> 1,442, 892 -> 825, 998 -> 1,803, 973 -> 1,408,
// 837 -> 1,138, 776 -> 963 and 1,309 -> 1,632 cycles/s (median ratio
// 1.29); W=32, three pairs, 1,840 -> 2,829, 2,550 -> 2,792 and
// 3,003 -> 3,019. So the round's updates run before the batch knows which
// operations are replays: a replayed completion's fence fails (its claim
// ended), a claim is granted after the round, and a batch with a
// heartbeat that carries a request id (whose fence still holds on a
// replay) reads them first, as before; an update of a replay that held
// anyway (a request id reused for another write) rolls the batch back,
// and it runs again reading them first (package taskgraph, hotRequests;
// storetest Request: ReusedIDRefused).
//
// The completions' lock. With two updates or more, Fetch locks their rows
// first, in task id order (lockUpdatedSQL), and the update statements
// find them held. An update statement alone does not take its rows in its
// arrays' order: over a large table its generic plan is a nested loop over
// the arrays, but over a small one a hash join, which updates rows in the
// table's order. Measured on 2026-12-04 (bench, N=10000, the binaries
// alternated, load 0.9-2.4): the lock costs 74-131 us of a batch of eight
// completions at W=8 (pg_stat_statements), and a build without it ran 1.06-1.12
// times as fast at W=8 and 1.06-1.14 at W=32 (four pairs each), but the
// storetest Key group's KeyCreateDepsBesideBatchLockInOrder deadlocked
// four times in one run (a creation locks its dependencies in task id
// order). The same lock written into the update statement (a
// materialized CTE read by a one-time filter) cost as much server time as
// the two statements (the lock is the cost, not the statement), and was
// not kept. TestFetchLocksUpdatedRowsFirst pins the lock. Measured again
// on 2026-12-05 on the store with packed events (a build without the
// lock and the keys' lock, not kept; bench, N=10000, five alternated
// pairs each, load 0.4-1.6): W=32 0.98, 1.11, 1.00, 1.07 and 0.99 (median
// 1.00), W=8 0.95, 1.10, 1.04, 1.08 and 1.00 (median 1.04). So the lock
// is worth at most a few percent now, not the deadlocks it prevents.
//
// So a batch of any size costs about six statements, two round trips and
// one commit, instead of some twenty statements and a commit per
// operation. The claim scans never wait (SKIP LOCKED), the updates take
// rows in task id order, and neither touches a workflow row, so batches
// running at once, on one replica or many, wait for one another only where
// they write the same task. Apply's updates update rows the batch locked in
// Fetch, so their guards hold; one that does not (a fault) fails the batch
// with ErrGuardFailed before it commits.
//
// # Events
//
// A workflow's events form a hash chain, a total order, and linking an
// event needs the head it links to. Linking in the writer's transaction
// made the workflow row the serialisation point of every writer of the
// workflow: each held it from its first event through the commit's fsync,
// and PostgreSQL cannot share an fsync between transactions queued on one
// row. So writers journal their events, and the store links them right
// after the commit: under the workflow's row lock, the linker reads the
// journaled events of the workflow in journal order, computes their
// positions and hashes, and records them (LinkJournaled: one round trip
// of two statements: the heads advanced by compare and set, then the
// journal rows deleted and the links written in one). A pass gathers the
// commits of up
// to 50 ms: linking is off every writer's path, and with a pass per few
// milliseconds its transactions were a third of the database's.
//
// Each event's body is written once (migration 0016). Until 0029 (see
// Packs below) the writer inserted the body into events, where it
// stays, without its link (wseq NULL,
// prev_hash and hash empty), and into event_journal one row per workflow
// it wrote events of (migration 0023): journal_id its first event's id,
// event_ids its events' ids in order (the body's columns NULL), in one
// statement. Until 0023 the journal held a pointer row per event (its
// insert, its entry in event_journal_by_workflow and its delete: 700 bytes
// of WAL per task of three events); the writers' statements now journal
// 0.25 rows per task in bench (see "WAL per cycle"). Pointers journaled
// before 0023 became rows of one event, linked as any other
// (TestMigrationLinksJournalOfSchema22).
// Before 0016, the writer journaled the whole body and the linker copied it
// into events: two bodies per event. Filling the link into the body's own
// row instead would rewrite the whole row (PostgreSQL writes a new
// version; a HOT update needs the new version on the old one's page, and a
// linking pass updates every row of the page at once, which needs pages
// kept half empty).
//
// The links are written by run (migration 0019). A linking pass writes one
// row of event_links per workflow it links: the run of consecutive events
// it linked, as the position of the first (wseq) and the hash it links to
// (prev_hash), the events' ids and their hashes in chain order (two
// arrays), and the least and greatest id. Each later event's prev_hash is
// not stored: it is the hash before it in the run. So a pass's links cost
// a row and two index entries per workflow, and about 76 bytes per event
// in the arrays (an 8-byte id and the hash's 68 bytes of text; TOASTed
// when a run is long), where 0016 wrote a row of
// some 200 bytes and two index entries, 60 to 95 bytes of WAL each, per
// event. (Until 0023 the deletes of the pointers stayed, one per event.) With bench
// --mode store (N=5000; three events per task; 5 workflows, so a run
// holds some 65 events at W=8) the linker's statements wrote 1,300 bytes
// of WAL per task and hit 22.6 buffers per task before, 425 bytes and 6.3
// buffers after (pg_stat_statements); the cluster's WAL per task fell from
// about 6,100 bytes to 5,230 at W=8 and from 6,290 to 5,400 at W=32
// (pg_current_wal_lsn, the tasks' creation and the verification
// included; medians of three alternated runs), and in the claim and
// complete phase alone from 3,960 to 3,380 (W=8) and from 4,090 to 3,480
// (W=32). Of the 5,230 the bodies are about 1,320 (440 each), their
// index entries (events_pkey, events_by_task) some 500, the pointers and
// their index entries and deletes about 700, the links 425, and the rest
// the tasks' rows: creation and two non-HOT updates (state is in the
// ready indexes' predicates) with their index entries.
//
// Packs (migration 0029). The writer's statement no longer inserts a row
// of events per event: it writes a batch's bodies into event_packs, one
// row per run of at most 16 events of one workflow (packMax), each of the
// bodies' columns an array with an element per event, and one journal row
// per pack (journal_id = pack_id = its first event's id). A row of events
// cost a heap tuple and an entry in events_pkey and in events_by_task_seq
// per event (the events statement was some 40-46 us of server time per
// cycle at W=32); a pack costs one tuple, a primary key entry, an entry in
// event_packs_by_workflow and the GIN entries of its distinct task seqs.
// One statement writes a batch's packs, whatever the number of
// workflows: the writer groups the events by workflow (stably: a
// workflow's events keep their order) and sends the bodies' arrays as
// they are with each pack's first and last element, and the server cuts
// the packs by slicing ($1[s:e]; building arrays on the server with
// array_agg cost nearly what the rows did). The ids are drawn from
// events' sequence for the batch, sorted, and handed out in the writer's
// order (the events' order before grouping), so ids keep meaning what
// they meant: an event that depends on another's commit has the higher
// id, and a statement's events take rising ids in the writer's order. The
// arrays are stored MAIN (compressed in line; TOASTed, the statement cost
// 253 against 181 us), and compressed with lz4 since migration 0030: with
// pglz the statement took 28.4 and 26.6 us of server time per task at
// W=32, with lz4 22.5 and 21.3 (bench --tasks 20000, pg_stat_statements,
// two alternated pairs, load about 1); a server built without lz4 keeps
// pglz (TestPacksCompressWithLZ4). The pack's size is bounded because a task's
// history decompresses its packs whole: a creation of 1,000 tasks in one
// pack made a task's history 1.6 ms to read, against 0.12 ms over packs of
// 16 and 0.06 ms by events_by_task_seq. The GIN index on task_seqs has no
// pending list (fastupdate = off): with one, a search reads the whole list
// (162 buffers and 7 ms for a task's three events before a VACUUM).
// A pack is never rewritten: its events are linked by id into
// event_links as events' rows were, and pruning deletes a workflow's
// packs with it. Bodies written before 0029 stay in events, and every
// reader reads both (a body is in one place: its id is drawn once); the
// behaviour suite reads them after moving every pack's bodies into rows
// of events (tgpostgres.UnpackBodiesSQL in its harness), and the driver's
// own tests check each reader on packs (TestTaskEventsPlanBySeq,
// TestForgedEventBodyBreaksVerification,
// TestEventBodiesWrittenOnceAndLinksVerified, TestJournalOneRowPerWorkflow).
//
// A linker takes the bodies of its own store's events from memory; the
// journal is as 0023 left it. The journal statement returns each journal
// row's workflow and ids, Apply sets them on the events it journaled
// (tgdriver.JournalIDReader), and the store's linker keeps the last 4,096
// it is kicked with. A pass reads the journal's ids alone
// (JournaledEventIDs: no join to events) and reads back by id and
// workflow (JournaledBodies, one more statement; since 0029 a body's pack
// is found through its journal row, walking event_journal_by_workflow
// down from the id) only the bodies it does not hold:
// another replica's, which before were read in the same statement as the
// ids. bench --tasks 10000 --workers 8, pg_stat_statements, one run each:
// the linker's read of the journal went from 62 calls, 151 ms and 91,322
// buffer hits (the bodies joined through events_pkey) to 59 calls, 18 ms
// and 1,010 hits, and one read-back of 8 bodies; per task, 15.1 -> 1.8 µs
// of server time and 9.1 -> 0.1 buffer hits
// (TestLinkerTakesKickedBodiesAndReadsBackOthers, TestApplySetsJournaledEventIDs).
//
// Events linked before 0016 (and by AppendEvents, which links in the
// writer's transaction) keep their link in their own row: readers take an
// event's link from its run or from its row (events_inline_chain orders
// the latter). The per-event links of 0016 became runs of one event, with
// the same positions and hashes: old databases verify as they did
// (TestMigrationKeepsLinksOfSchema18Verifying,
// TestMigrationKeepsOldEventsVerifying).
//
// Guards. One link per journal row, and all of its events: LinkJournaled
// deletes the journal rows its events begin (journal_id) and writes the
// links in the same statement only when those rows held exactly the
// events linked, each once (their arrays hold n ids together, n distinct
// ones among the n linked); otherwise it writes none and fails before it
// commits. So a row is linked by one pass only, whole, and a duplicated
// row, or part of a row, links nothing (TestJournalRowLinkedOnceWhole).
// JournaledEvents reads whole rows (the last may take a pass past its
// limit). One event per position: the heads'
// compare and set fails unless each run starts right after its
// workflow's head, so runs tile the chain; event_links' key (workflow,
// position of the first) holds one run per start. Before 0019 the keys of
// the per-event links stated both again; a run cannot, and the journal rows'
// delete and the head's compare and set are in the same transaction as
// the run's insert. Every body is held: linked in its row or a run, or
// in a journal row's array. A body that is neither (inserted behind the
// store's back, which a task's events would show) fails verification
// (Reads.UnheldEvent, by hash anti-joins over every body and run;
// TestForgedEventBodyBreaksVerification).
//
// Reads. A workflow's chain: its runs unnested in position order (each
// run's hashes zipped with themselves after its prev_hash give each
// event's prev_hash, each array read once), the bodies joined by event id:
// the workflow's packs read whole (event_packs_by_workflow), and the ids
// not in them from events (events_pkey). A task's events: through
// events_by_task_seq at the task's seq (read from tasks_task_id_key; see
// "WAL per cycle") and through event_packs_by_task_seq, each
// event's run found through event_links_by_event (workflow, least id): the last
// run starting at or below its id whose array holds it (within a run ids
// ascend; a run linked later may hold lower ids than one before it, as
// events that do not depend on each other may be linked in either order,
// hence the check of the array). An anchor's hash at a position: the
// last run starting at or before it (the key). Reading a workflow's chain
// hits more buffers than with per-event links (the arrays are TOASTed,
// the bodies found one by one): about 3 per event read against 1.8 with
// bench's five workflows. The hot path reads no link.
//
// Indexes per event: none since 0029 but a GIN entry per distinct task
// seq of its pack (before, events_pkey and events_by_task_seq); per pack
// (up to 16 events of a workflow): event_packs_pkey and
// event_packs_by_workflow; per journal row (a pack):
// event_journal_by_workflow (it serves every access to the journal, so
// the journal has no primary key index); per run: event_links' key and
// event_links_by_event.
//
// The order is right: an operation journals its events after the reads
// and writes they describe, and identity values are handed out in call
// order, so an event that depends on another's commit (a claim of the task
// a completion made ready, the completion of a claimed task) has the
// higher event id, the journal's order. A linking pass takes whole
// journal rows in journal_id order and links their events in event id
// order: within a row that is its array's order (a statement's events
// take rising ids), and an event that depends on another's commit has a
// higher id than every event of that commit's rows, so its row also has
// the higher journal_id; events that do not depend on each other (rows of
// concurrent statements, whose ids may interleave) may be linked in
// either order. Any replica's linker may link any
// workflow (one at a time holds its row: a linker's own pass skips a row
// another holds, see "Replicas on one database"), so events a replica
// journaled before it stopped are linked by another. Readers of the history link
// first; Reads show journaled events after the linked ones (the journal
// rows' arrays unnested, in event id order), with Seq 0, each event once
// (one statement: an event the linker links meanwhile is either linked or
// journaled in its snapshot). UnheldEvent's anti-join unnests the arrays
// too.
//
// # Server CPU
//
// Measured with bench --mode store (N=5000, one database per run,
// pg_stat_statements and the cluster's /proc CPU over the measured phase
// alone, from the --cpuprofile file appearing to its being written; A
// and B alternated), on the shared 2-core machine at load 18-37, so the
// CPU figures are medians of noisy runs and the counts are the firmer
// ones.
//
// Planning. The update shapes take arrays (see Batches), and PostgreSQL's
// plan_cache_mode auto keeps a custom plan while the custom plans cost
// less than the generic one, whose estimate assumes ten elements: a batch
// of a few elements always did, so every execution of both hot UPDATEs was
// planned again (plans = calls in pg_stat_statements: some 190 µs of
// planning per task each, under load), and perf put 12.5% of the
// backends' CPU in the planner at W=8. The hot rounds (Fetch, Apply) now
// begin with SET LOCAL plan_cache_mode = force_generic_plan (once per
// transaction, in the same round trip: txConn.SendRound): the generic
// plans are the custom ones (a nested loop over the arrays, one index
// probe per element: TestHotUpdatesPlanGenerically), and the claim scans
// ran on their generic plans already (TestClaimNextPlanIsIndexServed
// pins those). Statements planned per claim+complete cycle
// (pg_stat_statements with track_planning): W=8 0.69 → 0.23, W=32 0.27 →
// 0.17 (what is left: the linker's statements, reads of claim_pauses and
// of the keys); the planner's share of the backends' CPU at W=32 (perf)
// 8.0% → 4.0%. Server CPU per cycle, six alternated pairs at W=8 (load
// 18-31): medians 1,434 → 1,261 µs (-12%); three at W=32 (load 27-37):
// 958 → 730 µs (-24%). WAL per cycle is unchanged (3.2-3.3 KB in the
// measured phase). The cost: one more statement per transaction (a
// utility statement, not planned). The setting covers the whole
// transaction, the statements of the keys' triggers included; every
// statement the hot rounds run takes its parameters as keys or arrays of
// keys, none as a value a partial index's predicate would have to match.
//
// Autovacuum's ANALYZE. Under load autovacuum analyzes tasks and events
// every time a tenth of their rows changed, each time sampling up to
// 30,000 rows and sorting every column's values: perf of a 30,000-task
// run at W=8 put vacuum and analyze at a fifth of the server's samples
// in the measured phase. Migration 0026 has ANALYZE skip the body
// columns (an event's detail, content and hashes; a task's payload,
// result, error, report, status message, usage), which no statement
// filters, joins or orders by (TestAnalyzeSkipsOnlyBodies): ANALYZE of
// events at 90,000 rows 243 → 40 ms, of tasks at 30,000 200 → 120 ms.
//
// The rules on the tasks' values. PostgreSQL checks every CHECK
// constraint of a table on every row an UPDATE writes, whatever columns
// it sets, and reads each one back from its stored text and plans it
// again for every statement that writes the table (ExecRelCheck). The 14
// rules of tasks cost some 80 µs of server CPU per UPDATE statement:
// pgbench of one prepared one-row UPDATE shaped as a claim's took
// 0.23-0.27 ms with them and 0.16-0.19 ms without. Migration 0027 moves
// them into domains (tg_task_state, tg_nonnegative, tg_priority...),
// whose rules PostgreSQL plans once per session and checks only where a
// value is assigned to a column of the domain: a claim checks the
// columns it sets, a heartbeat none but its own. The rules and their
// SQLSTATE (23514) are the same, by INSERT and by UPDATE, on a new
// database and on one migrated (TestTaskRulesHold); clients see the base
// types, since PostgreSQL describes a domain column by its base type.
// The migration rewrites tasks once, under its lock, as any type change
// with a rule does: 8.1 s for a database of a million tasks (544 MB with
// their indexes) migrated from schema 26 on the 2-core machine. Measured with bench --tasks 5000, the binaries before
// and after alternated three times (load 0.4-1.4): W=32 3,923-4,042 →
// 4,271-4,351 cycles/s; W=1 1,011-1,065 → 1,044-1,097; W=8 within the
// runs' noise (3,224-3,434 → 3,248-3,404), where a batch of eight runs
// two task UPDATEs among its two rounds' other work. pg_stat_statements
// at W=8, mean time of a statement of eight rows: the claim UPDATE 338-354
// → 304-313 µs, the completion UPDATE 258-279 → 232-244 µs.
//
// The link runs' hashes. A run of event_links holds a pass's hashes as hex
// text, some 33 KB for a run of 486 events, which PostgreSQL TOASTs and
// first tries to compress: random hex never compresses by the quarter
// pglz asks for, so every run paid a failed pglz pass (1.9% of the
// backends' perf samples at W=32). Migration 0028 stores the column
// EXTERNAL, out of line and never compressed: 0.5% (what is left is the
// runs' event ids, which do compress). Throughput moved within the noise
// (three pairs at W=32, N=10,000).
//
// What is left, and why it was not cut here:
//   - The task UPDATEs are never HOT (pg_stat_user_tables: n_tup_hot_upd
//     0 of 1.8-1.9 updates per task): PostgreSQL 15 takes an update out
//     of HOT when it changes any column an index uses, its predicate
//     included, and state is in every ready index's predicate (and in
//     tasks_leases', whose key lease_expires_at_ms a claim sets too). So
//     each claim writes the heap and tasks_pkey, tasks_task_id_key,
//     tasks_workflow_id_node_id_key and tasks_leases (711 bytes, 5.6 WAL
//     records per task), each completion the first three (552 bytes, 5.3
//     records). Since migration 0031 the pair (workflow_id, node_id) is
//     unique in task_nodes instead (see "Nodes"), so each version enters
//     one index fewer. A lower fillfactor would keep new versions on their page
//     but not spare these index entries (one run, too noisy to tell). A
//     HOT claim needs state out of every index predicate, i.e. the ready
//     set in a table of its own. Its upper bound, measured by pgbench of
//     the claim-shaped UPDATE of eight rows over 200,000 pending tasks:
//     0.40-0.43 ms as tasks is, 0.18-0.19 ms with no index or trigger
//     naming state, due_at_ms or the lease and fillfactor 70 (93% of the
//     updates HOT), before what a ready table and a leases table of their
//     own would cost. That cost was then measured on this driver with a
//     prototype, not kept: a ready table and a leases table written in the
//     claim's and the completion's own statements (CTEs), the ready, due
//     and lease indexes and the keys' triggers dropped, fillfactor 70, the
//     claim scan reading ready (78% of the task updates HOT). Per batch
//     at W=8 the completion UPDATE went from 0.24-0.27 to 0.14-0.16 ms, but
//     the claim's only from 0.30-0.34 to 0.27-0.31 ms: its HOT saving goes
//     to the ready row's delete and the lease's insert, and the scan gains
//     0.02 ms. bench --tasks 5000, five alternated rounds (load 1.1-1.6):
//     W=8 median 3,189 -> 3,365 cycles/s (per-round ratios 0.80-1.11,
//     median 1.06), W=32 5,333 -> 5,584 (0.98-1.14, median 1.05). About
//     0.07 ms a batch of that is the keys' triggers, paid for rows with a
//     key or not (dropping them alone: claim 0.28 -> 0.25 ms, completion
//     0.23 -> 0.19 ms at W=8). Their WHEN clauses are not what costs at a
//     batch's size (2026-12-05, pgbench -M prepared, one client,
//     synchronous_commit off, eight alternated rounds of 2 s, load
//     1.2-1.9; a state-changing UPDATE of completed tasks by seq, on
//     copies of tasks with its unique and lease indexes and no trigger,
//     the four triggers of tasks, or the same in two triggers with
//     one-term WHENs): one row 69, 90 and 74-76 us; twelve rows 182, 228
//     and 221-232 us. PostgreSQL compiles each WHEN once a statement,
//     which merging saves, but in PostgreSQL 15's trigger.c a BEFORE
//     UPDATE row trigger fetches and locks each old row, and an AFTER one
//     fetches it again, whatever its WHEN says: some 2 us a row, and at
//     twelve rows merging was within the noise. So only taking the keys'
//     rules off the task UPDATEs would win them back, which is the
//     redesign below. Dropping seven of the partial indexes (none of
//     which a claim or a completion writes) changed nothing bench could
//     tell: opening them is not the per-statement cost. By the same
//     pgbench (another eight rounds, load 1.0-1.2), the other eight partial
//     indexes cost some 2 us a row, to test their predicates on each new
//     version: one row 68 -> 82 us, twelve rows 184 -> 218 us; with the
//     keys' triggers, 39 and 86 us of the 107 and 270 us the UPDATE costs
//     on tasks as it is. Both are what the ready table would take off the
//     task UPDATEs, and the prototype measured what that wins overall. A
//     redesign of every path that moves a task in or out of the ready
//     set, for some 5%, is not the lever for the targets. Where the
//     server's CPU goes (perf -a over bench --tasks 20000 --workers 32,
//     the measured phase): postgres 56% of the machine's samples, the
//     bench process 24%, idle 19%. In postgres, index inserts 21% (three
//     quarters of them the task UPDATEs', one quarter the events'),
//     finding heap pages for new tuples and extending the files 8%, heap
//     updates and inserts 8%, executor start 4%, the commit's flush 3%,
//     and sending results 3%.
//   - The task UPDATEs cost by the row, not by the statement (2026-12-05,
//     bench --tasks 10000/20000/20000 --workers 8/32/64, one run each,
//     pg_stat_statements, quiet machine): the claim's UPDATE took 274,
//     624 and 938 us a call for batches of 8, 14.6 and 29 claims, about
//     21 us a statement and 31.6 us a row; the completion's 228, 531 and
//     889 us, about 31.5 us a row and nothing measurable a statement. A
//     HOT update of the same rows costs some 7 us a row (EXPLAIN ANALYZE
//     of 15 rows: 0.10 ms and 30 WAL records against 0.32 ms and 102 for
//     the same rows changing state), so the rows' index entries are the
//     cost, and the ready-table prototype above is what measured how much
//     of it a redesign wins back. Two unique indexes that every version
//     enters (tasks_task_id_key, tasks_workflow_id_node_id_key) made
//     plain: no faster (pgbench, the state-changing UPDATE of 15 rows,
//     two alternated pairs: 0.916 and 0.911 ms unique, 0.966 and 0.964
//     plain). The same runs went 3,874, 6,591 and 9,732 cycles/s: the
//     store gains with batch size as long as the machine has CPU.
//     Dropping an index is what pays, not its kind: since migration 0031
//     the (workflow_id, node_id) pair is unique in task_nodes (see
//     "Nodes"). The next of the same kind is tasks_task_id_key, which every
//     version enters too; a table of task ids would take it off the
//     updates, but the hot path finds completions and heartbeats by task
//     id (the lock of the rows to update, the fenced update itself, the
//     journal's task seqs), so each would then pay a probe of that table
//     per row for the index entry per version it saves: at most half of
//     what 0031 won, not built.
//   - The events (built: migration 0029 writes them in packs, see
//     "Events"; this entry is what led to it, and its last sentences
//     the build's figures). Before: a body (events_pkey,
//     events_by_task_seq) per event,
//     about 1,300 bytes of WAL per task with their index entries (the
//     journal's rows are one per statement and workflow since 0023: see
//     "WAL per cycle"). The same prototype with the hot path's event
//     writes left out (a measurement: the history is not optional) ran
//     W=8 at a median 3,589 cycles/s (per-round ratio to the store as it
//     is 1.18, to the prototype 1.07) and W=32 at 6,883 (1.29 and 1.23),
//     the same five rounds. At W=32 this store spends about one and a
//     half times River's CPU a cycle (see "At W=32 the machine is not
//     saturated either" below), and the history's writes (two bodies and
//     four index entries per cycle, the journal's rows, the commit's
//     share of their WAL) are most of the CPU that separates this store
//     from River, which keeps no history
//     (River ran 6,180-8,160 cycles/s in peerbench's W=32 rounds of the
//     same day, this store 5,810-6,160). The linker is not (leaving it
//     idle during the run changed nothing measurable): the hot
//     transaction's INSERT is. That statement takes 0.25-0.34 ms for 16
//     events in the run (auto_explain: about 100 buffers hit and 2
//     "written", which PostgreSQL 15 counts for each block a statement
//     adds to a relation: events grows by a page or so a batch, each a
//     write of zeros; shared_buffers was three fifths free). Alone it
//     costs two thirds of that, so the run pays the statement's own cost
//     and the machine's contention on top, no more: journalSQL itself,
//     by pgx, 16 events of the bench's two shapes (eight completions,
//     eight claims), a transaction each, one client, 3,000 times, ran at
//     a mean 0.19 ms (pg_stat_statements; 50 WAL records and 10 KB a
//     statement), and 0.15 ms with the three body columns (detail,
//     task_state, content) cut to "{}" (5.9 KB). The bodies' bytes are a
//     fifth of it; the rows, their two index entries, the journal's row
//     and the statement the rest. Growing the file is not the cost: the
//     same insert into a table with 100 MB of free pages (rows deleted,
//     vacuumed) took as long as into a new one (pgbench, 0.19 ms). An
//     earlier note had pgbench insert "the same 16 rows" in 0.06 ms; it
//     had not: pgbench of rows of these sizes takes 0.28-0.31 ms with the
//     table's indexes, 0.22 ms without, 0.12 ms unlogged and without. So
//     the lever is fewer rows and index entries per event (a design of
//     its own: the history's audit properties hold per event), not the
//     statement's form. Its size, measured the same way: the same 16
//     events as one row of arrays (one element per event; a primary key,
//     and a GIN index on the events' task seqs for a task's history) took
//     0.07 ms, 3 WAL records and 2.5 KB a statement (the row is TOASTed
//     and its bodies compress), against 0.19-0.25 ms, 50 records and 10 KB.
//     At W=32 that is some 25 us of the server's CPU per cycle.
//     Measured in the hot path on 2026-12-04 by a prototype, not kept
//     (the linker idle and bench's verification skipped on both sides,
//     so the readers, the linker, verification and the migration are
//     still not measured): the journal's statement inserted one row per
//     writer statement and workflow into a table of arrays (event_packs:
//     the ids drawn from events' sequence, the bodies' columns as arrays
//     stored MAIN, compressed in line rather than moved to a TOAST
//     table, a GIN index on the events' task seqs) and its journal row,
//     the arrays sent as they are (a batch's events of one workflow).
//     bench --tasks 20000 --workers 32, pg_stat_statements, two runs of
//     each: the statement 648-676 -> 318-323 us a batch of some 29
//     events (46 -> 21 us a cycle), its WAL 27 -> 5.4 KB and its buffer
//     hits 270 -> 55; the hot statements together 164-173 -> 126-129 us
//     a cycle; 5,351 and 5,776 -> 6,694 and 6,799 cycles/s. At W=8 the
//     statement 287 -> 181 us a batch of 16 events (168 without the GIN
//     index). Alternated pairs, N=10000, load 0.8-1.7: W=32 1.02, 1.11,
//     0.93, 1.18, 1.16, 0.99 (median 1.06); W=8 1.21, 1.04, 1.10, 1.06,
//     1.10, 0.80 (median 1.08); N=20000, W=32, load 0.9-2.4: 1.06, 1.04,
//     1.07, 1.11, 1.10, 1.09, 1.10, 1.12 (median 1.09, every pair
//     faster). So packed bodies are the largest lever measured on this
//     driver. What the prototype showed a design needs: the arrays sent
//     as they are (built on the server from unnest by fifteen
//     array_aggs, the statement cost 264 us against the rows' 300; with
//     ORDER BY in each aggregate, 382); the bodies stored MAIN
//     (TOASTed, 253 us with the GIN index, 214 without); packs of a
//     bounded size (a creation of 1,000 tasks made a pack of 1,000
//     events, and reading one task's history, which must decompress the
//     whole pack, took 1.6 ms against 0.06 ms by events_by_task_seq;
//     0.12 ms over packs of at most 16); and the GIN index WITH
//     (fastupdate = off): with the default pending list a search reads
//     the whole list (162 buffers and 7 ms for one task's three events
//     before a VACUUM), and without it the statement cost 224 against
//     229 us at W=8 and 335 against 308 at W=32 (its WAL 5.7 and 9.2 KB).
//     A workflow's chain would read the packs its runs link (a run links
//     whole journal rows, i.e. whole packs), old bodies and new read
//     together, and UnheldEvent check both. A second prototype with all
//     of those constraints (one statement for a batch however many
//     workflows: the arrays sorted by workflow and cut into packs of at
//     most 16 on the server by slicing, $1[s:e], no aggregation; the GIN
//     index without a pending list; an index on (workflow_id, pack_id)
//     for a workflow's bodies, 3,000 of which read in 1.9 ms against 4.7
//     ms by id from events): the statement 541 -> 400 us a batch at W=32
//     (352 uncapped) and 294 -> 193 at W=8, N=20000; alternated pairs,
//     load 1.4-2.2: W=32 0.97, 1.27, 1.24, 1.01, 1.01, 1.10 (median
//     1.06), W=8 1.06, 1.03, 1.07, 1.12, 1.24, 0.93 (median 1.07).
//     Built (migration 0029, 2026-12-05), with the readers, the linker
//     and verification on both sides: bench --tasks 20000 --workers 32,
//     pg_stat_statements, the statement 673 -> 383-450 us a batch of
//     some 29 events, its WAL 26.8 -> 12.4-12.7 KB (the GIN entries, the
//     workflow index and a journal row per pack), its buffer hits 268 ->
//     154; verification's read of a workflow 29 -> 15 ms. Alternated
//     pairs, N=10000, load 1.4-2.3: W=32 0.93, 1.34, 0.97, 0.91, 1.11,
//     1.09 (median 1.03); W=8 1.42, 0.94, 1.01, 1.21, 1.09, 1.10 (median
//     1.10).
//     The GIN index is a fifth of what is left of the statement: the same
//     run (one database, emptied between runs, load 0.8-1.7) with
//     event_packs_by_task_seq as built, with a pending list of at most
//     64 KB, and dropped: 375-389, 350 and 294-300 us a batch, WAL
//     12.7-13.1, 12.5 and 8.0-8.3 KB, buffer hits 157-160, 134 and
//     68-70; 6,704-7,024, 7,156 and 6,976-7,182 cycles/s, within the
//     noise. Some 6 us of server time a cycle, for a task's history read
//     by index however large its workflow; a pending list saves a third
//     of it and makes every search read the list.
//   - At W=8 the store is bound by a batch's latency, not by CPU (perf
//     -a: postgres 34% of the machine's samples): each worker's next
//     claim rides with its completion, so eight workers make at most
//     eight cycles per batch time. Where a batch's time goes (bench
//     --tasks 10000 --workers 8, timers around the driver's Fetch and
//     Apply in a build not kept, five runs at load 0.6-1.4, 1,256-1,268
//     batches a run): 30-55 us before Fetch, Fetch 0.85-1.07 ms (its
//     statements some 0.5 ms by pg_stat_statements), the domain's work
//     between the rounds 54-109 us, Apply with the COMMIT 1.49-1.70 ms
//     (statements some 0.6 ms; the commit's fdatasync of 24-32 KB of WAL
//     0.3-1.5 ms in an strace of a backend, where pg_test_fsync syncs one
//     8 KB write in 0.1 ms). The Go side is under a tenth; the rest is
//     the statements, two round trips and the flush. River's workers do
//     not wait for their jobs' completions to commit (its completer
//     batches them apart), so its W=8 is not bound that way: in
//     peerbench's W=8 rounds of 2026-12-04 (load 0.3-1.6) it committed
//     0.20-0.23 times per job against this store's 0.16 per cycle, and
//     still ran 3,107-3,214 jobs/s against 2,225-2,572. At W=32 the
//     commit's wait is a smaller share: with synchronous_commit off (a
//     measurement only) bench ran 8-14% faster, two pairs.
//   - At W=32 the machine is not saturated either (2026-12-04, bench
//     --tasks 20000, measured phase): this process 100 us of CPU per
//     cycle, the cluster 227 us, 1.3 of the two cores at 4,082 cycles/s;
//     pg_stat_activity sampled every 10 ms saw 0.85 of the batches'
//     backends running, 0.35 waiting for this process between the rounds
//     ("idle in transaction") and a tenth in the WAL's sync. More batches
//     at once do not help: HotBatches 3 and 4 ran 0.70-0.88 and 0.64-0.76
//     of 2 (three rounds each, load 1.3-2.7), their batches smaller and
//     each paying a batch's fixed cost. perf -a over a run of bench
//     --tasks 30000 --workers 32 (5,173 cycles/s; the window took the
//     end of the seeding too): postgres 59% of the machine's samples,
//     this process 22%, idle 17%; of postgres's, the index inserts 18%,
//     the executor's start 9%, and autovacuum's vacuum and analyze of
//     the tables just seeded 14%. A run of N=5000 is over before
//     autovacuum comes (log_autovacuum_min_duration: both ran a second
//     after it), so whether they fall into a short run is the timing's.
//     This store and River on 2026-12-05, by one method (perf -a for 3-5 s of
//     the measured phase): this store (bench --tasks 60000 --workers 32,
//     6,517 cycles/s) postgres 56% of the machine's samples, this process
//     25%, idle 18%, so some 250 us of CPU a cycle (postgres 172, this
//     process 77); River in peerbench (W=32, N=60000, fetch 1ms/1s, 7,446
//     jobs/s) postgres 40%, its process 21%, idle 38%, some 166 us a job
//     (106 and 57; peerbench's own count, 61 and 116). Neither saturates
//     the two cores: River does the work in two thirds of this store's
//     CPU, and its workers do not wait for their completions' commits.
//     HotBatches 3 again (bench --tasks 10000 --workers 32, four
//     alternated pairs, load 2.7-3.3): 0.74, 0.81, 0.89 and 0.85 of 2.
//   - How much of the W=32 gap the history is, with packed events
//     (2026-12-05, a build that leaves the journal's statement out of
//     Apply and skips bench's verification, not kept; alternated pairs,
//     load 0.7-1.2): W=32, N=20000, 1.12, 1.17, 1.06 and 1.10 (median
//     1.11); W=8, N=10000, 1.21, 1.14 and 1.14. (That read a free
//     history as bringing W=32 from about 0.8 of River to about 0.9;
//     measured again beside River, the next entry, it brings it to
//     River's pace.) The gap is not the run's length, nor the machine's
//     saturation: peerbench with N=20000 (3 rounds, load 1.3 -> 4.8) ran
//     W=8 at 1.67 times the naive loop and 1.15 times River, W=32 at 3.65
//     and 0.81 (this store 7,373 cycles/s, River 9,034); at W=64 and
//     W=128 (N=20000, 3 rounds, load 0.6 -> 1.6), where both saturate the
//     two cores, 0.68 and 0.68 of River (this store 8,389 and 9,902,
//     River 12,774 and 14,114). Each new connection's first batches pay
//     their statements' parse, plan and first execution (PostgreSQL's
//     log: some 15-25 ms on each of the first two connections, so the
//     first claims of bench take 20-25 ms where a cycle takes 2-5); that
//     is 1-2% of a run of N=5000, and River's first fetches pay the same
//     kind of cost. Analyzing and vacuuming the tasks after the seed, as
//     peerbench does for River, changed nothing measurable (six pairs,
//     W=32, N=5000, median 0.96, range 0.70-1.20).
//   - The history is what stands between W=32 and River (2026-12-05, later;
//     throwaway builds switched by environment variables, and a wrapper that
//     applies SQL after the migration, none kept; bench --tasks 20000
//     --workers 32, a fresh database a run, alternated pairs, load 0.8-2.8).
//     Leaving the journal's statement out of Apply (nothing journaled, so
//     the linker finds nothing to link): 1.26, 1.40, 1.35 and 1.34 in one
//     set of pairs, 1.15, 1.11, 1.12, 1.00, 1.24 and 1.24 in a later and
//     busier one (median of the ten 1.24); this process's CPU 55-68 us a
//     cycle against 67-88. In peerbench's rounds beside River (N=20000,
//     W=32, three rounds each, load 2.1-2.4): this store ran 0.81 of River
//     as it is (medians 7,465 and 9,039 cycles/s) and 0.98 (of medians 1.00)
//     with no history. Every other lever measured, all at once: the
//     completions' lock left out, the keys' five triggers, the packs' GIN
//     index and the six partial indexes that bench's claims and completions
//     never read dropped: 1.03, 1.08, 1.03 and 1.03 (median 1.03). Alone,
//     the GIN index 0.73-1.19 (two sets of four pairs, medians 1.05 and
//     0.99) and the linker stopped for the run (the verification links what
//     it left) 0.78-1.13 (median 1.04, four pairs). The size of a workflow
//     does not matter once it runs: four workflows of 10,000 tasks ran 0.89,
//     1.07 and 1.01 of forty of 1,000 (N=40000). One of 10,000 (N=10000) ran
//     0.81-0.91 of ten of 1,000 (four pairs): the linking of its 10,001
//     creation events falls in the measured run (the first pass linked
//     11,120 events and read back 6,508 bodies, as the linker keeps 4,096
//     kicked ones), and keeping four times as many changed nothing (median
//     1.00, five pairs), so the read-back is not that cost. So without its
//     history this store runs at River's pace, and no other lever is worth
//     more than a few percent. What of the history costs, by builds that
//     write less of it (bench's verification skipped where the readers could
//     not read what they wrote): a batch's bodies as one row of one text
//     array (a tuple and a key entry a batch: no packs, no journal rows,
//     nothing linked) ran 1.16, 0.94, 1.10, 1.11 and 1.08 of this store
//     (median 1.10); with a journal row a workflow beside it (not linked)
//     1.06, 1.20, 1.08, 1.34, 1.13 and 1.14 (median 1.14, the two within
//     each other's noise). The redesign those point to, measured whole: a
//     batch's bodies in one row (its event ids and task seqs beside them, a
//     GIN index on the seqs as packs have), the workflows' journal rows as
//     they are, and the linker linking them from its kicked bodies as it
//     does: 1.12, 1.06, 1.05, 1.04, 1.02, 1.05, 1.03 and 1.02 (median 1.04,
//     load 2.0-2.5). And packs as they are with the twelve body arrays in
//     one (a text per event): 0.92-1.25 (median 1.07, six pairs at load
//     2.8-4.0). Emptying three of the bodies' text fields (the task's state,
//     the content and the detail: most of a body's bytes) changed nothing:
//     1.11, 0.99, 0.92, 0.97, 1.07, 1.01, 0.97 and 1.02 (median 1.00). So
//     the bytes are not the cost, and no one part of the history dominates:
//     the packs' tuples, the journal rows, the GIN entries and the linking
//     each take a few percent, and a redesign of any one of them wins about
//     that (not built: each touches every reader of the history and needs a
//     migration that keeps old databases verifying). The journal's statement
//     itself runs in every batch's last round, before its commit: some 23 us
//     of server time a cycle (pg_stat_statements, W=32). Parity with River
//     at W=32 needs the history nearly free.
//   - pgx (v5.12 and v5.13) shrinks its write buffer after every flush
//     larger than 1 KB, and its parameter buffer after every statement's
//     parameters larger than 256 bytes, so a round of some 20-40 KB grows
//     both again from that size, allocating its size about twice over: a
//     build with both limits raised to 256 KB (a local copy of pgx, not
//     kept) allocated 28.1 KB per cycle against 40.5 at W=8, but ran
//     within the noise (medians of the per-pair ratios 1.01 at W=8, six
//     pairs, and 1.00 at W=32, five).
//   - Two smaller things measured: the claim update's RETURNING of every
//     column costs 20-30 us of a transaction of some 850 us (a prepared
//     claim-shaped update of eight rows, RETURNING every column against
//     the ordinal alone, 1,000 transactions each, alternated). Since
//     2026-12-05 Apply returns no rows (tgdriver.Tx.Apply): its updates
//     return the ordinal alone, and a claim answers with the task as the
//     store granted it from the row it locked (claimedRow), which the
//     behaviour suite checks against the stored task (NextClaim/
//     AnswerIsTheStoredTask). And bench's own process with GOMAXPROCS=1
//     ran W=8 at 1.10-1.54 times its speed with 2 (four rounds) and W=32 at 0.85-0.95 (three):
//     on two cores shared with the database, a W=8 batch waits for the
//     backend's CPU, which the process's second thread takes. Again on
//     2026-12-04 (N=10000, four alternated pairs, load 0.5-0.7): W=8 at
//     1.11, 1.12, 1.16 and 1.20 times its speed, and 74-88 us of this
//     process's CPU a cycle against 110-124. perf record of the process
//     over N=20000: 10,000 samples with two threads against 8,000 with
//     one for the same cycles, of which the scheduler looking for work
//     (findRunnable, mostly waking and parking threads) 1,020 against
//     470, and the batches' own path 4,870 against 4,100; sysmon took a
//     tenth of the samples either way, and page faults of the heap some
//     7% (GODEBUG=madvdontneed=0 changed neither their count nor the
//     speed, four pairs). A matter for a deployment that shares a small
//     machine with its database, not for the driver.
//   - The array parameters (2026-12-05). pgx encodes a []string or
//     []int64 through its generic path (FlatArray), which boxes every
//     element in an interface and looks up its plan: at W=32 that was
//     8.5% of this process's CPU, and ExtendedQueryBuilder.Build 10.6%
//     in all (bench --tasks 60000 --workers 32). registerArrays
//     (arrays.go) puts codecs of our own on each connection's type map that write
//     []string, []int64, []int32 and [][]byte straight into the binary
//     array format, byte for byte what pgx writes
//     (TestArrayEncodingMatchesPgx): Build fell to 3.8%, and allocations
//     from 180 to 135 a cycle. Reads and every other value are pgx's.
//   - A database created with LC_COLLATE 'C' against this cluster's
//     C.UTF-8 (whose comparisons PostgreSQL 15 makes through strcoll):
//     4,597/4,591/4,639 against 4,617/4,452/4,423 cycles/s, W=32, three
//     alternated pairs on a busy machine (load 0.9-1.3), some 2-3%. Not
//     worth a migration of every text key's collation (joins between
//     columns of two collations need one named).
//
// # WAL per cycle
//
// Measured by scripts/pgwal: bench --database URL --tasks 5000 --workers 8
// --json on a fresh database, a CHECKPOINT just before (so that every run
// starts with the same pages to copy), the WAL between pg_current_wal_lsn
// before and after the run read by pg_waldump (records, full-page images, and bytes by
// relation and record type; pg_stat_wal lags by its backends' reporting
// interval, so its deltas over a few seconds undercount). Per task, the
// whole run (creation, claim+complete, linking, verification): about
// 4,550-5,370 bytes, 31 records, 0.02-0.2 FPIs, 0.27 commits (since
// migration 0023; before it 5,280-5,900 and 39.4-39.7 records); the claim
// and complete phase alone (from the --cpuprofile file appearing to its
// being written) 2,810-3,680 bytes (before 3,300-3,990). The higher
// figure of each pair is a run a checkpoint fell into (0.16-0.2 FPIs a
// task). The runs differ by some 100 bytes a task
// (autovacuum, analyze, the linker's pass sizes); the figures by relation
// are the firmer ones. Where the whole run's bytes go, per task:
//
//   - events: the bodies, 1,280-1,360 (440 a body), their TOASTed link
//     runs 160, events_pkey 190-200, the task index (below) 260-400;
//   - tasks: the row's insert 300 and its two updates 580-610 (Heap/UPDATE;
//     a third of the new versions land on another page, logged whole:
//     about 436 bytes against 212 on the same page), 150 of Heap/LOCK (2.8
//     a task: 1.6 the claim scans' FOR UPDATE, a claim's and the rows a
//     scan locked but its batch did not claim, and 1.1 an update whose new
//     version did not fit on the old one's page, which PostgreSQL marks
//     locked in the WAL before it lets go of the page; lockUpdatedSQL
//     then locked no task row when concurrency_keys was empty, as in
//     bench, a fault since mended: it is a statement of its own now and
//     locks the rows of every batch of two completions or more, see
//     "Batches"), and an entry per
//     version in tasks_task_id_key (260),
//     tasks_workflow_id_node_id_key (240; since 0031 an entry of
//     task_nodes at creation instead) and tasks_pkey (190), the ready
//     indexes' entry at creation (240) and tasks_leases' at the claim (64);
//   - the journal: 77-79 since 0023 (0.25 rows a task: a row per writer
//     statement and workflow, its insert 42, its entry in
//     event_journal_by_workflow 20, its delete 13), 694-700 before (a
//     pointer per event: insert 244, index entry 239 and splits, delete
//     162). Two runs each of scripts/pgwal, before and after, load 2.7-9.
//     pg_stat_statements over bench (N=5000, W=8, 7 alternated rounds,
//     load 8-11): the writers' journal statement 2,330-2,380 -> 1,894-1,901
//     bytes of WAL and 37.4 -> 29.0 buffer hits a task; the linker's writes
//     (the pointers' DELETE and the runs' INSERT, now one statement)
//     406-408 -> 246-258 bytes and 4.5-7.1 -> 1.0-1.1 hits a task, two
//     statements a pass instead of three; its read of the journal 9.2-9.4
//     hits a task either way, TryLockJournaled's probe 0.45-0.56 -> 0.18-0.25.
//     Their server time at that load is within the runs' noise (the
//     linker's statements 114-128 against 127-178 µs a task).
//
// HOT ratio of tasks: 0 of 10,000 updates (pg_stat_user_tables
// n_tup_hot_upd / n_tup_upd; workflows, audit_head and server_clock are
// all HOT). A claim changes state (in every ready index's predicate and in
// tasks_leases') and sets lease_expires_at_ms (tasks_leases' key), a
// completion changes both again, and PostgreSQL 15 takes an update out of
// HOT when it changes any column an index uses, its predicate included:
// no fillfactor makes these updates HOT. A fillfactor keeps the new
// versions on their page, where only the changed span of the row is
// logged: fillfactor 50 cut Heap/UPDATE from 600 to 537 bytes a task and
// 75 to 572 (one run each), and Heap/LOCK from 149 to 130 and 140, about
// 1.5% of the WAL for a table twice or a third larger; not kept.
//
// The rule: a task's events are keyed by the task's seq (migration 0021,
// SQLite's 0020): events.task_seq, the writer's when it holds the task's
// row (tgdriver.EventRow.TaskSeq), else set in the event's own INSERT from
// tasks_task_id_key (taskSeqOf: a subquery of the statement, no round trip
// more), indexed as events_by_task_seq (task_seq, event_id); the readers
// (TaskEvents, LastEventOfGeneration) probe it at the seq read from
// tasks_task_id_key, or at 0 for an id without a task row (ofTask; plans
// pinned by TestTaskEventsPlanBySeq, old databases take their seqs in the
// migration: TestTaskEventsBySeq). Task ids are ULIDs, random within the
// millisecond a creation's tasks share, so the events of the tasks
// claimed and completed together went onto random leaves of
// events_by_task (task_id, event_id), split at random, in 40-byte keys.
// Two runs each, before and after: the index's WAL 398/397 -> 268/262
// bytes a task, its size after the run 148 -> 93 pages for 15,000 events;
// the events' heap rows 8 bytes longer (+30 bytes a task); the totals
// within the runs' noise (5,320/5,408 -> 5,357/5,215).
//
// What is left, largest first: the bodies (hashed as they are); the
// tasks' non-HOT updates with an entry in each of three unique indexes
// per version (HOT needs the ready set and the leases out of tasks'
// indexes); the journal, a row, index entry and delete per writer
// statement and workflow (0023).
//
// # Replicas on one database
//
// What two replicas cost over one (bench --mode store, N=5000, W=8, the
// workers spread over the replicas; pg_stat_statements and
// pg_stat_activity sampled every 50 ms, replicas 1 and 2 alternated):
// the database is bound by its commits' WAL flushes (COMMITs per second
// were about the same for one replica and two), so what decides the
// ratio is commits per cycle. Before session 10's cuts two replicas made
// 1.9 times one replica's COMMITs: hot batches (each replica batches only
// its own callers, 2.2-2.3 cycles a batch against 4.0) and linking passes
// (every replica's linker passes, each finding what the others left: 16
// events a pass against 67, and waiting for the others on the workflows'
// rows, 6-23% of sampled backend time in Lock:transactionid). The
// replicas' row locks on tasks did not show (the claim scans skip locked
// rows); the timers' probes and the shared clock's touch are a few
// statements per hundred cycles. Two cuts: the hot lane gathers its
// returning callers for up to 2 ms (hotpace: Gather; since, up to a
// quarter past their average return, at most 5 ms), and a linker
// whose passes find few events waits longer between them (audit.Linker).
// At load 16-32, before and after alternated, two rounds: COMMITs per
// 5000 cycles, one replica 1,661/1,551 before, 1,409/1,376 after; two
// replicas 3,201/3,602 before, 1,969/2,049 after (linking passes
// 867/1,021 to 210/217, hot batches 2,209/2,398 to 1,706/1,736);
// statements per cycle, two replicas 6.1/6.7 before, 4.5/4.6 after (one
// replica 4.3/3.9 before, 4.0/3.7 after, creation and verification
// included); client CPU per cycle for two replicas 1,150/1,247 us before,
// 779/868 after (one replica 550-770 either way). Two replicas now make
// 1.4-1.5 times one replica's COMMITs, 1.9-2.3 before. The rest of the
// gap is the hot batches: a replica's batch holds at most its own callers.
//
// The hot lanes of several replicas (2026-12-04). Each replica's lane
// holds only its callers, and at W=32 two replicas' lanes each split their
// sixteen callers into two batches of eight side by side (hotpace's
// Enough was reached), four batches on the database where one replica
// runs two of sixteen: 0.133-0.135 commits per cycle against
// 0.072-0.076, and on the CPU-bound machine two replicas ran 0.52-0.89 of
// one (eleven pairs, median 0.74). A lane cannot tell one replica at W=16
// (where two batches of eight overlapping beat one of sixteen) from one
// of two at W=32: raising Enough to 16 for all lifted two replicas at
// W=32 by a median 1.29 but cost one replica at W=16 and W=24 (medians
// 0.93 and 0.87, measured with the new binary always second in a pair).
// So the driver counts the replicas on the database (replicas.go: each
// listener holds a session advisory lock of one class, and a driver counts
// that class's granted locks in pg_locks every 500 ms), the domain gives
// its lane's pacer that count to read (tgdriver.ReplicaCounter), and a
// lane starts a batch beside a running one only for Enough times the
// replicas (hotpace, "Replicas"): two replicas together run about the
// batches one would. The count only paces; nothing depends on it for
// safety, and a wrong count (a replica not yet counted, a database without
// advisory locks) paces as for that many replicas. bench --tasks 20000
// --workers 32, one replica, two replicas, and two replicas before the
// change, in rotated order, four rounds (load 1.7-3.9): two replicas
// committed 0.069-0.070 times per cycle (0.132-0.133 before) and ran
// 4,325-6,130 cycles/s against 3,416-5,003 before (per round 1.23, 1.36,
// 1.08, 1.27), 0.78-0.97 of one replica (6,227-7,138 and 5,393; median
// 0.83). At W=8 nothing changes (each replica's lane holds four callers,
// below Enough): two replicas ran 0.86-0.96 of one (three pairs), their
// batches carrying four cycles where one replica's carry eight. Again on
// 2026-12-04 at W=32 (N=10000, three pairs, load 0.7-1.3): 0.98, 0.80
// and 0.90 of one. pg_stat_statements of one pair: two replicas ran 630
// hot batches against one replica's 714 (fewer and larger, not more),
// and the hot statements cost the same per cycle (the claim update 57.3
// against 56.7 us, the events 55.8 against 51.6, the completion update
// 46.3 against 46.5); the process's CPU per cycle was 119 against 105
// us. What is left of the gap is the second store's own work in the
// process (its linker, listener, pools and timers) and the machine's
// noise, not the database's statements. With packed bodies (0029), on
// 2026-12-05 (N=10000, five alternated pairs each, load 0.8-1.8): W=32
// 0.98, 0.96, 0.98, 0.83, 0.81 of one (median 0.96); W=8 0.94, 0.97, 0.89,
// 1.09, 0.93 (median 0.94), the process's CPU per cycle 175-207 us
// against 127-163 (each replica's batches half as large). The linkers
// read back each other's bodies by their packs' ids (JournaledBodies):
// 1.3 ms a call at W=32; a search for each body's journal row through
// event_journal_by_workflow, tried first, read the journal's dead index
// entries and took 13 ms, the costliest statement of the run.
//
// Where two replicas' W=8 goes (2026-12-05, N=10000, same binary, load
// 1.5-2.8). Five alternated pairs: 0.89, 0.84, 0.81, 0.84, 0.88 of one
// (W=32: 0.88, 0.99, 0.84, 0.88, 0.86). Two replicas committed 0.26
// times a cycle against 0.13 and flushed the WAL once a commit (2,612
// WAL syncs for 2,611 commits, pg_stat_wal): two batches in flight at
// once do not share a flush. commit_delay = 300 us with commit_siblings
// = 1 made them share some (2,000 syncs) and ran slower (2,710-2,862
// cycles/s against 2,986-3,186), so the flush is not what is short. The
// machine is: one replica kept 56-63% of the two cores busy, two kept
// 80-81% for a sixth fewer cycles. The batch's cost is mostly fixed: the
// process spends about 240-280 us of CPU in a hot batch (hotTx: pgx's
// encoding of five statements' arrays, the pipeline's two flushes and
// reads, the rows read back) whether it carries 3.9 cycles (two replicas,
// or W=4) or 7.7 (one replica), and about 200 us plus 15 a cycle at W=32.
// Two replicas on one 2-core machine pay it twice as often; replicas on
// machines of their own do not share that CPU.
//
// At W=32 the ratio is within this machine's noise. bench --tasks 20000
// --workers 32, a fresh database a run, sixteen pairs (2026-12-05, load
// 0.8-2.4; six with one replica first, ten rotated):
//   - two replicas ran 0.73-1.21 of one, median 0.97 (the six first pairs
//     0.79-1.19, the ten rotated 0.73-1.21);
//   - commits per cycle 0.068-0.069 against 0.071-0.076.
//
// Either setting's slow runs are the machine's, not a mode of the store:
//   - five profiled runs of two replicas ran 6,157 and 4,287-5,248
//     cycles/s;
//   - their allocations per cycle were the same (140.3-141.0, 38.4 KB), so
//     the store did the same work per cycle;
//   - the process's CPU per cycle was 89 us against 112-129;
//   - the extra CPU was spread over every function: between the fastest
//     and the slowest profile (1.43 against 2.09 s for the same 20,000
//     cycles), no function differs by more than 0.12 s;
//   - one replica's runs spread as widely: 5,468-8,157 cycles/s, 64-99
//     us a cycle.
//
// The rule for the linkers: a linker's own pass (kicked, or its look at
// the whole journal every second) waits for no workflow's row and writes
// nothing when it finds nothing (TryLockJournaled, one statement: which of
// its workflows have journaled events, an EXISTS probe of
// event_journal_by_workflow each without locks, then those rows FOR NO
// KEY UPDATE SKIP LOCKED). A pass that finds nothing journaled, or only
// rows another transaction holds, locks nothing, so it takes no xid and
// its COMMIT flushes no WAL; a workflow whose row was held (most often by
// another replica's linker, which links what was journaled before it read
// the journal) joins the linker's next pass, without a pass of its own
// (one of its own made two replicas' linkers pass 1.3-1.7 times as often,
// each linking a few events); the look at the whole journal every second
// links it at the latest. Readers that link before they read look the
// same way first: with nothing journaled they lock nothing (a history
// read took an xid and flushed WAL at every read before), and when a
// journaled workflow's row is held they lock them all again, waiting
// (LockChains, in workflow id order), so a history read sees every event
// committed before it linked. 500 reads of a task's events (TaskEvents)
// after everything was linked: 48 KB of WAL and about 456 WAL syncs
// before, none after. Plans pinned by TestTryLockJournaledPlanByIndex (generic and
// custom); TestTryLockJournaledSkipsEmptyAndHeld (no xid for a pass that
// finds nothing; a held row reported busy, not waited for) and
// audit's TestLinkerPassSkipsHeldAndKeepsThem. Measured with bench
// --database URL --tasks 5000 --workers 8 --replicas 1|2 --json, a fresh
// database a run, base and new binaries and 1 and 2 replicas alternated,
// three rounds, load 11-16 (pg_stat_statements, pg_stat_activity sampled
// every 50 ms): two replicas' backends waiting on a lock (Lock:*) in
// 2/146, 8/148, 6/152 samples before, 0/168, 0/138, 0/136 after; their
// empty passes, each a COMMIT with a WAL flush before, 10-11 a run before,
// 18-22 after with none flushed; passes that linked 86-94 before, 77-97
// after (one replica 81-91, unchanged); COMMITs per cycle, two replicas
// 0.329/0.280/0.288 before, 0.295/0.288/0.280 after (one replica 0.27
// either way; the hot batches decide it: 1,256-1,511 a run for two
// replicas, 1,251 for one). Throughput, two replicas over one, same
// rounds: 0.87/0.84/1.09 before, 1.07/1.16/1.11 after (at this load a
// run's time varies by half, so the counts are the firmer figures). At
// load 4-5 before the change, two replicas already ran the hot batches and
// COMMITs of one (1,252-1,261 batches, 1,345-1,360 COMMITs against 1,250
// and 1,317-1,345) at 0.93-0.97 of one replica's cycles per second.
//
// # Claim-next
//
// NextPending is one claim scan (see Batches) of one task: the first
// claimable task by (priority DESC, seq) that no other transaction holds,
// locked FOR UPDATE SKIP LOCKED, without waiting. Concurrent claimers get
// different tasks; a claimer never waits for a workflow. Under READ
// COMMITTED a row claimed and committed by another transaction after the
// scan began is locked in its new version, fails the recheck and is
// skipped, but stays locked until the scanning transaction ends: a
// heartbeat of that task waits for the claimer's short transaction, which
// itself waits for nothing.
//
// # Graphs
//
// Nodes (migration 0031). A task's place in its workflow, (workflow_id,
// node_id), is unique in task_nodes, a table of its own, not by an index
// of tasks: a claim and a completion write a new version of the task (never
// HOT, see "What is left"), which enters every index of tasks, and the
// pair never changes after the task is created. task_nodes is written once
// per task, by the statement that inserts it (tasks_nodes_insert, AFTER
// INSERT once per statement, from its new rows), and never updated; a task
// deleted takes its row with it (task_nodes.seq references tasks), and a
// workflow deleted takes its tasks first (workflows_delete_tasks, BEFORE
// DELETE of each workflow row), as tasks' reference to workflows did
// before. task_nodes' primary key keeps node ids unique per workflow, and
// a second creation of a node still waits for the first and fails with a
// unique violation, which Write runs again; task_nodes' reference to
// workflows keeps every task in an existing workflow (TestTaskNodesFollowTasks).
// Every read of one workflow's tasks or nodes picks them by seq through
// task_nodes' primary key (inWorkflow, nodesOf; pinned by
// TestWorkflowReadsUseTaskNodes): tasks has no other index that leads with
// workflow_id than the ready ones, which hold ready tasks only. The claim
// scans within a workflow read those, as before. What it won: bench, the
// index dropped against the store as it was, alternated, N=10000, four
// pairs each, load 0.5-1.3: W=8 per-pair ratios 1.07-1.14 (median 1.10),
// W=32 0.94-1.29 in two runs (medians 1.04 and 1.10); the figures of the
// build itself are in the notes. Its WAL (scripts/pgwal, N=5000,
// W=8): the claim+complete phase 1,968 -> 1,764 bytes and 14.9 -> 12.7
// records a task (the index's 185 bytes gone), the whole run 3,494 ->
// 3,519 (a creation writes task_nodes' row and its two index entries,
// 237 bytes, where the index took 91).
//
// Creation. A creation (CreateWorkflow: one node or a whole graph) costs
// a fixed number of statements, not some per node: its workflow's row
// (EnsureWorkflow), its existing dependencies locked and read in one
// statement (LockDependencies), its keys (LockKey, one each), the nodes
// it names that exist already in one (TasksByNodes: a repeated creation
// finds them), its new tasks in one (InsertTasks: every column an array,
// unnested WITH ORDINALITY and inserted in that order, so the seqs ascend
// in dependency order and the park trigger sees the rows before each, as
// it did in statements of their own), their edges with their
// dependencies' counts in one (InsertEdges), then the events (one
// INSERT) and the audit head. The domain works out each new task's state
// from its dependencies' rows in memory, and refuses a dependency on no
// node, a cycle or a task too many before anything is inserted. One case
// splits the insert: a task cancelled at birth by a new task (its
// dependency, created in the same call, itself cancelled by a failed one)
// keeps that task's seq as its cause, so the tasks made before it are
// inserted first (storetest GraphOnAFailedNodeStartsCancelled).
//
// Before, each node cost its lookup, its insert, a lock and an edge per
// dependency: a round trip each. BenchmarkCreateWorkflow (one workflow of
// 500 nodes in ten layers, 900 edges, a creation per op; 2 rounds of 2,
// alternated, load 1.7-1.8): 765-1,048 tasks/s before, 5,236-6,709 after.
// bench --tasks 5000 --workers 8 (five creations of 1,000 nodes without
// dependencies): pg_stat_statements' calls per task over the whole run
// fell from 3.66 to 1.65; its time outside the measured phase (the
// creations and the verification) from 2.8-3.3 s to 1.3-1.4 s.
//
// Completion. The completions of a hot batch settle their dependents
// together, after them: one statement (decrementUnmetSQL) locks every
// unfinished dependent in task id order, lowers each unmet count by the
// number of the batch's completions it depends on, and returns each row
// whole with the dependencies it still waits for; the dependents made
// ready and the "waiting on" texts are updates of Apply (one statement a
// shape). Before, each completion ran its own decrement, then a read of
// each dependent's dependencies and an update of each, a round trip each,
// while the batch held its rows. bench --layers 10 (each workflow ten
// layers of 100, a task after two of the layer before), N=5000, W=8, two
// alternated rounds at load 1.3-1.9: 802-816 -> 981-996 cycles/s, CPU
// per cycle 534-550 -> 353-354 us, statements per task over the whole
// run 13.9 -> 5.3 (the creation's cut included). What is left is the wait
// on a dependent's row: two batches completing dependencies of one task
// queue on it, the second until the first commits (the decrement's mean
// time, 5 ms a call, is mostly that wait; 2,100-2,500 cycles/s without
// dependencies). Settling dependents after the commit, off the hot path,
// as the linker links events, would take the wait away.
//
// # Ready indexes
//
// The ready indexes hold only claimable tasks: pending with due_at_ms = 0
// (a task waiting for its retry delay or not_before is in tasks_due,
// until the domain promotes it under its workflow's lock; DueTasks is a
// plain SELECT like ExpiredLeases), not parked behind a closed concurrency
// key, full or held back by its rate (key_parked: migrations 0018 and 0025
// say how their triggers keep it; every scan says NOT key_parked, so that
// its index's predicate applies). A claim without capabilities reads
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
// The schema and statements avoid extensions and jsonb. Since migration
// 0012 they use PL/pgSQL triggers (the concurrency keys' counts, and since
// 0018 their parked queues), so an engine needs CREATE FUNCTION ...
// LANGUAGE plpgsql and row triggers.
// The driver also relies on: identity columns, partial indexes, ON CONFLICT,
// FOR UPDATE / FOR SHARE / SKIP LOCKED, SAVEPOINT, RETURNING, pg_notify
// and LISTEN (optional: see Notifications), pg_advisory_xact_lock (an engine
// that accepts it as a no-op loses only the single-migrator guarantee; the
// migration is one transaction either way), pg_try_advisory_lock and
// pg_locks (optional: the replicas' count, which only paces the hot lane;
// without them a replica paces as if alone), information_schema.tables and
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
// The driver makes no backups: back a PostgreSQL database up with pg_dump
// (the CLI's db backup says so for a postgres:// database).
package tgpostgres
