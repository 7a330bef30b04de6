package httpfront

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

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

// errProbeTimeout is a probe's answer when the database did not answer
// within the probe's deadline: a disk that does not answer, or a lock held
// for that long. It says no more than that, because no more is known.
var errProbeTimeout = fmt.Errorf("the database did not answer within %s", healthTimeout)

// probeResult is one probe's answer: the body of a success, or err.
type probeResult struct {
	body string
	err  error
}

// probeRun is a probe running against the store; done is closed once res
// is set.
type probeRun struct {
	done chan struct{}
	res  probeResult
}

// probeGate runs at most one probe of a kind against the store at once and
// answers every request by the probe deadline: a request that arrives while
// a probe runs shares that probe's answer; when the deadline passes first
// (the store does not answer: a frozen disk never returns), it gets
// errProbeTimeout, and the probe still running is not started again until
// it ends, so stuck probes never pile up. The zero value is ready to use.
type probeGate struct {
	mu      sync.Mutex
	running *probeRun
	// starts counts the probes started and joins the requests that shared
	// a running probe, for tests.
	starts, joins atomic.Int64
}

// do answers with fn's result, running fn (with a context that ends at the
// deadline) unless a probe already runs, or errProbeTimeout when no
// answer comes within timeout. A probe that failed because its deadline
// passed answers errProbeTimeout wrapping its error. ctx is the request's:
// when it ends, do returns its error.
func (g *probeGate) do(ctx context.Context, timeout time.Duration, fn func(context.Context) probeResult) probeResult {
	g.mu.Lock()
	run := g.running
	if run == nil {
		run = &probeRun{done: make(chan struct{})}
		g.running = run
		g.starts.Add(1)
		go func() {
			pctx, cancel := context.WithTimeout(context.Background(), timeout)
			res := fn(pctx)
			if res.err != nil && pctx.Err() != nil {
				res.err = fmt.Errorf("%w (%w)", errProbeTimeout, res.err)
			}
			cancel()
			g.mu.Lock()
			run.res, g.running = res, nil
			g.mu.Unlock()
			close(run.done)
		}()
	} else {
		g.joins.Add(1)
	}
	g.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-run.done:
		return run.res
	case <-t.C:
		return probeResult{err: errProbeTimeout}
	case <-ctx.Done():
		return probeResult{err: ctx.Err()}
	}
}

// serveHealth answers HealthPath: liveness, the database answers a read
// within healthTimeout; else 503 "not ok: <why>".
func (h *Handler) serveHealth(w http.ResponseWriter, r *http.Request) {
	if !probeRequest(w, r) {
		return
	}
	res := h.health.do(r.Context(), healthTimeout, func(ctx context.Context) probeResult {
		return probeResult{body: "ok\n", err: h.store.Ping(ctx)}
	})
	if err := res.err; err != nil {
		h.log.Warn("health check: database did not answer", "err", err)
		why := "the database did not answer a read; the server logged the details"
		if errors.Is(err, errProbeTimeout) {
			why = "timeout: " + errProbeTimeout.Error()
		}
		http.Error(w, "not ok: "+why, http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, res.body)
}

// serveReady answers ReadyPath: 200 "ready" when a probe write commits
// within readyTimeout ("ready; paused: …" while an operator has paused all
// claiming: the server still serves live leases), else 503 with "not ready: <reason>: <advice>" (the
// reason is one of taskgraph.UnavailableReason's, whose advice is
// tools.UnavailableAdvice, or shutting_down, or timeout when the database
// did not answer by the deadline), no-store, and for a retryable
// reason Retry-After.
func (h *Handler) serveReady(w http.ResponseWriter, r *http.Request) {
	if !probeRequest(w, r) {
		return
	}
	res := h.ready.do(r.Context(), readyTimeout, func(ctx context.Context) probeResult {
		if err := h.store.Ready(ctx); err != nil {
			return probeResult{err: err}
		}
		// Paused claiming is still ready: live leases must reach this
		// server to heartbeat and complete. The body says so.
		if ps, perr := h.store.Pauses(ctx, ""); perr == nil && len(ps) > 0 && ps[0].WorkflowID == "" {
			return probeResult{body: "ready; paused: " + ps[0].String() + "\n"}
		}
		return probeResult{body: "ready\n"}
	})
	err := res.err
	if err == nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, res.body)
		return
	}
	reason, retryable, ok := taskgraph.UnavailableReason(err)
	msg := tools.UnavailableAdvice(reason)
	switch {
	case errors.Is(err, errProbeTimeout):
		// Whatever the store would have said, it said nothing in time:
		// the honest reason is the timeout (a frozen disk or a lock held
		// that long look the same from here).
		reason, retryable, msg = "timeout", true, errProbeTimeout.Error()+": the disk may not be answering or a lock may be held that long; the server logged the details; retry."
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
