package taskgraph

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/audit"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// wtx is what a write operation sees: the driver's transaction and server
// time. A driver may run an operation more than once (PostgreSQL retries a
// serialization failure); each run gets a fresh wtx, and only the hooks and
// wake-ups of the run that committed take effect.
type wtx struct {
	ctx   context.Context
	tx    tgdriver.Tx
	now   time.Time
	nowMS int64
	// judged is the time a holder write is judged at (see holderWrite).
	judged time.Time
	s      *Store
	// out collects what the operations of one transaction leave to do at
	// its end (events to record, tasks made ready) and after its commit
	// (hooks); the operations of a batch share it.
	out *outbox
	// actor is who caused this operation's events (see as; ActorServer
	// when unset).
	actor Actor
	// keyTaken is the concurrency key slot this operation took last
	// (takeKeySlot), nil when none.
	keyTaken *keyTake
	// keyRows, while a batch grants its claims or a creation makes its
	// nodes, holds the key rows it locked and what it wrote to them since:
	// takeKeySlot and ensureKey read them there rather than locking each
	// again (a round trip), and lockKeys locks those missing in one
	// statement. Nil elsewhere.
	keyRows map[string]tgdriver.KeyRow
	// keyWrites, while a batch grants its claims, holds what its claims
	// wrote to the key rows it holds (keyRows) and has not yet sent:
	// takeKeySlot and untakeKeySlot change them here, and the batch sends
	// them with its next round (drainKeyWrites: a rescan's Fetch, or
	// Apply), rather than a round trip each. Nil elsewhere: they write at
	// once.
	keyWrites map[string]*tgdriver.KeyUpdate
	// batchDone, in a hot batch's completions, collects the completed
	// tasks with dependents, which the batch settles together after them
	// (completeDependents). Nil elsewhere.
	batchDone *[]int64
}

// outbox is what the operations of one transaction left to record before
// it commits and to do after.
type outbox struct {
	// events are the transaction's events in the order they happened, not
	// yet linked (Seq 0): flush links or journals them.
	events []tgdriver.EventRow
	// ready lists each task the transaction made claimable.
	ready []readyRef
	// updates are writes of rows the transaction holds locked, whose
	// guards hold (queueUpdate): flush applies them with the last round.
	updates []tgdriver.TaskUpdate
	// keys are writes of key rows the transaction holds locked (a batch's
	// slots taken: drainKeyWrites), applied before updates.
	keys []tgdriver.KeyUpdate
	// hooks run after the transaction commits, in order.
	hooks []func()
}

// afterCommit registers fn to run once the transaction holding this
// operation has committed. fn must not block.
func (w *wtx) afterCommit(fn func()) { w.out.hooks = append(w.out.hooks, fn) }

// wakeWaiters records that this operation made task r claimable: once the
// transaction commits, one claim-next waiter that may claim it (its
// workflow, its requires) is woken, here and (through the driver) on other
// replicas.
func (w *wtx) wakeWaiters(r *row) {
	w.out.ready = append(w.out.ready, readyRef{Workflow: r.WorkflowID, Requires: r.requires})
}

// wakeWaitersFor is wakeWaiters of task t as the driver read it.
func (w *wtx) wakeWaitersFor(t tgdriver.TaskRow) {
	w.out.ready = append(w.out.ready, readyRef{Workflow: t.WorkflowID, Requires: t.Requires})
}

// newWtx starts a run of an operation on tx at the store's time now.
func (s *Store) newWtx(ctx context.Context, tx tgdriver.Tx) *wtx {
	now := s.clock.Now().UTC()
	return &wtx{ctx: ctx, tx: tx, now: now, nowMS: now.UnixMilli(), s: s, out: &outbox{}}
}

// do runs fn as one write operation and returns its error once it has
// committed (or failed). With SQLite it is one operation of a
// group-committed batch; a failed commit fails every operation of the
// batch. If ctx is done before the driver reaches the operation, it is
// skipped and ctx's error returned.
func (s *Store) do(ctx context.Context, fn func(*wtx) error) error {
	if s.readOnly {
		return s.errReadOnly()
	}
	if s.closed.Load() {
		return ErrClosed
	}
	return s.write(ctx, fn)
}

// write is do without the closed check, for Close's own last write.
func (s *Store) write(ctx context.Context, fn func(*wtx) error) error {
	shared := s.lc != nil && s.lc.shared
	if err := s.stepIfDue(ctx); err != nil {
		return err
	}
	return s.writeTx(ctx, fn, shared)
}

// stepIfDue runs the shared lease clock's step, with a clock shared by
// replicas, when this process has not seen the alive time for so long that
// it may have been paused or the shared clock stepped: the time no server
// ran is given back to leases in a write of its own that commits before
// the caller's operation is judged. Writes that find it due at once wait
// for one step (it locks the alive row, so it is one at a time anyway) and
// go on without another when that one refreshed the alive time.
func (s *Store) stepIfDue(ctx context.Context) error {
	if s.lc == nil || !s.lc.shared || !s.lc.sharedDue(s.clock.Now().UnixMilli()) {
		return nil
	}
	s.lc.stepping.Lock()
	defer s.lc.stepping.Unlock()
	if !s.lc.sharedDue(s.clock.Now().UnixMilli()) {
		return nil
	}
	return s.writeTx(ctx, s.lc.step, false)
}

