package taskgraph

import (
	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/nodespec"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/rules"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/taskview"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// The store's views of tasks and workflows (package taskview: their fields
// and what each means), under the names the store's callers use.
type (
	// State is where a task is in its life.
	State = taskview.State
	// Task is a node of a workflow as stored.
	Task = taskview.Task
	// Created is the outcome of creating one node.
	Created = taskview.Created
	// ClaimRequest asks for a lease on a task.
	ClaimRequest = taskview.ClaimRequest
	// Claimed is a granted claim: the task and its lease.
	Claimed = taskview.Claimed
	// Dependency is one direct dependency of a task, as its worker sees it.
	Dependency = taskview.Dependency
	// Operator identifies the human behind an operator operation.
	Operator = taskview.Operator
	// Edge says that Task cannot start before Dependency completes.
	Edge = taskview.Edge
	// WorkflowView is a whole workflow: tasks, edges and counts.
	WorkflowView = taskview.WorkflowView
	// WorkflowSummary is a workflow's counts, without its tasks.
	WorkflowSummary = taskview.WorkflowSummary
	// ListFilter selects tasks for ListTasks.
	ListFilter = taskview.ListFilter
	// WorkflowListing is one workflow as a list of them shows it.
	WorkflowListing = taskview.WorkflowListing
	// WorkflowVersion is what changes whenever a workflow's tasks change.
	WorkflowVersion = taskview.WorkflowVersion
	// NotFoundError names what was not found (a task or workflow).
	NotFoundError = taskview.NotFoundError
	// NodeNotFoundError names a node not found in its workflow.
	NodeNotFoundError = taskview.NodeNotFoundError
	// ConflictError explains why an operation clashes with the task's state.
	ConflictError = taskview.ConflictError
	// MissingCapabilitiesError names the tags a claimant lacks for a task.
	MissingCapabilitiesError = taskview.MissingCapabilitiesError
	// GateError explains why an operation on a gate was refused.
	GateError = taskview.GateError
	// PruneResult reports Prune.
	PruneResult = taskview.PruneResult
	// RequeuedTask is one failed task of a RequeueFailed.
	RequeuedTask = taskview.RequeuedTask
	// RequeueReport is the outcome of RequeueFailed.
	RequeueReport = taskview.RequeueReport
	// Stats are cumulative counts since the store was opened.
	Stats = taskview.Stats
)

// The task states (package taskview); States lists them in lifecycle order.
const (
	StateBlocked   = taskview.StateBlocked
	StatePending   = taskview.StatePending
	StateClaimed   = taskview.StateClaimed
	StateCompleted = taskview.StateCompleted
	StateFailed    = taskview.StateFailed
	StateCancelled = taskview.StateCancelled
)

// States lists every state in lifecycle order.
var States = taskview.States

// NodeSpec describes a task to create (package nodespec: its fields,
// their rules and the defaults).
type NodeSpec = nodespec.Spec

// Errors returned by the store. Each is wrapped with context; test with errors.Is.
var (
	// ErrNotFound: no task (or workflow, or node) with that id; see
	// *NotFoundError and *NodeNotFoundError.
	ErrNotFound = taskview.ErrNotFound
	// ErrInvalid: the input broke a bound or rule; see *ValidationError.
	ErrInvalid = rules.ErrInvalid
	// ErrConflict: the task is not claimable now, or a create clashes with an
	// existing node of different content.
	ErrConflict = taskview.ErrConflict
	// ErrClosed: the store was closed.
	ErrClosed = tgdriver.ErrClosed
	// ErrStaleClaim: the presented claim is not the live one; see *lease.StaleClaimError.
	ErrStaleClaim = lease.ErrStaleClaim
)

// ValidationError names the field that broke a rule. It matches
// ErrInvalid (package rules).
type ValidationError = rules.ValidationError

func invalid(field, format string, args ...any) error { return rules.Invalid(field, format, args...) }
