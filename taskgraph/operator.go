package taskgraph

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"
)

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Requeue is a human operator's operation: it puts a task back to pending
// (blocked if its dependencies are not all completed), fencing out any holder,
// resetting its attempts, and reviving the dependents its failure or
// cancellation had cancelled. A completed task cannot be requeued (its
// dependents may already have run on its result); a blocked one has nothing
// to requeue.
func (s *Store) Requeue(ctx context.Context, taskID string, op Operator) (Task, error) {
	if err := checkTaskID(taskID); err != nil {
		return Task{}, err
	}
	if err := checkOperator(op); err != nil {
		return Task{}, err
	}
	var out Task
	err := s.do(ctx, func(w *wtx) error {
		r, err := w.loadTask(taskID)
		if err != nil {
			return err
		}
		from := r.State
		switch from {
		case StateCompleted:
			return &ConflictError{TaskID: r.TaskID, State: from, Detail: "a completed task cannot be requeued: its dependents may already have used its result"}
		case StateBlocked:
			return &ConflictError{TaskID: r.TaskID, State: from, Detail: "the task has not run yet (" + r.StatusMessage + "); requeue or skip its dependencies instead"}
		}
		// A task cancelled because its upstream failed cannot run until that
		// upstream is requeued or skipped.
		if blocker, err := w.failedDependency(r.seq); err != nil {
			return err
		} else if blocker != "" {
			return &ConflictError{TaskID: r.TaskID, State: from, Detail: "its dependency " + blocker + " did not complete; requeue or skip that task first"}
		}
		holder := r.Owner
		unmet, waiting, err := w.unmetDependencies(r.seq)
		if err != nil {
			return err
		}
		state, status := StatePending, fmt.Sprintf("ready to claim (requeued by %s: %s)", op.Name, op.Reason)
		if unmet > 0 {
			state, status = StateBlocked, blockedStatus(waiting)
		}
		if _, err := w.exec(`UPDATE tasks SET state = ?, owner = NULL, token_hash = NULL, lease_expires_at_ms = NULL, attempts = 0,
			unmet = ?, cancel_cause = NULL, status_message = ?, updated_at_ms = ? WHERE seq = ?`,
			string(state), unmet, status, w.nowMS, r.seq); err != nil {
			return err
		}
		if err := w.reload(&r); err != nil {
			return err
		}
		if state == StatePending {
			w.wakeWaiters(r.WorkflowID)
		}
		if err := w.appendEvent(&r, EventRequeue, holder, r.Generation, map[string]any{"operator": op.Name, "reason": op.Reason, "from": string(from)}); err != nil {
			return err
		}
		if from == StateFailed || from == StateCancelled {
			if err := w.revive(&r, "requeued"); err != nil {
				return err
			}
		}
		out = r.Task
		return nil
	})
	if err != nil {
		return Task{}, fmt.Errorf("requeue task %s: %w", taskID, err)
	}
	return out, nil
}

// Skip is a human operator's operation: it marks a task completed with a null
// result and an operator note, fencing out any holder, so its dependents can
// proceed (including those its failure or cancellation had cancelled).
func (s *Store) Skip(ctx context.Context, taskID string, op Operator) (Task, error) {
	if err := checkTaskID(taskID); err != nil {
		return Task{}, err
	}
	if err := checkOperator(op); err != nil {
		return Task{}, err
	}
	var out Task
	err := s.do(ctx, func(w *wtx) error {
		r, err := w.loadTask(taskID)
		if err != nil {
			return err
		}
		from := r.State
		if from == StateCompleted {
			return &ConflictError{TaskID: r.TaskID, State: from, Detail: "the task is already completed"}
		}
		holder := r.Owner
		if _, err := w.exec(`UPDATE tasks SET state = 'completed', result = 'null', token_hash = NULL, lease_expires_at_ms = NULL,
			cancel_cause = NULL, status_message = ?, updated_at_ms = ? WHERE seq = ?`,
			fmt.Sprintf("skipped by operator %s: %s", op.Name, op.Reason), w.nowMS, r.seq); err != nil {
			return err
		}
		if err := w.reload(&r); err != nil {
			return err
		}
		if err := w.appendEvent(&r, EventSkip, holder, r.Generation, map[string]any{"operator": op.Name, "reason": op.Reason, "from": string(from)}); err != nil {
			return err
		}
		// Dependents still waiting count this task as unmet; the ones its
		// failure cancelled are revived and recounted from scratch.
		if err := w.completeDependents(r.seq); err != nil {
			return err
		}
		if from == StateFailed || from == StateCancelled {
			if err := w.revive(&r, "skipped"); err != nil {
				return err
			}
		}
		out = r.Task
		return nil
	})
	if err != nil {
		return Task{}, fmt.Errorf("skip task %s: %w", taskID, err)
	}
	return out, nil
}

