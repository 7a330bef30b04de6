package taskgraph

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Regression: Close held the submit mutex while it waited for the background
// loops, so a loop that submitted a write after Close began (the sweeper
// expiring a lapsed lease at shutdown) blocked on that mutex and Close waited
// for it forever. A write submitted during Close must get ErrClosed instead.
func TestCloseDoesNotDeadlockWithBackgroundWrite(t *testing.T) {
	b := setup(t)
	got := make(chan error, 1)
	// Stand in for the sweeper: a background loop tracked by the store's
	// WaitGroup that submits a write once shutdown has begun.
	b.s.wg.Add(1)
	go func() {
		defer b.s.wg.Done()
		<-b.s.quit
		got <- b.s.do(b.ctx, func(*wtx) error { return nil })
	}()
	closed := make(chan error, 1)
	go func() { closed <- b.s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close deadlocked with a background loop that submitted a write")
	}
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Fatalf("write submitted during Close: %v, want ErrClosed", err)
	}
}

// Regression: claiming by id a task whose lease lapsed on its last attempt
// processed the expiry (failed, dependents cancelled) and then reported the
// conflict as the operation's error, which rolled the expiry back: the caller
// was told the task had failed while the database still showed it claimed.
// The expiry now commits; the conflict is still reported, and a conflict
// with nothing to expire writes nothing.
func TestClaimByIDKeepsExpiryItReports(t *testing.T) {
	b := setup(t)
	c, err := b.s.CreateTask(b.ctx, "wf", NodeSpec{NodeID: "once", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	dep := b.create(t, "wf", "dep", "once")
	b.claim(t, "a", c.Task.TaskID, time.Second)
	// A conflict with a live claim writes nothing.
	before := fingerprint(t, b.path)
	_, _, err = b.s.Claim(b.ctx, ClaimRequest{Owner: "b", TaskID: c.Task.TaskID})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("claim of a held task: %v", err)
	}
	if fingerprint(t, b.path) != before {
		t.Fatal("a refused claim wrote")
	}
	b.clock.Advance(2 * time.Second)
	_, _, err = b.s.Claim(b.ctx, ClaimRequest{Owner: "b", TaskID: c.Task.TaskID})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "failed") {
		t.Fatalf("claim of a task whose last lease lapsed: %v", err)
	}
	// Read the stored rows directly: Task() would process the expiry itself.
	var st, depSt string
	if err := b.s.rdb.QueryRow(`SELECT state FROM tasks WHERE task_id = ?`, c.Task.TaskID).Scan(&st); err != nil {
		t.Fatal(err)
	}
	if err := b.s.rdb.QueryRow(`SELECT state FROM tasks WHERE task_id = ?`, dep.TaskID).Scan(&depSt); err != nil {
		t.Fatal(err)
	}
	if st != "failed" || depSt != "cancelled" {
		t.Fatalf("stored states %s and %s after the reported failure, want failed and cancelled", st, depSt)
	}
	if e := lastEvent(t, b, c.Task.TaskID, EventExpire); !strings.Contains(string(e.Detail), `"next":"failed"`) {
		t.Fatalf("expire event %s", e.Detail)
	}
	b.verify(t)
}

// Regression: a task created on a dependency that a failure had already
// cancelled started cancelled with that dependency as its cause, not the
// failed task at the root of the cascade, so requeueing or skipping the root
// revived the dependency but left the late task cancelled forever. It now
// records the cascade's root, like the tasks the cascade cancelled itself.
func TestLateDependentOfCascadeRevives(t *testing.T) {
	for _, fix := range []string{"requeue", "skip"} {
		t.Run(fix, func(t *testing.T) {
			b := setup(t)
			a := b.create(t, "wf", "a")
			b.create(t, "wf", "b", "a")
			ca := b.claim(t, "w", a.TaskID, 0)
			if _, err := b.s.Fail(b.ctx, holder(ca), "broken", false); err != nil {
				t.Fatal(err)
			}
			late := b.create(t, "wf", "late", "b")
			if late.State != StateCancelled || !strings.Contains(late.StatusMessage, "upstream node b") {
				t.Fatalf("late dependent: %s %q", late.State, late.StatusMessage)
			}
			var err error
			var want string
			if fix == "requeue" {
				_, err = b.s.Requeue(b.ctx, a.TaskID, alice)
				want = "a,b,late"
			} else {
				_, err = b.s.Skip(b.ctx, a.TaskID, alice)
				want = "b,late"
			}
			if err != nil {
				t.Fatal(err)
			}
			if tk := b.wantState(t, late.TaskID, StateBlocked); tk.StatusMessage != "waiting on b" {
				t.Fatalf("late: %q", tk.StatusMessage)
			}
			checkCounters(t, b)
			if got := strings.Join(runToCompletion(t, b, "wf"), ","); got != want {
				t.Fatalf("ran %s, want %s", got, want)
			}
			b.verify(t)
		})
	}
}

// The late dependent's own dependency, left cancelled by a second failure
// when the root was requeued, revives it when that dependency is requeued in
// turn.
func TestLateDependentRevivesWithItsDependency(t *testing.T) {
	b := setup(t)
	ids := createGraph(t, b, "wf", []string{"a", "x", "b"}, map[string][]string{"b": {"a", "x"}})
	for _, n := range []string{"a", "x"} {
		c := b.claim(t, "w", ids[n], 0)
		if _, err := b.s.Fail(b.ctx, holder(c), "broken", false); err != nil {
			t.Fatal(err)
		}
	}
	late := b.create(t, "wf", "late", "b")
	if _, err := b.s.Requeue(b.ctx, ids["a"], alice); err != nil {
		t.Fatal(err)
	}
	b.wantState(t, ids["b"], StateCancelled) // x is still failed
	b.wantState(t, late.TaskID, StateCancelled)
	if _, err := b.s.Skip(b.ctx, ids["x"], alice); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Requeue(b.ctx, ids["b"], alice); err != nil {
		t.Fatal(err)
	}
	b.wantState(t, late.TaskID, StateBlocked)
	checkCounters(t, b)
	if got := strings.Join(runToCompletion(t, b, "wf"), ","); got != "a,b,late" {
		t.Fatalf("ran %s", got)
	}
	b.verify(t)
}

// Regression: a prune whose operation failed reported the tasks and events
// of the workflows it had removed before the failure, although the failure
// rolled those removals back. The result now counts committed removals only.
func TestFailedPruneReportsNothingRemoved(t *testing.T) {
	b := setup(t)
	for _, wf := range []string{"wf1", "wf2"} {
		b.create(t, wf, "a")
		if _, err := b.s.AbortWorkflow(b.ctx, wf, alice); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Second)
	}
	// Make the removal of wf2's history fail, after wf1's has been done.
	mustExec(t, rawDB(t, b.path), `CREATE TRIGGER keep_wf2 BEFORE DELETE ON events WHEN OLD.workflow_id = 'wf2'
		BEGIN SELECT RAISE(ABORT, 'wf2 is under legal hold'); END`)
	before := fingerprint(t, b.path)
	res, err := b.s.Prune(b.ctx, b.clock.Now())
	if err == nil || !strings.Contains(err.Error(), "legal hold") {
		t.Fatalf("prune: %v", err)
	}
	if len(res.Workflows) != 0 || res.Tasks != 0 || res.Events != 0 {
		t.Fatalf("a failed prune reported removals: %+v", res)
	}
	if fingerprint(t, b.path) != before {
		t.Fatal("a failed prune changed the database")
	}
}
