package taskgraph

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/gate"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/statusmsg"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
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
	return s.operateOnTask(ctx, "requeue", taskID, op, (*wtx).requeue)
}

// Skip is a human operator's operation: it marks a task completed with a null
// result and an operator note, fencing out any holder, so its dependents can
// proceed (including those its failure or cancellation had cancelled).
func (s *Store) Skip(ctx context.Context, taskID string, op Operator) (Task, error) {
	return s.operateOnTask(ctx, "skip", taskID, op, (*wtx).skip)
}

// operateOnTask runs an operator's intervention fn on task taskID, locked,
// as the operator, in one transaction; verb names it in the error.
func (s *Store) operateOnTask(ctx context.Context, verb, taskID string, op Operator, fn func(*wtx, row, Operator) (Task, error)) (Task, error) {
	if err := checkTaskID(taskID); err != nil {
		return Task{}, err
	}
	if err := checkOperator(op); err != nil {
		return Task{}, err
	}
	var out Task
	err := s.do(ctx, func(w *wtx) error {
		w.as(ActorOperator, op.Name)
		r, err := w.loadLocked(taskID)
		if err != nil {
			return err
		}
		out, err = fn(w, r, op)
		return err
	})
	if err != nil {
		return Task{}, fmt.Errorf("%s task %s: %w", verb, taskID, err)
	}
	return out, nil
}

// skip is Skip's write, on r locked.
func (w *wtx) skip(r row, op Operator) (Task, error) {
	from := r.State
	if from == StateCompleted {
		return Task{}, &ConflictError{TaskID: r.TaskID, State: from, Detail: "the task is already completed"}
	}
	holder := r.Owner
	if err := w.mustUpdate(&r, clearClaim(tgdriver.TaskSet{State: tgdriver.Val(string(StateCompleted)), Result: tgdriver.Val("null"),
		CancelCause: tgdriver.Null[int64](), StatusMessage: tgdriver.Val(statusmsg.Skipped(op.Name, op.Reason))}),
		tgdriver.TaskGuard{States: []string{string(from)}, Generation: tgdriver.Val(r.Generation)}, "skip"); err != nil {
		return Task{}, err
	}
	if err := w.appendEvent(&r, EventSkip, holder, r.Generation, map[string]any{"operator": op.Name, "reason": op.Reason, "from": string(from)}); err != nil {
		return Task{}, err
	}
	// Dependents still waiting count this task as unmet; the ones its
	// failure cancelled are revived and recounted from scratch.
	if err := w.completeDependents([]int64{r.seq}, nil); err != nil {
		return Task{}, err
	}
	if from == StateFailed || from == StateCancelled {
		if err := w.revive(&r, "skipped"); err != nil {
			return Task{}, err
		}
	}
	return r.Task, nil
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
		w.as(ActorOperator, op.Name)
		exists, err := w.tx.LockWorkflow(w.ctx, workflowID)
		if err != nil {
			return err
		}
		if !exists {
			return &NotFoundError{What: "workflow", ID: workflowID}
		}
		seqs, err := w.tx.UnfinishedInWorkflow(w.ctx, workflowID)
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
			if err := w.setCancelled(&r, status); err != nil {
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

// unmetDependencies counts the dependencies of seq that have not completed
// and names them, in seq order.
func (w *wtx) unmetDependencies(seq int64) (int, []string, error) {
	deps, err := w.tx.Dependencies(w.ctx, seq)
	if err != nil {
		return 0, nil, err
	}
	var waiting []string
	for _, d := range deps {
		if State(d.State) != StateCompleted {
			waiting = append(waiting, d.NodeID)
		}
	}
	return len(waiting), waiting, nil
}

// failedDependency names a dependency of seq that failed or was cancelled, or "".
func (w *wtx) failedDependency(seq int64) (string, error) {
	deps, err := w.tx.Dependencies(w.ctx, seq)
	if err != nil {
		return "", err
	}
	for _, d := range deps {
		if st := State(d.State); st == StateFailed || st == StateCancelled {
			return fmt.Sprintf("%s (task %s, %s)", d.NodeID, d.TaskID, d.State), nil
		}
	}
	return "", nil
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
		found, err := w.tx.CancelledBy(w.ctx, cause)
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
			deps, err := w.tx.Dependencies(w.ctx, c)
			if err != nil {
				return err
			}
			for _, d := range deps {
				if st := State(d.State); (st == StateFailed || st == StateCancelled) && d.Seq != root.seq && !in[d.Seq] {
					in[c], changed = false, true
				}
			}
		}
	}
	// Mark them blocked first, so that counting unmet dependencies sees the
	// revived ones as not completed.
	var revived []int64
	for _, c := range cands {
		if in[c] {
			revived = append(revived, c)
			r := row{seq: c}
			if err := w.mustUpdate(&r, tgdriver.TaskSet{State: tgdriver.Val(string(StateBlocked)), CancelCause: tgdriver.Null[int64]()},
				tgdriver.TaskGuard{States: []string{string(StateCancelled)}}, "revive"); err != nil {
				return err
			}
		}
	}
	for _, c := range revived {
		unmet, waiting, err := w.unmetDependencies(c)
		if err != nil {
			return err
		}
		r, err := w.loadSeq(c)
		if err != nil {
			return err
		}
		state, status := StateBlocked, statusmsg.Blocked(waiting)
		var due int64 // a revived task is claimable at once, whatever due time it had
		switch {
		case unmet == 0 && r.Kind == KindGate: // a revived gate awaits a decision
			status, due = gate.AwaitingStatus(r.GateTimeout, r.OnTimeout, w.nowMS), gate.DueAt(r.GateTimeout, w.nowMS)
		case unmet == 0:
			state, status = StatePending, "ready to claim"
		}
		if err := w.mustUpdate(&r, tgdriver.TaskSet{State: tgdriver.Val(string(state)), Unmet: tgdriver.Val(unmet), StatusMessage: tgdriver.Val(status),
			DueAtMS: tgdriver.Val(due)},
			tgdriver.TaskGuard{States: []string{string(StateBlocked)}}, "revive"); err != nil {
			return err
		}
		if due > 0 {
			w.scheduleDue()
		}
		if state == StatePending {
			w.wakeWaiters(&r)
		}
		if err := w.appendEvent(&r, EventRevive, "", r.Generation, map[string]any{"cause_task_id": root.TaskID, "cause": verb, "state": string(state)}); err != nil {
			return err
		}
	}
	return nil
}

