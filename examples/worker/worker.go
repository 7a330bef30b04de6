package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/examples/internal/mcpclient"
)

// Config configures Run.
type Config struct {
	// Owner names this worker on every claim; it must be unique among the
	// workers of a database.
	Owner string
	// Workflow, when set, limits claims to that workflow.
	Workflow string
	// Capabilities are the tags this worker advertises on every claim: it
	// is given only tasks whose requires are among them (none: only tasks
	// that require nothing).
	Capabilities []string
	// Lease is the lease duration asked for on claim and on every heartbeat
	// (1s..15m). Heartbeats are sent every Lease/3.
	Lease time.Duration
	// Wait is how long one claim-next may wait for a ready task (0..30s). A
	// stop request is noticed when the claim in flight returns, so this also
	// bounds how long an idle worker takes to stop.
	Wait time.Duration
	// MaxTasks stops Run after that many claims have been worked; 0 means no
	// limit.
	MaxTasks int
	// Grace is how long a task in hand may keep running after a stop request
	// before it is failed with retryable=true for another worker.
	Grace time.Duration
	// Handler does the work; nil means Echo.
	Handler Handler
	// Logger receives structured progress; nil discards it.
	Logger *slog.Logger
	// CallTimeout bounds each request other than the claim wait; 0 means 30s.
	CallTimeout time.Duration
}

// errLostClaim ends a handler's context when a heartbeat is refused.
var errLostClaim = errors.New("the claim was lost: another worker or an operator took over the task")

// errShuttingDown ends a handler's context when the grace period runs out.
var errShuttingDown = errors.New("the worker is shutting down and the grace period ran out")

// Run claims and works tasks until stop is done (or MaxTasks tasks were
// worked), then returns nil. A completion claims the next ready task in the
// same call (graph_task_complete with claim_next); when none was ready Run
// claims with a wait as usual. It returns an error only when it cannot go on:
// a broken connection, or a claim the server refuses (bad configuration).
//
// Shutdown: once stop is done Run claims nothing more. A claim already in
// flight is allowed to return (it is never cancelled, because a claim
// granted after its request was abandoned would sit unheld until its lease
// expired); a task it returns is worked like any task in hand. A task in hand
// keeps heartbeating and may finish within Grace of the stop; then its
// handler's context is cancelled and the claim is released
// (graph_task_cancel with release: true): the task goes back to pending for
// another worker without the attempt being counted. A task the last
// completion claimed after the stop was asked for is released unworked. Run never writes to a
// task whose claim it has lost.
func Run(stop context.Context, cs *mcp.ClientSession, cfg Config) error {
	w, err := newWorker(stop, cs, cfg)
	if err != nil {
		return err
	}
	defer w.release()
	return w.loop()
}

type worker struct {
	stop    context.Context
	stopAt  func() time.Time // when stop became done
	release func() bool      // unregisters the stop watcher
	cs      *mcp.ClientSession
	cfg     Config
	log     *slog.Logger
	handler Handler
}

func newWorker(stop context.Context, cs *mcp.ClientSession, cfg Config) (*worker, error) {
	if err := checkOwner(cfg.Owner); err != nil {
		return nil, err
	}
	if cfg.Lease < time.Second || cfg.Lease > 15*time.Minute {
		return nil, fmt.Errorf("lease must be between 1s and 15m (got %v)", cfg.Lease)
	}
	if cfg.Wait < 0 || cfg.Wait > 30*time.Second {
		return nil, fmt.Errorf("wait must be between 0 and 30s (got %v)", cfg.Wait)
	}
	if cfg.MaxTasks < 0 || cfg.Grace < 0 {
		return nil, fmt.Errorf("max tasks and grace must not be negative (got %d, %v)", cfg.MaxTasks, cfg.Grace)
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 30 * time.Second
	}
	w := &worker{stop: stop, cs: cs, cfg: cfg, log: cfg.Logger, handler: cfg.Handler}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.handler == nil {
		w.handler = Echo
	}
	var once sync.Once
	var at time.Time
	w.stopAt = func() time.Time {
		once.Do(func() { at = time.Now() })
		return at
	}
	w.release = context.AfterFunc(stop, func() { w.stopAt() })
	return w, nil
}