// writeTx runs fn in one driver transaction; with touch, it refreshes the
// shared alive time in passing as its last statement, so that the alive
// row is held only while the transaction commits.
func (s *Store) writeTx(ctx context.Context, fn func(*wtx) error, touch bool) error {
	var last *wtx
	err := s.drv.Write(ctx, func(tx tgdriver.Tx) error {
		w := s.newWtx(ctx, tx)
		last = nil
		if err := runGuarded(w, fn); err != nil {
			return err
		}
		if err := w.flush(nil); err != nil {
			return err
		}
		if touch {
			if err := s.lc.sharedTouch(w); err != nil {
				return err
			}
		}
		last = w
		return nil
	})
	if err != nil {
		if errors.Is(err, tgdriver.ErrReadOnlyStore) {
			return s.errReadOnly()
		}
		return err
	}
	if last != nil {
		s.committed(last.out)
	}
	return nil
}

// committed runs what a transaction left to do once it has committed: its
// hooks, the wake-ups of the tasks it made ready, the linking of the
// events it journaled, and the wake-up of the watchers of Changed.
func (s *Store) committed(out *outbox) {
	defer s.changes.signal()
	for _, h := range out.hooks {
		h()
	}
	s.notify.WakeAll(out.ready)
	if s.journal && len(out.events) > 0 {
		s.linker.kick(out.events)
	}
}

// flush records the events w's transaction collected (linked here, or
// journaled for the linker, see tgdriver.Info.JournalEvents), tells the
// other processes of the tasks it made ready, and applies updates, the
// batch's last writes, in one driver round. The caller's transaction
// commits next.
func (w *wtx) flush(updates []tgdriver.TaskUpdate) error {
	return w.flushRound(updates, nil, false)
}

// journalRound bounds the journaled events one driver round carries.
const journalRound = 1000

// flushRound is flush, keeping requests in the same round. With commit,
// nothing follows in the transaction, and the driver may commit it with
// the round (tgdriver.Apply.Commit). It reads nothing back: the caller
// knows the tasks as updates leave them (a claim's, claimedRow).
func (w *wtx) flushRound(updates []tgdriver.TaskUpdate, requests []tgdriver.RequestRow, commit bool) error {
	out := w.out
	if len(updates) == 0 && len(out.updates) == 0 && len(out.events) == 0 && len(out.ready) == 0 && len(requests) == 0 && len(out.keys) == 0 {
		return nil
	}
	if len(out.updates) > 0 {
		updates = append(updates[:len(updates):len(updates)], out.updates...)
	}
	a := tgdriver.Apply{Keys: out.keys, Updates: updates, Events: out.events, Journal: w.s.journal, Requests: requests, Commit: commit}
	if len(out.ready) > 0 {
		a.Ready = make([]tgdriver.Ready, len(out.ready))
		for i, r := range out.ready {
			a.Ready[i] = tgdriver.Ready{WorkflowID: r.Workflow, Requires: r.Requires}
		}
	}
	if !a.Journal {
		// The driver links the events onto the heads as they stand in
		// its transaction, in place (so out.events are linked too).
		a.Link = audit.Link
	}
	// Journaled events of a large operation (a 10,000-node workflow) go in
	// rounds of journalRound: the client encodes one round's events while
	// the transaction waits, and a whole operation's at once on a loaded
	// machine can outlast the database's idle-in-transaction timeout,
	// which ends the session and fails the operation (nothing written).
	for a.Journal && len(a.Events) > journalRound {
		if err := w.tx.Apply(w.ctx, tgdriver.Apply{Events: a.Events[:journalRound], Journal: true}); err != nil {
			return fmt.Errorf("record the events of the operation: %w", err)
		}
		a.Events = a.Events[journalRound:]
	}
	if err := w.tx.Apply(w.ctx, a); err != nil {
		if errors.Is(err, tgdriver.ErrChainMoved) || errors.Is(err, tgdriver.ErrGuardFailed) {
			return fmt.Errorf("%w: %v", errInternal, err)
		}
		return fmt.Errorf("record the events of the operation: %w", err)
	}
	return nil
}

// queueUpdate leaves the update of tr by set to the transaction's last
// round (outbox.updates): tr is a row the transaction holds locked, whose
// guard holds. set may set State and StatusMessage; it returns tr as the
// update leaves it.
func (w *wtx) queueUpdate(tr tgdriver.TaskRow, set tgdriver.TaskSet, guard tgdriver.TaskGuard) tgdriver.TaskRow {
	set.UpdatedAtMS = w.nowMS
	w.out.updates = append(w.out.updates, tgdriver.TaskUpdate{Seq: tr.Seq, Set: set, Guard: guard})
	if set.State.Set {
		tr.State = set.State.V
	}
	if set.StatusMessage.Set {
		tr.StatusMessage = set.StatusMessage.V
	}
	tr.UpdatedAtMS = w.nowMS
	return tr
}

// runGuarded runs fn and turns a panic into an error, so one bad operation
// cannot stop the writer.
func runGuarded(w *wtx, fn func(*wtx) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			w.s.log.Error("write operation panicked", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: internal error in write operation: %v", errInternal, r)
		}
	}()
	return fn(w)
}

// errInternal marks a fault of the store itself rather than of the input.
var errInternal = errors.New("internal error")

// batchStart is the driver hook that runs at the start of every write batch
// of a single-writer driver (SQLite): the lease clock gives live leases the
// time the server was away before any operation of the batch is judged.
func (s *Store) batchStart(ctx context.Context, tx tgdriver.Tx) (func(), error) {
	w := s.newWtx(ctx, tx)
	if err := s.lc.step(w); err != nil {
		return nil, err
	}
	if err := w.flush(nil); err != nil {
		return nil, err
	}
	out := w.out
	return func() { s.committed(out) }, nil
}
