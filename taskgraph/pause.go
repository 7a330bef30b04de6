package taskgraph

import (
	"context"
	"fmt"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/audit"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/pause"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// Audit chain entry kinds of pausing (the database-wide chain): the entry's
// workflow is the paused one, or "" for all claiming.
const (
	// AuditPause records a pause of claiming, with its operator and reason.
	AuditPause = audit.EntryPause
	// AuditResume records the end of a pause, with its operator and reason.
	AuditResume = audit.EntryResume
)

// MaxPausesListed bounds the workflow pauses one Pauses call returns.
const MaxPausesListed = pause.MaxListed

// Pause is a pause of claiming in effect (package pause).
type Pause = pause.Pause

// PauseClaims is a human operator's operation: it pauses claiming in
// workflowID, or on the whole database when workflowID is "". Once it
// returns, no claim is granted there until Resume, whatever runs at once
// on this or other servers: the claim scan excludes paused work in its own
// predicate, and a claim by id is guarded in its update. Live leases run
// on. Pausing what is paused replaces the reason (replaced is true). It is
// recorded in the audit chain with the operator and the reason.
func (s *Store) PauseClaims(ctx context.Context, workflowID string, op Operator) (replaced bool, err error) {
	if err := checkOperator(op); err != nil {
		return false, err
	}
	if workflowID != "" {
		if err := checkIdentifier("workflow_id", workflowID); err != nil {
			return false, err
		}
	}
	err = s.do(ctx, func(w *wtx) error {
		w.as(ActorOperator, op.Name)
		if workflowID != "" {
			exists, err := w.tx.LockWorkflow(w.ctx, workflowID)
			if err != nil {
				return fmt.Errorf("lock workflow %s: %w", workflowID, err)
			}
			if !exists {
				return &NotFoundError{What: "workflow", ID: workflowID}
			}
		}
		var err error
		if replaced, err = w.tx.SetPause(w.ctx, tgdriver.PauseRow{WorkflowID: workflowID, AtMS: w.nowMS, Reason: op.Reason, By: op.Name}); err != nil {
			return err
		}
		return w.appendAudit(AuditPause, workflowID, map[string]any{"operator": op.Name, "reason": op.Reason, "replaced": replaced})
	})
	if err != nil {
		return false, fmt.Errorf("pause %s: %w", pause.Scope(workflowID), err)
	}
	return replaced, nil
}

// ResumeClaims is a human operator's operation: it ends the pause of
// workflowID ("" for the pause of all claiming) and wakes the parked
// claims that may now take a task, here and on other servers. ok is false,
// and nothing is recorded, when there was no such pause. It is recorded in
// the audit chain with the operator and the reason.
func (s *Store) ResumeClaims(ctx context.Context, workflowID string, op Operator) (p Pause, ok bool, err error) {
	if err := checkOperator(op); err != nil {
		return Pause{}, false, err
	}
	if workflowID != "" {
		if err := checkIdentifier("workflow_id", workflowID); err != nil {
			return Pause{}, false, err
		}
	}
	err = s.do(ctx, func(w *wtx) error {
		w.as(ActorOperator, op.Name)
		if workflowID != "" {
			if _, err := w.tx.LockWorkflow(w.ctx, workflowID); err != nil {
				return fmt.Errorf("lock workflow %s: %w", workflowID, err)
			}
		}
		row, found, err := w.tx.ClearPause(w.ctx, workflowID)
		if err != nil || !found {
			p, ok = Pause{}, false
			return err
		}
		p, ok = pause.Of(row), true
		if err := w.appendAudit(AuditResume, workflowID, map[string]any{"operator": op.Name, "reason": op.Reason, "paused_at_ms": row.AtMS}); err != nil {
			return err
		}
		// Other servers look at their waiters' claimable tasks again.
		return w.tx.NotifyReady(w.ctx, "", "")
	})
	if err != nil {
		return Pause{}, false, fmt.Errorf("resume %s: %w", pause.Scope(workflowID), err)
	}
	if ok {
		if err := s.wakeForPending(ctx); err != nil {
			s.log.Warn("wake claim-next waiters after a resume", "err", err)
		}
	}
	return p, ok, nil
}

// Pauses returns the pauses in effect: the pause of all claiming first,
// when there is one; then workflowID's pause, or, when workflowID is "",
// the pauses of up to MaxPausesListed workflows in workflow id order.
func (s *Store) Pauses(ctx context.Context, workflowID string) ([]Pause, error) {
	rows, err := s.drv.Reads().Pauses(ctx, workflowID, MaxPausesListed)
	if err != nil {
		return nil, fmt.Errorf("read the pauses: %w", err)
	}
	out := make([]Pause, len(rows))
	for i, r := range rows {
		out[i] = pause.Of(r)
	}
	return out, nil
}

// claimPause returns the pause that holds a claim-next of workflowID ("":
// any workflow; pause.Holding), nil when none does.
func (s *Store) claimPause(ctx context.Context, workflowID string) *Pause {
	rows, err := s.drv.Reads().Pauses(ctx, workflowID, 0)
	if err != nil {
		return nil // the answer only explains; a failed read explains nothing
	}
	return pause.Holding(rows, workflowID)
}

// pausedConflict is the conflict of a claim by id of task r while a pause
// holds it, or nil.
func (w *wtx) pausedConflict(r *row) (*ConflictError, error) {
	rows, err := w.tx.Pauses(w.ctx, r.WorkflowID, 0)
	if err != nil {
		return nil, fmt.Errorf("read the pauses: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	return &ConflictError{TaskID: r.TaskID, State: r.State, Detail: "not claimable now: " + pause.Of(rows[0]).String()}, nil
}
