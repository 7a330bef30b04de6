package taskview

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/gate"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/pause"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/rules"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/workreport"
)

// State is where a task is in its life.
type State string

// The task states. Completed, failed and cancelled are terminal: they change
// again only through an operator operation (Requeue, Skip).
const (
	StateBlocked   State = "blocked"
	StatePending   State = "pending"
	StateClaimed   State = "claimed"
	StateCompleted State = "completed"
	StateFailed    State = "failed"
	StateCancelled State = "cancelled"
)

// States lists every state in lifecycle order.
var States = []State{StateBlocked, StatePending, StateClaimed, StateCompleted, StateFailed, StateCancelled}

// Terminal reports whether s is completed, failed or cancelled.
func (s State) Terminal() bool {
	return s == StateCompleted || s == StateFailed || s == StateCancelled
}

// Valid reports whether s is one of States.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// Task is a node of a workflow as stored. It never carries the claim token.
type Task struct {
	TaskID     string
	WorkflowID string
	NodeID     string
	Payload    json.RawMessage // a JSON object
	DependsOn  []string        // node ids in the same workflow
	State      State
	// Owner holds the current claim while the task is claimed. A finished
	// task may keep the owner of its last claim (its holder completed,
	// failed or cancelled it, or an operator ended it while claimed); it is
	// "" when the task was never claimed or went back to pending.
	Owner      string
	Generation int64 // number of claims granted so far
	// LeaseExpiresAt is the expiry of the current or last claim; zero when none.
	LeaseExpiresAt time.Time
	Attempts       int
	MaxAttempts    int
	// Priority orders claim-next: highest first, oldest first within one.
	Priority int
	// Requires are the capability tags a claimant must advertise (sorted,
	// deduplicated); nil when the task requires none.
	Requires []string
	// DueAt is when a pending task becomes claimable (NodeSpec.NotBefore,
	// a retry's delay); zero when it is claimable now.
	DueAt time.Time
	// RetryDelay is the base of the task's retry backoff (NodeSpec.RetryDelay).
	RetryDelay time.Duration
	// LeaseLosses counts the task's leases that lapsed (see "Poison tasks"
	// in the package doc); an operator's Requeue sets it back to 0.
	LeaseLosses int
	// ConcurrencyKey is the task's concurrency key ("" for none).
	ConcurrencyKey string
	Result         json.RawMessage // nil until completed
	Error          string          // the last failure, "" when none
	StatusMessage  string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// CreatedBy is the principal that created the task (see taskgraph.WithPrincipal);
	// "" when the creating request carried none.
	CreatedBy string
	// Report is the current (or last) attempt's report (taskgraph.WithReport); nil
	// when it reported nothing.
	Report *workreport.Report
	// TotalUsage is the usage every attempt of the task reported: the
	// earlier attempts' and Report's.
	TotalUsage workreport.Usage
	// Kind is KindTask or KindGate (see "Approval gates" in the package
	// doc). GateTimeout (0: none) and OnTimeout say what the server
	// decides for a gate nobody decided in time.
	Kind        string
	GateTimeout time.Duration
	OnTimeout   string
	// AwaitingApproval: the task is a gate whose dependencies all
	// completed and which nobody decided yet. Its State is blocked (it is
	// never claimable) and DueAt, when set, is when the server decides it.
	AwaitingApproval bool
}

// Created is the outcome of creating one node.
type Created struct {
	Task Task
	// Created is false when an identical node already existed and was returned.
	Created bool
}

// ClaimRequest asks for a lease on a task.
type ClaimRequest struct {
	Owner string
	// Lease is the lease duration; 0 means lease.DefaultDuration.
	Lease time.Duration
	// TaskID claims that task; empty means claim-next: the pending task of
	// highest priority, the oldest first within a priority.
	TaskID string
	// WorkflowID restricts claim-next to one workflow.
	WorkflowID string
	// Wait lets claim-next wait up to this long for a task to become ready.
	Wait time.Duration
	// Capabilities (at most MaxCapabilities tags, each matching TagPattern)
	// are what the claimant can do: claim-next gives only a task whose
	// requires are all among them (none: only tasks that require nothing),
	// and a claim by id of a task requiring others fails with
	// ErrMissingCapabilities.
	Capabilities []string
}

