package taskgraph

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/audit"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// Task returns the task with id taskID. If its lease has lapsed, the expiry
// is processed first (back to pending, or failed on its last attempt), so a
// read never shows a dead claim as live. A read-only store cannot process it:
// it returns the task as stored, claimed with LeaseExpiresAt in the past.
func (s *Store) Task(ctx context.Context, taskID string) (Task, error) {
	r, err := s.storedTask(ctx, taskID)
	if err != nil {
		return Task{}, err
	}
	arrived := s.arrival(ctx)
	if s.readOnly || !r.expired(arrived) {
		return r.Task, nil
	}
	err = s.doAt(ctx, arrived, func(w *wtx) error {
		cur, err := w.loadSeq(r.seq)
		if err != nil {
			return err
		}
		if cur.expired(w.at()) {
			if err := w.expire(&cur); err != nil {
				return err
			}
		}
		r = cur
		return nil
	})
	if err != nil {
		return Task{}, fmt.Errorf("read task %s: %w", taskID, err)
	}
	return r.Task, nil
}

// PeekTask returns the task with id taskID as stored: unlike Task, it never
// processes a lapsed lease, so a claim whose lease has lapsed shows as
// claimed with LeaseExpiresAt in the past (a stuck claim), and the read
// writes nothing. It is for views that must not change what they show.
func (s *Store) PeekTask(ctx context.Context, taskID string) (Task, error) {
	r, err := s.storedTask(ctx, taskID)
	return r.Task, err
}

// storedTask reads task taskID's row.
func (s *Store) storedTask(ctx context.Context, taskID string) (row, error) {
	if err := checkTaskID(taskID); err != nil {
		return row{}, err
	}
	tr, err := s.drv.Reads().TaskByID(ctx, taskID)
	r, err := found(tr, err, "task", taskID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return row{}, fmt.Errorf("read task %s: %w", taskID, err)
	}
	return r, err
}

// workflowRow reads workflowID's row; a missing workflow is ErrNotFound.
func workflowRow(ctx context.Context, rd tgdriver.Reads, workflowID string) (tgdriver.WorkflowRow, error) {
	wr, err := rd.Workflow(ctx, workflowID)
	if errors.Is(err, tgdriver.ErrNoRows) {
		return wr, &NotFoundError{What: "workflow", ID: workflowID}
	}
	if err != nil {
		return wr, fmt.Errorf("read workflow %s: %w", workflowID, err)
	}
	return wr, nil
}

// Workflow returns a whole workflow: tasks in creation order, edges, counts,
// read from one snapshot.
func (s *Store) Workflow(ctx context.Context, workflowID string) (WorkflowView, error) {
	if err := checkIdentifier("workflow_id", workflowID); err != nil {
		return WorkflowView{}, err
	}
	var v WorkflowView
	err := s.drv.Snapshot(ctx, func(rd tgdriver.Reads) error {
		var err error
		if v, err = readWorkflow(ctx, rd, workflowID, tgdriver.ListFilter{Limit: MaxTasksPerWorkflow}); err != nil {
			return err
		}
		edges, err := rd.WorkflowEdges(ctx, workflowID)
		if err != nil {
			return err
		}
		for _, e := range edges {
			v.Edges = append(v.Edges, Edge{Dependency: e.Dependency, Task: e.Task})
		}
		return nil
	})
	if err != nil {
		return WorkflowView{}, err
	}
	return v, nil
}

// readWorkflow reads workflowID's row and its tasks in creation order as f
// selects them (f.WorkflowID is set here), with the counts of the tasks
// read.
func readWorkflow(ctx context.Context, rd tgdriver.Reads, workflowID string, f tgdriver.ListFilter) (WorkflowView, error) {
	wr, err := workflowRow(ctx, rd, workflowID)
	if err != nil {
		return WorkflowView{}, err
	}
	v := WorkflowView{WorkflowID: workflowID, Counts: map[State]int{},
		CreatedAt: time.UnixMilli(wr.CreatedAtMS).UTC(), UpdatedAt: time.UnixMilli(wr.UpdatedAtMS).UTC()}
	f.WorkflowID = workflowID
	trs, err := rd.ListTasks(ctx, f)
	if err != nil {
		return WorkflowView{}, err
	}
	for _, tr := range trs {
		r, err := toRow(tr)
		if err != nil {
			return WorkflowView{}, err
		}
		v.Tasks = append(v.Tasks, r.Task)
		v.Counts[r.State]++
		v.Usage = v.Usage.Add(r.TotalUsage)
	}
	return v, nil
}

// WorkflowSummary returns workflowID's counts by state and its stuck claims
// at the server time the call arrived, from one snapshot. It reads no task
// rows into memory (unlike Workflow), and it never expires a lapsed lease.
func (s *Store) WorkflowSummary(ctx context.Context, workflowID string) (WorkflowSummary, error) {
	if err := checkIdentifier("workflow_id", workflowID); err != nil {
		return WorkflowSummary{}, err
	}
	now := s.arrival(ctx)
	var v WorkflowSummary
	err := s.drv.Snapshot(ctx, func(rd tgdriver.Reads) error {
		wr, err := workflowRow(ctx, rd, workflowID)
		if err != nil {
			return err
		}
		counts, stuck, err := rd.WorkflowCounts(ctx, workflowID, now.UnixMilli())
		if err != nil {
			return err
		}
		v = WorkflowSummary{WorkflowID: workflowID, Counts: make(map[State]int, len(States)), Stuck: stuck,
			CreatedAt: time.UnixMilli(wr.CreatedAtMS).UTC(), UpdatedAt: time.UnixMilli(wr.UpdatedAtMS).UTC()}
		for _, st := range States {
			v.Counts[st] = counts[string(st)]
			v.Total += counts[string(st)]
		}
		return nil
	})
	if err != nil {
		return WorkflowSummary{}, err
	}
	return v, nil
}

