package tgdriver

import (
	"context"
	"time"
)

// Driver stores task graphs in one database. It is safe for concurrent use.
type Driver interface {
	// Info describes the driver and its database.
	Info() Info
	// Start begins accepting writes with the domain's hooks. It is called
	// once, after the driver was opened (and migrated) and before any Write.
	Start(h Hooks) error
	// Write runs fn as one write transaction and returns once it committed
	// (nil) or failed. See the package doc for the retry rule.
	Write(ctx context.Context, fn func(Tx) error) error
	// Reads answers reads on committed state, outside any transaction.
	Reads() Reads
	// Snapshot runs fn on one consistent read snapshot.
	Snapshot(ctx context.Context, fn func(Reads) error) error
	// Changes delivers a value after another process or replica committed a
	// write that may have made tasks claimable. It may coalesce changes. Nil
	// when the driver never sees other writers.
	Changes() <-chan Change
	// Ready reports whether the database can commit a write now: nil or an
	// error matching ErrUnavailable or ErrClosed. It never changes the data.
	Ready(ctx context.Context) error
	// Ping checks that the database answers a read.
	Ping(ctx context.Context) error
	// Close finishes the writes already accepted and releases the database.
	// It is safe to call more than once.
	Close() error
}

// Info describes a driver: facts about it and its database that the domain
// reads. What a driver can do beyond Driver is an optional interface
// (caps.go), never a field here.
type Info struct {
	// Name is "sqlite" or "postgres".
	Name string
	// Location names the database for logs and errors: a file path, or a
	// PostgreSQL URL without its password.
	Location string
	// ReadOnly: every Write fails with ErrReadOnlyStore.
	ReadOnly bool
	// Connections bounds the transactions the driver runs at once (a
	// pool's size); 0 when it runs one writer (SQLite).
	Connections int
	// JournalEvents: writers of one workflow run at once (PostgreSQL), so
	// the domain does not link a workflow's events in the transaction that
	// records them (that would serialise every writer on the chain head):
	// it journals them (Tx.JournalEvents) and links them after the commit,
	// in journal order (Tx.JournaledEvents, Tx.LinkJournaled). Without it
	// (SQLite, one writer) the domain links events as it appends them
	// (Tx.AppendEvents).
	JournalEvents bool
}

// Hooks are the domain's callbacks into a driver.
type Hooks struct {
	// BatchStart, when set, runs inside every write transaction before any
	// operation of it (SQLite: at the start of every group-committed batch).
	// It returns a function that the driver calls once that transaction has
	// committed, or nil.
	BatchStart func(ctx context.Context, tx Tx) (after func(), err error)
	// OnBatch, when set, is called after every commit attempt with the
	// number of operations committed together, for metrics. It is called
	// before any of those operations' Write calls return.
	OnBatch func(size int, took time.Duration, err error)
}

// Change says what another writer changed.
type Change struct {
	// Workflows lists workflows in which a task became claimable, one entry
	// per task, when the driver knows them.
	Workflows []string
	// Unknown: something changed but the driver cannot tell what (SQLite's
	// data_version, a reconnected listener that may have missed messages);
	// the domain looks at the pending tasks itself.
	Unknown bool
	// Requires holds, when not nil, the canonical requires of the task of
	// each entry of Workflows (same length); nil means none required any.
	Requires []string
}