// Claimed is a granted claim: the task after the claim and its lease, whose
// Token is shown only here.
type Claimed struct {
	Task  Task
	Lease lease.Grant
	// Dependencies are the task's direct dependencies with their results
	// (see Dependency), read in the claim's transaction.
	Dependencies []Dependency
	// Paused is set only on a claim-next that found nothing (ok false)
	// because claiming is paused there: on the whole database, or in the
	// workflow it asked for (see PauseClaims).
	Paused *pause.Pause
	// Draining is set only on a claim-next that found nothing (ok false)
	// after Store.Drain: its server is shutting down, so it did not wait
	// (any longer) for a task.
	Draining bool
	// NextClaimableAt is set only on a claim-next that found nothing (ok
	// false) while a task it could take waits for its concurrency key's
	// rate (KeyLimit.Rate): the server time at which the earliest such key
	// allows its next claim. Zero otherwise.
	NextClaimableAt time.Time
	// NextClaimableAtLowerBound is set with NextClaimableAt when the
	// server read its bound of keys held back by their rates without
	// finding one with a task the claim could take: nothing is claimable
	// by rate before NextClaimableAt, and perhaps not then either.
	NextClaimableAtLowerBound bool
}

// Operator identifies the human behind an operator operation.
type Operator struct {
	// Name is who acted (for example the login name); it is recorded in history.
	Name string
	// Reason is why; it is recorded in history and is required.
	Reason string
}

// Edge says that Task cannot start before Dependency completes (node ids).
type Edge struct {
	Dependency string
	Task       string
}

