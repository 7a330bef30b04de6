package tgdriver

import "strings"

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
	// Requires (canonical, space-joined) and RetryDelayMS.
	NodeID       string
	DependsOn    string
	MaxAttempts  int
	Priority     int
	Requires     string
	RetryDelayMS int64
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

// UnmetRow is a dependent after DecrementUnmet.
type UnmetRow struct {
	Seq   int64
	State string
	Unmet int
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
	DueAtMS     Opt[int64]
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
}
