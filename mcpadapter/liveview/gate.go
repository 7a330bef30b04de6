package liveview

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// Deciding an approval gate from the live view (issue 27 item 3). The view
// is otherwise read-only; this is its one write, and it goes through the
// same Store.DecideGate as the HTTP front's POST /gates/{task_id}/… and
// the operator's admin approve|reject, with the principal as its actor.
// No model tool decides a gate: these are browser routes for a person.
//
// A decision is a POST from the page's script (the page's CSP forbids
// forms), allowed only when all of these hold:
//   - it comes with a view session (the cookie a login link set:
//     HttpOnly, SameSite=Strict, Path=/ui); a bearer token is told to use
//     POST /gates/{task_id}/… instead, and a server without
//     authentication refuses it (there only the operator decides);
//   - it carries an Origin header (a browser sends one on every POST),
//     which the HTTP front has already checked is this server's or an
//     allowed one;
//   - its UICSRFHeader equals the session's anti-forgery token (compared
//     in constant time): a random secret held in the session's entry,
//     which only a same-origin script can read from UIMePath;
//   - the session's principal, resolved afresh, holds the approve role
//     and the gate's workflow is in its scope (else the gate is answered
//     as an unknown task).
const (
	// UIMePath answers who the page acts for: the principal, whether it
	// may decide gates, and the session's anti-forgery token (GET).
	UIMePath = "/ui/api/me"
	// UIGatesPath prefixes the decisions: POST
	// /ui/api/gates/{task_id}/approve and …/reject, with an optional JSON
	// body {"reason": "…"}.
	UIGatesPath = "/ui/api/gates/"
	// UICSRFHeader carries the session's anti-forgery token on a decision.
	UICSRFHeader = "X-CSRF-Token"
	// uiMaxGateBody bounds a decision's body.
	uiMaxGateBody = 16 << 10
)

// Me is the answer of UIMePath.
type Me struct {
	// Principal is the viewer's name ("" without authentication).
	Principal string `json:"principal,omitempty"`
	// CanDecideGates: the page shows approve and reject on every gate
	// awaiting approval.
	CanDecideGates bool `json:"can_decide_gates"`
	// CSRFToken is the session's anti-forgery token, to send back in
	// UICSRFHeader; absent without a session.
	CSRFToken string `json:"csrf_token,omitempty"`
	// Why says why the viewer cannot decide gates here, when it cannot.
	Why string `json:"why,omitempty"`
}

// me is who v is, as the page needs to know it.
func (u *Handler) me(v viewer) Me {
	m := Me{CSRFToken: v.csrf}
	if v.p != nil {
		m.Principal = v.p.Name
	}
	if why := gateRefusal(v); why != "" {
		m.Why = why
		return m
	}
	m.CanDecideGates = true
	return m
}

// gateRefusal says why v cannot decide gates in the view, or "".
func gateRefusal(v viewer) string {
	switch {
	case v.p == nil:
		return "this server runs without authentication: only the operator decides a gate (graph-engineering-mcp admin approve|reject TASK_ID)"
	case v.csrf == "":
		return "a decision in the live view needs a view session (open a login link); with a bearer token, POST /gates/{task_id}/approve or /reject"
	case !v.p.HasRole(principal.RoleApprove):
		return principal.MissingRole(v.p, "deciding an approval gate", []string{principal.RoleApprove}).Error()
	}
	return ""
}

// GateRoute splits prefix{task_id}/{approve|reject} (the live view's
// UIGatesPath and the HTTP front's /gates/ route): the gate's task id and
// whether the decision approves; ok is false for any other path.
func GateRoute(prefix, path string) (taskID string, approve, ok bool) {
	rest, found := strings.CutPrefix(path, prefix)
	if !found {
		return "", false, false
	}
	id, verb, found := strings.Cut(rest, "/")
	if !found || id == "" {
		return "", false, false
	}
	switch verb {
	case "approve":
		return id, true, true
	case "reject":
		return id, false, true
	}
	return "", false, false
}

// GateAnswer is the answer of a decision: the gate after it, or an error
// saying what was wrong and whether the decision may have been recorded.
type GateAnswer struct {
	Task  *Node  `json:"task,omitempty"`
	Error string `json:"error,omitempty"`
}

