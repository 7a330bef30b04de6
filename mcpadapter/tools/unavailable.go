package mcpadapter

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// ReadyPath answers 200 "ready" when the server can commit a write now and
// 503 with the reason when it cannot; like HealthPath it needs no token.
const ReadyPath = "/readyz"

// readyTimeout bounds the readiness probe write: a database locked by
// another process for longer answers 503 busy.
const readyTimeout = healthTimeout

// unavailableAdvice is the text of an "unavailable" tool error: the cause
// and what the caller should do. It names no file, so a client learns
// nothing of the server's layout.
var unavailableAdvice = map[string]string{
	"busy":           "database busy: locked by another process for longer than the server's busy timeout; nothing was written. Retry the same call in a few seconds.",
	"disk_full":      "database disk full: the server's disk has no space left; nothing was written. Retry later, once an operator has freed space.",
	"read_only":      "database read-only: the server cannot write its database file or folder; nothing was written. Retrying will not help until an operator makes the database writable.",
	"files_replaced": "database files replaced: the server's database file, -wal or -shm was removed or replaced while it ran, so it refuses every write until it is restarted; this call may or may not have taken effect. After the restart, inspect the task before retrying.",
}

// unavailable is the tool error for a write the store could not commit
// because of the database's environment (taskgraph.ErrUnavailable): a
// result with isError, the advice as text and
// {"kind":"unavailable","reason":…,"retryable":…} as detail. The store has
// logged what matters; the details stay in the server log.
func (s *Server) unavailable(tool string, err error) *mcp.CallToolResult {
	reason, _, _ := taskgraph.UnavailableReason(err)
	s.observeTool(tool, "unavailable")
	s.log.Warn("tool call refused: database unavailable", "tool", tool, "reason", reason, "err", err)
	return &mcp.CallToolResult{
		Meta:    mcp.Meta{ErrorMetaKey: errorDetail("unavailable", err)},
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: tool + ": " + unavailableAdvice[reason]}},
	}
}

// unavailableRPC is the JSON-RPC error of a request that is not a tool call
// (tasks/cancel) and whose write the database could not take: -32603, since
// the protocol has no better code, with the advice as message and the same
// detail as the tool error in data.
func (s *Server) unavailableRPC(what string, err error) error {
	reason, _, _ := taskgraph.UnavailableReason(err)
	s.observeTool(what, "unavailable")
	s.log.Warn("request refused: database unavailable", "in", what, "reason", reason, "err", err)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: what + ": " + unavailableAdvice[reason],
		Data: errorData(errorDetail("unavailable", err))}
}

// probeRequest admits a GET or HEAD to a probe route (/healthz, /readyz),
// whose answer must never be cached; anything else gets 405 and false.
func probeRequest(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: use GET", http.StatusMethodNotAllowed)
		return false
	}
	w.Header().Set("Cache-Control", "no-store")
	return true
}

// serveReady answers ReadyPath: 200 "ready" when a probe write commits
// within readyTimeout, else 503 with "not ready: <reason>: <advice>" (the
// reason is busy, disk_full, read_only, files_replaced or shutting_down),
// no-store, and for a retryable reason Retry-After.
func (h *HTTPHandler) serveReady(w http.ResponseWriter, r *http.Request) {
	if !probeRequest(w, r) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	err := h.srv.store.Ready(ctx)
	if err == nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ready\n")
		return
	}
	reason, retryable, ok := taskgraph.UnavailableReason(err)
	msg := unavailableAdvice[reason]
	switch {
	case ok:
	case errors.Is(err, taskgraph.ErrClosed):
		reason, msg = "shutting_down", "the server is shutting down."
	default:
		// Neither a known cause nor shutdown: say so without details.
		reason, msg = "error", "the readiness probe failed; the server logged the details."
	}
	h.log.Warn("readiness check: cannot commit a write", "reason", reason, "err", err)
	if retryable {
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	http.Error(w, "not ready: "+reason+": "+msg, http.StatusServiceUnavailable)
}
