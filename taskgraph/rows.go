package taskgraph

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// row is a task as stored, with the bookkeeping the public Task hides.
type row struct {
	Task
	seq         int64
	tokenHash   []byte
	unmet       int
	cancelCause int64 // 0: none
	leaseMS     int64
	// requires is the stored canonical requires ("" for none).
	requires string
	// dueAtMS is due_at_ms (0: claimable now).
	dueAtMS int64
	// dependents counts the tasks that depend on this one.
	dependents int
	// report is the stored report text, usage its usage and prior the
	// usage of the earlier attempts (see Report).
	report       string
	usage, prior Usage
}

// toRow turns a driver's task row into the domain's.
func toRow(tr tgdriver.TaskRow) (row, error) {
	r := row{seq: tr.Seq, tokenHash: tr.TokenHash, unmet: tr.Unmet, cancelCause: tr.CancelCause, leaseMS: tr.LeaseMS, dependents: tr.Dependents}
	r.TaskID, r.WorkflowID, r.NodeID = tr.TaskID, tr.WorkflowID, tr.NodeID
	r.Payload = json.RawMessage(tr.Payload)
	if tr.DependsOn != "" && tr.DependsOn != "[]" { // most tasks have no dependencies: skip the decoder
		if err := json.Unmarshal([]byte(tr.DependsOn), &r.DependsOn); err != nil {
			return row{}, fmt.Errorf("%w: task %s has unreadable depends_on: %v", errInternal, tr.TaskID, err)
		}
	}
	r.State = State(tr.State)
	r.Owner = tr.Owner
	r.Generation = tr.Generation
	if tr.LeaseExpiresAtMS != 0 {
		r.LeaseExpiresAt = time.UnixMilli(tr.LeaseExpiresAtMS).UTC()
	}
	r.Attempts, r.MaxAttempts = tr.Attempts, tr.MaxAttempts
	r.Priority = tr.Priority
	r.requires, r.dueAtMS = tr.Requires, tr.DueAtMS
	r.Requires = splitTags(tr.Requires)
	if tr.DueAtMS != 0 {
		r.DueAt = time.UnixMilli(tr.DueAtMS).UTC()
	}
	r.RetryDelay = time.Duration(tr.RetryDelayMS) * time.Millisecond
	r.LeaseLosses = tr.LeaseLosses
	r.ConcurrencyKey = tr.ConcurrencyKey
	if tr.HasResult {
		r.Result = json.RawMessage(tr.Result)
	}
	r.Error = tr.Error
	r.StatusMessage = tr.StatusMessage
	r.CreatedAt = time.UnixMilli(tr.CreatedAtMS).UTC()
	r.UpdatedAt = time.UnixMilli(tr.UpdatedAtMS).UTC()
	r.CreatedBy = tr.CreatedBy
	r.report, r.usage, r.prior = tr.Report, Usage(tr.Usage), Usage(tr.PriorUsage)
	if tr.Report != "" {
		rep, err := readReport(tr.TaskID, tr.Report)
		if err != nil {
			return row{}, err
		}
		r.Report = rep
	}
	r.TotalUsage = r.prior.Add(r.usage)
	r.Kind = tgdriver.KindOf(tr.Kind)
	if r.Kind == KindGate {
		r.GateTimeout = time.Duration(tr.GateTimeoutMS) * time.Millisecond
		r.OnTimeout = tr.GateOnTimeout
		r.AwaitingApproval = r.State == StateBlocked && r.unmet == 0
	}
	return r, nil
}

// current is the lease view of a stored task, for lease.Check.
func (r row) current() lease.Current {
	return lease.Current{
		State:      string(r.State),
		Held:       r.State == StateClaimed,
		Terminal:   r.State.Terminal(),
		Owner:      r.Owner,
		Generation: r.Generation,
		TokenHash:  r.tokenHash,
		ExpiresAt:  r.LeaseExpiresAt,
	}
}

// expired reports whether r is claimed and its lease has lapsed at now.
func (r row) expired(now time.Time) bool {
	return r.State == StateClaimed && !now.Before(r.LeaseExpiresAt)
}

// found converts a driver lookup, naming what was missing.
func found(tr tgdriver.TaskRow, err error, what, id string) (row, error) {
	if errors.Is(err, tgdriver.ErrNoRows) {
		return row{}, &NotFoundError{What: what, ID: id}
	}
	if err != nil {
		return row{}, err
	}
	return toRow(tr)
}

func (w *wtx) loadTask(taskID string) (row, error) {
	tr, err := w.tx.TaskByID(w.ctx, taskID)
	return found(tr, err, "task", taskID)
}

func (w *wtx) loadSeq(seq int64) (row, error) {
	tr, err := w.tx.TaskBySeq(w.ctx, seq)
	if err != nil {
		return row{}, fmt.Errorf("read task %d: %w", seq, err)
	}
	return toRow(tr)
}

// lockWorkflow takes the write lock of the workflow of a task before it is
// written: locks are taken workflow first, then tasks (see tgdriver).
func (w *wtx) lockWorkflow(workflowID string) error {
	if _, err := w.tx.LockWorkflow(w.ctx, workflowID); err != nil {
		return fmt.Errorf("lock workflow %s: %w", workflowID, err)
	}
	return nil
}

// clearClaim clears the claim of a task leaving the claimed state: every
// state change ends or replaces the live claim.
func clearClaim(set tgdriver.TaskSet) tgdriver.TaskSet {
	set.TokenHash = tgdriver.Null[[]byte]()
	set.LeaseExpiresAtMS = tgdriver.Null[int64]()
	return set
}

// unfinished are the states of a task that has not finished.
var unfinished = []string{string(StateBlocked), string(StatePending), string(StateClaimed)}

// update applies set to r if guard holds, in the write itself, and makes r
// the task as updated; ok is false when the guard did not hold.
func (w *wtx) update(r *row, set tgdriver.TaskSet, guard tgdriver.TaskGuard) (bool, error) {
	set.UpdatedAtMS = w.nowMS
	tr, ok, err := w.tx.UpdateTask(w.ctx, r.seq, set, guard)
	if err != nil || !ok {
		return false, err
	}
	nr, err := toRow(tr)
	if err != nil {
		return false, err
	}
	wasClaimed := r.State == StateClaimed
	*r = nr
	if wasClaimed && nr.State != StateClaimed {
		// The schema gave the key's slot back: wake a claim for it.
		if err := w.keysFreed(nr.ConcurrencyKey); err != nil {
			return false, err
		}
	}
	return true, nil
}

// mustUpdate is update for a write whose guard the operation checked in
// this transaction; a guard that did not hold means another writer changed
// the row since (tgdriver.ErrRowChanged: the driver may run it again).
func (w *wtx) mustUpdate(r *row, set tgdriver.TaskSet, guard tgdriver.TaskGuard, what string) error {
	ok, err := w.update(r, set, guard)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !ok {
		return fmt.Errorf("%w: %s of task %s changed no row: %w", errInternal, what, r.TaskID, tgdriver.ErrRowChanged)
	}
	return nil
}

func (w *wtx) reload(r *row) error {
	nr, err := w.loadSeq(r.seq)
	if err != nil {
		return err
	}
	*r = nr
	return nil
}