// serveGate decides a gate for the session's principal; see UIGatesPath.
func (u *Handler) serveGate(w http.ResponseWriter, r *http.Request) {
	id, approve, ok := GateRoute(UIGatesPath, r.URL.Path)
	if !ok {
		writeUIJSON(w, r, http.StatusNotFound, GateAnswer{Error: "not found: decide a gate with POST " + UIGatesPath + "{task_id}/approve or …/reject"})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeUIJSON(w, r, http.StatusMethodNotAllowed, GateAnswer{Error: "method not allowed: a decision is a POST"})
		return
	}
	v, status, why := u.viewer(r)
	if status != 0 {
		u.refuse(w, r, status, why)
		return
	}
	if v.p == nil || v.csrf == "" {
		u.refuse(w, r, http.StatusForbidden, "forbidden: "+gateRefusal(v))
		return
	}
	if r.Header.Get("Origin") == "" {
		u.refuse(w, r, http.StatusForbidden, "forbidden: a decision in the live view must come from its page (the request has no Origin header)")
		return
	}
	sent := r.Header.Get(UICSRFHeader)
	if sent == "" || subtle.ConstantTimeCompare([]byte(sent), []byte(v.csrf)) != 1 {
		u.refuse(w, r, http.StatusForbidden, "forbidden: the request's "+UICSRFHeader+" header is missing or does not match this view session; reload the page and decide again (nothing was decided)")
		return
	}
	if !v.p.HasRole(principal.RoleApprove) {
		u.refuse(w, r, http.StatusForbidden, principal.MissingRole(v.p, "deciding an approval gate", []string{principal.RoleApprove}).Error())
		return
	}
	var req struct {
		Reason string `json:"reason"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, uiMaxGateBody+1))
	switch {
	case err != nil:
		writeUIJSON(w, r, http.StatusBadRequest, GateAnswer{Error: "the request body could not be read; nothing was decided"})
		return
	case len(body) > uiMaxGateBody:
		writeUIJSON(w, r, http.StatusRequestEntityTooLarge, GateAnswer{Error: fmt.Sprintf("the body must be at most %d bytes; nothing was decided", uiMaxGateBody)})
		return
	case len(bytes.TrimSpace(body)) > 0:
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || dec.More() {
			writeUIJSON(w, r, http.StatusBadRequest, GateAnswer{Error: `the body must be empty or a JSON object {"reason": "…"}; nothing was decided`})
			return
		}
	}
	u.decide(w, r, v.p, id, approve, req.Reason)
}

// decide runs the decision in one of the view's slots and answers it.
func (u *Handler) decide(w http.ResponseWriter, r *http.Request, p *principal.Principal, id string, approve bool, reason string) {
	if !u.takeSlot(w, r, GateAnswer{Error: "server busy: the live view serves a few requests at once; nothing was decided, retry after a moment"}) {
		return
	}
	defer func() { <-u.sem }()
	ctx, cancel := context.WithTimeout(taskgraph.WithPrincipal(r.Context(), p.Name), uiReadTimeout)
	defer cancel()
	verb := "reject"
	if approve {
		verb = "approve"
	}
	// PeekTask, as the view reads: the scope check must not expire a lease.
	task, err := u.store.PeekTask(ctx, id)
	if err == nil && !p.WorkflowAllowed(task.WorkflowID) {
		err = taskgraph.ErrNotFound // as a missing one, like the HTTP route
	}
	if err == nil {
		task, err = u.store.DecideGate(ctx, id, taskgraph.GateDecision{Approve: approve, By: p.Name, Via: taskgraph.DecidedByPrincipal, Reason: reason})
	}
	switch {
	case err == nil:
		u.log.Info("approval gate decided in the live view", "task", task.TaskID, "workflow", task.WorkflowID, "decision", verb, "principal", p.Name)
		n := uiNodeOf(task, u.store.Clock().Now(), uiMaxText)
		writeUIJSON(w, r, http.StatusOK, GateAnswer{Task: &n})
	case errors.Is(err, taskgraph.ErrNotFound):
		writeUIJSON(w, r, http.StatusNotFound, GateAnswer{Error: fmt.Sprintf("unknown task %q; nothing was decided", clipID(id))})
	case errors.Is(err, taskgraph.ErrNotGate), errors.Is(err, taskgraph.ErrInvalid):
		writeUIJSON(w, r, http.StatusBadRequest, GateAnswer{Error: err.Error()})
	case errors.Is(err, taskgraph.ErrConflict):
		writeUIJSON(w, r, http.StatusConflict, GateAnswer{Error: err.Error()})
	case errors.Is(err, taskgraph.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "1")
		writeUIJSON(w, r, http.StatusServiceUnavailable, GateAnswer{Error: "the database is unavailable or did not answer in time; the decision may or may not have been recorded: look at the gate before deciding again"})
	default:
		u.log.Error("deciding an approval gate in the live view failed", "task", id, "err", err)
		writeUIJSON(w, r, http.StatusInternalServerError, GateAnswer{Error: "internal error; the decision may or may not have been recorded: look at the gate before deciding again"})
	}
}

// clipID shortens an id taken from a URL for an error message.
func clipID(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