// Prune removes finished workflows (every task terminal) whose last change is
// older than before, with their tasks, edges and events. Each removal is
// recorded in pruned_workflows with the head of its chain, so the remaining
// chains still verify and the removal itself is on record.
func (s *Store) Prune(ctx context.Context, before time.Time) (PruneResult, error) {
	var res PruneResult
	// A workflow with journaled events is not pruned (the guard of the
	// delete): link them first.
	if err := s.linkAll(ctx); err != nil {
		return res, fmt.Errorf("prune: %w", err)
	}
	for {
		var pageFull bool
		// Counted per operation and added to res only once it committed: a
		// failed operation's removals were rolled back.
		var ids []string
		var tasks, events int64
		err := s.do(ctx, func(w *wtx) error {
			w.as(ActorOperator, "")
			ids, tasks, events = ids[:0], 0, 0
			cands, err := w.tx.PruneCandidates(w.ctx, before.UnixMilli(), 100)
			if err != nil {
				return err
			}
			// Locked (by the guarded delete) in id order, the order every
			// writer that locks several workflows keeps.
			slices.Sort(cands)
			for _, id := range cands {
				// The guard (still finished, unchanged since before) is in
				// the delete: a create that revived the workflow meanwhile
				// keeps it.
				p, ok, err := w.tx.PruneWorkflow(w.ctx, id, before.UnixMilli(), w.nowMS)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				if err := w.appendAudit(AuditPrune, id, map[string]any{"task_count": p.Tasks, "event_count": p.Events, "head_hash": p.HeadHash}); err != nil {
					return err
				}
				ids = append(ids, id)
				tasks += p.Tasks
				events += p.Events
			}
			// A full page means there may be more; an empty one that found
			// candidates all kept means stop.
			pageFull = len(cands) == 100 && len(ids) > 0
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("prune: %w", err)
		}
		res.Workflows = append(res.Workflows, ids...)
		res.Tasks += tasks
		res.Events += events
		if !pageFull {
			return res, nil
		}
	}
}

// requeue is Requeue of r, locked by the caller's transaction: the same
// rules (a completed or blocked task is refused, and a task whose
// dependency did not complete) and the same writes, each refusal before any
// write.
func (w *wtx) requeue(r row, op Operator) (Task, error) {
	from := r.State
	switch from {
	case StateCompleted:
		return Task{}, &ConflictError{TaskID: r.TaskID, State: from, Detail: "a completed task cannot be requeued: its dependents may already have used its result"}
	case StateBlocked:
		return Task{}, &ConflictError{TaskID: r.TaskID, State: from, Detail: "the task has not run yet (" + r.StatusMessage + "); requeue or skip its dependencies instead"}
	}
	// A task cancelled because its upstream failed cannot run until that
	// upstream is requeued or skipped.
	if blocker, err := w.failedDependency(r.seq); err != nil {
		return Task{}, err
	} else if blocker != "" {
		return Task{}, &ConflictError{TaskID: r.TaskID, State: from, Detail: "its dependency " + blocker + " did not complete; requeue or skip that task first"}
	}
	holder := r.Owner
	unmet, waiting, err := w.unmetDependencies(r.seq)
	if err != nil {
		return Task{}, err
	}
	state, status := StatePending, fmt.Sprintf("ready to claim (requeued by %s: %s)", op.Name, op.Reason)
	var due int64 // an operator's requeue is claimable at once
	switch {
	case unmet > 0:
		state, status = StateBlocked, statusmsg.Blocked(waiting)
	case r.Kind == KindGate: // a requeued gate awaits a decision again
		state, status, due = StateBlocked, gate.AwaitingStatus(r.GateTimeout, r.OnTimeout, w.nowMS), gate.DueAt(r.GateTimeout, w.nowMS)
	}
	if err := w.mustUpdate(&r, clearClaim(tgdriver.TaskSet{State: tgdriver.Val(string(state)), Owner: tgdriver.Null[string](),
		Attempts: tgdriver.Val(0), LeaseLosses: tgdriver.Val(0), Unmet: tgdriver.Val(unmet), CancelCause: tgdriver.Null[int64](), StatusMessage: tgdriver.Val(status),
		DueAtMS: tgdriver.Val(due)}),
		tgdriver.TaskGuard{States: []string{string(from)}, Generation: tgdriver.Val(r.Generation)}, "requeue"); err != nil {
		return Task{}, err
	}
	if due > 0 {
		w.scheduleDue()
	}
	if state == StatePending {
		w.wakeWaiters(&r)
	}
	if err := w.appendEvent(&r, EventRequeue, holder, r.Generation, map[string]any{"operator": op.Name, "reason": op.Reason, "from": string(from)}); err != nil {
		return Task{}, err
	}
	if from == StateFailed || from == StateCancelled {
		if err := w.revive(&r, "requeued"); err != nil {
			return Task{}, err
		}
	}
	return r.Task, nil
}
