package taskgraph

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/limits"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/statusmsg"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// MaxClaimWait bounds ClaimRequest.Wait.
const MaxClaimWait = limits.MaxClaimWait

// sweepLimit bounds how many expired leases one claim operation processes.
const sweepLimit = 64

// Claim grants a lease. With TaskID it claims that task, which must be pending
// (or claimed with an expired lease); otherwise it is claim-next: the first
// by priority (highest first), then the oldest
// pending task, optionally within WorkflowID, waiting up to Wait for one. ok
// is false when claim-next found nothing; that is not an error (c.Paused
// then names the pause that holds it, if one does). A claim-next
// with a wait that finds nothing while Options.MaxWaiters calls are already
// waiting answers at once with ok false and an error matching ErrWaitLimit.
func (s *Store) Claim(ctx context.Context, req ClaimRequest) (c Claimed, ok bool, err error) {
	if err := checkIdentifier("owner", req.Owner); err != nil {
		return Claimed{}, false, err
	}
	d, err := lease.Duration(req.Lease)
	if err != nil {
		return Claimed{}, false, invalid("lease_ms", "must be between %d and %d (got %d)", lease.MinDuration.Milliseconds(), lease.MaxDuration.Milliseconds(), req.Lease.Milliseconds())
	}
	if req.Wait < 0 || req.Wait > MaxClaimWait {
		return Claimed{}, false, invalid("wait_ms", "must be between 0 and %d (got %d)", MaxClaimWait.Milliseconds(), req.Wait.Milliseconds())
	}
	caps, err := canonicalTags("capabilities", req.Capabilities, MaxCapabilities)
	if err != nil {
		return Claimed{}, false, err
	}
	if req.TaskID != "" {
		if req.WorkflowID != "" {
			return Claimed{}, false, invalid("workflow_id", "give either task_id (claim that task) or workflow_id (claim-next within it), not both")
		}
		if req.Wait != 0 {
			return Claimed{}, false, invalid("wait_ms", "applies only to claim-next (without task_id)")
		}
		if err := checkTaskID(req.TaskID); err != nil {
			return Claimed{}, false, err
		}
		rq, err := newRequest(ctx, "claim", req.Owner, claimArgs(req.TaskID, req.WorkflowID, caps, d))
		if err != nil {
			return Claimed{}, false, err
		}
		var conflict *ConflictError
		arrived := s.arrival(ctx)
		err = s.doAt(ctx, arrived, func(w *wtx) error {
			w.as(ActorWorker, req.Owner)
			c, conflict = Claimed{}, nil
			if rq != nil {
				if found, err := w.replay(rq, &c); err != nil || found {
					return err
				}
			}
			var err error
			c, conflict, err = w.claimByID(req.TaskID, caps, req.Owner, d)
			if err != nil || conflict != nil || rq == nil {
				return err
			}
			return w.keep(rq, c)
		})
		if err == nil && conflict != nil {
			err = conflict
		}
		if err != nil {
			return Claimed{}, false, fmt.Errorf("claim task %s: %w", req.TaskID, err)
		}
		return c, true, nil
	}
	if req.WorkflowID != "" {
		if err := checkIdentifier("workflow_id", req.WorkflowID); err != nil {
			return Claimed{}, false, err
		}
	}
	rq, err := newRequest(ctx, "claim", req.Owner, claimArgs("", req.WorkflowID, caps, d))
	if err != nil {
		return Claimed{}, false, err
	}
	// The first try is judged at the request's arrival; a retry after
	// waiting, at the time of the retry (set after each park).
	arrived := s.arrival(ctx)
	try := func() (Claimed, bool, error) {
		defer s.claimAttempts.Add(1)
		return s.hotClaimNext(ctx, arrived, req.Owner, req.WorkflowID, caps, d, rq)
	}
	// A claim-next that finds nothing says why when a pause or a key's
	// rate is the reason (claimedNone: reads on that answer only, shared
	// with the claim-nexts that find nothing at the same moment).
	none := func() (Claimed, bool, error) { return s.claimedNone(ctx, req.WorkflowID, caps), false, nil }
	// After Drain a claim-next tries once and does not wait: its server is
	// shutting down.
	drained := func() (Claimed, bool, error) {
		c, ok, err := none()
		c.Draining = true
		return c, ok, err
	}
	if req.Wait > 0 && s.Draining() {
		if c, ok, err = try(); err != nil || ok {
			return c, ok, err
		}
		return drained()
	}
	if req.Wait == 0 {
		if c, ok, err = try(); err != nil || ok {
			return c, ok, err
		}
		return none()
	}
	deadline := time.Now().Add(req.Wait)
	// Registered before the first try, so that no wake-up is missed.
	wt := s.notify.Add(req.WorkflowID, caps)
	if wt == nil {
		if c, ok, err = try(); err != nil || ok {
			return c, ok, err
		}
		return Claimed{}, false, fmt.Errorf("claim next: %w (%d claim-next calls are waiting); nothing was claimed: retry after a moment", ErrWaitLimit, s.opts.MaxWaiters)
	}
	defer s.notify.Remove(wt)
	for {
		if c, ok, err = try(); err != nil || ok {
			return c, ok, err
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return none()
		}
		// Sleep until a task this call may claim became ready (a commit here
		// or, through the watcher, by another process), or the deadline. The
		// server's sweeper expires leases and promotes due tasks, and wakes
		// waiters by count; without it, a waiter also wakes at the next lease
		// expiry or due time.
		sleep := remaining
		// A key's rate opens by time alone: no commit wakes the claim.
		if at := s.sharedKeyOpen(ctx, req.WorkflowID, caps); !at.IsZero() {
			if until := at.Sub(s.clock.Now()) + time.Millisecond; until < sleep {
				sleep = max(until, time.Millisecond)
			}
		}
		if !s.opts.Sweep {
			for _, next := range s.nextTimers(ctx) {
				if until := next.Sub(s.clock.Now()) + time.Millisecond; until < sleep {
					sleep = max(until, time.Millisecond)
				}
			}
		}
		if err := s.park(ctx, wt, sleep); errors.Is(err, errDrained) {
			return drained()
		} else if err != nil {
			return Claimed{}, false, err
		}
		arrived = s.clock.Now().UTC()
	}
}

