package taskgraph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"crypto/rand"

	"github.com/oklog/ulid/v2"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/dag"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/gate"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/nodespec"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/statusmsg"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// CreateTask creates one task in workflowID (creating the workflow if it is
// new). Its dependencies must already exist in the workflow. Creating a node
// that exists with the same payload, dependencies and max_attempts returns
// the existing task with Created false; with different ones it fails with
// ErrConflict.
func (s *Store) CreateTask(ctx context.Context, workflowID string, spec NodeSpec) (Created, error) {
	out, err := s.CreateWorkflow(ctx, workflowID, []NodeSpec{spec})
	if err != nil {
		return Created{}, err
	}
	return out[0], nil
}

// CreateWorkflow creates many nodes of one workflow atomically: either every
// node is created (or found identical) or nothing is written. Dependencies may
// name nodes of the same call or nodes that already exist. An unknown
// dependency or a cycle is rejected with ErrInvalid. Results are in the order
// of nodes.
func (s *Store) CreateWorkflow(ctx context.Context, workflowID string, nodes []NodeSpec) ([]Created, error) {
	if err := checkIdentifier("workflow_id", workflowID); err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, invalid("nodes", "at least one node is required")
	}
	if len(nodes) > MaxTasksPerWorkflow {
		return nil, invalid("nodes", "a workflow holds at most %d tasks (got %d)", MaxTasksPerWorkflow, len(nodes))
	}
	norm := make([]nodespec.Node, len(nodes))
	index := make(map[string]int, len(nodes))
	for i, n := range nodes {
		nn, err := nodespec.Normalize(n)
		if err != nil {
			if len(nodes) > 1 {
				return nil, fmt.Errorf("node %d (%q): %w", i, n.NodeID, err)
			}
			return nil, err
		}
		if _, dup := index[nn.NodeID]; dup {
			return nil, invalid("node_id", "node %q appears twice in one workflow creation", nn.NodeID)
		}
		index[nn.NodeID] = i
		norm[i] = nn
	}
	order, err := topoOrder(norm, index)
	if err != nil {
		return nil, err
	}
	rq, err := newRequest(ctx, "create", "", map[string]any{"workflow_id": workflowID, "nodes": nodes})
	if err != nil {
		return nil, err
	}
	var out []Created
	err = s.do(ctx, func(w *wtx) error {
		out = make([]Created, len(nodes))
		return w.kept(rq, &out, func() error {
			return w.as(ActorSubmitter, "").createNodes(workflowID, norm, order, out)
		})
	})
	if err != nil {
		return nil, fmt.Errorf("create in workflow %s: %w", workflowID, err)
	}
	return out, nil
}

// topoOrder orders the nodes of one creation so that every node comes after
// the nodes of the same creation it depends on, or reports a cycle
// (dag.Order).
func topoOrder(nodes []nodespec.Node, index map[string]int) ([]int, error) {
	ids, deps := make([]string, len(nodes)), make([][]string, len(nodes))
	for i, n := range nodes {
		ids[i], deps[i] = n.NodeID, n.DependsOn
	}
	return dag.Order(ids, deps, index)
}

