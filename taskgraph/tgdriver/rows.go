package tgdriver

import (
	"errors"
	"fmt"
	"strings"
)

// TaskRow is a task as stored. Nullable columns map to zero values: an empty
// Owner, Error or Result, a zero LeaseExpiresAtMS, LeaseMS or CancelCause
// (seqs start at 1) all mean NULL.
type TaskRow struct {
	Seq              int64
	TaskID           string
	WorkflowID       string
	NodeID           string
	Payload          string // JSON text
	DependsOn        string // JSON array of node ids, as given at creation
	State            string
	Owner            string
	Generation       int64
	TokenHash        []byte
	LeaseExpiresAtMS int64
	LeaseMS          int64
	Attempts         int
	MaxAttempts      int
	Unmet            int
	Result           string // JSON text; "" is NULL
	HasResult        bool
	Error            string
	StatusMessage    string
	CancelCause      int64
	CreatedAtMS      int64
	UpdatedAtMS      int64
	// CreatedBy is the principal that created the task; "" (NULL) when
	// none was authenticated (stdio, operator commands).
	CreatedBy string
	// Priority orders claim-next: highest first, then lowest Seq (-100..100).
	Priority int
	// Requires is the canonical set of capability tags a claimant must
	// advertise: sorted, deduplicated, joined by one space; "" for none.
	Requires string
	// DueAtMS: a pending task is claimable from this server time on; 0
	// means now (only tasks with 0 are in the ready indexes).
	DueAtMS int64
	// RetryDelayMS is the base of a retryable failure's backoff.
	RetryDelayMS int64
	// Dependents counts the tasks that depend on this one (its edges out),
	// so that a completion skips its dependents when it has none.
	Dependents int
	// LeaseLosses counts the leases of the task that lapsed.
	LeaseLosses int
	// Report is the current or last attempt's report (canonical JSON); ""
	// when it reported nothing. Usage is that report's usage, PriorUsage
	// the sum of the task's earlier attempts' (migration 0009).
	Report     string
	Usage      Usage
	PriorUsage Usage
	// ConcurrencyKey names the task's concurrency key ("" for none,
	// migration 0012): see KeyRow.
	ConcurrencyKey string
	// Kind is KindTask or KindGate ("" inserts KindTask); GateTimeoutMS
	// (0: none) and GateOnTimeout ("approve", "reject" or "" for none)
	// say what the server decides for a gate nobody decided in time
	// (migration 0013). A gate awaiting approval is blocked with Unmet 0,
	// and DueAtMS is its decision time (0: none).
	Kind          string
	GateTimeoutMS int64
	GateOnTimeout string
}

// The kinds of task (TaskRow.Kind): an ordinary task, claimed by
// workers, and an approval gate, which no claim takes.
const (
	KindTask = "task"
	KindGate = "gate"
)

// KindOf is the stored kind of a row's Kind: "" is KindTask.
func KindOf(kind string) string {
	if kind == "" {
		return KindTask
	}
	return kind
}

// Usage is what work cost: tokens and money (columns usage_* and prior_*).
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	CostUSD      float64
}

// TaskStateRow is what audit verify checks of a stored task: the columns
// an event's task state and content digests cover. Nullable columns map as
// in TaskRow.
type TaskStateRow struct {
	Seq        int64
	TaskID     string
	Payload    string
	State      string
	Owner      string
	Generation int64
	Attempts   int
	Result     string
	HasResult  bool
	Error      string
	// The columns fixed at creation, which the create event's detail
	// records: NodeID, DependsOn (JSON text), MaxAttempts, Priority,
	// Requires (canonical, space-joined), RetryDelayMS, and Kind,
	// GateTimeoutMS and GateOnTimeout (migration 0013).
	NodeID        string
	DependsOn     string
	MaxAttempts   int
	Priority      int
	Requires      string
	RetryDelayMS  int64
	Kind          string
	GateTimeoutMS int64
	GateOnTimeout string
}

