package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/limits"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/rules"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// What the server decides for a gate nobody decided within its timeout.
const (
	OnTimeoutApprove = "approve"
	OnTimeoutReject  = "reject"
)

// MaxTimeout bounds a gate's timeout: 30 days.
const MaxTimeout = 30 * 24 * time.Hour

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
// principal holding the approve role (over HTTP).
const ActorApprover = "approver"

// How a gate was decided (Decision.Via).
const (
	DecidedByOperator  = "operator"  // admin approve|reject
	DecidedByPrincipal = "principal" // an approve principal over HTTP
	DecidedByTimeout   = "timeout"   // the server, at the gate's timeout
)

// Errors of gates.
var (
	// ErrGate: the operation is not one a gate takes: a gate is never
	// claimed, so no claim, heartbeat, completion or failure applies.
	ErrGate = errors.New("approval gate")
	// ErrNotGate: an approval or rejection named a task that is not a gate.
	ErrNotGate = errors.New("not an approval gate")
	// ErrDecided: the gate was already decided (or ended otherwise).
	ErrDecided = errors.New("gate already decided")
	// ErrNotAwaiting: the gate still waits on its dependencies.
	ErrNotAwaiting = errors.New("gate not awaiting approval")
)

// Decision is a person's decision on a gate.
type Decision struct {
	// Approve completes the gate; false rejects it.
	Approve bool
	// By names who decided: the operator's name or the principal's.
	By string
	// Via is DecidedByOperator or DecidedByPrincipal.
	Via string
	// Reason is optional (at most limits.MaxReasonBytes); it is recorded.
	Reason string
}

// CheckDecision checks a person's decision.
func CheckDecision(d Decision) error {
	if d.By == "" {
		return rules.Invalid("decided_by", "is required: name who decides")
	}
	if len(d.By) > limits.MaxIdentifierLen || !utf8.ValidString(d.By) {
		return rules.Invalid("decided_by", "must be valid UTF-8 of at most %d bytes", limits.MaxIdentifierLen)
	}
	if d.Via != DecidedByOperator && d.Via != DecidedByPrincipal {
		return rules.Invalid("via", "must be %q or %q", DecidedByOperator, DecidedByPrincipal)
	}
	if len(d.Reason) > limits.MaxReasonBytes || !utf8.ValidString(d.Reason) {
		return rules.Invalid("reason", "must be valid UTF-8 of at most %d bytes", limits.MaxReasonBytes)
	}
	return nil
}

// Node is what a node to create says of its kind: its kind, gate fields,
// and whether it requires capabilities or has a not-before time.
type Node struct {
	Kind         string
	Timeout      time.Duration
	OnTimeout    string
	HasRequires  bool
	HasNotBefore bool
}

// CheckNode checks a node's kind and gate fields and returns them
// normalized (kind tgdriver.KindTask for "").
func CheckNode(n Node) (kind string, timeout time.Duration, onTimeout string, err error) {
	switch n.Kind {
	case "", tgdriver.KindTask:
		if n.Timeout != 0 || n.OnTimeout != "" {
			return "", 0, "", rules.Invalid("gate_timeout_ms", "and on_timeout apply only to a node of kind %q", tgdriver.KindGate)
		}
		return tgdriver.KindTask, 0, "", nil
	case tgdriver.KindGate:
	default:
		return "", 0, "", rules.Invalid("kind", "must be %q (the default) or %q (got %q)", tgdriver.KindTask, tgdriver.KindGate, n.Kind)
	}
	if n.HasRequires {
		return "", 0, "", rules.Invalid("requires", "does not apply to a gate: a gate is never claimed")
	}
	if n.HasNotBefore {
		return "", 0, "", rules.Invalid("not_before", "does not apply to a gate: a gate is never claimed (use gate_timeout_ms)")
	}
	switch {
	case n.Timeout == 0 && n.OnTimeout != "":
		return "", 0, "", rules.Invalid("on_timeout", "applies only with gate_timeout_ms")
	case n.Timeout == 0:
		return tgdriver.KindGate, 0, "", nil
	case n.Timeout < time.Second || n.Timeout > MaxTimeout || n.Timeout%time.Millisecond != 0:
		return "", 0, "", rules.Invalid("gate_timeout_ms", "must be a whole number of milliseconds between %d and %d (got %v)",
			time.Second.Milliseconds(), MaxTimeout.Milliseconds(), n.Timeout)
	case n.OnTimeout != OnTimeoutApprove && n.OnTimeout != OnTimeoutReject:
		return "", 0, "", rules.Invalid("on_timeout", "must be %q or %q with gate_timeout_ms (got %q)", OnTimeoutApprove, OnTimeoutReject, n.OnTimeout)
	}
	return tgdriver.KindGate, n.Timeout, n.OnTimeout, nil
}