func (w *worker) stopping() bool { return w.stop.Err() != nil }

func (w *worker) loop() error {
	w.log.Info("worker started", "workflow", w.cfg.Workflow, "lease", w.cfg.Lease, "wait", w.cfg.Wait, "max_tasks", w.cfg.MaxTasks)
	worked := 0
	backoff := time.Duration(0)
	// next is the task the last completion claimed with claim_next, when
	// it claimed one: worked next, without a claim of its own.
	var next *claimed
	for !w.stopping() && (w.cfg.MaxTasks == 0 || worked < w.cfg.MaxTasks) {
		claim, err := next, error(nil)
		next = nil
		if claim == nil {
			claim, err = w.claim()
		}
		if err != nil {
			if !transient(err) {
				return err
			}
			backoff = min(max(2*backoff, 250*time.Millisecond), 5*time.Second)
			w.log.Warn("claim failed; retrying", "err", err, "in", backoff)
			if !w.pause(backoff) {
				break
			}
			continue
		}
		backoff = 0
		if claim == nil {
			continue
		}
		worked++
		// Claim the next task with the completion unless this one is the
		// last to work.
		claimNext := w.cfg.MaxTasks == 0 || worked < w.cfg.MaxTasks
		if next, err = w.work(claim, claimNext); err != nil {
			return err
		}
	}
	if next != nil {
		// Stopping with a task the last completion claimed: give it back
		// unworked, the attempt not counted.
		w.log.Info("stopping; releasing the task the last completion claimed", "task_id", next.task.TaskID)
		if err := w.releaseClaim(next, w.log.With("task_id", next.task.TaskID)); err != nil {
			return err
		}
	}
	reason := "stop requested"
	if !w.stopping() {
		reason = fmt.Sprintf("worked %d tasks (--max-tasks)", worked)
	}
	w.log.Info("worker stopped", "reason", reason, "worked", worked)
	return nil
}

// pause waits d unless a stop comes first; it reports whether to go on.
func (w *worker) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.stop.Done():
		return false
	}
}

// transient reports whether err is a one-off server fault (-32603) worth
// retrying, rather than a broken connection or a refusal.
func transient(err error) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) && je.Code == jsonrpc.CodeInternalError
}

// claimed is a task this worker holds.
type claimed struct {
	task  mcpclient.Task
	lease mcpclient.Lease
	deps  []mcpclient.Dependency
	at    time.Time // when the claim was sent: the lease runs from no earlier
	// report is the handler's latest progress, sent with the holder writes.
	report reportSlot
}

// claim asks for the next ready task, waiting up to Wait. It returns nil when
// none became ready. The request is deliberately not tied to stop (see Run).
func (w *worker) claim() (*claimed, error) {
	args := map[string]any{"owner": w.cfg.Owner, "lease_ms": w.cfg.Lease.Milliseconds(), "wait_ms": w.cfg.Wait.Milliseconds()}
	if w.cfg.Workflow != "" {
		args["workflow_id"] = w.cfg.Workflow
	}
	if len(w.cfg.Capabilities) > 0 {
		args["capabilities"] = w.cfg.Capabilities
	}
	// One request id for the claim and its retries: a claim whose answer
	// was lost is answered with the lease it took, never a second one.
	args["request_id"] = mcpclient.NewRequestID()
	sent := time.Now()
	var out mcpclient.Result
	err := w.retried(mcpclient.ToolClaim, func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(w.stop), w.cfg.Wait+w.cfg.CallTimeout)
		defer cancel()
		return mcpclient.CallTool(ctx, w.cs, mcpclient.ToolClaim, args, &out)
	})
	if err != nil {
		var te *mcpclient.ToolError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("the server refused the claim; check --owner, --workflow and --capabilities: %w", err)
		}
		return nil, err
	}
	return claimedFrom(&out, sent)
}

// claimedFrom is the task a claim's answer out (sent at sent) holds, nil
// when it claimed none.
func claimedFrom(out *mcpclient.Result, sent time.Time) (*claimed, error) {
	if out == nil || out.Claimed == nil || !*out.Claimed {
		return nil, nil
	}
	if out.Task == nil || out.Lease == nil {
		return nil, fmt.Errorf("claim returned claimed=true without a task and lease; is this a graph-engineering server?")
	}
	return &claimed{task: *out.Task, lease: *out.Lease, deps: out.Dependencies, at: sent}, nil
}

