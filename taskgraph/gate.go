package taskgraph

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// The kinds of task (NodeSpec.Kind, Task.Kind).
const (
	// KindTask is an ordinary task, claimed by workers (the default).
	KindTask = tgdriver.KindTask
	// KindGate is an approval gate: never claimed; a person decides it
	// (see "Approval gates" in the package doc).
	KindGate = tgdriver.KindGate
)

// What the server decides for a gate nobody decided within its timeout
// (NodeSpec.OnTimeout).
const (
	OnTimeoutApprove = "approve"
	OnTimeoutReject  = "reject"
)

// MaxGateTimeout bounds NodeSpec.GateTimeout: 30 days.
const MaxGateTimeout = 30 * 24 * time.Hour

// Event kinds of gates.
const (
	// EventAwaitApproval records a gate whose dependencies all completed:
	// it awaits a decision (detail: decide_by_ms when it has a timeout).
	EventAwaitApproval = "await_approval"
	// EventApprove records a gate's approval (detail: decided_by, via,
	// reason); the gate is completed.
	EventApprove = "approve"
	// EventReject records a gate's rejection; the gate is failed and its
	// dependents are cancelled.
	EventReject = "reject"
)

// ActorApprover is the actor kind of a gate decided by an authenticated
// principal holding the approve role (over HTTP); the event's actor
// principal names it.
const ActorApprover = "approver"

// How a gate was decided (GateDecision.Via).
const (
	DecidedByOperator  = "operator"  // admin approve|reject
	DecidedByPrincipal = "principal" // an approve principal over HTTP
	DecidedByTimeout   = "timeout"   // the server, at the gate's timeout
)

// Errors of gates. Each error that carries one also matches ErrConflict
// (ErrNotGate: ErrInvalid).
var (
	// ErrGate: the operation is not one a gate takes: a gate is never
	// claimed, so no claim, heartbeat, completion or failure applies.
	ErrGate = errors.New("approval gate")
	// ErrNotGate: an approval or rejection named a task that is not a gate.
	ErrNotGate = errors.New("not an approval gate")
	// ErrGateDecided: the gate was already decided (or ended otherwise).
	ErrGateDecided = errors.New("gate already decided")
	// ErrGateNotAwaiting: the gate still waits on its dependencies.
	ErrGateNotAwaiting = errors.New("gate not awaiting approval")
)

// GateError explains why an operation on a gate (or a decision on a
// task) was refused. It matches Sentinel and ErrConflict, or ErrInvalid
// for ErrNotGate.
type GateError struct {
	TaskID   string
	State    State
	Sentinel error
	Detail   string
}

// Error implements error.
func (e *GateError) Error() string {
	return fmt.Sprintf("task %s (%s): %s", e.TaskID, e.State, e.Detail)
}

// Is reports whether target is e's sentinel, or ErrConflict (ErrInvalid
// for ErrNotGate).
func (e *GateError) Is(target error) bool {
	if target == e.Sentinel {
		return true
	}
	if e.Sentinel == ErrNotGate {
		return target == ErrInvalid
	}
	return target == ErrConflict
}

// GateDecision is a person's decision on a gate.
type GateDecision struct {
	// Approve completes the gate; false rejects it.
	Approve bool
	// By names who decided: the operator's name or the principal's.
	By string
	// Via is DecidedByOperator or DecidedByPrincipal.
	Via string
	// Reason is optional (at most MaxReasonBytes); it is recorded.
	Reason string
}

// gateResult is the result of an approved gate, which its dependents read
// as their upstream's result.
type gateResult struct {
	Decision  string `json:"decision"`
	DecidedBy string `json:"decided_by"`
	Via       string `json:"via"`
	Reason    string `json:"reason,omitempty"`
}

func checkDecision(d GateDecision) error {
	if d.By == "" {
		return invalid("decided_by", "is required: name who decides")
	}
	if len(d.By) > MaxIdentifierLen || !utf8.ValidString(d.By) {
		return invalid("decided_by", "must be valid UTF-8 of at most %d bytes", MaxIdentifierLen)
	}
	if d.Via != DecidedByOperator && d.Via != DecidedByPrincipal {
		return invalid("via", "must be %q or %q", DecidedByOperator, DecidedByPrincipal)
	}
	if len(d.Reason) > MaxReasonBytes || !utf8.ValidString(d.Reason) {
		return invalid("reason", "must be valid UTF-8 of at most %d bytes", MaxReasonBytes)
	}
	return nil
}