// TaskRef names a task by seq, with its workflow.
type TaskRef struct {
	Seq        int64
	WorkflowID string
	// ExpiresAtMS is the lease expiry, for ShiftLeases' result.
	ExpiresAtMS int64
}

// DepRow is one dependency of a task.
type DepRow struct {
	Seq    int64
	TaskID string
	NodeID string
	State  string
}

// Dependent is a task whose unmet count DecrementUnmet lowered.
type Dependent struct {
	// Row is the task as the decrement left it.
	Row TaskRow
	// By are those of the tasks given to DecrementUnmet that it depends
	// on, ascending.
	By []int64
	// Waiting, for a dependent still blocked with unmet dependencies
	// left, names its dependencies that have not completed, by node id in
	// seq order (its "waiting on" text); nil for any other.
	Waiting []string
}

// EdgeRow is one dependency edge by node id.
type EdgeRow struct {
	Dependency string
	Task       string
}

// WorkflowRow is a workflow with its chain head.
type WorkflowRow struct {
	WorkflowID  string
	TaskCount   int64
	EventCount  int64
	HeadHash    string
	CreatedAtMS int64
	UpdatedAtMS int64
}

// EventRow is one recorded transition. Seq is its position in the
// workflow's chain, from 1.
type EventRow struct {
	EventID    int64
	WorkflowID string
	Seq        int64
	TaskID     string
	Kind       string
	Owner      string
	Generation int64
	AtMS       int64
	Detail     string // a JSON object
	PrevHash   string
	Hash       string
	// HashVersion is the event's hash format: 1 (before migration 0003) or
	// 2. The fields below are "" at version 1.
	HashVersion    int
	ActorKind      string
	ActorName      string
	ActorPrincipal string
	TaskState      string // canonical JSON of the task state the event leaves
	Content        string // canonical JSON of the digests of the content it changed
	// TaskSeq is the seq of the task TaskID names, when the writer holds
	// its row; 0 when it does not, and the driver finds it by TaskID
	// (0 again when no task has that id). The event is stored under it
	// (events.task_seq, where a task's history is read): a TaskSeq that is
	// not TaskID's task's would hide the event from that task's history,
	// so a writer sets it only from the task's own row. Reads leave it 0.
	TaskSeq int64
}

// AuditRow is one entry of the database-wide audit chain (a workflow's
// creation or prune, the switch to hash format 2). Seq is its position, from 1.
type AuditRow struct {
	Seq        int64
	Kind       string
	WorkflowID string
	AtMS       int64
	Detail     string // canonical JSON object
	PrevHash   string
	Hash       string
}

// RequestRow is the kept answer of a write that carried a request id
// (table requests).
type RequestRow struct {
	// Key is the SHA-256 (hex) of the principal, the owner and the request
	// id: the scope of the id.
	Key       string
	Principal string
	// Op names the operation, Args its arguments' digests (a JSON object),
	// Answer its answer (JSON).
	Op, Args, Answer string
	CreatedAtMS      int64
}

// PrunedRow is what PruneWorkflow removed.
type PrunedRow struct {
	Tasks    int64
	Events   int64
	HeadHash string
}

// ListFilter selects tasks for Reads.ListTasks; zero fields do not filter.
type ListFilter struct {
	WorkflowID string
	State      string
	Limit      int
	// NoBodies reads the rows without their payload and result, for a view
	// that shows neither: Payload is "null", Result "" and HasResult false.
	// Every other column is read as usual.
	NoBodies bool
}

