package taskgraph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/rules"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/statusmsg"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// MaxTokenLen bounds a presented claim token, in bytes (real ones are 32 ASCII characters).
const MaxTokenLen = 128

// checkHolder checks the claim h presents (its task id, then rules.CheckClaim).
func checkHolder(h lease.Holder) error {
	if err := checkTaskID(h.TaskID); err != nil {
		return err
	}
	return rules.CheckClaim(h.Owner, h.Generation, h.Token, MaxTokenLen)
}

// holderWrite runs fn on the task held by h after checking, in the same
// transaction, that h is the live claim at the time the request arrived
// (WithArrival, else the time of this call). A rejected claim changes nothing.
//
// With a request id (WithRequestID), args are the write's arguments
// besides the claim, by name: a retry must repeat them.
func (s *Store) holderWrite(ctx context.Context, verb string, h lease.Holder, args map[string]any, fn func(w *wtx, r *row) error) (Task, error) {
	if err := checkHolder(h); err != nil {
		return Task{}, err
	}
	rq, err := newRequest(ctx, verb, h.Owner, holderArgs(h, args))
	if err != nil {
		return Task{}, err
	}
	arrived := s.arrival(ctx)
	var out Task
	err = s.doAt(ctx, arrived, func(w *wtx) error {
		w.as(ActorWorker, h.Owner)
		return w.kept(rq, &out, func() error {
			r, err := w.loadTask(h.TaskID)
			if err != nil {
				return err
			}
			if err := lease.Check(r.current(), h, w.judged); err != nil {
				return w.explainStale(r, h, err)
			}
			if err := fn(w, &r); err != nil {
				return err
			}
			out = r.Task
			return nil
		})
	})
	if err != nil {
		if errors.Is(err, ErrStaleClaim) {
			s.stats.staleRejections.Add(1)
		}
		return Task{}, fmt.Errorf("%s task %s: %w", verb, h.TaskID, err)
	}
	return out, nil
}

// holderArgs are the arguments of a holder write presenting h, with the
// write's own args, for its request id.
func holderArgs(h lease.Holder, args map[string]any) map[string]any {
	out := map[string]any{"task_id": h.TaskID, "generation": h.Generation, "claim_token": lease.HashToken(h.Token)}
	for k, v := range args {
		out[k] = v
	}
	return out
}

// explainStale names the real reason when a claim was ended by its lease
// expiring: once the expiry is processed the task is pending (or failed, on
// its last attempt) at the same generation, and lease.Check sees only that it
// is no longer held (or finished). The worker must learn that its lease ran
// out, not that someone took the claim away: it heartbeats too slowly.
func (w *wtx) explainStale(r row, h lease.Holder, err error) error {
	if r.Kind == KindGate {
		return gateNotClaimed(r)
	}
	var se *lease.StaleClaimError
	if !errors.As(err, &se) || h.Generation != r.Generation || (se.Reason != lease.ReasonNotHeld && se.Reason != lease.ReasonTerminal) {
		return err
	}
	kind, atMS, ok, qerr := w.tx.LastEventOfGeneration(w.ctx, r.TaskID, h.Generation)
	if qerr != nil {
		return fmt.Errorf("read the task's last event: %w", qerr)
	}
	if !ok || kind != EventExpire {
		return err
	}
	return &lease.StaleClaimError{TaskID: r.TaskID, Reason: lease.ReasonLeaseExpired, Detail: fmt.Sprintf(
		"the lease of generation %d expired before this write arrived (processed at %s) and the task is now %s; heartbeat more often than the lease runs out, and claim the task again to keep working on it",
		h.Generation, time.UnixMilli(atMS).UTC().Format(time.RFC3339Nano), r.State)}
}

// fenced runs an UPDATE whose WHERE clause repeats the whole fencing
// predicate with the claim h the write presents (generation, owner and the
// digest of its token) and the time it is judged at (its arrival),
// so the guard is part of the write itself and holds however many writers
// there are, not only because lease.Check ran first in the same
// transaction. A write that matches no row was not the live claim when it
// was applied: a stale claim, and nothing changed. r becomes the task as
// updated.
func (w *wtx) fenced(r *row, h lease.Holder, set tgdriver.TaskSet) error {
	ok, err := w.update(r, set, w.fence(h))
	if err != nil {
		return err
	}
	if !ok {
		return notLive(r.TaskID)
	}
	return nil
}