// Reads are the read operations, in a write transaction (Tx), in a snapshot,
// or on committed state.
type Reads interface {
	// TaskByID returns the task with id taskID, or ErrNoRows.
	TaskByID(ctx context.Context, taskID string) (TaskRow, error)
	// TaskBySeq returns the task with seq, or ErrNoRows.
	TaskBySeq(ctx context.Context, seq int64) (TaskRow, error)
	// TaskByNode returns node nodeID of workflowID, or ErrNoRows.
	TaskByNode(ctx context.Context, workflowID, nodeID string) (TaskRow, error)
	// ListTasks returns tasks matching f in creation (seq) order.
	ListTasks(ctx context.Context, f ListFilter) ([]TaskRow, error)
	// CountByState counts tasks per state over all workflows.
	CountByState(ctx context.Context) (map[string]int, error)
	// NextLeaseExpiry returns the earliest lease expiry of a claimed task;
	// ok is false when none is claimed.
	NextLeaseExpiry(ctx context.Context) (ms int64, ok bool, err error)
	// Dependencies returns the dependencies of task seq, in seq order.
	Dependencies(ctx context.Context, seq int64) ([]DepRow, error)
	// LastEventOfGeneration returns the kind and time of the newest event
	// of taskID recorded at generation; ok is false when there is none.
	LastEventOfGeneration(ctx context.Context, taskID string, generation int64) (kind string, atMS int64, ok bool, err error)
	// Workflow returns the chain head row of workflowID, or ErrNoRows.
	Workflow(ctx context.Context, workflowID string) (WorkflowRow, error)
	// Workflows returns every workflow row in workflow_id order.
	Workflows(ctx context.Context) ([]WorkflowRow, error)
	// WorkflowEdges returns the edges among the tasks of workflowID by node
	// id, ordered by task seq then dependency seq.
	WorkflowEdges(ctx context.Context, workflowID string) ([]EdgeRow, error)
	// TaskEvents returns the events of taskID, oldest first.
	TaskEvents(ctx context.Context, taskID string) ([]EventRow, error)
	// WorkflowEvents calls fn with each event of workflowID in chain order
	// (wseq), stopping at fn's first error.
	WorkflowEvents(ctx context.Context, workflowID string, fn func(EventRow) error) error
	// OrphanEventWorkflow names a workflow that has events but no workflow
	// row; ok is false when there is none.
	OrphanEventWorkflow(ctx context.Context) (workflowID string, ok bool, err error)
	// UnheldEvent names the lowest event whose body no chain holds: neither
	// linked into its workflow's chain nor journaled for linking. Only a
	// driver that stores a body apart from its link can hold one
	// (PostgreSQL since migration 0016); ok is false when there is none.
	UnheldEvent(ctx context.Context) (workflowID string, eventID int64, ok bool, err error)
	// AuditHead returns the entry count and head hash of the database-wide
	// audit chain; ok is false before its first entry.
	AuditHead(ctx context.Context) (count int64, head string, ok bool, err error)
	// AuditEntries calls fn with each entry of the audit chain in order,
	// stopping at fn's first error.
	AuditEntries(ctx context.Context, fn func(AuditRow) error) error
	// EventCount counts the events of every workflow.
	EventCount(ctx context.Context) (int64, error)
	// PendingWorkflows returns the workflow of each of the first limit
	// claimable tasks (pending and due), in claim-next order.
	PendingWorkflows(ctx context.Context, limit int) ([]string, error)
	// CountClaimable counts, up to limit, the claimable tasks (pending,
	// due and not paused) that a claim-next of workflowID ("" for any) with capabilities
	// caps (canonical: sorted, deduplicated) could take: those whose
	// requires are all among caps.
	CountClaimable(ctx context.Context, workflowID string, caps []string, limit int) (int, error)
	// NextDue returns the earliest due_at_ms of the pending tasks not yet
	// promoted (due_at_ms > 0); ok is false when there is none.
	NextDue(ctx context.Context) (ms int64, ok bool, err error)
	// NextGateDue returns the earliest decision time (due_at_ms) of the
	// gates awaiting approval with a timeout (kind gate, blocked,
	// due_at_ms > 0); ok is false when there is none.
	NextGateDue(ctx context.Context) (ms int64, ok bool, err error)
	// JournaledWorkflows returns up to limit workflows that have journaled
	// events, oldest journal entry first.
	JournaledWorkflows(ctx context.Context, limit int) ([]string, error)
	// WorkflowTaskStates calls fn with the audited columns of each task of
	// workflowID in seq order, stopping at fn's first error (audit verify:
	// it reads only what it checks).
	WorkflowTaskStates(ctx context.Context, workflowID string, fn func(TaskStateRow) error) error
	// WorkflowCounts counts the tasks of workflowID per state, and the
	// claimed ones whose lease expired at or before nowMS (stuck claims),
	// without reading the tasks' rows into memory.
	WorkflowCounts(ctx context.Context, workflowID string, nowMS int64) (counts map[string]int, stuck int, err error)
	// WorkflowUsage sums the usage of every attempt of the tasks of
	// workflowID ("" for every workflow): the usage_* and prior_* columns.
	WorkflowUsage(ctx context.Context, workflowID string) (Usage, error)
	// Pauses returns the pauses of claiming in effect: the one of all
	// claiming first (WorkflowID ""), when there is one; then, when
	// workflowID is not empty, that workflow's, else up to limit
	// workflows' pauses in workflow id order.
	Pauses(ctx context.Context, workflowID string, limit int) ([]PauseRow, error)
	// Key returns concurrency key key; ok is false when no task named it.
	Key(ctx context.Context, key string) (k KeyRow, ok bool, err error)
	// Keys returns up to limit concurrency keys in key order, after the
	// key after ("" from the first).
	Keys(ctx context.Context, after string, limit int) ([]KeyRow, error)
	// KeyHead returns the first claimable task (pending, due, not paused)
	// of concurrency key key in claim-next order, through an index of the
	// keyed ready tasks; ok is false when it has none.
	KeyHead(ctx context.Context, key string) (t TaskRow, ok bool, err error)
	// RateHeldKeys returns up to limit concurrency keys whose rate holds
	// back claims at nowMS (RateOpenAtMS after nowMS) and that are not
	// full, in the order their rates open (then by key), each with
	// whether it has a claimable task (pending, due, not paused) of
	// workflowID ("" for any) whose requires are among caps. It reads
	// the keys through an index of their rate's opening (migration 0014)
	// and each key's ready tasks through its index (tasks_ready_by_key).
	RateHeldKeys(ctx context.Context, workflowID string, caps []string, nowMS int64, limit int) ([]RateHeldKey, error)
	// EventHashAt returns the hash of event seq of workflowID's chain; ok is
	// false when there is no such event.
	EventHashAt(ctx context.Context, workflowID string, seq int64) (hash string, ok bool, err error)
}