// WorkflowView is a whole workflow: its tasks in creation order, its edges
// and how many tasks are in each state.
type WorkflowView struct {
	WorkflowID string
	Tasks      []Task
	Edges      []Edge
	Counts     map[State]int
	// Usage is the usage of every attempt of the workflow's tasks (all of
	// them, also when Tasks holds only some).
	Usage     workreport.Usage
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Finished reports whether every task of the workflow is terminal.
func (w WorkflowView) Finished() bool {
	for _, t := range w.Tasks {
		if !t.State.Terminal() {
			return false
		}
	}
	return true
}

// ErrConflict means the task is not claimable now, or a create clashes
// with an existing node of different content.
var ErrConflict = errors.New("conflict")

// ErrNotFound means no task (or workflow, or node) has that id.
var ErrNotFound = errors.New("not found")

// NotFoundError names what was not found: What ("task", "workflow") and
// its ID. It matches ErrNotFound.
type NotFoundError struct{ What, ID string }

// Error implements error.
func (e *NotFoundError) Error() string {
	return fmt.Sprintf("%s %q not found", e.What, e.ID)
}

// Is reports whether target is ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// NodeNotFoundError says no node NodeID is in WorkflowID. It matches
// ErrNotFound.
type NodeNotFoundError struct{ WorkflowID, NodeID string }

// Error implements error.
func (e *NodeNotFoundError) Error() string {
	return fmt.Sprintf("node %q of workflow %q not found", e.NodeID, e.WorkflowID)
}

// Is reports whether target is ErrNotFound.
func (e *NodeNotFoundError) Is(target error) bool { return target == ErrNotFound }

// ConflictError explains why an operation clashes with the task's state. It matches ErrConflict.
type ConflictError struct {
	TaskID string
	State  State
	Detail string
}

// Error implements error.
func (e *ConflictError) Error() string {
	if e.TaskID == "" {
		return "conflict: " + e.Detail
	}
	return fmt.Sprintf("conflict on task %s (%s): %s", e.TaskID, e.State, e.Detail)
}

// Is reports whether target is ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Dependency is one direct dependency of a task as seen by its worker: which
// node it is, its state and, once completed, its result.
type Dependency struct {
	NodeID string
	TaskID string
	State  State
	// Result is the dependency's result (nil until completed, or when omitted).
	Result json.RawMessage
	// ResultOmitted: the dependency has a result but it did not fit within
	// MaxDependencyResultBytes for this answer; read it with Task(TaskID).
	ResultOmitted bool
}

// WorkflowSummary is a workflow's counts, without its tasks: what a list of
// workflows shows.
type WorkflowSummary struct {
	WorkflowID string
	// Counts holds the number of tasks in each state (every state present).
	Counts map[State]int
	// Total is the number of tasks.
	Total int
	// Stuck counts the claims whose lease had expired at the read's server
	// time and that nobody has expired yet (no heartbeat for longer than
	// their lease).
	Stuck     int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ListFilter selects tasks for ListTasks. Zero fields do not filter.
type ListFilter struct {
	WorkflowID string
	State      State
	// Limit bounds the result; 0 means 100, at most 10,000.
	Limit int
}

// WorkflowListing is one workflow as a list of them shows it before its
// tasks are counted.
type WorkflowListing struct {
	WorkflowID string
	// Tasks is the number of tasks the workflow holds.
	Tasks     int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// WorkflowVersion is what changes whenever a workflow's tasks change: its
// task count, the length and head of its event chain, and its update time.
// Reading it costs one row, however large the workflow.
type WorkflowVersion struct {
	Tasks       int64
	Events      int64
	Head        string
	UpdatedAtMS int64
}

// ErrMissingCapabilities means a claim by id named a task that requires
// capabilities the caller did not advertise; see *MissingCapabilitiesError.
// It also matches ErrConflict (the task is not claimable by this caller).
var ErrMissingCapabilities = errors.New("missing capabilities")

// MissingCapabilitiesError names the tags a claimant lacks for a task.
type MissingCapabilitiesError struct {
	TaskID  string
	Missing []string
}

// Error implements error.
func (e *MissingCapabilitiesError) Error() string {
	return fmt.Sprintf("conflict on task %s (pending): the task requires capabilities the claim did not advertise: missing %s; claim with capabilities that include them, or leave the task to a worker that has them",
		e.TaskID, strings.Join(e.Missing, ", "))
}

// Is reports whether target is ErrMissingCapabilities or ErrConflict.
func (e *MissingCapabilitiesError) Is(target error) bool {
	return target == ErrMissingCapabilities || target == ErrConflict
}

// GateError explains why an operation on a gate (or a decision on a
// task) was refused. It matches Sentinel and ErrConflict, or ErrInvalid
// for ErrNotGate.
type GateError struct {
	TaskID   string
	State    State
	Sentinel error
	Detail   string
}

// Error implements error.
func (e *GateError) Error() string {
	return fmt.Sprintf("task %s (%s): %s", e.TaskID, e.State, e.Detail)
}

// Is reports whether target is e's sentinel, or ErrConflict (ErrInvalid
// for ErrNotGate).
func (e *GateError) Is(target error) bool {
	if target == e.Sentinel {
		return true
	}
	if e.Sentinel == gate.ErrNotGate {
		return target == rules.ErrInvalid
	}
	return target == ErrConflict
}

// PruneResult reports Prune.
type PruneResult struct {
	Workflows []string
	Tasks     int64
	Events    int64
}

// RequeuedTask is one failed task of a RequeueFailed: what happened to it,
// or, in a dry run, what would have.
type RequeuedTask struct {
	TaskID string
	NodeID string
	// Cause is the failure that failed the task: its error.
	Cause string
	// State is the task's state after the requeue (pending, or blocked
	// when a dependency has not completed); empty when Refused is set.
	State State
	// Refused says why the task was not requeued (the rule Requeue
	// applies); empty when it was (or would be).
	Refused string
}

// RequeueReport is the outcome of RequeueFailed.
type RequeueReport struct {
	WorkflowID string
	// DryRun is true when nothing was written.
	DryRun bool
	// Tasks are the workflow's failed tasks in creation order (those
	// created by one call in no particular order).
	Tasks []RequeuedTask
	// Requeued and Refused count Tasks by outcome.
	Requeued, Refused int
}

// Stats are cumulative counts since the store was opened, for metrics.
type Stats struct {
	Claims          int64 // leases granted
	Reclaims        int64 // leases granted on a task that had been claimed before
	Completions     int64
	Failures        int64 // terminal failures, including leases expired on the last attempt
	Retries         int64 // retryable failures sent back to pending
	Expiries        int64 // leases that lapsed
	Cancels         int64 // holder, protocol and operator cancellations
	CascadeCancels  int64 // dependents cancelled because an upstream task failed or was cancelled
	StaleRejections int64 // holder writes rejected because the claim was not live
	Replays         int64 // writes answered with the kept answer of their request id
}