// claimedNone is the answer of a claim-next of workflowID ("" for any)
// with caps that found nothing: the pause that holds it, if one does, and
// when a concurrency key's rate next lets it take a task, if a rate holds
// one back (one read of the few pauses and one bounded read of the keys,
// on that answer only). The claim-nexts of the same workflow and
// capabilities that find nothing at the same moment share those reads
// (Store.whyNone): a read that started after each of them asked.
func (s *Store) claimedNone(ctx context.Context, workflowID string, caps []string) Claimed {
	c, err := s.whyNone.Do(ctx, claimKey(workflowID, caps), func(ctx context.Context) (Claimed, error) {
		c := Claimed{Paused: s.claimPause(ctx, workflowID)}
		c.NextClaimableAt, c.NextClaimableAtLowerBound = s.nextKeyOpen(ctx, workflowID, caps)
		return c, nil
	})
	if err != nil {
		return Claimed{} // the caller left; the answer only explains
	}
	if c.Paused != nil {
		p := *c.Paused // callers share the read, not the answer
		c.Paused = &p
	}
	return c
}

// sharedKeyOpen is nextKeyOpen's time for a claim-next about to park: the
// parked claim-nexts of the same workflow and capabilities share the read
// (Store.keyOpens), as claimedNone's callers do.
func (s *Store) sharedKeyOpen(ctx context.Context, workflowID string, caps []string) time.Time {
	at, err := s.keyOpens.Do(ctx, claimKey(workflowID, caps), func(ctx context.Context) (time.Time, error) {
		at, _ := s.nextKeyOpen(ctx, workflowID, caps)
		return at, nil
	})
	if err != nil {
		return time.Time{}
	}
	return at
}