// claimNextArgs is the claim_next of a completion: the claim this worker
// would make, without a wait (graph_task_complete claims only a task ready
// now; a null next falls back to a waiting claim).
func (w *worker) claimNextArgs() map[string]any {
	next := map[string]any{"lease_ms": w.cfg.Lease.Milliseconds()}
	if w.cfg.Workflow != "" {
		next["workflow_id"] = w.cfg.Workflow
	}
	if len(w.cfg.Capabilities) > 0 {
		next["capabilities"] = w.cfg.Capabilities
	}
	return next
}

// upstream returns the results of the claimed task's dependencies by node id,
// reading whole (graph_task_inspect) any the claim left out for size.
func (w *worker) upstream(c *claimed) (map[string]json.RawMessage, error) {
	if len(c.deps) == 0 {
		return nil, nil
	}
	out := make(map[string]json.RawMessage, len(c.deps))
	for _, d := range c.deps {
		r := d.Result
		if d.ResultOmitted {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(w.stop), w.cfg.CallTimeout)
			var got mcpclient.Result
			err := mcpclient.CallTool(ctx, w.cs, mcpclient.ToolInspect, map[string]any{"task_id": d.TaskID}, &got)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("read the result of dependency %s: %w", d.NodeID, err)
			}
			if got.Task != nil {
				r = got.Task.Result
			}
		}
		out[d.NodeID] = r
	}
	return out, nil
}

// holderArgs are the arguments that prove the claim on every holder write.
func (c *claimed) holderArgs() map[string]any {
	return map[string]any{"task_id": c.task.TaskID, "owner": c.lease.Owner, "generation": c.lease.Generation, "claim_token": c.lease.ClaimToken}
}

// outcome is what the handler produced.
type outcome struct {
	result any
	err    error
}

// work runs the handler on a held task while heartbeating, then completes or
// fails it — unless the claim was lost, in which case it writes nothing.
// With claimNext a completion also claims the next ready task, which work
// returns (nil when none was ready, or nothing was completed).
func (w *worker) work(c *claimed, claimNext bool) (*claimed, error) {
	log := w.log.With("task_id", c.task.TaskID, "workflow", c.task.WorkflowID, "node", c.task.NodeID, "generation", c.lease.Generation)
	log.Info("claimed task", "attempt", c.task.Attempts, "max_attempts", c.task.MaxAttempts, "lease_until", c.lease.LeaseExpiresAt)

	workCtx, cancelWork := context.WithCancelCause(context.Background())
	defer cancelWork(nil)
	lost := make(chan error, 1)
	hbCtx, stopHeartbeats := context.WithCancel(workCtx)
	var hbDone sync.WaitGroup
	hbDone.Go(func() { w.heartbeat(hbCtx, c, log, lost) })
	defer func() { stopHeartbeats(); hbDone.Wait() }()

	done := make(chan outcome, 1)
	up, upErr := w.upstream(c)
	task := Task{TaskID: c.task.TaskID, WorkflowID: c.task.WorkflowID, NodeID: c.task.NodeID, Payload: c.task.Payload,
		Attempt: c.task.Attempts, MaxAttempts: c.task.MaxAttempts, Owner: c.lease.Owner, Generation: c.lease.Generation, Upstream: up,
		Report: c.report.set}
	go func() {
		if upErr != nil {
			done <- outcome{err: Retryable(upErr)}
			return
		}
		defer func() {
			if r := recover(); r != nil {
				done <- outcome{err: fmt.Errorf("the handler panicked: %v", r)}
			}
		}()
		result, err := w.handler(workCtx, task)
		done <- outcome{result, err}
	}()

	stopC := w.stop.Done()
	var graceC <-chan time.Time
	for {
		select {
		case o := <-done:
			stopHeartbeats()
			hbDone.Wait()
			select {
			case err := <-lost:
				log.Warn("claim lost while the handler finished; result discarded", "err", err)
				return nil, nil
			default:
			}
			return w.finish(c, o, claimNext, log)
		case err := <-lost:
			cancelWork(errLostClaim)
			log.Warn("claim lost; stopped work on the task and will not write to it", "err", err)
			return nil, nil
		case <-stopC:
			stopC = nil
			left := w.cfg.Grace - time.Since(w.stopAt())
			log.Info("stop requested; letting the task in hand finish", "within", left.Round(time.Millisecond))
			t := time.NewTimer(max(left, 0))
			defer t.Stop()
			graceC = t.C
		case <-graceC:
			cancelWork(errShuttingDown)
			stopHeartbeats()
			hbDone.Wait()
			select {
			case err := <-lost:
				log.Warn("claim lost during shutdown; leaving the task alone", "err", err)
				return nil, nil
			default:
			}
			log.Info("grace period over; releasing the task so another worker can take it (the attempt is not counted)", "grace", w.cfg.Grace)
			return nil, w.releaseClaim(c, log)
		}
	}
}