// AbortWorkflow is a human operator's operation: it cancels every unfinished
// task of the workflow, fencing out their holders, and returns how many it
// cancelled.
func (s *Store) AbortWorkflow(ctx context.Context, workflowID string, op Operator) (int, error) {
	if err := checkIdentifier("workflow_id", workflowID); err != nil {
		return 0, err
	}
	if err := checkOperator(op); err != nil {
		return 0, err
	}
	n := 0
	err := s.do(ctx, func(w *wtx) error {
		var one int
		if err := w.queryRow(`SELECT 1 FROM workflows WHERE workflow_id = ?`, workflowID).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return &notFoundError{what: "workflow", id: workflowID}
		} else if err != nil {
			return err
		}
		seqs, err := w.seqs(`SELECT seq FROM tasks WHERE workflow_id = ? AND state IN ('blocked', 'pending', 'claimed') ORDER BY seq`, workflowID)
		if err != nil {
			return err
		}
		status := fmt.Sprintf("aborted by operator %s: %s", op.Name, op.Reason)
		for _, seq := range seqs {
			r, err := w.loadSeq(seq)
			if err != nil {
				return err
			}
			holder := r.Owner
			if err := w.setState(seq, StateCancelled, status); err != nil {
				return err
			}
			if err := w.reload(&r); err != nil {
				return err
			}
			if err := w.appendEvent(&r, EventAbort, holder, r.Generation, map[string]any{"operator": op.Name, "reason": op.Reason}); err != nil {
				return err
			}
		}
		n = len(seqs)
		w.afterCommit(func() { w.s.stats.cancels.Add(int64(n)) })
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("abort workflow %s: %w", workflowID, err)
	}
	return n, nil
}

func (w *wtx) seqs(query string, args ...any) ([]int64, error) {
	rows, err := w.query(query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// unmetDependencies counts the dependencies of seq that have not completed.
func (w *wtx) unmetDependencies(seq int64) (int, []string, error) {
	rows, err := w.query(`SELECT t.node_id FROM edges e JOIN tasks t ON t.seq = e.dep_seq
		WHERE e.task_seq = ? AND t.state <> 'completed' ORDER BY t.seq`, seq)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	var waiting []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return 0, nil, err
		}
		waiting = append(waiting, n)
	}
	return len(waiting), waiting, rows.Err()
}

// failedDependency names a dependency of seq that failed or was cancelled, or "".
func (w *wtx) failedDependency(seq int64) (string, error) {
	var node, id, st string
	err := w.queryRow(`SELECT t.node_id, t.task_id, t.state FROM edges e JOIN tasks t ON t.seq = e.dep_seq
		WHERE e.task_seq = ? AND t.state IN ('failed', 'cancelled') ORDER BY t.seq LIMIT 1`, seq).Scan(&node, &id, &st)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s (task %s, %s)", node, id, st), nil
}