func (w *wtx) createNodes(workflowID string, nodes []nodespec.Node, order []int, out []Created) error {
	// The workflow's lock first: creates of one workflow, and every other
	// writer of its tasks, run one at a time.
	taskCount, err := w.tx.EnsureWorkflow(w.ctx, workflowID, w.nowMS)
	if err != nil {
		return fmt.Errorf("create workflow: %w", err)
	}
	// Then the existing dependencies (FOR SHARE on PostgreSQL), all at
	// once in task id order, as a batch locks the tasks it ends, and
	// before any key's row: whatever ends a claim holds the task's row
	// when the schema's trigger locks its key's row to give the slot back
	// (package doc, "Lock order"). insertNode locks them again, a no-op.
	if err := w.lockDeps(workflowID, nodes); err != nil {
		return err
	}
	keys := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if n.Key != "" {
			keys = append(keys, n.Key)
		}
	}
	// The keys' rows next, in key order (lockKeys): nodes name keys in
	// any order, and two creates that name the same keys in opposite
	// orders must not wait for each other.
	if err := w.lockKeys(keys); err != nil {
		return err
	}
	added := 0
	for _, i := range order {
		n := nodes[i]
		tr, err := w.tx.TaskByNode(w.ctx, workflowID, n.NodeID)
		if err == nil {
			existing, err := toRow(tr)
			if err != nil {
				return err
			}
			if err := sameNode(existing, n); err != nil {
				return err
			}
			out[i] = Created{Task: existing.Task}
			continue
		}
		if !errors.Is(err, tgdriver.ErrNoRows) {
			return fmt.Errorf("look up node %s: %w", n.NodeID, err)
		}
		if taskCount+added+1 > MaxTasksPerWorkflow {
			return invalid("workflow_id", "workflow %q would exceed %d tasks", workflowID, MaxTasksPerWorkflow)
		}
		r, err := w.insertNode(workflowID, n)
		if err != nil {
			return err
		}
		added++
		out[i] = Created{Task: r.Task, Created: true}
	}
	if added > 0 {
		if err := w.tx.AddWorkflowTasks(w.ctx, workflowID, added); err != nil {
			return err
		}
	}
	if taskCount == 0 {
		// A new workflow (an existing one has tasks): recorded in the
		// database-wide chain, so that deleting it whole is detected. The
		// audit head is locked last, after the workflow and its tasks.
		if err := w.appendAudit(AuditCreate, workflowID, nil); err != nil {
			return err
		}
	}
	return nil
}

// lockDeps locks the existing dependencies of nodes in task id order (a
// node of this creation not created yet has no row: insertNode makes it,
// or refuses a dependency that names no node).
func (w *wtx) lockDeps(workflowID string, nodes []nodespec.Node) error {
	var deps []string
	for _, n := range nodes {
		deps = append(deps, n.DependsOn...)
	}
	if len(deps) == 0 {
		return nil
	}
	if err := w.tx.LockDependencies(w.ctx, workflowID, deps); err != nil {
		return fmt.Errorf("lock the dependencies: %w", err)
	}
	return nil
}

// sameNode decides whether a repeated create of n matches the existing task.
func sameNode(existing row, n nodespec.Node) error {
	what := nodespec.Differs(nodespec.Node{Payload: existing.Payload, DependsOn: existing.DependsOn, MaxAttempts: existing.MaxAttempts,
		Priority: existing.Priority, Requires: existing.Requires, RetryDelay: existing.RetryDelay, Key: existing.ConcurrencyKey,
		Kind: existing.Kind, GateTimeout: existing.GateTimeout, OnTimeout: existing.OnTimeout}, n)
	if what == "" {
		return nil
	}
	return &ConflictError{TaskID: existing.TaskID, State: existing.State,
		Detail: fmt.Sprintf("node %q already exists in workflow %q with a different %s; creates are idempotent only when identical (use a new node_id for a different task)", n.NodeID, existing.WorkflowID, what)}
}

// newTaskID returns a ULID whose 80 random bits come from crypto/rand, so
// task ids cannot be guessed from one another.
func newTaskID(now time.Time) (string, error) {
	id, err := ulid.New(ulid.Timestamp(now), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("generate task id: %w", err)
	}
	return id.String(), nil
}

