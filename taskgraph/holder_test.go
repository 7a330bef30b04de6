package taskgraph

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
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
			return w.fenced(&r, h, `status_message = ?`, "written by "+name)
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
		return w.fenced(&r, late, `status_message = ?`, "written late")
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
		if _, err := w.exec(`UPDATE tasks SET lease_expires_at_ms = ? WHERE seq = ?`, w.now.Add(time.Minute).UnixMilli(), r.seq); err != nil {
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
	// A trigger plays the other writer: it moves the head as the event is
	// inserted, between the read of the head and its update.
	err := b.s.do(b.ctx, func(w *wtx) error {
		r, err := w.loadTask(tk.TaskID)
		if err != nil {
			return err
		}
		if _, err := w.exec(`CREATE TEMP TRIGGER move_head AFTER INSERT ON events BEGIN UPDATE workflows SET head_hash = 'moved' WHERE workflow_id = NEW.workflow_id; END`); err != nil {
			return err
		}
		defer w.exec(`DROP TRIGGER IF EXISTS move_head`)
		return w.appendEvent(&r, EventHeartbeat, "w", 0, nil)
	})
	if err == nil || !strings.Contains(err.Error(), "moved") {
		t.Fatalf("an event linked to a moved head: got %v, want the write refused", err)
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