// heartbeat extends the lease every Lease/3 until ctx ends. A refusal for a
// stale claim, or no successful heartbeat before the lease would have expired,
// is reported on lost and ends the heartbeats.
func (w *worker) heartbeat(ctx context.Context, c *claimed, log *slog.Logger, lost chan<- error) {
	interval := w.cfg.Lease / 3
	expires := c.at.Add(w.cfg.Lease)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		sent := time.Now()
		args := c.holderArgs()
		args["lease_ms"] = w.cfg.Lease.Milliseconds()
		// The handler's progress, when it changed since the last heartbeat
		// that carried it; a heartbeat without one keeps the last.
		rep, version := c.report.changed()
		rep.addTo(args)
		cctx, cancel := context.WithTimeout(ctx, interval)
		err := mcpclient.CallTool(cctx, w.cs, mcpclient.ToolHeartbeat, args, nil)
		cancel()
		switch {
		case err == nil:
			expires = sent.Add(w.cfg.Lease)
			c.report.sent(version)
			log.Debug("heartbeat", "lease_for", w.cfg.Lease)
		case ctx.Err() != nil:
			return
		case mcpclient.IsStaleClaim(err):
			lost <- err
			return
		case time.Now().After(expires):
			lost <- fmt.Errorf("no heartbeat succeeded before the lease expired: %w", err)
			return
		default:
			log.Warn("heartbeat failed; retrying before the lease expires", "err", err, "lease_expires_in", time.Until(expires).Round(time.Millisecond))
		}
	}
}

// finish completes or fails the task with the handler's outcome. With
// claimNext, and unless a stop was asked for, the completion claims the next
// ready task in the same call (claim_next), which finish returns.
func (w *worker) finish(c *claimed, o outcome, claimNext bool, log *slog.Logger) (*claimed, error) {
	if o.err != nil {
		return nil, w.fail(c, o.err.Error(), IsRetryable(o.err), log)
	}
	result, err := json.Marshal(o.result)
	if err != nil {
		return nil, w.fail(c, fmt.Sprintf("the handler's result is not JSON: %v", err), false, log)
	}
	args := c.holderArgs()
	args["result"] = json.RawMessage(result)
	c.report.latest().addTo(args)
	if claimNext && !w.stopping() {
		next, done, err := w.completeAndClaim(args, log)
		if done {
			return next, err
		}
		// The answer may have been lost: complete alone, with a request
		// id, as below. A completion that was applied is then refused as
		// already finished (its result is stored), and a task it claimed
		// waits out its lease for another worker.
	}
	err = w.holderWrite(mcpclient.ToolComplete, args)
	var te *mcpclient.ToolError
	switch {
	case err == nil:
		log.Info("completed task")
		return nil, nil
	case mcpclient.IsStaleClaim(err):
		log.Warn("claim lost before completion; result discarded", "err", err)
		return nil, nil
	case errors.As(err, &te):
		// The server refused this result (too large, say): record why.
		return nil, w.fail(c, "the server refused the result: "+te.Text, false, log)
	}
	return nil, err
}