// fence is the guard of a holder write presenting claim h: the task is
// claimed at h's generation by h's owner with h's token, and its lease runs
// at the time the write is judged at.
func (w *wtx) fence(h lease.Holder) tgdriver.TaskGuard {
	return tgdriver.TaskGuard{
		States:        []string{string(StateClaimed)},
		Generation:    tgdriver.Val(h.Generation),
		Owner:         tgdriver.Val(h.Owner),
		TokenHash:     tgdriver.Val(lease.HashToken(h.Token)),
		LeaseLiveAtMS: tgdriver.Val(w.judged.UnixMilli()),
	}
}

// notLive is the error of a fenced write that matched no row.
func notLive(taskID string) error {
	return &lease.StaleClaimError{TaskID: taskID, Reason: lease.ReasonNotHeld,
		Detail: "the claim was no longer live when this write was applied; inspect the task before doing more work on it"}
}

// Heartbeat extends the holder's lease to now + d (0 means the default
// duration). The generation does not change.
func (s *Store) Heartbeat(ctx context.Context, h lease.Holder, d time.Duration) (Task, error) {
	dur, err := lease.Duration(d)
	if err != nil {
		return Task{}, invalid("lease_ms", "must be between %d and %d (got %d)", lease.MinDuration.Milliseconds(), lease.MaxDuration.Milliseconds(), d.Milliseconds())
	}
	if err := checkHolder(h); err != nil {
		return Task{}, err
	}
	return s.hotHolderWrite(ctx, &hotOp{kind: hotHeartbeat, h: h, dur: dur}, map[string]any{"lease_ms": dur.Milliseconds()})
}

// heartbeatSet is the update of a heartbeat with a lease of dur, and the
// lease's new expiry.
func (w *wtx) heartbeatSet(dur time.Duration) (tgdriver.TaskSet, int64) {
	exp := w.now.Add(dur).UnixMilli()
	return tgdriver.TaskSet{LeaseExpiresAtMS: tgdriver.Val(exp), LeaseMS: tgdriver.Val(dur.Milliseconds()), UpdatedAtMS: w.nowMS}, exp
}

// heartbeated records the heartbeat of h on r, as updated, with its
// report (nil: none).
func (w *wtx) heartbeated(r *row, h lease.Holder, exp int64, rep *Report) error {
	return w.appendEvent(r, EventHeartbeat, h.Owner, h.Generation, w.arrived(withReport(map[string]any{"lease_expires_at_ms": exp}, rep)))
}

// Complete stores the holder's result (any JSON value) and finishes the task;
// dependents whose dependencies are now all completed become pending in the
// same transaction.
func (s *Store) Complete(ctx context.Context, h lease.Holder, result json.RawMessage) (Task, error) {
	res, err := checkJSON("result", result, MaxResultBytes, false)
	if err != nil {
		return Task{}, err
	}
	if err := checkHolder(h); err != nil {
		return Task{}, err
	}
	return s.hotHolderWrite(ctx, &hotOp{kind: hotComplete, h: h, result: res}, map[string]any{"result": json.RawMessage(res)})
}