func (w *wtx) insertNode(workflowID string, n nodespec.Node) (row, error) {
	var dueMS int64
	if n.NotBefore.After(w.now) {
		if n.NotBefore.Sub(w.now) > MaxNotBefore {
			return row{}, invalid("not_before", "must be at most %d days after the server time of the creation (%s); got %s",
				int(MaxNotBefore/(24*time.Hour)), w.now.Format(time.RFC3339), n.NotBefore.UTC().Format(time.RFC3339))
		}
		// Rounded up: the task is never claimable before not_before.
		dueMS = (n.NotBefore.UnixNano() + int64(time.Millisecond) - 1) / int64(time.Millisecond)
	}
	if n.Key != "" {
		if err := w.ensureKey(n.Key, n.KeyLimit); err != nil {
			return row{}, err
		}
	}
	deps := make([]tgdriver.TaskRow, 0, len(n.DependsOn))
	for _, d := range n.DependsOn {
		// Locked: its state, counted below, cannot change before this
		// transaction ends, so a dependency that completes concurrently
		// either counts as completed here or sees this task's edge.
		x, err := w.tx.LockDependency(w.ctx, workflowID, d)
		if errors.Is(err, tgdriver.ErrNoRows) {
			return row{}, invalid("depends_on", "node %q depends on %q, which is not a node of workflow %q (create dependencies first or in the same call)", n.NodeID, d, workflowID)
		}
		if err != nil {
			return row{}, fmt.Errorf("look up dependency %s: %w", d, err)
		}
		deps = append(deps, x)
	}
	state, status, unmet := StatePending, "ready to claim", 0
	var cause *tgdriver.TaskRow
	var waiting []string
	for i := range deps {
		switch State(deps[i].State) {
		case StateCompleted:
		case StateFailed, StateCancelled:
			if cause == nil {
				cause = &deps[i]
			}
			unmet++
		default:
			unmet++
			waiting = append(waiting, deps[i].NodeID)
		}
	}
	var causeSeq int64
	switch {
	case cause != nil:
		state = StateCancelled
		status = fmt.Sprintf("cancelled: upstream node %s (task %s) is %s", cause.NodeID, cause.TaskID, cause.State)
		causeSeq = cause.Seq
	case unmet > 0:
		state, status = StateBlocked, "waiting on "+strings.Join(waiting, ", ")
	case n.Kind == KindGate:
		// A gate with nothing to wait for awaits approval at once.
		state, status = StateBlocked, gate.AwaitingStatus(n.GateTimeout, n.OnTimeout, w.nowMS)
		if n.GateTimeout > 0 {
			dueMS = w.nowMS + n.GateTimeout.Milliseconds()
		}
	case dueMS > 0:
		status = statusmsg.Waiting(time.UnixMilli(dueMS), "not_before")
	}
	taskID, err := newTaskID(w.now)
	if err != nil {
		return row{}, err
	}
	depsJSON, _ := json.Marshal(n.DependsOn)
	if n.DependsOn == nil {
		depsJSON = []byte("[]")
	}
	tr := tgdriver.TaskRow{TaskID: taskID, WorkflowID: workflowID, NodeID: n.NodeID, Payload: string(n.Payload), DependsOn: string(depsJSON),
		State: string(state), MaxAttempts: n.MaxAttempts, Unmet: unmet, StatusMessage: status, CancelCause: causeSeq,
		CreatedAtMS: w.nowMS, UpdatedAtMS: w.nowMS, CreatedBy: PrincipalFrom(w.ctx), Priority: n.Priority,
		Requires: strings.Join(n.Requires, " "), DueAtMS: dueMS, RetryDelayMS: n.RetryDelay.Milliseconds(),
		ConcurrencyKey: n.Key, Kind: n.Kind, GateTimeoutMS: n.GateTimeout.Milliseconds(), GateOnTimeout: n.OnTimeout}
	seq, err := w.tx.InsertTask(w.ctx, tr)
	if err != nil {
		return row{}, fmt.Errorf("insert task: %w", err)
	}
	for _, d := range deps {
		if err := w.tx.InsertEdge(w.ctx, d.Seq, seq); err != nil {
			return row{}, fmt.Errorf("insert edge: %w", err)
		}
	}
	tr.Seq = seq
	r, err := toRow(tr)
	if err != nil {
		return row{}, err
	}
	detail := map[string]any{"node_id": n.NodeID, "depends_on": n.DependsOn, "state": string(state), "max_attempts": n.MaxAttempts}
	if n.Priority != 0 {
		detail["priority"] = n.Priority
	}
	if len(n.Requires) > 0 {
		detail["requires"] = n.Requires
	}
	if dueMS > 0 {
		detail["due_at_ms"] = dueMS
	}
	if n.RetryDelay != DefaultRetryDelay {
		detail["retry_delay_ms"] = n.RetryDelay.Milliseconds()
	}
	if n.Key != "" {
		detail["concurrency_key"] = n.Key
	}
	if n.Kind == KindGate {
		detail["kind"] = KindGate
		if n.GateTimeout > 0 {
			detail["gate_timeout_ms"] = n.GateTimeout.Milliseconds()
			detail["on_timeout"] = n.OnTimeout
		}
	}
	if err := w.appendEvent(&r, EventCreate, "", 0, detail); err != nil {
		return row{}, err
	}
	switch {
	case r.AwaitingApproval && dueMS > 0:
		w.scheduleDue()
	case state == StatePending && dueMS > 0:
		w.scheduleDue()
	case state == StatePending:
		w.wakeWaiters(&r)
	}
	return r, nil
}
