package storetest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// poisonTests: a task whose leases keep lapsing backs off and then fails
// (issue 27, item 6).
var poisonTests = []test{
	{"PoisonTaskBacksOffThenFails", testPoisonTaskBacksOffThenFails},
	{"RequeueForgetsLeaseLosses", testRequeueForgetsLeaseLosses},
}

// loseLease claims task id by id and lets its lease lapse and expire.
func (e *env) loseLease(t *testing.T, id string) {
	t.Helper()
	e.Claim(t, "doomed", id, time.Minute)
	e.Clock.Advance(time.Minute)
	if n, err := e.S.ExpireLeases(e.Ctx); err != nil || n != 1 {
		t.Fatalf("expire: %d %v", n, err)
	}
}

// The first lost lease reclaims at once, the second waits the task's retry
// backoff, the third (the default bound) fails the task as poison, with
// attempts left, and cancels its dependents; the history records each
// loss, and verifies.
func testPoisonTaskBacksOffThenFails(t *testing.T, h Harness) {
	e := setup(t, h)
	delay := 2 * time.Second
	task := e.createSpec(t, "wf", tg.NodeSpec{NodeID: "flaky", MaxAttempts: 10, RetryDelay: &delay})
	after := e.Create(t, "wf", "after", "flaky")

	e.loseLease(t, task.TaskID)
	if tk := e.WantState(t, task.TaskID, tg.StatePending); tk.LeaseLosses != 1 || !tk.DueAt.IsZero() {
		t.Fatalf("after one loss: losses %d, due %v; want 1, claimable at once", tk.LeaseLosses, tk.DueAt)
	}
	e.loseLease(t, task.TaskID)
	tk := e.WantState(t, task.TaskID, tg.StatePending)
	if tk.LeaseLosses != 2 || !tk.DueAt.Equal(e.Clock.Now().Add(delay)) || !strings.Contains(tk.StatusMessage, "backs off") {
		t.Fatalf("after two losses: losses %d, due %v (now %v), status %q; want the reclaim %v later", tk.LeaseLosses, tk.DueAt, e.Clock.Now(), tk.StatusMessage, delay)
	}
	if _, ok := e.ClaimNext(t, "w", "wf"); ok {
		t.Fatal("claimed during the backoff after a second lease loss")
	}
	e.Clock.Advance(delay)
	e.loseLease(t, task.TaskID)
	tk = e.WantState(t, task.TaskID, tg.StateFailed)
	if tk.LeaseLosses != 3 || tk.Attempts != 3 || !strings.Contains(tk.Error, "poison task: its lease was lost 3 times") {
		t.Fatalf("after three losses: losses %d, attempts %d, error %q", tk.LeaseLosses, tk.Attempts, tk.Error)
	}
	if a := e.WantState(t, after.TaskID, tg.StateCancelled); !strings.Contains(a.StatusMessage, "flaky") {
		t.Fatalf("the dependent: %q", a.StatusMessage)
	}
	ev := e.lastEvent(t, task.TaskID, tg.EventExpire)
	var d map[string]any
	if err := json.Unmarshal(ev.Detail, &d); err != nil || d["poison"] != true || d["lease_losses"] != float64(3) || d["next"] != "failed" {
		t.Fatalf("the last expire event: %s", ev.Detail)
	}
	if rep, err := e.S.VerifyHistory(e.Ctx); err != nil || rep.Broken != nil {
		t.Fatalf("verify: %v %+v", err, rep.Broken)
	}
}

// An operator's requeue of a poison task starts its count of losses again.
func testRequeueForgetsLeaseLosses(t *testing.T, h Harness) {
	e := setupWith(t, h, tg.Options{MaxLeaseLosses: 1})
	task := e.createSpec(t, "wf", tg.NodeSpec{NodeID: "flaky", MaxAttempts: 10})
	e.loseLease(t, task.TaskID)
	if tk := e.WantState(t, task.TaskID, tg.StateFailed); tk.LeaseLosses != 1 || !strings.Contains(tk.Error, "lost 1 times") {
		t.Fatalf("with a bound of 1: losses %d, error %q", tk.LeaseLosses, tk.Error)
	}
	tk, err := e.S.Requeue(e.Ctx, task.TaskID, alice)
	if err != nil || tk.LeaseLosses != 0 || tk.State != tg.StatePending {
		t.Fatalf("requeue: %+v %v", tk, err)
	}
}
