package httpfront

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/liveview"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// GatesPath prefixes the approval-gate decisions: POST
// /gates/{task_id}/approve and /gates/{task_id}/reject. They are not MCP:
// no model tool decides a gate (the seven tools stay seven); a person
// does, as an authenticated principal with the approve role.
const GatesPath = "/gates/"

// maxGateBody bounds a decision's body ({"reason": …}).
const maxGateBody = 16 << 10

// gateRequest is a decision's optional JSON body.
type gateRequest struct {
	Reason string `json:"reason"`
}

// gateTaskJSON is the gate after a decision.
type gateTaskJSON struct {
	TaskID        string          `json:"task_id"`
	WorkflowID    string          `json:"workflow_id"`
	NodeID        string          `json:"node_id"`
	State         string          `json:"state"`
	StatusMessage string          `json:"status_message"`
	Result        json.RawMessage `json:"result,omitempty"`
	Error         string          `json:"error,omitempty"`
}

// gateAnswer is the body of every answer of a decision: the gate, or an
// error saying what was wrong.
type gateAnswer struct {
	Task  *gateTaskJSON `json:"task,omitempty"`
	Error string        `json:"error,omitempty"`
}

func writeGateAnswer(w http.ResponseWriter, status int, a gateAnswer) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(a)
}

// serveGate decides an approval gate for principal p (nil: the server
// runs without authentication), which must hold the approve role: a
// worker, a submitter or an observer is refused with 403 naming the role,
// and so is everybody on a server without authentication (there, only
// the operator's admin approve|reject decides). A gate outside p's
// workflows is answered as an unknown task, as MCP answers it.
func (h *Handler) serveGate(w http.ResponseWriter, r *http.Request, p *principal.Principal) {
	id, approve, ok := liveview.GateRoute(GatesPath, r.URL.Path)
	if !ok {
		writeGateAnswer(w, http.StatusNotFound, gateAnswer{Error: "not found: decide a gate with POST /gates/{task_id}/approve or /gates/{task_id}/reject"})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeGateAnswer(w, http.StatusMethodNotAllowed, gateAnswer{Error: "method not allowed: a decision is a POST"})
		return
	}
	verb := "reject"
	if approve {
		verb = "approve"
	}
	if p == nil {
		writeGateAnswer(w, http.StatusForbidden, gateAnswer{Error: fmt.Sprintf(
			"forbidden: deciding an approval gate over HTTP needs an authenticated principal with the role %s, and this server runs without authentication; the operator decides with: graph-engineering-mcp admin %s %s",
			principal.RoleApprove, verb, id)})
		return
	}
	if !p.HasRole(principal.RoleApprove) {
		scope := []string{principal.RoleApprove}
		if c := h.oauthConfig(); c != nil && p.FromToken() {
			scope = c.ScopesFor(principal.RoleApprove)
		}
		w.Header().Set("WWW-Authenticate", h.challenge(`error="insufficient_scope"`, scope))
		if h.metrics != nil {
			h.metrics.reject("insufficient_scope")
		}
		writeGateAnswer(w, http.StatusForbidden, gateAnswer{Error: principal.MissingRole(p, "deciding an approval gate", []string{principal.RoleApprove}).Error()})
		return
	}
	var req gateRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, maxGateBody+1))
	switch {
	case err != nil:
		writeGateAnswer(w, http.StatusBadRequest, gateAnswer{Error: "the request body could not be read"})
		return
	case len(body) > maxGateBody:
		writeGateAnswer(w, http.StatusRequestEntityTooLarge, gateAnswer{Error: fmt.Sprintf("the body must be at most %d bytes", maxGateBody)})
		return
	case len(bytes.TrimSpace(body)) > 0:
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || dec.More() {
			writeGateAnswer(w, http.StatusBadRequest, gateAnswer{Error: `the body must be empty or a JSON object {"reason": "…"}`})
			return
		}
	}
	ctx := taskgraph.WithPrincipal(r.Context(), p.Name)
	t, err := h.store.Task(ctx, id)
	if err == nil && !p.WorkflowAllowed(t.WorkflowID) {
		err = taskgraph.ErrNotFound
	}
	if err == nil {
		t, err = h.store.DecideGate(ctx, id, taskgraph.GateDecision{Approve: approve, By: p.Name, Via: taskgraph.DecidedByPrincipal, Reason: req.Reason})
	}
	switch {
	case err == nil:
		h.log.Info("approval gate decided over HTTP", "task", t.TaskID, "workflow", t.WorkflowID, "decision", verb, "principal", p.Name)
		writeGateAnswer(w, http.StatusOK, gateAnswer{Task: &gateTaskJSON{TaskID: t.TaskID, WorkflowID: t.WorkflowID, NodeID: t.NodeID,
			State: string(t.State), StatusMessage: t.StatusMessage, Result: t.Result, Error: t.Error}})
	case errors.Is(err, taskgraph.ErrNotFound):
		writeGateAnswer(w, http.StatusNotFound, gateAnswer{Error: fmt.Sprintf("unknown task %q", clip(id))})
	case errors.Is(err, taskgraph.ErrNotGate), errors.Is(err, taskgraph.ErrInvalid):
		writeGateAnswer(w, http.StatusBadRequest, gateAnswer{Error: err.Error()})
	case errors.Is(err, taskgraph.ErrConflict):
		writeGateAnswer(w, http.StatusConflict, gateAnswer{Error: err.Error()})
	case errors.Is(err, taskgraph.ErrUnavailable):
		w.Header().Set("Retry-After", retryAfterSeconds)
		writeGateAnswer(w, http.StatusServiceUnavailable, gateAnswer{Error: "the database is unavailable; the decision may or may not have been recorded: read the gate before retrying"})
	default:
		h.log.Error("deciding an approval gate failed", "task", id, "err", err)
		writeGateAnswer(w, http.StatusInternalServerError, gateAnswer{Error: "internal error; the decision may or may not have been recorded: read the gate before retrying"})
	}
}

// clip shortens an id taken from a URL for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