// NoBodiesColumns returns a driver's task column list cols (which names
// payload right after node_id and result right after unmet) with payload
// replaced by the constant 'null' and result by NULL, for ListFilter.NoBodies.
// It panics if cols does not name them so: a changed column list must be
// caught when the driver's package loads, not by a wrong read.
func NoBodiesColumns(cols string) string {
	out := strings.Replace(strings.Replace(cols, "node_id, payload,", "node_id, 'null',", 1), "unmet, result,", "unmet, NULL,", 1)
	if strings.Contains(out, "payload") || strings.Contains(out, "result") {
		panic("tgdriver: NoBodiesColumns: the task column list does not name payload and result where expected")
	}
	return out
}

// Opt is an optional column value for TaskSet and TaskGuard: unset leaves
// the column alone (or does not test it), Null sets it to NULL.
type Opt[T any] struct {
	Set  bool
	Null bool
	V    T
}

// Val is an Opt set to v.
func Val[T any](v T) Opt[T] { return Opt[T]{Set: true, V: v} }

// Null is an Opt set to NULL.
func Null[T any]() Opt[T] { return Opt[T]{Set: true, Null: true} }

// TaskSet is the new values of an UpdateTask. UpdatedAtMS is always set.
type TaskSet struct {
	State            Opt[string]
	Owner            Opt[string]
	Generation       Opt[int64]
	TokenHash        Opt[[]byte]
	LeaseExpiresAtMS Opt[int64]
	LeaseMS          Opt[int64]
	Attempts         Opt[int]
	// AddAttempt sets attempts = attempts + 1 (Attempts must be unset).
	AddAttempt    bool
	Unmet         Opt[int]
	Result        Opt[string]
	Error         Opt[string]
	StatusMessage Opt[string]
	CancelCause   Opt[int64]
	// DueAtMS sets due_at_ms (0: claimable now; never NULL).
	DueAtMS Opt[int64]
	// Report sets report (a worker's report, canonical JSON; Null clears
	// it), Usage the usage_* columns and PriorUsage the prior_* columns
	// (never NULL).
	Report     Opt[string]
	Usage      Opt[Usage]
	PriorUsage Opt[Usage]
	// LeaseLosses sets lease_losses (never NULL).
	LeaseLosses Opt[int]
	UpdatedAtMS int64
}

// TaskGuard is the predicate an UpdateTask must meet, in the update itself.
// Zero fields do not test.
type TaskGuard struct {
	// States: state is one of these.
	States []string
	// Generation: generation equals this.
	Generation Opt[int64]
	// Owner and TokenHash: the claim presented.
	Owner     Opt[string]
	TokenHash Opt[[]byte]
	// LeaseLiveAtMS: lease_expires_at_ms > this (the lease runs at that time).
	LeaseLiveAtMS Opt[int64]
	// LeaseLapsedAtMS: lease_expires_at_ms <= this (it had lapsed then).
	LeaseLapsedAtMS Opt[int64]
	// NoUnmet: unmet = 0.
	NoUnmet bool
	// DueByMS: due_at_ms <= this (the task is due at that time; 0 is
	// always due).
	DueByMS Opt[int64]
	// NotPaused: neither the task's workflow nor all claiming is paused
	// (no row of claim_pauses for the workflow or for "").
	NotPaused bool
}

// PauseRow is a pause of claiming (claim_pauses): of the workflow
// WorkflowID, or of every workflow when WorkflowID is "". While it holds,
// no claim is granted there; leases granted before run on.
type PauseRow struct {
	WorkflowID string
	AtMS       int64
	Reason     string
	By         string // the operator
}