// WorkflowGraph returns the shape of workflowID for a view of it: its
// tasks in creation order, at most limit of them (0 or more than
// MaxTasksPerWorkflow: all), each without its payload and result (Payload
// is JSON null, Result nil: neither is read from the database), and its
// counts by state and its usage over all of its tasks, from one snapshot. Edges is not
// filled: each task's DependsOn names its dependencies. It never expires a
// lapsed lease. A view that polls reads far less this way than through
// Workflow, whose rows carry payloads and results of up to 256 KiB each.
func (s *Store) WorkflowGraph(ctx context.Context, workflowID string, limit int) (WorkflowView, error) {
	if err := checkIdentifier("workflow_id", workflowID); err != nil {
		return WorkflowView{}, err
	}
	if limit <= 0 || limit > MaxTasksPerWorkflow {
		limit = MaxTasksPerWorkflow
	}
	var v WorkflowView
	err := s.drv.Snapshot(ctx, func(rd tgdriver.Reads) error {
		var err error
		if v, err = readWorkflow(ctx, rd, workflowID, tgdriver.ListFilter{Limit: limit, NoBodies: true}); err != nil {
			return err
		}
		if len(v.Tasks) < limit {
			return nil
		}
		// Some tasks may be left out: count them all in the database.
		counts, _, err := rd.WorkflowCounts(ctx, workflowID, 0)
		if err != nil {
			return err
		}
		clear(v.Counts)
		for st, n := range counts {
			v.Counts[State(st)] = n
		}
		u, err := rd.WorkflowUsage(ctx, workflowID)
		v.Usage = Usage(u)
		return err
	})
	if err != nil {
		return WorkflowView{}, err
	}
	return v, nil
}

// ListTasks returns tasks matching f in creation order.
func (s *Store) ListTasks(ctx context.Context, f ListFilter) ([]Task, error) {
	if f.Limit == 0 {
		f.Limit = 100
	}
	if f.Limit < 0 || f.Limit > MaxTasksPerWorkflow {
		return nil, invalid("limit", "must be between 1 and %d (got %d)", MaxTasksPerWorkflow, f.Limit)
	}
	if f.State != "" && !f.State.Valid() {
		return nil, invalid("state", "must be one of blocked, pending, claimed, completed, failed, cancelled (got %q)", f.State)
	}
	if f.WorkflowID != "" {
		if err := checkIdentifier("workflow_id", f.WorkflowID); err != nil {
			return nil, err
		}
	}
	trs, err := s.drv.Reads().ListTasks(ctx, tgdriver.ListFilter{WorkflowID: f.WorkflowID, State: string(f.State), Limit: f.Limit})
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	out := make([]Task, 0, len(trs))
	for _, tr := range trs {
		r, err := toRow(tr)
		if err != nil {
			return nil, err
		}
		out = append(out, r.Task)
	}
	return out, nil
}

// CountByState returns how many tasks are in each state, over all workflows.
func (s *Store) CountByState(ctx context.Context) (map[State]int, error) {
	m, err := s.drv.Reads().CountByState(ctx)
	if err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	out := make(map[State]int, len(States))
	for _, st := range States {
		out[st] = 0
	}
	for st, n := range m {
		out[State(st)] = n
	}
	return out, nil
}

// OldestLeaseExpiry returns the earliest lease expiry among claimed tasks, or
// the zero time when no task is claimed. An expiry in the past means a lease
// lapsed and has not been processed yet.
func (s *Store) OldestLeaseExpiry(ctx context.Context) (time.Time, error) {
	return s.nextLeaseExpiry(ctx)
}

// RecentWorkflows returns every workflow, the most recently changed first
// (ties by id), without reading any task. A workflow changes when a task of
// it is created or changes state.
func (s *Store) RecentWorkflows(ctx context.Context) ([]WorkflowListing, error) {
	// A workflow's last change is its newest linked event's.
	if err := s.linkAll(ctx); err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	wrs, err := s.drv.Reads().Workflows(ctx)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	audit.SortByRecency(wrs)
	out := make([]WorkflowListing, len(wrs))
	for i, w := range wrs {
		out[i] = WorkflowListing{WorkflowID: w.WorkflowID, Tasks: int(w.TaskCount),
			CreatedAt: time.UnixMilli(w.CreatedAtMS).UTC(), UpdatedAt: time.UnixMilli(w.UpdatedAtMS).UTC()}
	}
	return out, nil
}

// WorkflowIDs returns the id of every workflow, in id order.
func (s *Store) WorkflowIDs(ctx context.Context) ([]string, error) {
	wrs, err := s.drv.Reads().Workflows(ctx)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	out := make([]string, len(wrs))
	for i, w := range wrs {
		out[i] = w.WorkflowID
	}
	return out, nil
}

// WorkflowVersion reads workflowID's version (one row); a missing workflow
// is ErrNotFound. On a driver that journals events (PostgreSQL) the chain
// head moves once the events are linked, a few milliseconds after the
// commit on the replica that wrote them (within a second from another
// replica), so a view keyed by it shows a change that much later.
func (s *Store) WorkflowVersion(ctx context.Context, workflowID string) (WorkflowVersion, error) {
	if err := checkIdentifier("workflow_id", workflowID); err != nil {
		return WorkflowVersion{}, err
	}
	wr, err := workflowRow(ctx, s.drv.Reads(), workflowID)
	if err != nil {
		return WorkflowVersion{}, err
	}
	return WorkflowVersion{Tasks: wr.TaskCount, Events: wr.EventCount, Head: wr.HeadHash, UpdatedAtMS: wr.UpdatedAtMS}, nil
}
