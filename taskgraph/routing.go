package taskgraph

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/limits"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/retry"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/rules"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/statusmsg"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/taskview"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// Bounds of capability routing and retry timing.
const (
	// MaxRequires bounds NodeSpec.Requires.
	MaxRequires = limits.MaxRequires
	// MaxCapabilities bounds ClaimRequest.Capabilities.
	MaxCapabilities = limits.MaxCapabilities
	// DefaultRetryDelay is NodeSpec.RetryDelay's default: the wait before
	// the first retry of a retryable failure; it doubles per retry.
	DefaultRetryDelay = limits.DefaultRetryDelay
	// MaxRetryDelay bounds NodeSpec.RetryDelay and caps every backoff.
	MaxRetryDelay = limits.MaxRetryDelay
	// MaxRetryAfter bounds the retry delay a failing worker asks for.
	MaxRetryAfter = limits.MaxRetryAfter
	// MaxNotBefore bounds how far ahead of the creation NodeSpec.NotBefore
	// may lie.
	MaxNotBefore = limits.MaxNotBefore
)

// TagPattern is the rule for a capability tag (NodeSpec.Requires,
// ClaimRequest.Capabilities): a lower-case letter, then up to 63 lower-case
// letters, digits, '_', '.' or '-'.
const TagPattern = limits.TagPattern

// ErrMissingCapabilities means a claim by id named a task that requires
// capabilities the caller did not advertise (package taskview).
var ErrMissingCapabilities = taskview.ErrMissingCapabilities

// canonicalTags validates tags for field (at most max) and returns them
// sorted and deduplicated (rules.CanonicalTags).
func canonicalTags(field string, tags []string, max int) ([]string, error) {
	return rules.CanonicalTags(field, tags, max)
}

// splitTags and missingTags read stored requires against canonical
// capabilities (package rules).
var (
	splitTags   = rules.SplitTags
	missingTags = rules.MissingTags
)

// backoff and leaseLossDelay are the retry timing of package retry.
var (
	backoff        = retry.Backoff
	leaseLossDelay = retry.LeaseLossDelay
)

// DefaultMaxLeaseLosses is Options.MaxLeaseLosses's default, and
// MaxMaxLeaseLosses its bound.
const (
	DefaultMaxLeaseLosses = 3
	MaxMaxLeaseLosses     = 100
)

// dueLimit bounds how many due tasks one operation promotes.
const dueLimit = 64

// promoteDue makes claimable up to limit pending tasks whose due time had
// come when the operation arrived (w.at). Each promotion locks the task's
// workflow, re-reads the task under that lock and is guarded in its own
// update (pending, due by then), so promoters on every replica may run at
// once; each promoted task wakes a parked claim that may take it.
// more reports that limit due tasks were found (there may be more).
func (w *wtx) promoteDue(limit int) (n int, more bool, err error) {
	at := w.at().UnixMilli()
	refs, err := w.tx.DueTasks(w.ctx, at, limit)
	if err != nil {
		return 0, false, fmt.Errorf("find due tasks: %w", err)
	}
	more = len(refs) == limit
	// Tasks are written in seq order, the order of every writer that
	// writes several: promoters on several replicas do not deadlock.
	slices.SortFunc(refs, func(a, b tgdriver.TaskRef) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, ref := range refs {
		r, err := w.loadSeq(ref.Seq)
		if err != nil {
			return n, false, err
		}
		if r.State != StatePending || r.dueAtMS == 0 || r.dueAtMS > at {
			continue // claimed, cancelled or promoted meanwhile
		}
		ok, err := w.promote(&r, at)
		if err != nil {
			return n, false, err
		}
		if ok {
			n++
		}
	}
	return n, more, nil
}

// expireAndPromote is sweepExpired and promoteDue in one pass, as
// claim-next runs them: the workflows of both are locked in one id order
// (the order of every writer that locks more than one), so two claim-nexts
// never wait for each other's workflows in opposite orders. found is
// whether there was a lease or a due task to look at (and so whether it
// may have written).
func (w *wtx) expireAndPromote(expireLimit, promoteLimit int) (found bool, err error) {
	at := w.at()
	expired, err := w.tx.ExpiredLeases(w.ctx, at.UnixMilli(), expireLimit)
	if err != nil {
		return false, fmt.Errorf("find expired leases: %w", err)
	}
	due, err := w.tx.DueTasks(w.ctx, at.UnixMilli(), promoteLimit)
	if err != nil {
		return false, fmt.Errorf("find due tasks: %w", err)
	}
	if len(expired)+len(due) == 0 {
		return false, nil
	}
	type item struct {
		ref tgdriver.TaskRef
		due bool
	}
	items := make([]item, 0, len(expired)+len(due))
	for _, r := range expired {
		items = append(items, item{ref: r})
	}
	for _, r := range due {
		items = append(items, item{ref: r, due: true})
	}
	slices.SortStableFunc(items, func(a, b item) int { return cmp.Compare(a.ref.Seq, b.ref.Seq) })
	for _, it := range items {
		r, err := w.loadSeq(it.ref.Seq)
		if err != nil {
			return true, err
		}
		switch {
		case !it.due && r.expired(at):
			if err := w.expire(&r); err != nil {
				return true, err
			}
		case it.due && r.State == StatePending && r.dueAtMS != 0 && r.dueAtMS <= at.UnixMilli():
			if _, err := w.promote(&r, at.UnixMilli()); err != nil {
				return true, err
			}
		}
	}
	return true, nil
}

// promote makes pending task r, due at at, claimable now.
func (w *wtx) promote(r *row, at int64) (bool, error) {
	ok, err := w.update(r, tgdriver.TaskSet{DueAtMS: tgdriver.Val(int64(0)),
		StatusMessage: tgdriver.Val(statusmsg.ReadySince(r.dueAtMS))},
		tgdriver.TaskGuard{States: []string{string(StatePending)}, DueByMS: tgdriver.Val(at)})
	if err != nil || !ok {
		return false, err
	}
	w.wakeWaiters(r)
	return true, nil
}

// scheduleDue tells the sweeper, once this operation commits, that a task
// became due at a new time, so that its timer covers it.
func (w *wtx) scheduleDue() {
	w.afterCommit(func() {
		select {
		case w.s.dueChanged <- struct{}{}:
		default:
		}
	})
}

// PromoteDue makes claimable every pending task whose due time (NodeSpec.
// NotBefore, a retry's delay) has come at server time, and returns how many
// it promoted. Servers run it from the sweeper; claim-next also promotes in
// passing. It is safe to call at any time, from any number of servers.
func (s *Store) PromoteDue(ctx context.Context) (int, error) {
	return s.inRounds(ctx, "promote due tasks", func(w *wtx) (int, bool, error) {
		return w.as(ActorSweeper, "").promoteDue(dueLimit)
	})
}

// inRounds runs round, a bounded sweep, in write operations of their own,
// each at its own server time, until one reports nothing more to do, and
// returns the total it reports; what names the sweep in an error.
func (s *Store) inRounds(ctx context.Context, what string, round func(w *wtx) (int, bool, error)) (int, error) {
	total := 0
	for {
		var n int
		var more bool
		err := s.doAt(ctx, s.arrival(ctx), func(w *wtx) error {
			var err error
			n, more, err = round(w)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("%s: %w", what, err)
		}
		total += n
		if !more {
			return total, nil
		}
	}
}

func (s *Store) nextDue(ctx context.Context) (time.Time, error) {
	ms, ok, err := s.drv.Reads().NextDue(ctx)
	if err != nil || !ok {
		return time.Time{}, err
	}
	return time.UnixMilli(ms), nil
}