// KeyRow is a concurrency key (concurrency_keys, migration 0012): the
// limits of the tasks that name it, and its claims. Every key with a
// limit or a claim has a row; a key without one has no limit and no claim
// (the domain prunes idle rows without a limit, Tx.FreeKeys, and makes a
// missing row again before it locks it).
type KeyRow struct {
	Key string
	// MaxClaimed caps the key's tasks claimed at once; 0 is no cap.
	MaxClaimed int
	// Claimed counts the key's claimed tasks while the key has a cap (0
	// without one: no count is kept). A claim raises it in its own
	// transaction (Tx.UpdateKey, guarded); whatever ends a claim lowers it
	// in the same statement's transaction (a trigger, when capped); a
	// change of the limit that sets a cap stores the count
	// (Tx.LockKeyForLimit).
	Claimed int
	// RateCount claims at most per RateIntervalMS; 0 is no rate.
	RateCount      int
	RateIntervalMS int64
	// RecentMS lists the server times (ms) of the key's claims within the
	// last rate interval, oldest first, space separated, at most
	// RateCount of them.
	RecentMS string
	// RateOpenAtMS is the first server time at which the rate allows the
	// next claim; 0 when it allows one now.
	RateOpenAtMS int64
	UpdatedAtMS  int64
	// UpdatedBy is who set the limits last ("" for the task's creator).
	UpdatedBy string
}

// RateHeldKey is a concurrency key whose rate holds its tasks back
// (Reads.RateHeldKeys): when its rate opens, and whether it has a task the
// claim-next asked about could take.
type RateHeldKey struct {
	Key string
	// OpenAtMS is the first server time at which the key's rate allows
	// its next claim (its RateOpenAtMS).
	OpenAtMS int64
	// Claimable is true when the key has a claimable task (pending, due,
	// not paused) of the workflow and capabilities asked about.
	Claimable bool
}

// Closed reports whether k grants no claim at atMS: it is full, or its
// rate opens after atMS. It is the predicate the claim scans apply
// (ClaimScan).
func (k KeyRow) Closed(atMS int64) bool {
	return k.MaxClaimed > 0 && k.Claimed >= k.MaxClaimed || k.RateOpenAtMS > atMS
}

// TaskUpdate is one guarded update of a batch (Fetch, Apply): Set applies
// to the task with Seq, or with TaskID when Seq is 0, if Guard holds in the
// write itself.
type TaskUpdate struct {
	Seq    int64
	TaskID string
	Set    TaskSet
	Guard  TaskGuard
}

// ClaimScan asks Fetch for up to N claimable tasks (pending, due, not
// paused: see PauseRow) in
// claim-next order (priority DESC, seq) of WorkflowID ("" for any), whose
// requires are all among Caps (canonical; empty takes only tasks that
// require nothing), each locked for the transaction. A driver of many
// writers skips tasks another transaction holds.
//
// The scan passes over the tasks whose concurrency key is closed at AtMS
// (KeyRow.Closed): full, or rate-limited until after AtMS.
type ClaimScan struct {
	WorkflowID string
	Caps       []string
	N          int
	AtMS       int64
}

// KeyUpdate is a guarded write of a concurrency key's row: New over Old,
// if the row still holds Old (UpdateKey's guard). A batch keeps the slots
// its claims take in memory, on rows it holds locked, and writes them
// with its next round (Fetch.Keys, Apply.Keys) rather than one round
// trip each.
type KeyUpdate struct{ Old, New KeyRow }

// Fetch is the first round of a batch (Tx.Fetch).
type Fetch struct {
	// Requests are keys of kept requests (RequestRow.Key) to read, as
	// Tx.Requests does, before anything else of the round: a batch that
	// does not yet know which of its operations are replays reads their
	// kept answers in its first round instead of a round of its own
	// (Fetched.Kept). The round's updates run whatever was read: the
	// caller drops what a replay's update wrote (package taskgraph rolls
	// the transaction back and runs the batch again, reading first).
	Requests []string
	// Keys are written first, before anything else of the round reads
	// them; a guard that does not hold fails the round with
	// ErrGuardFailed.
	Keys []KeyUpdate
	// Lock lists tasks, by id, to read and lock for the transaction (in
	// task id order); ids that do not exist are left out of Fetched.Locked.
	Lock []string
	// Updates are guarded updates whose result the batch needs: Fetched.
	// Updated[i] is the task as updated by Updates[i], with OK false when
	// its guard did not hold (or the task does not exist).
	Updates []TaskUpdate
	// Claims are the claim-next scans of the batch.
	Claims []ClaimScan
}