// claimKey is the key of a claim-next's shared reads: its workflow and
// its capabilities (canonical: sorted, unique, with no NUL).
func claimKey(workflowID string, caps []string) string {
	return workflowID + "\x00" + strings.Join(caps, "\x00")
}

// claimArgs are a claim's arguments, for its request id. How long a
// claim-next may wait is not one: a retry may wait less.
func claimArgs(taskID, workflowID string, caps []string, d time.Duration) map[string]any {
	return map[string]any{"task_id": taskID, "workflow_id": workflowID, "capabilities": caps, "lease_ms": d.Milliseconds()}
}

// errDrained is park's answer when Drain was called: the claim answers ok
// false (Claimed.Draining) rather than an error.
var errDrained = errors.New("the store is draining")

// park waits for a wake of wt, the timeout, ctx, Drain or Close.
func (s *Store) park(ctx context.Context, wt *waiter, sleep time.Duration) error {
	t := time.NewTimer(sleep)
	defer t.Stop()
	select {
	case <-wt.Woken():
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.quit:
		return ErrClosed
	case <-s.drain:
		return errDrained
	}
	return nil
}

// Waiters returns how many claim-next calls are waiting for a task to become
// ready right now.
func (s *Store) Waiters() int { return s.notify.Len() }

// nextTimers returns the next lease expiry and the next due time, those
// that exist.
func (s *Store) nextTimers(ctx context.Context) []time.Time {
	var out []time.Time
	if next, err := s.nextLeaseExpiry(ctx); err == nil && !next.IsZero() {
		out = append(out, next)
	}
	if next, err := s.nextDue(ctx); err == nil && !next.IsZero() {
		out = append(out, next)
	}
	return out
}

func (s *Store) nextLeaseExpiry(ctx context.Context) (time.Time, error) {
	ms, ok, err := s.drv.Reads().NextLeaseExpiry(ctx)
	if err != nil || !ok {
		return time.Time{}, err
	}
	return time.UnixMilli(ms), nil
}

// claimByID claims task taskID. A task that cannot be claimed is reported as
// conflict with a nil error, so that the operation still commits the expiry
// of a lapsed lease it processed on the way (the conflict's message may
// report its outcome); nothing else has been written then.
func (w *wtx) claimByID(taskID string, caps []string, owner string, d time.Duration) (Claimed, *ConflictError, error) {
	r, err := w.loadLocked(taskID) // decided on as it is once its workflow is locked
	if err != nil {
		return Claimed{}, nil, err
	}
	if r.Kind == KindGate {
		return Claimed{}, nil, gateNotClaimed(r)
	}
	if !r.State.Terminal() {
		// Refused before anything is written: this caller may never claim it.
		if missing := missingTags(r.Requires, caps); len(missing) > 0 {
			return Claimed{}, nil, &MissingCapabilitiesError{TaskID: r.TaskID, Missing: missing}
		}
	}
	if r.expired(w.at()) {
		if err := w.expire(&r); err != nil {
			return Claimed{}, nil, err
		}
	}
	if r.State != StatePending || r.dueAtMS > w.at().UnixMilli() {
		return Claimed{}, &ConflictError{TaskID: r.TaskID, State: r.State, Detail: statusmsg.NotClaimable(r.Task)}, nil
	}
	if conflict, err := w.pausedConflict(&r); err != nil || conflict != nil {
		return Claimed{}, conflict, err
	}
	if r.ConcurrencyKey != "" {
		// The key's slot, taken in this transaction; refused, nothing is
		// written (but a lapsed lease expired above).
		no, err := w.takeKeySlot(r.ConcurrencyKey)
		if err != nil {
			return Claimed{}, nil, err
		}
		if no != "" {
			return Claimed{}, &ConflictError{TaskID: r.TaskID, State: r.State, Detail: "not claimable now: " + no}, nil
		}
	}
	g, err := w.grantFor(&r, owner, d)
	if err != nil {
		return Claimed{}, nil, err
	}
	// The pause is tested again in the update itself: a pause that
	// committed since the read above wins (PostgreSQL: SetPause).
	g.guard.NotPaused = true
	ok, err := w.update(&r, g.set, g.guard)
	if err != nil {
		return Claimed{}, nil, fmt.Errorf("claim: %w", err)
	}
	if !ok {
		if err := w.untakeKeySlot(); err != nil {
			return Claimed{}, nil, err
		}
		if err := w.reload(&r); err != nil {
			return Claimed{}, nil, err
		}
		if conflict, err := w.pausedConflict(&r); err != nil || conflict != nil {
			return Claimed{}, conflict, err
		}
		return Claimed{}, nil, fmt.Errorf("%w: claim of task %s changed no row: %w", errInternal, r.TaskID, tgdriver.ErrRowChanged)
	}
	c, err := w.granted(&r, g)
	return c, nil, err
}