// DecideGate approves or rejects gate taskID awaiting approval. Approval
// completes it (its dependents become ready); rejection fails it with the
// decision as its error and cancels its unfinished dependents, as a
// failure does. The decision is recorded in the history with its actor
// (the operator, or the principal: ActorApprover) and reason. A gate
// already decided is refused with ErrGateDecided naming who decided; a
// task that is not a gate with ErrNotGate; a gate still waiting on its
// dependencies with ErrGateNotAwaiting. The check and the write are one
// transaction, the state guard in the write itself.
func (s *Store) DecideGate(ctx context.Context, taskID string, d GateDecision) (Task, error) {
	if err := checkTaskID(taskID); err != nil {
		return Task{}, err
	}
	if err := checkDecision(d); err != nil {
		return Task{}, err
	}
	var out Task
	err := s.do(ctx, func(w *wtx) error {
		if d.Via == DecidedByOperator {
			w.as(ActorOperator, d.By)
		} else {
			w.as(ActorApprover, d.By)
		}
		r, err := w.loadLocked(taskID)
		if err != nil {
			return err
		}
		if err := gateDecidable(r); err != nil {
			return err
		}
		if err := w.decide(&r, d.Approve, d.By, d.Via, d.Reason); err != nil {
			return err
		}
		out = r.Task
		return nil
	})
	if err != nil {
		verb := "reject"
		if d.Approve {
			verb = "approve"
		}
		return Task{}, fmt.Errorf("%s gate %s: %w", verb, taskID, err)
	}
	return out, nil
}

// gateDecidable says why r cannot be decided now, or nil.
func gateDecidable(r row) error {
	if r.Kind != KindGate {
		return &GateError{TaskID: r.TaskID, State: r.State, Sentinel: ErrNotGate,
			Detail: "is an ordinary task, not an approval gate: only a task created with kind \"gate\" is approved or rejected"}
	}
	switch {
	case r.AwaitingApproval:
		return nil
	case r.State == StateBlocked:
		return &GateError{TaskID: r.TaskID, State: r.State, Sentinel: ErrGateNotAwaiting,
			Detail: "the gate does not await approval yet (" + r.StatusMessage + "); it can be decided once its dependencies completed"}
	default:
		return &GateError{TaskID: r.TaskID, State: r.State, Sentinel: ErrGateDecided, Detail: "the gate was already decided: " + decidedSummary(r)}
	}
}

// decidedSummary says how a finished gate ended and who decided.
func decidedSummary(r row) string {
	switch r.State {
	case StateCompleted:
		var g gateResult
		if json.Unmarshal(r.Result, &g) == nil && g.Decision != "" {
			s := fmt.Sprintf("approved by %s (%s)", g.DecidedBy, g.Via)
			if g.Reason != "" {
				s += ": " + g.Reason
			}
			return s
		}
		return "completed: " + r.StatusMessage
	case StateFailed:
		return r.Error
	default:
		return string(r.State) + ": " + r.StatusMessage
	}
}

// decide records the decision on gate r, awaiting approval and locked.
func (w *wtx) decide(r *row, approve bool, by, via, reason string) error {
	detail := map[string]any{"decided_by": by, "via": via}
	if reason != "" {
		detail["reason"] = reason
	}
	guard := tgdriver.TaskGuard{States: []string{string(StateBlocked)}, NoUnmet: true, Generation: tgdriver.Val(r.Generation)}
	if approve {
		res, err := canonicalJSON(nil, map[string]any{"decision": "approved", "decided_by": by, "via": via, "reason": reason})
		if err != nil {
			return err
		}
		status := fmt.Sprintf("approved by %s (%s)", by, via)
		if reason != "" {
			status += ": " + errorSummary(reason)
		}
		if err := w.mustUpdate(r, tgdriver.TaskSet{State: tgdriver.Val(string(StateCompleted)), Result: tgdriver.Val(string(res)),
			StatusMessage: tgdriver.Val(status), DueAtMS: tgdriver.Val(int64(0))}, guard, "approve"); err != nil {
			return err
		}
		if err := w.appendEvent(r, EventApprove, "", r.Generation, detail); err != nil {
			return err
		}
		return w.completeDependents(r.seq)
	}
	errText := fmt.Sprintf("rejected by %s (%s)", by, via)
	if reason != "" {
		errText += ": " + reason
	}
	if err := w.mustUpdate(r, tgdriver.TaskSet{State: tgdriver.Val(string(StateFailed)), Error: tgdriver.Val(errText),
		StatusMessage: tgdriver.Val(errorSummary(errText)), DueAtMS: tgdriver.Val(int64(0))}, guard, "reject"); err != nil {
		return err
	}
	w.afterCommit(func() { w.s.stats.failures.Add(1) })
	if err := w.appendEvent(r, EventReject, "", r.Generation, detail); err != nil {
		return err
	}
	return w.cascadeCancel(r)
}