// CompleteAndClaim completes h's task with result as Complete does and, in
// the same transaction, claims the next task as next asks, only if the
// completion was accepted: a worker's usual loop in one round trip and one
// commit instead of two. next is a claim-next that does not wait: its
// TaskID and Wait must be zero, and its Owner is h's owner (or empty, which
// means h's owner). ok is false when nothing was claimable; the worker then
// claims with a wait as usual. An error is the completion's, and then
// nothing was claimed; with an error of the environment either may have
// happened, as with Complete alone. A request id (WithRequestID) is refused:
// complete with one, then claim with another.
func (s *Store) CompleteAndClaim(ctx context.Context, h lease.Holder, result json.RawMessage, next ClaimRequest) (Task, Claimed, bool, error) {
	res, err := checkJSON("result", result, MaxResultBytes, false)
	if err != nil {
		return Task{}, Claimed{}, false, err
	}
	if err := checkHolder(h); err != nil {
		return Task{}, Claimed{}, false, err
	}
	if next.Owner == "" {
		next.Owner = h.Owner
	}
	if next.Owner != h.Owner {
		return Task{}, Claimed{}, false, invalid("owner", "the next claim's owner must be the completing holder's (%q), got %q", h.Owner, next.Owner)
	}
	if next.TaskID != "" {
		return Task{}, Claimed{}, false, invalid("task_id", "the next claim is a claim-next: give no task_id")
	}
	if next.Wait != 0 {
		return Task{}, Claimed{}, false, invalid("wait_ms", "the next claim does not wait: give 0, and claim with a wait if nothing was claimable")
	}
	if RequestIDFrom(ctx) != "" {
		return Task{}, Claimed{}, false, invalid("request_id", "not accepted with a next claim: complete with a request id, then claim")
	}
	d, err := lease.Duration(next.Lease)
	if err != nil {
		return Task{}, Claimed{}, false, invalid("lease_ms", "must be between %d and %d (got %d)", lease.MinDuration.Milliseconds(), lease.MaxDuration.Milliseconds(), next.Lease.Milliseconds())
	}
	caps, err := canonicalTags("capabilities", next.Capabilities, MaxCapabilities)
	if err != nil {
		return Task{}, Claimed{}, false, err
	}
	if next.WorkflowID != "" {
		if err := checkIdentifier("workflow_id", next.WorkflowID); err != nil {
			return Task{}, Claimed{}, false, err
		}
	}
	if s.readOnly {
		return Task{}, Claimed{}, false, s.errReadOnly()
	}
	if s.closed.Load() {
		return Task{}, Claimed{}, false, ErrClosed
	}
	arrived := s.arrival(ctx)
	done := &hotOp{ctx: ctx, kind: hotComplete, arrived: arrived, h: h, result: res}
	claim := &hotOp{ctx: ctx, kind: hotClaim, arrived: arrived, owner: next.Owner, workflowID: next.WorkflowID, caps: caps, lease: d, after: done}
	s.runHotOps(done, claim)
	s.claimAttempts.Add(1)
	da, ca := done.ans, claim.ans
	if da.err != nil {
		return Task{}, Claimed{}, false, fmt.Errorf("complete task %s: %w", h.TaskID, da.err)
	}
	if ca.err != nil {
		// The completion was accepted: the claim shared its transaction,
		// so it cannot have failed alone. Say so rather than guess.
		return da.task, Claimed{}, false, fmt.Errorf("complete task %s: accepted, but the next claim failed: %w", h.TaskID, ca.err)
	}
	if !ca.ok {
		// Why nothing was claimable, as a claim-next's answer says.
		return da.task, s.claimedNone(ctx, next.WorkflowID, caps), false, nil
	}
	return da.task, ca.claimed, true, nil
}

// completeSet is the update of h's completion with result res.
func (w *wtx) completeSet(h lease.Holder, res []byte) tgdriver.TaskSet {
	return clearClaim(tgdriver.TaskSet{State: tgdriver.Val(string(StateCompleted)), Result: tgdriver.Val(string(res)),
		StatusMessage: tgdriver.Val(statusmsg.Completed(h.Owner, h.Generation)), UpdatedAtMS: w.nowMS})
}

// completed records h's completion of r, as updated, with result res and
// report rep (nil: none), and makes ready the dependents it was the last
// to wait for.
func (w *wtx) completed(r *row, h lease.Holder, res []byte, rep *Report) error {
	if err := w.appendEvent(r, EventComplete, h.Owner, h.Generation, w.arrived(withReport(map[string]any{"result_sha256": sha256Hex(res)}, rep))); err != nil {
		return err
	}
	w.afterCommit(func() { w.s.stats.completions.Add(1) })
	switch {
	case r.dependents == 0:
		return nil
	case w.batchDone != nil:
		*w.batchDone = append(*w.batchDone, r.seq) // the batch settles them at once
		return nil
	}
	return w.completeDependents([]int64{r.seq}, nil)
}