// grantPlan is a claim of a pending task decided on: the update that grants
// it and the lease it grants.
type grantPlan struct {
	owner string
	token string
	exp   time.Time
	gen   int64
	set   tgdriver.TaskSet
	guard tgdriver.TaskGuard
}

// grantFor decides the claim of pending task r (as read) for owner with a
// lease of d: a fresh token, the next generation, the next attempt.
func (w *wtx) grantFor(r *row, owner string, d time.Duration) (grantPlan, error) {
	token, err := lease.NewToken()
	if err != nil {
		return grantPlan{}, err
	}
	exp := w.now.Add(d)
	gen := r.Generation + 1
	var due tgdriver.Opt[int64]
	if r.dueAtMS != 0 { // due by now (the guard says so): claimed in passing
		due = tgdriver.Val(int64(0))
	}
	g := grantPlan{owner: owner, token: token, exp: exp, gen: gen,
		set: tgdriver.TaskSet{
			DueAtMS:          due,
			State:            tgdriver.Val(string(StateClaimed)),
			Owner:            tgdriver.Val(owner),
			Generation:       tgdriver.Val(gen),
			TokenHash:        tgdriver.Val(lease.HashToken(token)),
			LeaseExpiresAtMS: tgdriver.Val(exp.UnixMilli()),
			LeaseMS:          tgdriver.Val(d.Milliseconds()),
			AddAttempt:       true,
			StatusMessage:    tgdriver.Val(fmt.Sprintf("claimed by %s (generation %d)", owner, gen)),
			UpdatedAtMS:      w.nowMS,
		},
		guard: tgdriver.TaskGuard{States: []string{string(StatePending)}, Generation: tgdriver.Val(r.Generation), DueByMS: tgdriver.Val(w.at().UnixMilli())},
	}
	foldReport(&g.set, r)
	return g, nil
}

// claimedRow is pending task r as g's update leaves it.
func claimedRow(r row, g grantPlan, nowMS int64) row {
	r.State, r.Owner, r.Generation = StateClaimed, g.owner, g.gen
	r.tokenHash = lease.HashToken(g.token)
	r.LeaseExpiresAt = time.UnixMilli(g.exp.UnixMilli()).UTC()
	r.leaseMS = g.set.LeaseMS.V
	r.Attempts++
	r.StatusMessage = g.set.StatusMessage.V
	r.dueAtMS, r.DueAt = 0, time.Time{}
	r.UpdatedAt = time.UnixMilli(nowMS).UTC()
	if g.set.PriorUsage.Set {
		r.report, r.Report, r.usage, r.prior = "", nil, Usage{}, Usage(g.set.PriorUsage.V)
	}
	return r
}

