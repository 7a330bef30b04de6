package httpfront

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// ReadyPath answers 200 "ready" when the server can commit a write now and
// 503 with the reason when it cannot; like HealthPath it needs no token.
const ReadyPath = "/readyz"

// readyTimeout bounds the readiness probe write: a database locked by
// another process for longer answers 503 busy.
const readyTimeout = healthTimeout

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

// serveHealth answers HealthPath: liveness, the database answers a read.
func (h *Handler) serveHealth(w http.ResponseWriter, r *http.Request) {
	if !probeRequest(w, r) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	if err := h.store.Ping(ctx); err != nil {
		h.log.Warn("health check: database did not answer", "err", err)
		http.Error(w, "not ok", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

// serveReady answers ReadyPath: 200 "ready" when a probe write commits
// within readyTimeout ("ready; paused: …" while an operator has paused all
// claiming: the server still serves live leases), else 503 with "not ready: <reason>: <advice>" (the
// reason is one of taskgraph.UnavailableReason's, whose advice is
// tools.UnavailableAdvice, or shutting_down), no-store, and for a retryable
// reason Retry-After.
func (h *Handler) serveReady(w http.ResponseWriter, r *http.Request) {
	if !probeRequest(w, r) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	err := h.store.Ready(ctx)
	if err == nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		// Paused claiming is still ready: live leases must reach this
		// server to heartbeat and complete. The body says so.
		if ps, perr := h.store.Pauses(ctx, ""); perr == nil && len(ps) > 0 && ps[0].WorkflowID == "" {
			_, _ = io.WriteString(w, "ready; paused: "+ps[0].String()+"\n")
			return
		}
		_, _ = io.WriteString(w, "ready\n")
		return
	}
	reason, retryable, ok := taskgraph.UnavailableReason(err)
	msg := tools.UnavailableAdvice(reason)
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
