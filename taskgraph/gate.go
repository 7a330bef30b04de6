package taskgraph

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/gate"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/statusmsg"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// The kinds of task (NodeSpec.Kind, Task.Kind).
const (
	// KindTask is an ordinary task, claimed by workers (the default).
	KindTask = tgdriver.KindTask
	// KindGate is an approval gate: never claimed; a person decides it
	// (package gate holds the vocabulary and checks of gates).
	KindGate = tgdriver.KindGate
)

// What the server decides for a gate nobody decided within its timeout
// (NodeSpec.OnTimeout); the vocabulary of gates is package gate's.
const (
	OnTimeoutApprove = gate.OnTimeoutApprove
	OnTimeoutReject  = gate.OnTimeoutReject
	// MaxGateTimeout bounds NodeSpec.GateTimeout: 30 days.
	MaxGateTimeout = gate.MaxTimeout
	// EventAwaitApproval, EventApprove and EventReject are the event
	// kinds of gates (gate.EventAwaitApproval...).
	EventAwaitApproval = gate.EventAwaitApproval
	EventApprove       = gate.EventApprove
	EventReject        = gate.EventReject
	// ActorApprover is the actor kind of a gate decided by a principal
	// holding the approve role; the event's actor principal names it.
	ActorApprover = gate.ActorApprover
	// DecidedByOperator, DecidedByPrincipal and DecidedByTimeout say how
	// a gate was decided (GateDecision.Via).
	DecidedByOperator  = gate.DecidedByOperator
	DecidedByPrincipal = gate.DecidedByPrincipal
	DecidedByTimeout   = gate.DecidedByTimeout
)

// Errors of gates (package gate). Each error that carries one also
// matches ErrConflict (ErrNotGate: ErrInvalid).
var (
	ErrGate            = gate.ErrGate
	ErrNotGate         = gate.ErrNotGate
	ErrGateDecided     = gate.ErrDecided
	ErrGateNotAwaiting = gate.ErrNotAwaiting
)

// GateDecision is a person's decision on a gate (gate.Decision).
type GateDecision = gate.Decision

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
	if err := gate.CheckDecision(d); err != nil {
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
	detail, sentinel := gate.Refusal(r.Kind, r.AwaitingApproval, string(r.State), r.Result, r.Error, r.StatusMessage)
	if sentinel == nil {
		return nil
	}
	return &GateError{TaskID: r.TaskID, State: r.State, Sentinel: sentinel, Detail: detail}
}

// decide records the decision on gate r, awaiting approval and locked.
func (w *wtx) decide(r *row, approve bool, by, via, reason string) error {
	detail := gate.Detail(by, via, reason)
	guard := tgdriver.TaskGuard{States: []string{string(StateBlocked)}, NoUnmet: true, Generation: tgdriver.Val(r.Generation)}
	if approve {
		res, err := canonicalJSON(nil, gate.ApprovedResult(by, via, reason))
		if err != nil {
			return err
		}
		if err := w.mustUpdate(r, tgdriver.TaskSet{State: tgdriver.Val(string(StateCompleted)), Result: tgdriver.Val(string(res)),
			StatusMessage: tgdriver.Val(gate.ApprovedStatus(by, via, reason, statusmsg.ErrorSummary)), DueAtMS: tgdriver.Val(int64(0))}, guard, "approve"); err != nil {
			return err
		}
		if err := w.appendEvent(r, EventApprove, "", r.Generation, detail); err != nil {
			return err
		}
		return w.completeDependents([]int64{r.seq}, nil)
	}
	errText := gate.RejectedError(by, via, reason)
	if err := w.mustUpdate(r, tgdriver.TaskSet{State: tgdriver.Val(string(StateFailed)), Error: tgdriver.Val(errText),
		StatusMessage: tgdriver.Val(statusmsg.ErrorSummary(errText)), DueAtMS: tgdriver.Val(int64(0))}, guard, "reject"); err != nil {
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
	set := tgdriver.TaskSet{StatusMessage: tgdriver.Val(gate.AwaitingStatus(r.GateTimeout, r.OnTimeout, w.nowMS))}
	due := gate.DueAt(r.GateTimeout, w.nowMS)
	if due > 0 {
		set.DueAtMS = tgdriver.Val(due)
	}
	ok, err := w.update(&r, set, tgdriver.TaskGuard{States: []string{string(StateBlocked)}, NoUnmet: true})
	if err != nil || !ok {
		return err // !ok: cancelled meanwhile
	}
	if due > 0 {
		w.scheduleDue()
	}
	return w.appendEvent(&r, EventAwaitApproval, "", r.Generation, gate.AwaitDetail(due, r.OnTimeout))
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
		if err := w.decide(&r, r.OnTimeout == OnTimeoutApprove, "server", DecidedByTimeout, gate.TimeoutReason(r.GateTimeout)); err != nil {
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
	return &GateError{TaskID: r.TaskID, State: r.State, Sentinel: ErrGate, Detail: gate.NotClaimedDetail}
}
