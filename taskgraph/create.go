package taskgraph

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"crypto/rand"

	"github.com/oklog/ulid/v2"

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
	norm, order, err := nodespec.NormalizeAll(nodes)
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
	// (package doc, "Lock order"). A new workflow has none, nor nodes.
	deps, err := w.lockDeps(workflowID, nodes, taskCount)
	if err != nil {
		return err
	}
	keys, ids := make([]string, 0, len(nodes)), make([]string, len(nodes))
	for i, n := range nodes {
		if ids[i] = n.NodeID; n.Key != "" {
			keys = append(keys, n.Key)
		}
	}
	// The keys' rows next, in key order (lockKeys): nodes name keys in
	// any order, and two creates that name the same keys in opposite
	// orders must not wait for each other. The rows are kept as locked
	// (keyRows), so that each node's key is not locked again: nothing but
	// this creation writes them until it commits (no claim ends in it).
	w.keyRows = map[string]tgdriver.KeyRow{}
	defer func() { w.keyRows = nil }()
	if err := w.lockKeys(keys); err != nil {
		return err
	}
	existing := map[string]tgdriver.TaskRow{}
	if taskCount > 0 {
		found, err := w.tx.TasksByNodes(w.ctx, workflowID, ids)
		if err != nil {
			return fmt.Errorf("look up the nodes: %w", err)
		}
		for _, tr := range found {
			existing[tr.NodeID] = tr
		}
	}
	// New rows are made in dependency order, inserted together, then their
	// edges; one whose CancelCause is a new row's seq inserts those first.
	var made []tgdriver.TaskRow
	var madeAt []int
	inserted := 0
	for _, i := range order {
		n := nodes[i]
		if tr, ok := existing[n.NodeID]; ok {
			r, err := toRow(tr)
			if err != nil {
				return err
			}
			if err := sameNode(r, n); err != nil {
				return err
			}
			out[i] = Created{Task: r.Task}
			continue
		}
		if taskCount+len(made)+1 > MaxTasksPerWorkflow {
			return invalid("workflow_id", "workflow %q would exceed %d tasks", workflowID, MaxTasksPerWorkflow)
		}
		tr, cause, err := w.newNode(workflowID, n, deps)
		if err != nil {
			return err
		}
		if cause != nil && cause.Seq == 0 {
			if err := w.insertMade(made[inserted:], deps); err != nil {
				return err
			}
			inserted = len(made)
		}
		if cause != nil {
			tr.CancelCause = deps[cause.NodeID].Seq
		}
		made, madeAt = append(made, tr), append(madeAt, i)
		deps[n.NodeID] = tr
	}
	if err := w.insertMade(made[inserted:], deps); err != nil {
		return err
	}
	var edges []tgdriver.Edge
	for k := range made {
		for _, d := range nodes[madeAt[k]].DependsOn {
			edges = append(edges, tgdriver.Edge{Dep: deps[d].Seq, Task: deps[made[k].NodeID].Seq})
		}
	}
	if err := w.tx.InsertEdges(w.ctx, edges); err != nil {
		return fmt.Errorf("insert edges: %w", err)
	}
	for k, tr := range made {
		tr.Seq = deps[tr.NodeID].Seq
		r, err := w.createdNode(tr, nodes[madeAt[k]])
		if err != nil {
			return err
		}
		out[madeAt[k]] = Created{Task: r.Task, Created: true}
	}
	if added := len(made); added > 0 {
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

// lockDeps locks the existing dependencies of nodes (none in a new
// workflow, taskCount 0) in task id order and returns them by node id
// (createNodes makes those of this creation, or refuses a missing one).
func (w *wtx) lockDeps(workflowID string, nodes []nodespec.Node, taskCount int) (map[string]tgdriver.TaskRow, error) {
	var names []string
	for _, n := range nodes {
		names = append(names, n.DependsOn...)
	}
	deps := make(map[string]tgdriver.TaskRow, len(nodes))
	if len(names) == 0 || taskCount == 0 {
		return deps, nil
	}
	rows, err := w.tx.LockDependencies(w.ctx, workflowID, names)
	if err != nil {
		return nil, fmt.Errorf("lock the dependencies: %w", err)
	}
	for _, tr := range rows {
		deps[tr.NodeID] = tr
	}
	return deps, nil
}

// insertMade inserts the rows createNodes made, in their order, and
// records their seqs in deps.
func (w *wtx) insertMade(made []tgdriver.TaskRow, deps map[string]tgdriver.TaskRow) error {
	if len(made) == 0 {
		return nil
	}
	seqs, err := w.tx.InsertTasks(w.ctx, made)
	if err != nil {
		return fmt.Errorf("insert tasks: %w", err)
	}
	for k, tr := range made {
		tr.Seq = seqs[k]
		deps[tr.NodeID] = tr
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

// newNode makes the row of new node n (it is inserted later: its Seq is
// 0), from deps, the rows of its dependencies by node id; cause is the
// dependency whose failure cancels it, if any (its seq is the row's
// CancelCause, which createNodes sets).
func (w *wtx) newNode(workflowID string, n nodespec.Node, deps map[string]tgdriver.TaskRow) (tr tgdriver.TaskRow, cause *tgdriver.TaskRow, err error) {
	var dueMS int64
	if n.NotBefore.After(w.now) {
		if n.NotBefore.Sub(w.now) > MaxNotBefore {
			return tr, nil, invalid("not_before", "must be at most %d days after the server time of the creation (%s); got %s",
				int(MaxNotBefore/(24*time.Hour)), w.now.Format(time.RFC3339), n.NotBefore.UTC().Format(time.RFC3339))
		}
		// Rounded up: the task is never claimable before not_before.
		dueMS = (n.NotBefore.UnixNano() + int64(time.Millisecond) - 1) / int64(time.Millisecond)
	}
	if n.Key != "" {
		if err := w.ensureKey(n.Key, n.KeyLimit); err != nil {
			return tr, nil, err
		}
	}
	// Each dependency is locked (lockDeps) or made by this creation: its
	// state, counted below, cannot change before this transaction ends,
	// so a dependency that completes concurrently either counts as
	// completed here or sees this task's edge.
	state, status, unmet := StatePending, "ready to claim", 0
	var waiting []string
	for _, d := range n.DependsOn {
		x, ok := deps[d]
		if !ok {
			return tr, nil, invalid("depends_on", "node %q depends on %q, which is not a node of workflow %q (create dependencies first or in the same call)", n.NodeID, d, workflowID)
		}
		switch State(x.State) {
		case StateCompleted:
		case StateFailed, StateCancelled:
			if cause == nil {
				cause = &x
			}
			unmet++
		default:
			unmet++
			waiting = append(waiting, x.NodeID)
		}
	}
	switch {
	case cause != nil:
		state = StateCancelled
		status = fmt.Sprintf("cancelled: upstream node %s (task %s) is %s", cause.NodeID, cause.TaskID, cause.State)
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
		return tr, nil, err
	}
	depsJSON, _ := json.Marshal(n.DependsOn)
	if n.DependsOn == nil {
		depsJSON = []byte("[]")
	}
	return tgdriver.TaskRow{TaskID: taskID, WorkflowID: workflowID, NodeID: n.NodeID, Payload: string(n.Payload), DependsOn: string(depsJSON),
		State: string(state), MaxAttempts: n.MaxAttempts, Unmet: unmet, StatusMessage: status,
		CreatedAtMS: w.nowMS, UpdatedAtMS: w.nowMS, CreatedBy: PrincipalFrom(w.ctx), Priority: n.Priority,
		Requires: strings.Join(n.Requires, " "), DueAtMS: dueMS, RetryDelayMS: n.RetryDelay.Milliseconds(),
		ConcurrencyKey: n.Key, Kind: n.Kind, GateTimeoutMS: n.GateTimeout.Milliseconds(), GateOnTimeout: n.OnTimeout}, cause, nil
}

// createdNode records the creation of node n, inserted as tr: its event,
// and the timers or waiters it concerns.
func (w *wtx) createdNode(tr tgdriver.TaskRow, n nodespec.Node) (row, error) {
	state, dueMS := State(tr.State), tr.DueAtMS
	r, err := toRow(tr)
	if err != nil {
		return row{}, err
	}
	if err := w.appendEvent(&r, EventCreate, "", 0, n.CreateDetail(string(state), dueMS)); err != nil {
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
