package taskgraph

import (
	"context"
	"errors"
	"fmt"
)

// RequeueFailedBatch bounds the tasks RequeueFailed requeues in one
// transaction, so that a workflow of many failed tasks does not hold its
// lock (and every writer of it) for one long transaction.
const RequeueFailedBatch = 100

// errDryRun rolls back a dry run's batch.
var errDryRun = errors.New("dry run")

// RequeueFailed requeues every failed task of workflowID, as Requeue does
// each (attempts reset, claimable at once, the dependents its failure
// cancelled revived), recording each in the task's history with op: a
// dead-letter replay. The tasks are requeued in creation order, in
// transactions of at most RequeueFailedBatch tasks, each of which re-checks
// under the workflow's lock that the task is still failed (one that is not
// any longer is left alone and not reported). Batches are committed one
// by one: a run that stops (an error, a crash) leaves the batches before
// it requeued and the rest failed, and running it again finishes the job. A task Requeue would refuse
// is left failed and reported with the reason (Refused); the others are
// requeued. With dryRun every batch runs exactly as it would and is then
// rolled back: the report says what would happen and nothing is written.
// An unknown workflow is ErrNotFound. An error other than a refusal stops
// the run: the batches before it are committed (the report so far is
// returned with the error), the one it happened in is not.
func (s *Store) RequeueFailed(ctx context.Context, workflowID string, op Operator, dryRun bool) (RequeueReport, error) {
	rep := RequeueReport{WorkflowID: workflowID, DryRun: dryRun}
	if err := checkIdentifier("workflow_id", workflowID); err != nil {
		return rep, err
	}
	if err := checkOperator(op); err != nil {
		return rep, err
	}
	if _, err := s.WorkflowSummary(ctx, workflowID); err != nil {
		return rep, err
	}
	failed, err := s.ListTasks(ctx, ListFilter{WorkflowID: workflowID, State: StateFailed, Limit: MaxTasksPerWorkflow})
	if err != nil {
		return rep, err
	}
	for start := 0; start < len(failed); start += RequeueFailedBatch {
		batch := failed[start:min(start+RequeueFailedBatch, len(failed))]
		var done []RequeuedTask
		err := s.do(ctx, func(w *wtx) error {
			w.as(ActorOperator, op.Name)
			done = done[:0]
			for _, t := range batch {
				r, err := w.loadLocked(t.TaskID)
				if err != nil {
					return err
				}
				if r.State != StateFailed {
					continue // requeued or changed since it was listed
				}
				out := RequeuedTask{TaskID: r.TaskID, NodeID: r.NodeID, Cause: r.Error}
				after, err := w.requeue(r, op)
				var ce *ConflictError
				switch {
				case errors.As(err, &ce):
					// Refused before any write: the rest of the batch goes on.
					out.Refused = ce.Detail
				case err != nil:
					return err
				default:
					out.State = after.State
				}
				done = append(done, out)
			}
			if dryRun {
				return errDryRun
			}
			return nil
		})
		if err != nil && !(dryRun && errors.Is(err, errDryRun)) {
			return rep, fmt.Errorf("requeue the failed tasks of workflow %s (%d of %d handled before this batch, which was not written): %w", workflowID, start, len(failed), err)
		}
		for _, d := range done {
			if d.Refused != "" {
				rep.Refused++
			} else {
				rep.Requeued++
			}
		}
		rep.Tasks = append(rep.Tasks, done...)
	}
	return rep, nil
}