// Fetched is what Fetch read and changed.
type Fetched struct {
	// Kept are the requests kept under Fetch.Requests, by key; a key with
	// none kept is not in the map (nil when Fetch.Requests was empty).
	Kept      map[string]RequestRow
	Locked    []TaskRow
	Updated   []Updated
	Claimable [][]TaskRow
	// Keys are concurrency keys whose rows the round locked for writing
	// before its updates, in key order (PostgreSQL: the capped keys of
	// the tasks whose claims the updates may end, when there are two
	// updates or more), so that the caller can lock further keys in key
	// order after them.
	Keys []string
}

// Updated is the result of one TaskUpdate of Fetch.
type Updated struct {
	Row TaskRow
	OK  bool
}

// Ready names a task that became claimable, for the other processes or
// replicas (Tx.NotifyReady).
type Ready struct {
	WorkflowID string
	Requires   string
}

// Apply is the last round of a batch (Tx.Apply).
type Apply struct {
	// Keys are written first, before the updates (whose triggers read
	// them); a guard that does not hold fails the round with
	// ErrGuardFailed, before its COMMIT.
	Keys    []KeyUpdate
	Updates []TaskUpdate
	Events  []EventRow
	// Journal records Events in the journal (Tx.JournalEvents) rather than
	// linked (Tx.AppendEvents).
	Journal bool
	// Link, when set (and Journal is not), links Events, which come
	// unlinked and in the order they happened, onto their workflows' chain
	// heads as they stand in the transaction: the driver reads each
	// workflow's head (as ChainHead does) once, calls Link on each event
	// with its predecessor's hash and its position in the chain, and then
	// records them as AppendEvents does. The domain passes its hash
	// format's link (audit.Link): the driver knows nothing of the format.
	Link  func(e *EventRow, prevHash string, seq int64)
	Ready []Ready
	// Requests are kept as KeepRequest keeps each, in the same round.
	Requests []RequestRow
	// Commit says nothing follows Apply in the transaction: the driver may
	// commit it in the same round (PostgreSQL: the COMMIT pipelined after
	// the round's statements, each of Updates then checked by the server).
	// A driver that did so has ended the transaction when Apply returns:
	// nil means committed; an error whose outcome is not known matches
	// ErrUnknownOutcome, any other means nothing was written. A driver may
	// also leave the commit to Write, as without Commit.
	Commit bool
}

// The columns a TaskSet sets, in the order of UpdateShape.Set and of the
// values Shape returns.
const (
	SetState = iota
	SetOwner
	SetGeneration
	SetTokenHash
	SetLeaseExpiresAtMS
	SetLeaseMS
	SetAttempts
	SetUnmet
	SetResult
	SetError
	SetStatusMessage
	SetCancelCause
	SetDueAtMS
	SetReport
	SetUsageInputTokens
	SetUsageOutputTokens
	SetUsageCostUSD
	SetPriorInputTokens
	SetPriorOutputTokens
	SetPriorCostUSD
	SetLeaseLosses
	numSetColumns
)

// SetColumns names the column of each Set* index.
var SetColumns = [numSetColumns]string{"state", "owner", "generation", "token_hash", "lease_expires_at_ms", "lease_ms",
	"attempts", "unmet", "result", "error", "status_message", "cancel_cause", "due_at_ms",
	"report", "usage_input_tokens", "usage_output_tokens", "usage_cost_usd", "prior_input_tokens", "prior_output_tokens", "prior_cost_usd",
	"lease_losses"}

// The tests of a TaskGuard besides States and NoUnmet, in the order of
// UpdateShape.Guard and of the values Shape returns.
const (
	GuardGeneration = iota
	GuardOwner
	GuardTokenHash
	GuardLeaseLiveAt
	GuardLeaseLapsedAt
	GuardDueBy
	numGuardTests
)