// Fail records the holder's error. With retryable and attempts left the task
// returns to pending, claimable again after its backoff (NodeSpec.RetryDelay
// doubled per retry, capped at MaxRetryDelay; see FailRetryAfter);
// otherwise it is failed and its unfinished dependents are cancelled.
func (s *Store) Fail(ctx context.Context, h lease.Holder, errText string, retryable bool) (Task, error) {
	return s.fail(ctx, h, errText, retryable, -1)
}

// FailRetryAfter is a retryable Fail whose retry waits after (0 to
// MaxRetryAfter, 0 for at once) instead of the task's backoff. Without
// attempts left the task fails as with Fail.
func (s *Store) FailRetryAfter(ctx context.Context, h lease.Holder, errText string, after time.Duration) (Task, error) {
	if after < 0 || after > MaxRetryAfter {
		return Task{}, invalid("retry_after_ms", "must be between 0 and %d (got %d)", MaxRetryAfter.Milliseconds(), after.Milliseconds())
	}
	return s.fail(ctx, h, errText, true, after)
}

// fail is Fail with a retry delay: after < 0 means the task's backoff.
func (s *Store) fail(ctx context.Context, h lease.Holder, errText string, retryable bool, after time.Duration) (Task, error) {
	if err := checkErrorText(errText); err != nil {
		return Task{}, err
	}
	rep, err := checkedReport(ctx)
	if err != nil {
		return Task{}, err
	}
	args := reportArgs(map[string]any{"error": errText, "retryable": retryable, "retry_after": int64(after)}, rep)
	return s.holderWrite(ctx, "fail", h, args, func(w *wtx, r *row) error {
		if retryable && r.Attempts < r.MaxAttempts {
			delay := after
			if delay < 0 {
				delay = backoff(r.RetryDelay, r.Attempts)
			}
			why := fmt.Sprintf("retrying after attempt %d of %d failed: %s", r.Attempts, r.MaxAttempts, statusmsg.ErrorSummary(errText))
			status, due := "ready to claim ("+why+")", int64(0)
			if delay > 0 {
				// From the server time the failure arrived, as every judgement
				// of a holder write is (WithArrival).
				due = w.at().Add(delay).UnixMilli()
				status = statusmsg.Waiting(time.UnixMilli(due), why)
			}
			set := clearClaim(tgdriver.TaskSet{State: tgdriver.Val(string(StatePending)), Owner: tgdriver.Null[string](), Error: tgdriver.Val(errText),
				DueAtMS: tgdriver.Val(due), StatusMessage: tgdriver.Val(status)})
			if err := w.setReport(&set, rep, h.Generation); err != nil {
				return err
			}
			if err := w.fenced(r, h, set); err != nil {
				return err
			}
			if due > 0 {
				w.scheduleDue()
			} else {
				w.wakeWaiters(r)
			}
			w.afterCommit(func() { w.s.stats.retries.Add(1) })
			detail := map[string]any{"attempt": r.Attempts, "error": statusmsg.ErrorSummary(errText)}
			if due > 0 {
				detail["due_at_ms"] = due
			}
			return w.appendEvent(r, EventRetry, h.Owner, h.Generation, w.arrived(withReport(detail, rep)))
		}
		why := "failed"
		if retryable {
			why = fmt.Sprintf("failed after %d of %d attempts", r.Attempts, r.MaxAttempts)
		}
		set := clearClaim(tgdriver.TaskSet{State: tgdriver.Val(string(StateFailed)), Error: tgdriver.Val(errText),
			StatusMessage: tgdriver.Val(why + ": " + statusmsg.ErrorSummary(errText))})
		if err := w.setReport(&set, rep, h.Generation); err != nil {
			return err
		}
		if err := w.fenced(r, h, set); err != nil {
			return err
		}
		w.afterCommit(func() { w.s.stats.failures.Add(1) })
		if err := w.appendEvent(r, EventFail, h.Owner, h.Generation, w.arrived(withReport(map[string]any{"attempt": r.Attempts, "retryable": retryable, "error": statusmsg.ErrorSummary(errText)}, rep))); err != nil {
			return err
		}
		return w.cascadeCancel(r)
	})
}