// awaitApproval turns gate seq, blocked with no unmet dependency, into a
// gate awaiting approval: it stays blocked (never claimable), says so in
// its status, and takes its decision time when it has a timeout. The
// guard is in the write.
func (w *wtx) awaitApproval(seq int64) error {
	r := row{seq: seq}
	if err := w.reload(&r); err != nil {
		return err
	}
	set := tgdriver.TaskSet{StatusMessage: tgdriver.Val(awaitingStatus(r.GateTimeout, r.OnTimeout, w.nowMS))}
	var due int64
	if r.GateTimeout > 0 {
		due = w.nowMS + r.GateTimeout.Milliseconds()
		set.DueAtMS = tgdriver.Val(due)
	}
	ok, err := w.update(&r, set, tgdriver.TaskGuard{States: []string{string(StateBlocked)}, NoUnmet: true})
	if err != nil || !ok {
		return err // !ok: cancelled meanwhile
	}
	if due > 0 {
		w.scheduleDue()
	}
	detail := map[string]any{}
	if due > 0 {
		detail["decide_by_ms"] = due
		detail["on_timeout"] = r.OnTimeout
	}
	return w.appendEvent(&r, EventAwaitApproval, "", r.Generation, detail)
}

// gateDue is the decision time of a gate with timeout that starts
// awaiting approval at nowMS; 0 when it has none.
func gateDue(timeout time.Duration, nowMS int64) int64 {
	if timeout <= 0 {
		return 0
	}
	return nowMS + timeout.Milliseconds()
}

// awaitingStatus is the status message of a gate awaiting approval.
func awaitingStatus(timeout time.Duration, onTimeout string, nowMS int64) string {
	if timeout <= 0 {
		return "awaiting approval"
	}
	return fmt.Sprintf("awaiting approval (%s at %s unless decided before)", onTimeout,
		time.UnixMilli(nowMS+timeout.Milliseconds()).UTC().Format(time.RFC3339Nano))
}

// gateLimit bounds how many due gates one operation decides.
const gateLimit = 32

// decideDueGates decides, as their on_timeout says, up to limit gates
// awaiting approval whose decision time had come when the operation
// arrived. Workflows are locked in id order (the order of every writer
// that locks several); each gate is re-read under its workflow's lock and
// decided by a guarded update, so deciders on every replica, and a person
// deciding at the same moment, may run at once: one decision wins.
func (w *wtx) decideDueGates(limit int) (n int, more bool, err error) {
	at := w.at().UnixMilli()
	refs, err := w.tx.DueGates(w.ctx, at, limit)
	if err != nil {
		return 0, false, fmt.Errorf("find due gates: %w", err)
	}
	more = len(refs) == limit
	slices.SortFunc(refs, func(a, b tgdriver.TaskRef) int {
		return cmp.Or(cmp.Compare(a.WorkflowID, b.WorkflowID), cmp.Compare(a.Seq, b.Seq))
	})
	for _, ref := range refs {
		if err := w.lockWorkflow(ref.WorkflowID); err != nil {
			return n, false, err
		}
		r, err := w.loadSeq(ref.Seq)
		if err != nil {
			return n, false, err
		}
		if !r.AwaitingApproval || r.dueAtMS == 0 || r.dueAtMS > at {
			continue // decided or cancelled meanwhile
		}
		reason := fmt.Sprintf("nobody decided within %s", r.GateTimeout)
		if err := w.decide(&r, r.OnTimeout == OnTimeoutApprove, "server", DecidedByTimeout, reason); err != nil {
			return n, false, err
		}
		n++
	}
	return n, more, nil
}

// DecideDueGates decides every gate whose timeout has come at server time
// as its on_timeout says, and returns how many it decided. Servers run it
// from the sweeper (with PromoteDue); it is safe to call at any time, from
// any number of servers.
func (s *Store) DecideDueGates(ctx context.Context) (int, error) {
	return s.inRounds(ctx, "decide due gates", func(w *wtx) (int, bool, error) {
		return w.as(ActorSweeper, "").decideDueGates(gateLimit)
	})
}

// nextGateDue is the earliest decision time of a gate awaiting approval
// with a timeout; zero when there is none.
func (s *Store) nextGateDue(ctx context.Context) (time.Time, error) {
	ms, ok, err := s.drv.Reads().NextGateDue(ctx)
	if err != nil || !ok {
		return time.Time{}, err
	}
	return time.UnixMilli(ms), nil
}

// gateNotClaimed is the error of a claim or a holder's write on gate r.
func gateNotClaimed(r row) error {
	return &GateError{TaskID: r.TaskID, State: r.State, Sentinel: ErrGate,
		Detail: "is an approval gate: no worker claims, completes or fails it; an operator (admin approve|reject) or a principal with the approve role decides it"}
}