// GuardColumns names the column each Guard* index tests, and GuardOps the
// comparison with the value (the NULL form of a test is "IS NULL").
var (
	GuardColumns = [numGuardTests]string{"generation", "owner", "token_hash", "lease_expires_at_ms", "lease_expires_at_ms", "due_at_ms"}
	GuardOps     = [numGuardTests]string{"=", "=", "=", ">", "<=", "<="}
)

// Column forms in UpdateShape: unset, a value, or NULL.
const (
	FormUnset uint8 = iota
	FormValue
	FormNull
)

// UpdateShape is what an update's SQL text depends on: which columns it
// sets (to a value or to NULL), which tests it makes, the states it
// accepts and how it finds its task. The values themselves are
// parameters, so one text (and one prepared statement) serves every update
// of a shape, and a batch runs the updates of one shape as one statement.
// It is comparable: drivers key their statement caches by it.
type UpdateShape struct {
	ByTaskID   bool
	Set        [numSetColumns]uint8
	AddAttempt bool
	Guard      [numGuardTests]uint8
	// States is the guard's accepted states joined by ","; "" tests none.
	States    string
	NoUnmet   bool
	NotPaused bool
}

// ErrBadUpdate means a TaskUpdate the domain built wrong (a caller bug).
var ErrBadUpdate = errors.New("invalid task update")