// Tx is one write transaction.
type Tx interface {
	Reads

	// LockWorkflow takes the write lock of workflowID's row (its chain head)
	// for the rest of the transaction; exists is false when there is no such
	// workflow. Call it before writing any task of the workflow.
	LockWorkflow(ctx context.Context, workflowID string) (exists bool, err error)
	// EnsureWorkflow creates workflowID if it does not exist, locks it as
	// LockWorkflow does and returns its task count.
	EnsureWorkflow(ctx context.Context, workflowID string, nowMS int64) (taskCount int, err error)
	// AddWorkflowTasks adds n to the task count of workflowID.
	AddWorkflowTasks(ctx context.Context, workflowID string, n int) error
	// LockDependencies returns the nodes nodeIDs of workflowID that exist
	// (nodes that do not are passed over; a name given twice counts once;
	// in no particular order) and keeps them from changing state until
	// the transaction ends, so that the tasks a creation makes on them
	// count their states right (PostgreSQL: FOR SHARE). It takes them all
	// at once, in task id order (the order a hot batch locks and updates
	// tasks in), so that a creation that depends on tasks a batch is
	// ending never waits for it in the opposite order.
	LockDependencies(ctx context.Context, workflowID string, nodeIDs []string) ([]TaskRow, error)
	// TasksByNodes returns the nodes nodeIDs of workflowID that exist,
	// unlocked, in no particular order (a creation's look for the nodes it
	// would repeat).
	TasksByNodes(ctx context.Context, workflowID string, nodeIDs []string) ([]TaskRow, error)
	// InsertTasks inserts ts in order (their Seq is ignored) and returns
	// their seqs, ascending in that order.
	InsertTasks(ctx context.Context, ts []TaskRow) (seqs []int64, err error)
	// InsertEdges records that each edge's Task must wait for its Dep, and
	// counts each edge in its Dep's dependents.
	InsertEdges(ctx context.Context, edges []Edge) error

	// NextPending returns the claimable task (pending, due_at_ms = 0, not
	// paused: neither its workflow nor all claiming, see PauseRow) of
	// highest priority, the oldest (lowest seq) first within a priority, of
	// workflowID when it is not empty, whose requires are all among caps
	// (canonical: sorted, deduplicated; empty takes only tasks that require
	// nothing), read through an index ordered so, locked for this
	// transaction (its row only: a writer of tasks never locks their
	// workflow, see the package doc); ok is false when there is none this
	// transaction may take. PostgreSQL skips tasks other transactions hold
	// (SKIP LOCKED).
	NextPending(ctx context.Context, workflowID string, caps []string) (t TaskRow, ok bool, err error)
	// DueTasks returns up to limit pending tasks not yet promoted whose due
	// time had come at atMS (0 < due_at_ms <= atMS), earliest first. It
	// locks nothing: callers lock the workflow and promote with a guarded
	// UpdateTask.
	DueTasks(ctx context.Context, atMS int64, limit int) ([]TaskRef, error)
	// DueGates returns up to limit gates awaiting approval (kind gate,
	// blocked) whose decision time had come at atMS (0 < due_at_ms <=
	// atMS), earliest first, read through an index of such gates. It
	// locks nothing: callers lock the workflow and decide with a guarded
	// UpdateTask.
	DueGates(ctx context.Context, atMS int64, limit int) ([]TaskRef, error)
	// ExpiredLeases returns up to limit claimed tasks whose lease had lapsed
	// at atMS (lease_expires_at_ms <= atMS), earliest expiry first. It locks
	// nothing: callers lock the workflow and expire with a guarded update.
	ExpiredLeases(ctx context.Context, atMS int64, limit int) ([]TaskRef, error)
	// UnfinishedDependents returns the dependents of seq that are blocked,
	// pending or claimed, in seq order.
	UnfinishedDependents(ctx context.Context, seq int64) ([]int64, error)
	// CancelledBy returns the cancelled tasks whose cancel cause is seq.
	CancelledBy(ctx context.Context, causeSeq int64) ([]int64, error)
	// UnfinishedInWorkflow returns the blocked, pending and claimed tasks of
	// workflowID in seq order.
	UnfinishedInWorkflow(ctx context.Context, workflowID string) ([]int64, error)

	// UpdateTask applies set to task seq if guard holds in the same
	// statement, and returns the task as updated; ok is false (and nothing
	// changed) when the task does not exist or guard did not hold.
	UpdateTask(ctx context.Context, seq int64, set TaskSet, guard TaskGuard) (t TaskRow, ok bool, err error)
	// DecrementUnmet lowers the unmet count of every blocked, pending or
	// claimed dependent of the tasks depSeqs (distinct) by the number of
	// them it depends on, in one step, and returns those dependents as it
	// left them, in task id order (PostgreSQL locks them in it).
	DecrementUnmet(ctx context.Context, depSeqs []int64) ([]Dependent, error)
	// ShiftLeases moves every live lease by shiftMS, to at most nowMS + its
	// own duration (defaultLeaseMS when unknown), and returns what moved.
	ShiftLeases(ctx context.Context, shiftMS, nowMS, defaultLeaseMS int64) ([]TaskRef, error)

	// ChainHead returns the head hash and event count of workflowID's chain.
	ChainHead(ctx context.Context, workflowID string) (head string, count int64, err error)
	// AppendEvents inserts linked events, which run consecutively within
	// each workflow in the order given, and advances each workflow's head
	// from (PrevHash, Seq-1) of its first event to (Hash, Seq) of its last
	// by compare and set; when a head had moved it returns ErrChainMoved and
	// the caller's operation rolls back.
	AppendEvents(ctx context.Context, evs []EventRow) error
	// JournalEvents records events not yet linked (Seq, PrevHash and Hash
	// are ignored) in the journal, in the order given, after every journal
	// entry this transaction can see. The order of the journal follows the
	// order of commits for events that depend on one another: an
	// operation journals its events after the reads and writes they
	// describe. See Info.JournalEvents.
	JournalEvents(ctx context.Context, evs []EventRow) error
	// LockChains takes the write lock of each workflow of workflowIDs (as
	// LockWorkflow, in workflow id order) and returns their rows with the
	// chain heads; workflows that do not exist are left out.
	LockChains(ctx context.Context, workflowIDs []string) ([]WorkflowRow, error)
	// JournaledEvents returns the first limit journaled events of the
	// workflows of workflowIDs, in journal order, with EventID their
	// journal id and Seq 0. A driver that journals a write's events of a
	// workflow as one entry returns whole entries (the last may take it
	// past limit).
	JournaledEvents(ctx context.Context, workflowIDs []string, limit int) ([]EventRow, error)
	// LinkJournaled moves journaled events into the chain: evs (linked,
	// each with the EventID of its journal entry) are appended as
	// AppendEvents does and their journal entries removed, or it returns
	// ErrChainMoved (a head moved) or ErrNoRows (an entry is no longer in
	// the journal, or evs hold part of an entry of several events) and
	// the caller's transaction must roll back (part of
	// the move may already be written in it). The caller holds the
	// workflows' locks (LockChains).
	LinkJournaled(ctx context.Context, evs []EventRow) error
	// LockAuditHead returns the entry count and head hash of the audit chain
	// (0 and "" before its first entry) and holds its write lock for the
	// rest of the transaction. Lock order: after any workflow row.
	LockAuditHead(ctx context.Context) (count int64, head string, err error)
	// AppendAudit inserts a and advances the audit head from (a.PrevHash,
	// a.Seq-1) to (a.Hash, a.Seq) by compare and set, or returns
	// ErrChainMoved.
	AppendAudit(ctx context.Context, a AuditRow) error
	// NotifyReady tells the other processes or replicas, once this
	// transaction commits, that a task of workflowID requiring requires
	// (canonical, "" for none) became claimable; with workflowID "",
	// that tasks of any workflow may have (they see a Change Unknown).
	NotifyReady(ctx context.Context, workflowID, requires string) error

	// SetPause records p (a pause of p.WorkflowID, or of all claiming
	// when it is ""), replacing the pause of that scope if there is one,
	// and reports whether there was one. It is exact under concurrency:
	// once it commits, no claim whose transaction saw no pause commits
	// (PostgreSQL waits for the transactions that hold tasks rows, and
	// claims wait for it). Callers lock the workflow first.
	SetPause(ctx context.Context, p PauseRow) (replaced bool, err error)
	// EnsureKey creates concurrency key key, with no limits, if it does
	// not exist.
	EnsureKey(ctx context.Context, key string, nowMS int64) error
	// FreeKeys is what the ends of claims of concurrency keys leave to
	// do, keys holding one entry per claim ended (a key may repeat), in
	// one statement where the driver can, so that a batch's ends cost one
	// round trip: for each entry whose key has a cap (a claim may wait for
	// its slot), the key's first claimable task as KeyHead finds it, in
	// the entries' order, as often as the key repeats (a parked claim is
	// woken for each); and the row of each key that holds no claim and no
	// limit (claimed, max_claimed and rate_count 0) and has no claimable
	// task is deleted, in the delete's own predicate (such a row is what a
	// missing row means; its next claim makes it again). A key without a
	// cap wakes nobody: no claim waits for its slots.
	FreeKeys(ctx context.Context, keys []string) (heads []TaskRow, err error)
	// PruneIdleKeys looks at the first limit concurrency keys after after
	// in key order ("" from the first) and deletes those that hold no
	// claim, no limit and no claimable task (pending, due now), in the
	// delete's own predicate. last is the last key it looked at, "" when
	// there was none: the walk is over. It reads the keys' primary key and
	// tasks_ready_by_key, so a walk costs one pass over the keys.
	PruneIdleKeys(ctx context.Context, after string, limit int) (pruned int, last string, err error)
	// LockKey returns concurrency key key and locks its row for the rest
	// of the transaction; ok is false when it does not exist. A key with
	// a limit (a cap or a rate) is held for writing (PostgreSQL: FOR NO
	// KEY UPDATE), one without only shared (FOR KEY SHARE): its claims
	// write nothing to it (no count is kept while uncapped), so they do
	// not wait for one another, only for a change of its limit
	// (LockKeyForLimit). Lock order: after the tasks rows, and a
	// transaction that locks several keys locks them in key order (the
	// domain locks them all first, sorted).
	LockKey(ctx context.Context, key string) (k KeyRow, ok bool, err error)
	// LockKeys is LockKey of several keys in one statement where the
	// driver can (a batch locks its candidates' keys at once, a creation
	// the keys it names): it returns the rows it locked, in key order,
	// each in the mode LockKey takes it. The keys after held in key order
	// (all of them when held is "") it waits for, in key order; those up
	// to held, the last key a batch already holds, it locks only when no
	// other transaction holds them in a mode that conflicts (PostgreSQL:
	// SKIP LOCKED), and returns in busy, in key order, those another
	// transaction holds (or whose limit a change committed since the
	// statement's snapshot), so that a transaction never waits for a key
	// out of key order. A row this transaction holds is never busy. A key
	// after held it does not return the caller locks with LockKey: a key
	// without a row, or (PostgreSQL) one whose limit a change set or
	// lifted while the statement waited for its row; a key up to held in
	// neither answer has no row.
	LockKeys(ctx context.Context, keys []string, held string) (locked []KeyRow, busy []string, err error)
	// LockKeyForLimit returns concurrency key key locked exclusively
	// (PostgreSQL: FOR UPDATE, so it waits for every claim of the key in
	// flight, and every claim after waits for it) and claimed, the key's
	// claimed tasks counted after the lock in a statement of its own: a
	// change of the key's limit stores that count with a new cap.
	LockKeyForLimit(ctx context.Context, key string) (k KeyRow, ok bool, claimed int, err error)
	// LockParkedOfKey locks the ready tasks of key that are parked out of
	// the ready indexes (PostgreSQL: migration 0018), in task id order. A
	// change of the key's limit calls it after taking the key's row
	// (LockKeyForLimit), since raising or lifting the cap unparks them,
	// and every other unpark takes them after that row too.
	LockParkedOfKey(ctx context.Context, key string) error
	// UpdateKey writes k over old (same Key) if the row still holds old's
	// Claimed, RecentMS and limits, in the update's own predicate; ok is
	// false (nothing written) when it does not.
	UpdateKey(ctx context.Context, old, k KeyRow) (ok bool, err error)

	// ClearPause removes the pause of workflowID ("" for all claiming)
	// and returns it; ok is false when there was none.
	ClearPause(ctx context.Context, workflowID string) (p PauseRow, ok bool, err error)

	// Fetch is the first round of a batch of operations, in one round trip
	// where the driver can: it reads the requests kept under f.Requests,
	// takes each lock of f.Lock, then applies each
	// update of f.Updates (in the order given; sort them by task to keep
	// one lock order), then locks the claimable tasks of each scan of
	// f.Claims. See Fetch.
	Fetch(ctx context.Context, f Fetch) (Fetched, error)
	// Apply is the last round of a batch of operations, in one round trip
	// where the driver can: it applies the guarded updates of a.Updates,
	// then records a.Events (linked, as AppendEvents, after linking them
	// with a.Link when it is set, or journaled, as JournalEvents, by
	// a.Journal; a JournalIDReader then sets each journaled event's
	// EventID in a.Events) and queues a.Ready's notifications (as
	// NotifyReady). Every update must hold its guard: when one does not,
	// Apply returns an error matching ErrGuardFailed and the caller's
	// transaction must roll back (the events of the round may already be
	// written in it). Apply returns no rows: the caller holds every task
	// it updates locked and knows what it wrote (a claim's task as
	// granted), so reading each back would cost the round a task's every
	// column for nothing; a caller that needs a row as the database holds
	// it reads it (TaskBySeq).
	Apply(ctx context.Context, a Apply) error

	// PruneCandidates returns up to limit workflows whose every task is
	// finished and whose last change is before beforeMS, oldest first.
	PruneCandidates(ctx context.Context, beforeMS int64, limit int) ([]string, error)
	// PruneWorkflow removes workflowID with its tasks, edges and events if it
	// is still finished and unchanged since before beforeMS (the guard is in
	// the delete), recording its final chain head in pruned_workflows; ok is
	// false when it no longer qualifies.
	PruneWorkflow(ctx context.Context, workflowID string, beforeMS, nowMS int64) (p PrunedRow, ok bool, err error)

	// Requests returns the requests kept under keys, by key; a key with
	// none kept is not in the map.
	Requests(ctx context.Context, keys []string) (map[string]RequestRow, error)
	// KeepRequest inserts r. When a transaction that committed meanwhile
	// kept r.Key, it fails (PostgreSQL: a unique violation, which Write
	// retries in a new transaction, where Requests finds the row).
	KeepRequest(ctx context.Context, r RequestRow) error
	// PruneRequests removes up to limit requests kept before beforeMS,
	// oldest first, and returns how many it removed.
	PruneRequests(ctx context.Context, beforeMS int64, limit int) (int, error)
	// RequestPrincipals returns each principal keeping more than keep
	// requests, with how many it keeps.
	RequestPrincipals(ctx context.Context, keep int) (map[string]int, error)
	// TrimRequests removes up to limit of principal's requests beyond its
	// keep newest, oldest first, and returns how many it removed.
	TrimRequests(ctx context.Context, principal string, keep, limit int) (int, error)

	// ReadAlive returns the shared alive time of the servers and locks it
	// for the rest of the transaction, so that servers judging it at once
	// take turns; ok is false when none was recorded.
	ReadAlive(ctx context.Context) (ms int64, ok bool, err error)
	// TouchAlive records ms as the servers' alive time.
	TouchAlive(ctx context.Context, ms int64) error
	// TryTouchAlive is TouchAlive unless another transaction holds the
	// alive time (then it waits for nothing and reports false): writes
	// refresh it in passing without queueing behind one another. When a
	// time is recorded it records ms only if that moves it forward by less
	// than withinMS, and reports whether it did: a touch in passing never
	// moves the alive time back, nor over a gap that only a step of the
	// lease clock (ReadAlive, TouchAlive) may measure and give back. A
	// touch whose time was taken before a backward step of the clock, and
	// whose write comes after a step gave that step back, would otherwise
	// record a time ahead of the clock, which the next step would take for
	// a second backward step (every live lease lost).
	TryTouchAlive(ctx context.Context, ms, withinMS int64) (touched bool, err error)
}
