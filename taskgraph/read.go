package taskgraph

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Task returns the task with id taskID. If its lease has lapsed, the expiry
// is processed first (back to pending, or failed on its last attempt), so a
// read never shows a dead claim as live. A read-only store cannot process it:
// it returns the task as stored, claimed with LeaseExpiresAt in the past.
func (s *Store) Task(ctx context.Context, taskID string) (Task, error) {
	if err := checkTaskID(taskID); err != nil {
		return Task{}, err
	}
	r, err := scanTask(s.rdb.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE task_id = ?`, taskID))
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, &notFoundError{what: "task", id: taskID}
	}
	if err != nil {
		return Task{}, fmt.Errorf("read task %s: %w", taskID, err)
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

// Workflow returns a whole workflow: tasks in creation order, edges, counts.
func (s *Store) Workflow(ctx context.Context, workflowID string) (WorkflowView, error) {
	if err := checkIdentifier("workflow_id", workflowID); err != nil {
		return WorkflowView{}, err
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return WorkflowView{}, err
	}
	defer tx.Rollback()
	v := WorkflowView{WorkflowID: workflowID, Counts: map[State]int{}}
	var created, updated int64
	err = tx.QueryRowContext(ctx, `SELECT created_at_ms, updated_at_ms FROM workflows WHERE workflow_id = ?`, workflowID).Scan(&created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return WorkflowView{}, &notFoundError{what: "workflow", id: workflowID}
	}
	if err != nil {
		return WorkflowView{}, fmt.Errorf("read workflow %s: %w", workflowID, err)
	}
	v.CreatedAt, v.UpdatedAt = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
	rows, err := tx.QueryContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE workflow_id = ? ORDER BY seq`, workflowID)
	if err != nil {
		return WorkflowView{}, err
	}
	for rows.Next() {
		r, err := scanTask(rows)
		if err != nil {
			rows.Close()
			return WorkflowView{}, err
		}
		v.Tasks = append(v.Tasks, r.Task)
		v.Counts[r.State]++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return WorkflowView{}, err
	}
	erows, err := tx.QueryContext(ctx, `SELECT d.node_id, t.node_id FROM edges e JOIN tasks d ON d.seq = e.dep_seq
		JOIN tasks t ON t.seq = e.task_seq WHERE t.workflow_id = ? ORDER BY t.seq, d.seq`, workflowID)
	if err != nil {
		return WorkflowView{}, err
	}
	defer erows.Close()
	for erows.Next() {
		var e Edge
		if err := erows.Scan(&e.Dependency, &e.Task); err != nil {
			return WorkflowView{}, err
		}
		v.Edges = append(v.Edges, e)
	}
	return v, erows.Err()
}

// ListFilter selects tasks for ListTasks. Zero fields do not filter.
type ListFilter struct {
	WorkflowID string
	State      State
	// Limit bounds the result; 0 means 100, at most 10,000.
	Limit int
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
	q := `SELECT ` + taskColumns + ` FROM tasks WHERE 1 = 1`
	var args []any
	if f.WorkflowID != "" {
		q += ` AND workflow_id = ?`
		args = append(args, f.WorkflowID)
	}
	if f.State != "" {
		q += ` AND state = ?`
		args = append(args, string(f.State))
	}
	q += ` ORDER BY seq LIMIT ?`
	args = append(args, f.Limit)
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	defer rows.Close()
	var out []Task
	for rows.Next() {
		r, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r.Task)
	}
	return out, rows.Err()
}

// CountByState returns how many tasks are in each state, over all workflows.
func (s *Store) CountByState(ctx context.Context) (map[State]int, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT state, COUNT(*) FROM tasks GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	defer rows.Close()
	out := make(map[State]int, len(States))
	for _, st := range States {
		out[st] = 0
	}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[State(st)] = n
	}
	return out, rows.Err()
}

// OldestLeaseExpiry returns the earliest lease expiry among claimed tasks, or
// the zero time when no task is claimed. An expiry in the past means a lease
// lapsed and has not been processed yet.
func (s *Store) OldestLeaseExpiry(ctx context.Context) (time.Time, error) {
	return s.nextLeaseExpiry(ctx)
}