// Cancel ends the holder's own claim by cancelling the task (and its
// unfinished dependents). It is not an administrative abort.
func (s *Store) Cancel(ctx context.Context, h lease.Holder) (Task, error) {
	return s.holderWrite(ctx, "cancel", h, nil, func(w *wtx, r *row) error {
		if err := w.fenced(r, h, clearClaim(tgdriver.TaskSet{State: tgdriver.Val(string(StateCancelled)),
			StatusMessage: tgdriver.Val(statusmsg.CancelledByHolder(h.Owner, h.Generation))})); err != nil {
			return err
		}
		w.afterCommit(func() { w.s.stats.cancels.Add(1) })
		if err := w.appendEvent(r, EventCancel, h.Owner, h.Generation, w.arrived(map[string]any{"by": "holder"})); err != nil {
			return err
		}
		return w.cascadeCancel(r)
	})
}

// CancelTask is the protocol cancel (MCP tasks/cancel): it cancels a task that
// has not finished, fencing out any holder and cancelling its unfinished
// dependents. A finished task is returned unchanged with changed false.
func (s *Store) CancelTask(ctx context.Context, taskID, reason string) (t Task, changed bool, err error) {
	if err := checkTaskID(taskID); err != nil {
		return Task{}, false, err
	}
	if len(reason) > MaxReasonBytes {
		return Task{}, false, invalid("reason", "must be at most %d bytes", MaxReasonBytes)
	}
	if reason == "" {
		reason = "cancelled by request"
	}
	rq, err := newRequest(ctx, "cancel_task", "", map[string]any{"task_id": taskID, "reason": reason})
	if err != nil {
		return Task{}, false, err
	}
	var answer struct {
		Task    Task
		Changed bool
	}
	err = s.do(ctx, func(w *wtx) error {
		w.as(ActorRequestor, "")
		answer.Task, answer.Changed = Task{}, false
		return w.kept(rq, &answer, func() error {
			r, err := w.loadLocked(taskID)
			if err != nil {
				return err
			}
			if r.State.Terminal() {
				answer.Task = r.Task
				return nil
			}
			prev := r.Owner
			if err := w.setCancelled(&r, reason); err != nil {
				return err
			}
			w.afterCommit(func() { w.s.stats.cancels.Add(1) })
			if err := w.appendEvent(&r, EventCancel, prev, r.Generation, map[string]any{"by": "request", "reason": reason}); err != nil {
				return err
			}
			if err := w.cascadeCancel(&r); err != nil {
				return err
			}
			answer.Task, answer.Changed = r.Task, true
			return nil
		})
	})
	t, changed = answer.Task, answer.Changed
	if err != nil {
		return Task{}, false, fmt.Errorf("cancel task %s: %w", taskID, err)
	}
	return t, changed, nil
}

// loadLocked loads task taskID with its workflow locked, as it is then.
// Hot batches lock task rows only, so a guarded write may still meet a
// change (mustUpdate).
func (w *wtx) loadLocked(taskID string) (row, error) {
	r, err := w.loadTask(taskID)
	if err != nil {
		return row{}, err
	}
	if err := w.lockWorkflow(r.WorkflowID); err != nil {
		return row{}, err
	}
	if err := w.reload(&r); err != nil {
		return row{}, err
	}
	return r, nil
}

// setCancelled cancels unfinished task r with status, fencing out any
// holder: the update is guarded to an unfinished task.
func (w *wtx) setCancelled(r *row, status string) error {
	return w.mustUpdate(r, clearClaim(tgdriver.TaskSet{State: tgdriver.Val(string(StateCancelled)), StatusMessage: tgdriver.Val(status)}),
		tgdriver.TaskGuard{States: unfinished}, "cancel")
}