// granted records the claim g of r, as updated, and reads the task's
// dependencies for the claimant.
func (w *wtx) granted(r *row, g grantPlan) (Claimed, error) {
	if err := w.appendEvent(r, EventClaim, g.owner, g.gen, map[string]any{"attempt": r.Attempts, "lease_expires_at_ms": g.exp.UnixMilli()}); err != nil {
		return Claimed{}, err
	}
	deps := []Dependency{}
	if len(r.DependsOn) > 0 { // most tasks have none: skip the read
		var err error
		if deps, err = dependencies(w.ctx, w.tx, r.seq); err != nil {
			return Claimed{}, err
		}
	}
	reclaim := g.gen > 1
	w.afterCommit(func() {
		w.s.stats.claims.Add(1)
		if reclaim {
			w.s.stats.reclaims.Add(1)
		}
	})
	return Claimed{Task: r.Task, Lease: lease.Grant{Owner: g.owner, Generation: g.gen, Token: g.token, ExpiresAt: time.UnixMilli(g.exp.UnixMilli()).UTC()}, Dependencies: deps}, nil
}

// sweepExpired processes up to limit claims whose lease had lapsed when the
// operation arrived (w.at): time it spent queued never expires a lease that a
// holder write queued behind it may still renew. Each expiry locks the
// task's workflow and is guarded in its own update, so sweepers may run on
// every replica at once.
func (w *wtx) sweepExpired(limit int) (int, error) {
	refs, err := w.tx.ExpiredLeases(w.ctx, w.at().UnixMilli(), limit)
	if err != nil {
		return 0, fmt.Errorf("find expired leases: %w", err)
	}
	// Tasks are written in seq order, the order of every writer that
	// writes several: sweepers on several replicas do not deadlock.
	slices.SortFunc(refs, func(a, b tgdriver.TaskRef) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, ref := range refs {
		r, err := w.loadSeq(ref.Seq)
		if err != nil {
			return 0, err
		}
		if r.expired(w.at()) { // a cascade earlier in this loop, or another writer, may have changed it
			if err := w.expire(&r); err != nil {
				return 0, err
			}
		}
	}
	return len(refs), nil
}

// expireGuard is the predicate of an expiry's update: the task is still
// claimed at the generation that was read and its lease had lapsed when the
// operation arrived, so an expiry never ends a claim that was renewed or
// taken over meanwhile, whatever else writes.
func (w *wtx) expireGuard(gen int64) tgdriver.TaskGuard {
	return tgdriver.TaskGuard{States: []string{string(StateClaimed)}, Generation: tgdriver.Val(gen), LeaseLapsedAtMS: tgdriver.Val(w.at().UnixMilli())}
}

// expire ends the lapsed claim on r, counting a lease loss: back to
// pending if attempts remain and the task is not poison (see
// leaseLossDelay), otherwise failed (and its dependents cancelled).
func (w *wtx) expire(r *row) error {
	if w.actor.Kind != ActorSweeper {
		// An expiry in passing (a claim scan, a read) is the server's doing,
		// not the caller's.
		saved := w.actor
		w.actor = Actor{Kind: ActorServer}
		defer func() { w.actor = saved }()
	}
	holder, gen := r.Owner, r.Generation
	losses := r.LeaseLosses + 1
	// Attempts bound a task first; the losses bound one that has attempts
	// left (a high max_attempts, releases, requeues).
	exhausted := r.Attempts >= r.MaxAttempts
	poison := !exhausted && losses >= w.s.opts.MaxLeaseLosses
	if !exhausted && !poison {
		why := fmt.Sprintf("the lease of %s at generation %d expired after attempt %d of %d", holder, gen, r.Attempts, r.MaxAttempts)
		status, due := "ready to claim ("+why+")", int64(0)
		if delay := leaseLossDelay(r.RetryDelay, losses); delay > 0 {
			due = w.at().Add(delay).UnixMilli()
			status = statusmsg.Waiting(time.UnixMilli(due), fmt.Sprintf("%s; lease lost %d of %d times, so the reclaim backs off", why, losses, w.s.opts.MaxLeaseLosses))
		}
		ok, err := w.update(r, clearClaim(tgdriver.TaskSet{
			State:         tgdriver.Val(string(StatePending)),
			Owner:         tgdriver.Null[string](),
			StatusMessage: tgdriver.Val(status),
			LeaseLosses:   tgdriver.Val(losses),
			DueAtMS:       tgdriver.Val(due),
		}), w.expireGuard(gen))
		if err != nil {
			return err
		}
		if !ok {
			return w.reload(r) // renewed or taken over meanwhile: nothing to expire
		}
		detail := map[string]any{"attempt": r.Attempts, "next": string(StatePending), "lease_losses": losses}
		if due > 0 {
			detail["due_at_ms"] = due
			w.scheduleDue()
		} else {
			w.wakeWaiters(r)
		}
		w.afterCommit(func() { w.s.stats.expiries.Add(1) })
		return w.appendEvent(r, EventExpire, holder, gen, detail)
	}
	msg := fmt.Sprintf("lease expired after %d attempts", r.Attempts)
	if poison {
		msg = fmt.Sprintf("poison task: its lease was lost %d times (each worker stopped heartbeating before it finished), so it is not claimed again; an operator may requeue it", losses)
	}
	ok, err := w.update(r, clearClaim(tgdriver.TaskSet{
		State:         tgdriver.Val(string(StateFailed)),
		Error:         tgdriver.Val(msg),
		StatusMessage: tgdriver.Val("failed: " + msg),
		LeaseLosses:   tgdriver.Val(losses),
	}), w.expireGuard(gen))
	if err != nil {
		return err
	}
	if !ok {
		return w.reload(r) // renewed or taken over meanwhile: nothing to expire
	}
	w.afterCommit(func() { w.s.stats.expiries.Add(1); w.s.stats.failures.Add(1) })
	detail := map[string]any{"attempt": r.Attempts, "next": string(StateFailed), "lease_losses": losses}
	if poison {
		detail["poison"] = true
	}
	if err := w.appendEvent(r, EventExpire, holder, gen, detail); err != nil {
		return err
	}
	return w.cascadeCancel(r)
}

// ExpireLeases processes every claim whose lease has lapsed at server time
// and returns how many it processed. Servers run it from the sweeper; it is
// safe to call at any time, from any number of servers.
func (s *Store) ExpireLeases(ctx context.Context) (int, error) {
	total := 0
	for {
		var n int
		arrived := s.arrival(ctx)
		err := s.doAt(ctx, arrived, func(w *wtx) error {
			var err error
			n, err = w.as(ActorSweeper, "").sweepExpired(sweepLimit)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("expire leases: %w", err)
		}
		total += n
		if n < sweepLimit {
			return total, nil
		}
	}
}

// cascadeCancel cancels every unfinished transitive dependent of root, which
// has just failed or been cancelled, naming root as the cause. The caller
// holds the workflow's lock; dependencies stay within a workflow.
func (w *wtx) cascadeCancel(root *row) error {
	verb := "failed"
	if root.State == StateCancelled {
		verb = "was cancelled"
	}
	status := fmt.Sprintf("cancelled: upstream node %s (task %s) %s", root.NodeID, root.TaskID, verb)
	queue := []int64{root.seq}
	n := 0
	for len(queue) > 0 {
		seq := queue[0]
		queue = queue[1:]
		next, err := w.tx.UnfinishedDependents(w.ctx, seq)
		if err != nil {
			return fmt.Errorf("find dependents: %w", err)
		}
		for _, d := range next {
			r := row{seq: d}
			// The guard repeats the check in the write itself: only an
			// unfinished task is cancelled, whatever else writes meanwhile
			// (a diamond reaches a task twice).
			ok, err := w.update(&r, clearClaim(tgdriver.TaskSet{
				State:         tgdriver.Val(string(StateCancelled)),
				CancelCause:   tgdriver.Val(root.seq),
				StatusMessage: tgdriver.Val(status),
			}), tgdriver.TaskGuard{States: unfinished})
			if err != nil {
				return err
			}
			if !ok {
				continue // finished meanwhile: nothing to cancel
			}
			if err := w.appendEvent(&r, EventCancel, "", r.Generation, map[string]any{"cause_task_id": root.TaskID, "cause": verb}); err != nil {
				return err
			}
			n++
			queue = append(queue, d)
		}
	}
	if n > 0 {
		w.afterCommit(func() { w.s.stats.cascadeCancels.Add(int64(n)) })
	}
	return nil
}

// completeDependents lowers the unmet count of every dependent of the
// completed tasks seqs (one driver call) and makes ready the blocked ones
// that reach zero, or names in their status the dependencies they still
// wait for. It costs O(out-degree). by is nil but in a hot batch, whose
// later steps read no dependent: then the writes go to the batch's last
// round (queueUpdate), and by(d.By) is the operation that records what a
// dependent's change caused (the completion of its last dependency).
func (w *wtx) completeDependents(seqs []int64, by func(deps []int64) *wtx) error {
	deps, err := w.tx.DecrementUnmet(w.ctx, seqs)
	if err != nil {
		return fmt.Errorf("update dependents: %w", err)
	}
	for _, d := range deps {
		if State(d.Row.State) != StateBlocked {
			continue
		}
		ow := w
		if by != nil {
			ow = by(d.By)
		}
		switch {
		case d.Row.Unmet > 0:
			// Keep "waiting on …" naming only the dependencies still
			// unfinished: clients read it (tasks/get, claim conflicts) to
			// see what holds a task.
			set := tgdriver.TaskSet{StatusMessage: tgdriver.Val(statusmsg.Blocked(d.Waiting))}
			if by != nil {
				ow.queueUpdate(d.Row, set, tgdriver.TaskGuard{})
				continue
			}
			r := row{seq: d.Row.Seq}
			_, err = ow.update(&r, set, tgdriver.TaskGuard{})
		case d.Row.Kind == KindGate:
			err = ow.awaitApproval(d.Row.Seq)
		case by != nil && d.Row.DueAtMS == 0:
			var r row // makeReady, its write queued: the row is locked (DecrementUnmet)
			if r, err = toRow(ow.queueUpdate(d.Row, readySet, readyGuard)); err == nil {
				err = ow.readied(&r)
			}
		default:
			err = ow.makeReady(d.Row.Seq)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readySet and readyGuard make ready only a task still blocked with no
// unmet dependency (the guard is in the write, not only in a read).
var readySet, readyGuard = tgdriver.TaskSet{State: tgdriver.Val(string(StatePending)), StatusMessage: tgdriver.Val(statusmsg.Ready)},
	tgdriver.TaskGuard{States: []string{string(StateBlocked)}, NoUnmet: true}

func (w *wtx) makeReady(seq int64) error {
	r := row{seq: seq}
	ok, err := w.update(&r, readySet, readyGuard)
	if err != nil {
		return err
	}
	if !ok {
		return nil // cancelled or made ready meanwhile
	}
	return w.readied(&r)
}

// readied records that r became ready (makeReady's write done or queued):
// a task due later waits for its time, one due now is promoted, any
// other wakes a claim that may take it; then its event.
func (w *wtx) readied(r *row) error {
	switch {
	case r.dueAtMS > w.nowMS: // created with a not_before still ahead
		if _, err := w.update(r, tgdriver.TaskSet{StatusMessage: tgdriver.Val(statusmsg.Waiting(r.DueAt, "not_before"))}, tgdriver.TaskGuard{}); err != nil {
			return err
		}
		w.scheduleDue()
	case r.dueAtMS > 0:
		if _, err := w.promote(r, w.nowMS); err != nil {
			return err
		}
	default:
		w.wakeWaiters(r)
	}
	return w.appendEvent(r, EventReady, "", r.Generation, nil)
}