// completeAndClaim sends graph_task_complete with args and claim_next,
// once and without a request id (the server refuses the two together). done
// is false when the answer may have been lost (a one-off fault, an unknown
// outcome, a timeout) or the server refused the result: the caller then
// completes as it would without claim_next.
func (w *worker) completeAndClaim(args map[string]any, log *slog.Logger) (next *claimed, done bool, err error) {
	withNext := maps.Clone(args)
	withNext["claim_next"] = w.claimNextArgs()
	sent := time.Now()
	var out mcpclient.Result
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.stop), w.cfg.CallTimeout)
	err = mcpclient.CallTool(ctx, w.cs, mcpclient.ToolComplete, withNext, &out)
	cancel()
	var te *mcpclient.ToolError
	switch {
	case err == nil:
		if n := out.Next; n != nil {
			next, err = claimedFrom(&mcpclient.Result{Task: n.Task, Claimed: n.Claimed, Lease: n.Lease, Dependencies: n.Dependencies}, sent)
		}
		log.Info("completed task", "claimed_next", next != nil)
		return next, true, err
	case mcpclient.IsStaleClaim(err):
		log.Warn("claim lost before completion; result discarded", "err", err)
		return nil, true, nil
	case errors.As(err, &te) && !te.RetryWithRequestID():
		// A refusal (the result, say): completing alone says the same and
		// records it.
		return nil, false, nil
	}
	log.Warn("completion with claim_next not acknowledged; completing again with a request id", "err", err)
	return nil, false, nil
}

// maxErrorBytes is the server's bound on a failure message.
const maxErrorBytes = 65536

// fail records a failure of the held task.
func (w *worker) fail(c *claimed, msg string, retryable bool, log *slog.Logger) error {
	if msg == "" {
		msg = "the handler failed without a message"
	}
	if len(msg) > maxErrorBytes {
		msg = msg[:maxErrorBytes-3] + "..."
	}
	args := c.holderArgs()
	args["error"] = msg
	args["retryable"] = retryable
	c.report.latest().addTo(args)
	var out mcpclient.Result
	err := w.holderWriteInto(mcpclient.ToolFail, args, &out)
	switch {
	case err == nil:
		state := ""
		if out.Task != nil {
			state = out.Task.State
		}
		log.Info("failed task", "error", msg, "retryable", retryable, "state", state)
		return nil
	case mcpclient.IsStaleClaim(err):
		log.Warn("claim lost before the failure was recorded", "err", err)
		return nil
	}
	return err
}

// releaseClaim gives the held claim back (graph_task_cancel with release:
// true): the task returns to pending, the attempt is not counted.
func (w *worker) releaseClaim(c *claimed, log *slog.Logger) error {
	args := c.holderArgs()
	args["release"] = true
	err := w.holderWrite(mcpclient.ToolCancel, args)
	switch {
	case err == nil:
		log.Info("released task")
		return nil
	case mcpclient.IsStaleClaim(err):
		log.Warn("claim lost before the release was recorded", "err", err)
		return nil
	}
	return err
}

func (w *worker) holderWrite(tool string, args map[string]any) error {
	return w.holderWriteInto(tool, args, nil)
}

// holderWriteInto sends a complete, fail or release with a request id,
// retrying it with the same id while the answer may have been lost. It is
// not tied to stop: a write during shutdown must still land.
func (w *worker) holderWriteInto(tool string, args map[string]any, out any) error {
	args["request_id"] = mcpclient.NewRequestID()
	return w.retried(tool, func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(w.stop), w.cfg.CallTimeout)
		defer cancel()
		return mcpclient.CallTool(ctx, w.cs, tool, args, out)
	})
}

// maxWriteTries bounds the tries of one write (retried).
const maxWriteTries = 5

// retried runs call, a write carrying a request id, and repeats it (with
// the same id, so the server answers a write it already applied as it did
// and never applies it twice) after a one-off server fault or an answer
// that says the database was briefly unavailable or the outcome is unknown,
// backing off from 200 ms, at most maxWriteTries times.
func (w *worker) retried(tool string, call func() error) error {
	var err error
	for attempt, pause := 1, 200*time.Millisecond; ; attempt, pause = attempt+1, pause*2 {
		err = call()
		var te *mcpclient.ToolError
		again := transient(err) || (errors.As(err, &te) && te.RetryWithRequestID())
		if err == nil || !again || attempt == maxWriteTries {
			return err
		}
		w.log.Warn("write not acknowledged; retrying it with its request id", "tool", tool, "err", err)
		time.Sleep(pause)
	}
}
