package taskgraph

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// The fenced UPDATE carries the whole claim in its own predicate: even with
// lease.Check skipped (as a second writer racing this one would make it
// meaningless), a write presenting a wrong token, owner or generation, or
// arriving after the lease, changes nothing and is a stale claim, not an
// internal error.
func TestFencedWriteCarriesTheClaimInItsPredicate(t *testing.T) {
	b := setup(t)
	tk := b.create(t, "wf", "a")
	c := b.claim(t, "w", tk.TaskID, 10*time.Second)
	live := holder(c)
	for name, h := range map[string]lease.Holder{
		"wrong token":      {TaskID: live.TaskID, Owner: live.Owner, Generation: live.Generation, Token: "not-the-token"},
		"wrong owner":      {TaskID: live.TaskID, Owner: "someone-else", Generation: live.Generation, Token: live.Token},
		"wrong generation": {TaskID: live.TaskID, Owner: live.Owner, Generation: live.Generation + 1, Token: live.Token},
	} {
		err := b.s.do(b.ctx, func(w *wtx) error {
			w.judged = w.now
			r, err := w.loadTask(h.TaskID)
			if err != nil {
				return err
			}
			return w.fenced(&r, h, tgdriver.TaskSet{StatusMessage: tgdriver.Val("written by " + name)})
		})
		if !errors.Is(err, ErrStaleClaim) {
			t.Errorf("%s: got %v, want a stale claim", name, err)
		}
	}
	late := live
	err := b.s.do(b.ctx, func(w *wtx) error {
		w.judged = w.now.Add(time.Minute)
		r, err := w.loadTask(late.TaskID)
		if err != nil {
			return err
		}
		return w.fenced(&r, late, tgdriver.TaskSet{StatusMessage: tgdriver.Val("written late")})
	})
	if !errors.Is(err, ErrStaleClaim) {
		t.Errorf("after the lease: got %v, want a stale claim", err)
	}
	got, err := b.s.Task(b.ctx, tk.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if got.StatusMessage != c.Task.StatusMessage {
		t.Fatalf("a refused fenced write changed the task: %q", got.StatusMessage)
	}
	// The live claim still writes.
	if _, err := b.s.Complete(b.ctx, live, json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
}

// An expiry's UPDATE carries its own guard: a row read as expired that was
// renewed before the expiry is applied is left alone.
func TestExpiryCarriesItsGuardInThePredicate(t *testing.T) {
	b := setup(t)
	tk := b.create(t, "wf", "a")
	c := b.claim(t, "w", tk.TaskID, time.Second)
	b.clock.Advance(2 * time.Second)
	err := b.s.do(b.ctx, func(w *wtx) error {
		r, err := w.loadTask(tk.TaskID)
		if err != nil {
			return err
		}
		// Another writer renews the lease between the read and the expiry.
		if _, _, err := w.tx.UpdateTask(w.ctx, r.seq, tgdriver.TaskSet{LeaseExpiresAtMS: tgdriver.Val(w.now.Add(time.Minute).UnixMilli()), UpdatedAtMS: w.nowMS}, tgdriver.TaskGuard{}); err != nil {
			return err
		}
		return w.expire(&r)
	})
	if err != nil {
		t.Fatalf("expiry of a renewed lease: %v", err)
	}
	got, err := b.s.Task(b.ctx, tk.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != StateClaimed || got.Generation != c.Lease.Generation {
		t.Fatalf("the renewed claim was expired: %s at generation %d", got.State, got.Generation)
	}
}

// The chain head advances by compare and set: an event linked to a head that
// moved meanwhile is refused and nothing of its operation stands.
func TestChainHeadAdvancesOnlyFromTheHeadItLinksTo(t *testing.T) {
	b := setup(t)
	tk := b.create(t, "wf", "a")
	err := b.s.do(b.ctx, func(w *wtx) error {
		r, err := w.loadTask(tk.TaskID)
		if err != nil {
			return err
		}
		// Another writer's event lands between this one's read of the head
		// and its append.
		if err := w.appendEvent(&r, EventHeartbeat, "other", 0, nil); err != nil {
			return err
		}
		return w.tx.AppendEvents(w.ctx, []tgdriver.EventRow{tgdriver.EventRow{WorkflowID: "wf", Seq: 3, TaskID: r.TaskID, Kind: EventHeartbeat,
			AtMS: w.nowMS, Detail: "{}", PrevHash: "the head before the other writer", Hash: "h"}})
	})
	if !errors.Is(err, tgdriver.ErrChainMoved) {
		t.Fatalf("an event linked to a moved head: got %v, want ErrChainMoved", err)
	}
	if evs := mustEvents(t, b, tk.TaskID); len(evs) != 1 {
		t.Fatalf("the refused operation left %d events, want the create alone", len(evs))
	}
	b.verify(t)
}

// makeReady's UPDATE carries its guard: a task that is no longer blocked
// (here cancelled) is not made ready, and no event is appended.
func TestMakeReadyCarriesItsGuard(t *testing.T) {
	b := setup(t)
	b.create(t, "wf", "a")
	dep, err := b.s.CreateTask(b.ctx, "wf", NodeSpec{NodeID: "b", DependsOn: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.s.CancelTask(b.ctx, dep.Task.TaskID, "gone"); err != nil {
		t.Fatal(err)
	}
	before, err := b.s.WorkflowEvents(b.ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.s.do(b.ctx, func(w *wtx) error {
		r, err := w.loadTask(dep.Task.TaskID)
		if err != nil {
			return err
		}
		return w.makeReady(r.seq)
	}); err != nil {
		t.Fatal(err)
	}
	got, err := b.s.Task(b.ctx, dep.Task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	after, err := b.s.WorkflowEvents(b.ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != StateCancelled || len(after) != len(before) {
		t.Fatalf("a cancelled task was made ready: %s, %d events after %d", got.State, len(after), len(before))
	}
	b.verify(t)
}