// revive undoes the cascade that root's failure or cancellation caused: every
// task cancelled with root as its cause returns to blocked (or pending), unless
// another dependency of it also failed or was cancelled for another reason.
// So do the tasks created later on one of those (which start cancelled with
// that dependency as their cause), transitively.
func (w *wtx) revive(root *row, verb string) error {
	var cands []int64
	seen := map[int64]bool{root.seq: true}
	for frontier := []int64{root.seq}; len(frontier) > 0; {
		cause := frontier[0]
		frontier = frontier[1:]
		found, err := w.seqs(`SELECT seq FROM tasks WHERE cancel_cause = ? AND state = 'cancelled' ORDER BY seq`, cause)
		if err != nil {
			return err
		}
		for _, c := range found {
			if !seen[c] {
				seen[c] = true
				cands = append(cands, c)
				frontier = append(frontier, c)
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	slices.Sort(cands)
	in := make(map[int64]bool, len(cands))
	for _, c := range cands {
		in[c] = true
	}
	// Drop, until nothing changes, every candidate with a dependency that
	// stays failed or cancelled.
	for changed := true; changed; {
		changed = false
		for _, c := range cands {
			if !in[c] {
				continue
			}
			rows, err := w.query(`SELECT t.seq FROM edges e JOIN tasks t ON t.seq = e.dep_seq
				WHERE e.task_seq = ? AND t.state IN ('failed', 'cancelled')`, c)
			if err != nil {
				return err
			}
			for rows.Next() {
				var d int64
				if err := rows.Scan(&d); err != nil {
					rows.Close()
					return err
				}
				if d != root.seq && !in[d] {
					in[c], changed = false, true
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
	}
	// Mark them blocked first, so that counting unmet dependencies sees the
	// revived ones as not completed.
	var revived []int64
	for _, c := range cands {
		if in[c] {
			revived = append(revived, c)
			if _, err := w.exec(`UPDATE tasks SET state = 'blocked', cancel_cause = NULL, updated_at_ms = ? WHERE seq = ?`, w.nowMS, c); err != nil {
				return err
			}
		}
	}
	for _, c := range revived {
		unmet, waiting, err := w.unmetDependencies(c)
		if err != nil {
			return err
		}
		state, status := StateBlocked, blockedStatus(waiting)
		if unmet == 0 {
			state, status = StatePending, "ready to claim"
			w.wakeWaiters(root.WorkflowID) // dependencies stay within a workflow
		}
		if _, err := w.exec(`UPDATE tasks SET state = ?, unmet = ?, status_message = ?, updated_at_ms = ? WHERE seq = ?`,
			string(state), unmet, status, w.nowMS, c); err != nil {
			return err
		}
		r, err := w.loadSeq(c)
		if err != nil {
			return err
		}
		if err := w.appendEvent(&r, EventRevive, "", r.Generation, map[string]any{"cause_task_id": root.TaskID, "cause": verb, "state": string(state)}); err != nil {
			return err
		}
	}
	return nil
}

// PruneResult reports Prune.
type PruneResult struct {
	Workflows []string
	Tasks     int64
	Events    int64
}

// Prune removes finished workflows (every task terminal) whose last change is
// older than before, with their tasks, edges and events. Each removal is
// recorded in pruned_workflows with the head of its chain, so the remaining
// chains still verify and the removal itself is on record.
func (s *Store) Prune(ctx context.Context, before time.Time) (PruneResult, error) {
	var res PruneResult
	for {
		// Counted per operation and added to res only once it committed: a
		// failed operation's removals were rolled back.
		var ids []string
		var tasks, events int64
		err := s.do(ctx, func(w *wtx) error {
			ids, tasks, events = ids[:0], 0, 0
			rows, err := w.query(`SELECT w.workflow_id, w.task_count, w.event_count, w.head_hash FROM workflows w
				WHERE w.updated_at_ms < ? AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.workflow_id = w.workflow_id
				AND t.state IN ('blocked', 'pending', 'claimed')) ORDER BY w.updated_at_ms LIMIT 100`, before.UnixMilli())
			if err != nil {
				return err
			}
			type wf struct {
				id         string
				tasks, evs int64
				head       string
			}
			var wfs []wf
			for rows.Next() {
				var x wf
				if err := rows.Scan(&x.id, &x.tasks, &x.evs, &x.head); err != nil {
					rows.Close()
					return err
				}
				wfs = append(wfs, x)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			for _, x := range wfs {
				if _, err := w.exec(`INSERT INTO pruned_workflows (workflow_id, pruned_at_ms, task_count, event_count, head_hash) VALUES (?, ?, ?, ?, ?)
					ON CONFLICT DO NOTHING`, x.id, w.nowMS, x.tasks, x.evs, x.head); err != nil {
					return err
				}
				if _, err := w.exec(`DELETE FROM events WHERE workflow_id = ?`, x.id); err != nil {
					return err
				}
				if _, err := w.exec(`DELETE FROM tasks WHERE workflow_id = ?`, x.id); err != nil {
					return err
				}
				if _, err := w.exec(`DELETE FROM workflows WHERE workflow_id = ?`, x.id); err != nil {
					return err
				}
				ids = append(ids, x.id)
				tasks += x.tasks
				events += x.evs
			}
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("prune: %w", err)
		}
		res.Workflows = append(res.Workflows, ids...)
		res.Tasks += tasks
		res.Events += events
		if len(ids) < 100 {
			return res, nil
		}
	}
}