// Result is the result of an approved gate, which its dependents read as
// their upstream's result.
type Result struct {
	Decision  string `json:"decision"`
	DecidedBy string `json:"decided_by"`
	Via       string `json:"via"`
	Reason    string `json:"reason,omitempty"`
}

// Detail is the detail of a decision's event.
func Detail(by, via, reason string) map[string]any {
	detail := map[string]any{"decided_by": by, "via": via}
	if reason != "" {
		detail["reason"] = reason
	}
	return detail
}

// ApprovedResult is the result an approval records, as a value for the
// store's canonical JSON (the Result's fields, reason always present).
func ApprovedResult(by, via, reason string) map[string]any {
	return map[string]any{"decision": "approved", "decided_by": by, "via": via, "reason": reason}
}

// ApprovedStatus is the status message of an approved gate; summary
// shortens the reason as the store shortens error texts.
func ApprovedStatus(by, via, reason string, summary func(string) string) string {
	status := fmt.Sprintf("approved by %s (%s)", by, via)
	if reason != "" {
		status += ": " + summary(reason)
	}
	return status
}

// RejectedError is the error a rejection records on the gate.
func RejectedError(by, via, reason string) string {
	errText := fmt.Sprintf("rejected by %s (%s)", by, via)
	if reason != "" {
		errText += ": " + reason
	}
	return errText
}

// TimeoutReason is the reason the server records when it decides a gate
// nobody decided within timeout.
func TimeoutReason(timeout time.Duration) string {
	return fmt.Sprintf("nobody decided within %s", timeout)
}

// DecidedSummary says how a finished gate ended and who decided, from its
// state, stored result, error and status message.
func DecidedSummary(state string, result []byte, errText, status string) string {
	switch state {
	case "completed":
		var g Result
		if json.Unmarshal(result, &g) == nil && g.Decision != "" {
			s := fmt.Sprintf("approved by %s (%s)", g.DecidedBy, g.Via)
			if g.Reason != "" {
				s += ": " + g.Reason
			}
			return s
		}
		return "completed: " + status
	case "failed":
		return errText
	default:
		return state + ": " + status
	}
}

// DueAt is the decision time of a gate with timeout that starts awaiting
// approval at nowMS; 0 when it has none.
func DueAt(timeout time.Duration, nowMS int64) int64 {
	if timeout <= 0 {
		return 0
	}
	return nowMS + timeout.Milliseconds()
}

// AwaitingStatus is the status message of a gate awaiting approval since
// nowMS.
func AwaitingStatus(timeout time.Duration, onTimeout string, nowMS int64) string {
	if timeout <= 0 {
		return "awaiting approval"
	}
	return fmt.Sprintf("awaiting approval (%s at %s unless decided before)", onTimeout,
		time.UnixMilli(nowMS+timeout.Milliseconds()).UTC().Format(time.RFC3339Nano))
}

// AwaitDetail is the detail of a gate's await_approval event: its decision
// time and what the server then decides, when it has a timeout.
func AwaitDetail(dueMS int64, onTimeout string) map[string]any {
	detail := map[string]any{}
	if dueMS > 0 {
		detail["decide_by_ms"] = dueMS
		detail["on_timeout"] = onTimeout
	}
	return detail
}

// Refusal says why a task cannot be decided now: what to tell the caller
// and the sentinel (ErrNotGate, ErrNotAwaiting, ErrDecided); a nil
// sentinel when it is a gate awaiting approval. state, result, errText and
// status are the task's as stored.
func Refusal(kind string, awaiting bool, state string, result []byte, errText, status string) (detail string, sentinel error) {
	switch {
	case kind != tgdriver.KindGate:
		return "is an ordinary task, not an approval gate: only a task created with kind \"gate\" is approved or rejected", ErrNotGate
	case awaiting:
		return "", nil
	case state == "blocked":
		return "the gate does not await approval yet (" + status + "); it can be decided once its dependencies completed", ErrNotAwaiting
	default:
		return "the gate was already decided: " + DecidedSummary(state, result, errText, status), ErrDecided
	}
}

// NotClaimedDetail is why no worker's operation applies to a gate.
const NotClaimedDetail = "is an approval gate: no worker claims, completes or fails it; an operator (admin approve|reject) or a principal with the approve role decides it"