// Shape returns u's shape, the values of the columns it sets to a value
// (in Set* order) and of the tests it makes with a value (in Guard*
// order). Every driver gives Opt the same meaning through it: Null sets
// or tests NULL, Val sets or tests exactly its value, zero values
// included.
func Shape(u TaskUpdate) (UpdateShape, []any, []any, error) {
	var sh UpdateShape
	set, guard := &u.Set, &u.Guard
	if set.AddAttempt && set.Attempts.Set {
		return sh, nil, nil, fmt.Errorf("%w: AddAttempt and Attempts are both set; set one", ErrBadUpdate)
	}
	if set.DueAtMS.Set && set.DueAtMS.Null {
		return sh, nil, nil, fmt.Errorf("%w: due_at_ms cannot be NULL (0 means due now)", ErrBadUpdate)
	}
	if u.Seq == 0 && u.TaskID == "" {
		return sh, nil, nil, fmt.Errorf("%w: neither a seq nor a task id", ErrBadUpdate)
	}
	sh.ByTaskID = u.Seq == 0
	vals := make([]any, 0, 8)
	col := func(i int, set, null bool, v any) {
		switch {
		case !set:
		case null:
			sh.Set[i] = FormNull
		default:
			sh.Set[i] = FormValue
			vals = append(vals, v)
		}
	}
	col(SetState, set.State.Set, set.State.Null, set.State.V)
	col(SetOwner, set.Owner.Set, set.Owner.Null, set.Owner.V)
	col(SetGeneration, set.Generation.Set, set.Generation.Null, set.Generation.V)
	col(SetTokenHash, set.TokenHash.Set, set.TokenHash.Null, set.TokenHash.V)
	col(SetLeaseExpiresAtMS, set.LeaseExpiresAtMS.Set, set.LeaseExpiresAtMS.Null, set.LeaseExpiresAtMS.V)
	col(SetLeaseMS, set.LeaseMS.Set, set.LeaseMS.Null, set.LeaseMS.V)
	col(SetAttempts, set.Attempts.Set, set.Attempts.Null, int64(set.Attempts.V))
	col(SetUnmet, set.Unmet.Set, set.Unmet.Null, int64(set.Unmet.V))
	col(SetResult, set.Result.Set, set.Result.Null, set.Result.V)
	col(SetError, set.Error.Set, set.Error.Null, set.Error.V)
	col(SetStatusMessage, set.StatusMessage.Set, set.StatusMessage.Null, set.StatusMessage.V)
	col(SetCancelCause, set.CancelCause.Set, set.CancelCause.Null, set.CancelCause.V)
	col(SetDueAtMS, set.DueAtMS.Set, false, set.DueAtMS.V)
	col(SetReport, set.Report.Set, set.Report.Null, set.Report.V)
	for i, u := range [2]Opt[Usage]{set.Usage, set.PriorUsage} {
		if u.Null {
			return sh, nil, nil, fmt.Errorf("%w: usage cannot be NULL (zero means none)", ErrBadUpdate)
		}
		base := SetUsageInputTokens + 3*i
		col(base, u.Set, false, u.V.InputTokens)
		col(base+1, u.Set, false, u.V.OutputTokens)
		col(base+2, u.Set, false, u.V.CostUSD)
	}
	if set.LeaseLosses.Set && set.LeaseLosses.Null {
		return sh, nil, nil, fmt.Errorf("%w: lease_losses cannot be NULL", ErrBadUpdate)
	}
	col(SetLeaseLosses, set.LeaseLosses.Set, false, int64(set.LeaseLosses.V))
	sh.AddAttempt = set.AddAttempt
	gvals := make([]any, 0, 4)
	test := func(i int, set, null bool, v any) {
		switch {
		case !set:
		case null:
			sh.Guard[i] = FormNull
		default:
			sh.Guard[i] = FormValue
			gvals = append(gvals, v)
		}
	}
	test(GuardGeneration, guard.Generation.Set, guard.Generation.Null, guard.Generation.V)
	test(GuardOwner, guard.Owner.Set, guard.Owner.Null, guard.Owner.V)
	test(GuardTokenHash, guard.TokenHash.Set, guard.TokenHash.Null, guard.TokenHash.V)
	test(GuardLeaseLiveAt, guard.LeaseLiveAtMS.Set, guard.LeaseLiveAtMS.Null, guard.LeaseLiveAtMS.V)
	test(GuardLeaseLapsedAt, guard.LeaseLapsedAtMS.Set, guard.LeaseLapsedAtMS.Null, guard.LeaseLapsedAtMS.V)
	test(GuardDueBy, guard.DueByMS.Set, guard.DueByMS.Null, guard.DueByMS.V)
	for i, st := range guard.States {
		if st == "" || strings.ContainsRune(st, ',') {
			return sh, nil, nil, fmt.Errorf("%w: guard state %q", ErrBadUpdate, st)
		}
		if i > 0 {
			sh.States += ","
		}
		sh.States += st
	}
	sh.NoUnmet = guard.NoUnmet
	sh.NotPaused = guard.NotPaused
	return sh, vals, gvals, nil
}

// ChainRun is the events of one workflow in a list of linked events (as
// AppendEvents takes): the first and the last, which a driver's compare
// and set of the chain head needs.
type ChainRun struct {
	WorkflowID  string
	First, Last EventRow
}

// ChainRuns groups linked events by workflow, in the order each workflow
// first appears, and checks that each workflow's events run consecutively
// (each links to the one before it); an error matches ErrChainMoved.
func ChainRuns(evs []EventRow) ([]ChainRun, error) {
	var runs []ChainRun
	at := make(map[string]int, 2)
	for _, e := range evs {
		i, ok := at[e.WorkflowID]
		if !ok {
			at[e.WorkflowID] = len(runs)
			runs = append(runs, ChainRun{WorkflowID: e.WorkflowID, First: e, Last: e})
			continue
		}
		last := &runs[i].Last
		if e.Seq != last.Seq+1 || e.PrevHash != last.Hash {
			return nil, fmt.Errorf("%w: event %d of workflow %s does not follow event %d", ErrChainMoved, e.Seq, e.WorkflowID, last.Seq)
		}
		*last = e
	}
	return runs, nil
}

// Edge is a dependency between two tasks, by seq: Task waits for Dep.
type Edge struct {
	Dep, Task int64
}
