package storetest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// operatorTests: requeue, skip and abort, and the dependents they revive.
var operatorTests = []test{
	{"RequeueClaimedFencesHolder", testRequeueClaimedFencesHolder},
	{"RequeueFailedRevivesDiamond", testRequeueFailedRevivesDiamond},
	{"RequeueLeavesDependentsOfOtherFailures", testRequeueLeavesDependentsOfOtherFailures},
	{"RequeueRefuses", testRequeueRefuses},
	{"RequeueFailedReplaysDeadLetters", testRequeueFailedReplaysDeadLetters},
	{"RequeueFailedBatchesAndRefuses", testRequeueFailedBatchesAndRefuses},
	{"SkipFailedRevivesDependents", testSkipFailedRevivesDependents},
	{"SkipBlockedKeepsCountersRight", testSkipBlockedKeepsCountersRight},
	{"SkipClaimedFencesHolder", testSkipClaimedFencesHolder},
	{"AbortWorkflow", testAbortWorkflow},
	{"OperatorActionsRecorded", testOperatorActionsRecorded},
	{"LateDependentOfCascadeRevives", testLateDependentOfCascadeRevives},
	{"LateDependentRevivesWithItsDependency", testLateDependentRevivesWithItsDependency},
}

var alice = tg.Operator{Name: "alice", Reason: "INC-42: the upstream API is back"}

// checkCounters asserts the readiness invariant on every unfinished task: its
// unmet count equals the number of its dependencies that have not completed,
// it is blocked exactly when that count is positive, and it carries no
// cancellation cause.
func (e *env) checkCounters(t *testing.T) {
	t.Helper()
	rows := e.DB.Query(t, `SELECT t.node_id, t.state, t.unmet,
		(SELECT COUNT(*) FROM edges ed JOIN tasks d ON d.seq = ed.dep_seq WHERE ed.task_seq = t.seq AND d.state <> 'completed'),
		CASE WHEN t.cancel_cause IS NULL THEN 0 ELSE 1 END
		FROM tasks t WHERE t.state IN ('blocked', 'pending', 'claimed')`)
	for _, r := range rows {
		node, state, unmet, want, caused := r[0], r[1], r[2], r[3], r[4]
		if unmet != want || (state == string(tg.StateBlocked)) != (want != "0") || caused != "0" {
			t.Errorf("node %s is %s with unmet %s (cause set %s), but %s dependencies have not completed", node, state, unmet, caused, want)
		}
	}
}

// createGraph creates nodes in workflow wf; deps maps a node to its
// dependencies. It returns task ids by node id.
func (e *env) createGraph(t *testing.T, wf string, order []string, deps map[string][]string) map[string]string {
	t.Helper()
	specs := make([]tg.NodeSpec, len(order))
	for i, n := range order {
		specs[i] = tg.NodeSpec{NodeID: n, DependsOn: deps[n], Payload: json.RawMessage(`{"n":"` + n + `"}`)}
	}
	out, err := e.S.CreateWorkflow(e.Ctx, wf, specs)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, c := range out {
		ids[c.Task.NodeID] = c.Task.TaskID
	}
	return ids
}

// runToCompletion claims and completes every claimable task of wf, wave by
// wave, and returns the node ids in the order they were claimed.
func (e *env) runToCompletion(t *testing.T, wf string) []string {
	t.Helper()
	var order []string
	for {
		var wave []tg.Claimed
		for {
			c, ok := e.ClaimNext(t, "runner", wf)
			if !ok {
				break
			}
			wave = append(wave, c)
		}
		if len(wave) == 0 {
			return order
		}
		for _, c := range wave {
			order = append(order, c.Task.NodeID)
			if _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(`"ok"`)); err != nil {
				t.Fatalf("complete %s: %v", c.Task.NodeID, err)
			}
		}
		e.checkCounters(t)
	}
}

// lastEvent returns the newest event of kind on task id.
func (e *env) lastEvent(t *testing.T, id, kind string) tg.Event {
	t.Helper()
	evs := e.Events(t, id)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == kind {
			return evs[i]
		}
	}
	t.Fatalf("task %s has no %s event", id, kind)
	return tg.Event{}
}

// wantOperatorEvent asserts that task id's newest event of kind records op
// and, when holder is set, the fenced-out holder.
func (e *env) wantOperatorEvent(t *testing.T, id, kind string, op tg.Operator, holder string) tg.Event {
	t.Helper()
	ev := e.lastEvent(t, id, kind)
	var d map[string]any
	if err := json.Unmarshal(ev.Detail, &d); err != nil {
		t.Fatal(err)
	}
	if d["operator"] != op.Name || d["reason"] != op.Reason {
		t.Errorf("%s event of %s records operator %v reason %v, want %q %q", kind, id, d["operator"], d["reason"], op.Name, op.Reason)
	}
	if holder != "" && ev.Owner != holder {
		t.Errorf("%s event of %s records owner %q, want the fenced holder %q", kind, id, ev.Owner, holder)
	}
	return ev
}

// Requeue of a claimed task fences the holder out and makes the task
// claimable again, at a higher generation.
func testRequeueClaimedFencesHolder(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	old := e.Claim(t, "worker-1", a.TaskID, time.Minute)
	tk, err := e.S.Requeue(e.Ctx, a.TaskID, alice)
	if err != nil {
		t.Fatal(err)
	}
	if tk.State != tg.StatePending || tk.Owner != "" || tk.Attempts != 0 || !tk.LeaseExpiresAt.IsZero() || !strings.Contains(tk.StatusMessage, "requeued by alice") {
		t.Fatalf("requeued task: %+v", tk)
	}
	// The lease has not expired, yet the old holder can no longer write.
	_, err = e.S.Heartbeat(e.Ctx, holder(old), 0)
	wantStale(t, err, lease.ReasonNotHeld)
	_, err = e.S.Complete(e.Ctx, holder(old), json.RawMessage(`"stale"`))
	wantStale(t, err, lease.ReasonNotHeld)
	_, err = e.S.Fail(e.Ctx, holder(old), "stale", false)
	wantStale(t, err, lease.ReasonNotHeld)

	c, ok := e.ClaimNext(t, "worker-2", "wf")
	if !ok || c.Task.TaskID != a.TaskID || c.Lease.Generation != old.Lease.Generation+1 || c.Task.Attempts != 1 {
		t.Fatalf("reclaim after requeue: ok=%v %+v", ok, c)
	}
	_, err = e.S.Complete(e.Ctx, holder(old), json.RawMessage(`"stale"`))
	wantStale(t, err, lease.ReasonSuperseded)
	if _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(`"fresh"`)); err != nil {
		t.Fatal(err)
	}
	if got := e.WantState(t, a.TaskID, tg.StateCompleted); string(got.Result) != `"fresh"` {
		t.Fatalf("result %s", got.Result)
	}
	ev := e.wantOperatorEvent(t, a.TaskID, tg.EventRequeue, alice, "worker-1")
	if !strings.Contains(string(ev.Detail), `"from":"claimed"`) {
		t.Errorf("requeue event detail %s does not record the previous state", ev.Detail)
	}
	e.Verify(t)
}

// Requeue of a failed task revives the dependents its failure cancelled: in
// a diamond, failing A cancels B, C and D; requeueing A makes them blocked
// again, and the workflow then runs to completion in dependency order.
func testRequeueFailedRevivesDiamond(t *testing.T, h Harness) {
	e := setup(t, h)
	ids := e.createGraph(t, "dia", []string{"a", "b", "c", "d", "solo"}, map[string][]string{"b": {"a"}, "c": {"a"}, "d": {"b", "c"}})
	ca, _ := e.ClaimNext(t, "w", "dia")
	if ca.Task.NodeID != "a" {
		t.Fatalf("claimed %s first", ca.Task.NodeID)
	}
	if _, err := e.S.Fail(e.Ctx, holder(ca), "boom", false); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"b", "c", "d"} {
		e.WantState(t, ids[n], tg.StateCancelled)
	}
	e.WantState(t, ids["solo"], tg.StatePending)

	tk, err := e.S.Requeue(e.Ctx, ids["a"], alice)
	if err != nil {
		t.Fatal(err)
	}
	if tk.State != tg.StatePending || tk.Attempts != 0 {
		t.Fatalf("requeued a: %s attempts %d", tk.State, tk.Attempts)
	}
	for n, waiting := range map[string]string{"b": "waiting on a", "c": "waiting on a", "d": "waiting on b, c"} {
		got := e.WantState(t, ids[n], tg.StateBlocked)
		if got.StatusMessage != waiting {
			t.Errorf("%s status %q, want %q", n, got.StatusMessage, waiting)
		}
		ev := e.lastEvent(t, ids[n], tg.EventRevive)
		if !strings.Contains(string(ev.Detail), ids["a"]) {
			t.Errorf("revive event of %s does not name a: %s", n, ev.Detail)
		}
	}
	e.checkCounters(t)
	e.wantOperatorEvent(t, ids["a"], tg.EventRequeue, alice, "")
	order := e.runToCompletion(t, "dia")
	if got := strings.Join(order, ","); got != "a,solo,b,c,d" {
		t.Fatalf("ran %s, want a,solo,b,c,d", got)
	}
	v, err := e.S.Workflow(e.Ctx, "dia")
	if err != nil || v.Counts[tg.StateCompleted] != 5 {
		t.Fatalf("counts %v %v", v.Counts, err)
	}
	e.Verify(t)
}

// A dependent that also depends on another task that failed on its own stays
// cancelled when the first failure is requeued; it revives when the second
// is dealt with too.
func testRequeueLeavesDependentsOfOtherFailures(t *testing.T, h Harness) {
	e := setup(t, h)
	ids := e.createGraph(t, "wf", []string{"a", "x", "b", "d"}, map[string][]string{"b": {"a"}, "d": {"b", "x"}})
	for _, n := range []string{"a", "x"} {
		c := e.Claim(t, "w", ids[n], 0)
		if _, err := e.S.Fail(e.Ctx, holder(c), n+" broke", false); err != nil {
			t.Fatal(err)
		}
	}
	e.WantState(t, ids["d"], tg.StateCancelled)
	if _, err := e.S.Requeue(e.Ctx, ids["a"], alice); err != nil {
		t.Fatal(err)
	}
	e.WantState(t, ids["b"], tg.StateBlocked)
	e.WantState(t, ids["d"], tg.StateCancelled) // x is still failed
	// d cannot be requeued while x has failed.
	_, err := e.S.Requeue(e.Ctx, ids["d"], alice)
	wantConflict(t, err, "its dependency x")
	if _, err := e.S.Skip(e.Ctx, ids["x"], alice); err != nil {
		t.Fatal(err)
	}
	// d was cancelled by a, not x, so skipping x does not revive it ...
	e.WantState(t, ids["d"], tg.StateCancelled)
	// ... but it can now be requeued itself.
	if tk, err := e.S.Requeue(e.Ctx, ids["d"], alice); err != nil || tk.State != tg.StateBlocked || tk.StatusMessage != "waiting on b" {
		t.Fatalf("requeue d: %+v %v", tk, err)
	}
	e.checkCounters(t)
	if got := strings.Join(e.runToCompletion(t, "wf"), ","); got != "a,b,d" {
		t.Fatalf("ran %s", got)
	}
	e.Verify(t)
}

// Requeue refuses what it cannot sensibly redo, and writes nothing.
func testRequeueRefuses(t *testing.T, h Harness) {
	e := setup(t, h)
	ids := e.createGraph(t, "wf", []string{"a", "b", "c", "done", "later"}, map[string][]string{"b": {"a"}, "c": {"b"}, "later": {"done"}})
	cd := e.Claim(t, "w", ids["done"], 0)
	if _, err := e.S.Complete(e.Ctx, holder(cd), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	before := e.DB.Snapshot(t)
	_, err := e.S.Requeue(e.Ctx, ids["done"], alice)
	wantConflict(t, err, "a completed task cannot be requeued")
	_, err = e.S.Requeue(e.Ctx, ids["b"], alice)
	wantConflict(t, err, "has not run yet (waiting on a)")
	_, err = e.S.Requeue(e.Ctx, "01ARZ3NDEKTSV4RRFFQ69G5FAV", alice)
	if !errors.Is(err, tg.ErrNotFound) {
		t.Fatalf("unknown task: %v", err)
	}
	if e.DB.Snapshot(t) != before {
		t.Fatal("a refused requeue wrote")
	}
	ca := e.Claim(t, "w", ids["a"], 0)
	if _, err := e.S.Fail(e.Ctx, holder(ca), "broken", false); err != nil {
		t.Fatal(err)
	}
	before = e.DB.Snapshot(t)
	// b and c were cancelled because a failed: they cannot run until a is
	// dealt with. b names a directly; c names b, which is cancelled.
	_, err = e.S.Requeue(e.Ctx, ids["b"], alice)
	wantConflict(t, err, "its dependency a (task "+ids["a"]+", failed) did not complete")
	_, err = e.S.Requeue(e.Ctx, ids["c"], alice)
	wantConflict(t, err, "its dependency b")
	if e.DB.Snapshot(t) != before {
		t.Fatal("a refused requeue wrote")
	}
	for _, id := range []string{ids["b"], ids["c"]} {
		for _, ev := range e.Events(t, id) {
			if ev.Kind == tg.EventRequeue {
				t.Fatalf("a refused requeue is in the history of %s", id)
			}
		}
	}
}

// Skip of a failed task completes it with a null result and revives and
// unblocks the dependents its failure cancelled.
func testSkipFailedRevivesDependents(t *testing.T, h Harness) {
	e := setup(t, h)
	ids := e.createGraph(t, "wf", []string{"a", "b", "c", "d"}, map[string][]string{"b": {"a"}, "c": {"a"}, "d": {"b", "c"}})
	ca := e.Claim(t, "w", ids["a"], 0)
	if _, err := e.S.Fail(e.Ctx, holder(ca), "broken", false); err != nil {
		t.Fatal(err)
	}
	tk, err := e.S.Skip(e.Ctx, ids["a"], alice)
	if err != nil {
		t.Fatal(err)
	}
	if tk.State != tg.StateCompleted || string(tk.Result) != "null" || !strings.Contains(tk.StatusMessage, "skipped by operator alice: "+alice.Reason) {
		t.Fatalf("skipped task: %+v", tk)
	}
	e.WantState(t, ids["b"], tg.StatePending)
	e.WantState(t, ids["c"], tg.StatePending)
	if d := e.WantState(t, ids["d"], tg.StateBlocked); d.StatusMessage != "waiting on b, c" {
		t.Fatalf("d: %q", d.StatusMessage)
	}
	e.checkCounters(t)
	ev := e.wantOperatorEvent(t, ids["a"], tg.EventSkip, alice, "")
	if !strings.Contains(string(ev.Detail), `"from":"failed"`) {
		t.Errorf("skip detail %s", ev.Detail)
	}
	if got := strings.Join(e.runToCompletion(t, "wf"), ","); got != "b,c,d" {
		t.Fatalf("ran %s", got)
	}
	_, err = e.S.Skip(e.Ctx, ids["a"], alice)
	wantConflict(t, err, "already completed")
	e.Verify(t)
}

// Skip of a blocked task completes it and decrements its dependents' counts;
// when its own upstream completes afterwards, the counts stay right (the
// skipped task is not decremented below zero, its dependents not twice).
func testSkipBlockedKeepsCountersRight(t *testing.T, h Harness) {
	e := setup(t, h)
	// a -> b -> c, a -> c, and b -> e alone.
	ids := e.createGraph(t, "wf", []string{"a", "b", "c", "e"}, map[string][]string{"b": {"a"}, "c": {"a", "b"}, "e": {"b"}})
	if _, err := e.S.Skip(e.Ctx, ids["b"], alice); err != nil {
		t.Fatal(err)
	}
	e.WantState(t, ids["b"], tg.StateCompleted)
	e.WantState(t, ids["e"], tg.StatePending) // its only dependency is done
	e.WantState(t, ids["c"], tg.StateBlocked) // still waiting on a
	e.checkCounters(t)
	e.wantOperatorEvent(t, ids["b"], tg.EventSkip, alice, "")
	// Now the upstream of the skipped task completes.
	ca := e.Claim(t, "w", ids["a"], 0)
	if _, err := e.S.Complete(e.Ctx, holder(ca), json.RawMessage(`1`)); err != nil {
		t.Fatalf("completing the upstream of a skipped task: %v", err)
	}
	e.WantState(t, ids["b"], tg.StateCompleted)
	e.WantState(t, ids["c"], tg.StatePending)
	e.checkCounters(t)
	if got := strings.Join(e.runToCompletion(t, "wf"), ","); got != "c,e" {
		t.Fatalf("ran %s", got)
	}
	e.Verify(t)
}

// Skip of a claimed task fences the holder: its writes are refused as
// writes to a finished task.
func testSkipClaimedFencesHolder(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	d := e.Create(t, "wf", "d", "a")
	c := e.Claim(t, "w", a.TaskID, time.Minute)
	if _, err := e.S.Skip(e.Ctx, a.TaskID, alice); err != nil {
		t.Fatal(err)
	}
	_, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(`"late"`))
	wantStale(t, err, lease.ReasonTerminal)
	_, err = e.S.Heartbeat(e.Ctx, holder(c), 0)
	wantStale(t, err, lease.ReasonTerminal)
	if got := e.WantState(t, a.TaskID, tg.StateCompleted); string(got.Result) != "null" {
		t.Fatalf("result %s", got.Result)
	}
	e.WantState(t, d.TaskID, tg.StatePending)
	e.wantOperatorEvent(t, a.TaskID, tg.EventSkip, alice, "w")
	e.Verify(t)
}

// AbortWorkflow cancels every unfinished task of the workflow, fences out
// their holders, leaves finished tasks and other workflows alone, and records
// each cancellation with the operator and reason.
func testAbortWorkflow(t *testing.T, h Harness) {
	e := setup(t, h)
	ids := e.createGraph(t, "wf", []string{"done", "held", "ready", "blocked", "failed"}, map[string][]string{"blocked": {"held"}})
	other := e.Create(t, "other", "x")
	cd := e.Claim(t, "w", ids["done"], 0)
	if _, err := e.S.Complete(e.Ctx, holder(cd), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	cf := e.Claim(t, "w", ids["failed"], 0)
	if _, err := e.S.Fail(e.Ctx, holder(cf), "no", false); err != nil {
		t.Fatal(err)
	}
	ch := e.Claim(t, "holder", ids["held"], time.Minute)
	otherBefore := e.Get(t, other.TaskID)

	n, err := e.S.AbortWorkflow(e.Ctx, "wf", alice)
	if err != nil || n != 3 {
		t.Fatalf("abort: n=%d err=%v, want 3", n, err)
	}
	for _, node := range []string{"held", "ready", "blocked"} {
		tk := e.WantState(t, ids[node], tg.StateCancelled)
		if tk.StatusMessage != "aborted by operator alice: "+alice.Reason {
			t.Errorf("%s status %q", node, tk.StatusMessage)
		}
		holderName := ""
		if node == "held" {
			holderName = "holder"
		}
		e.wantOperatorEvent(t, ids[node], tg.EventAbort, alice, holderName)
	}
	e.WantState(t, ids["done"], tg.StateCompleted)
	e.WantState(t, ids["failed"], tg.StateFailed)
	if got := e.Get(t, other.TaskID); got.State != tg.StatePending || !got.UpdatedAt.Equal(otherBefore.UpdatedAt) {
		t.Fatalf("another workflow's task changed: %+v", got)
	}
	_, err = e.S.Heartbeat(e.Ctx, holder(ch), 0)
	wantStale(t, err, lease.ReasonTerminal)
	_, err = e.S.Complete(e.Ctx, holder(ch), json.RawMessage(`1`))
	wantStale(t, err, lease.ReasonTerminal)
	if _, ok := e.ClaimNext(t, "w", "wf"); ok {
		t.Fatal("a task of an aborted workflow was claimable")
	}
	// Aborting again finds nothing left to cancel.
	before := e.DB.Snapshot(t)
	if n, err := e.S.AbortWorkflow(e.Ctx, "wf", alice); err != nil || n != 0 {
		t.Fatalf("second abort: %d %v", n, err)
	}
	if e.DB.Snapshot(t) != before {
		t.Fatal("an abort with nothing to cancel wrote")
	}
	if _, err := e.S.AbortWorkflow(e.Ctx, "nope", alice); !errors.Is(err, tg.ErrNotFound) || !strings.Contains(err.Error(), `workflow "nope" not found`) {
		t.Fatalf("unknown workflow: %v", err)
	}
	if st := e.S.Stats(); st.Cancels != 3 {
		t.Fatalf("stats %+v", st)
	}
	e.Verify(t)
}

// Every operator action of a mixed session is in the history with the
// operator's name and reason, in the order it happened, and the history
// verifies afterwards.
func testOperatorActionsRecorded(t *testing.T, h Harness) {
	e := setup(t, h)
	ids := e.createGraph(t, "wf", []string{"a", "b", "c"}, map[string][]string{"b": {"a"}})
	bob := tg.Operator{Name: "bob", Reason: "retry after the fix"}
	carol := tg.Operator{Name: "carol@example", Reason: "obsolete — not needed any more"}
	ca := e.Claim(t, "w", ids["a"], 0)
	if _, err := e.S.Fail(e.Ctx, holder(ca), "x", false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.S.Requeue(e.Ctx, ids["a"], bob); err != nil {
		t.Fatal(err)
	}
	if _, err := e.S.Skip(e.Ctx, ids["a"], alice); err != nil {
		t.Fatal(err)
	}
	if _, err := e.S.AbortWorkflow(e.Ctx, "wf", carol); err != nil {
		t.Fatal(err)
	}
	evs, err := e.S.WorkflowEvents(e.Ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		switch ev.Kind {
		case tg.EventRequeue, tg.EventSkip, tg.EventAbort:
			var d struct{ Operator, Reason string }
			if err := json.Unmarshal(ev.Detail, &d); err != nil {
				t.Fatal(err)
			}
			got = append(got, ev.Kind+":"+d.Operator+":"+d.Reason)
		}
	}
	want := []string{"requeue:bob:" + bob.Reason, "skip:alice:" + alice.Reason, "abort:carol@example:" + carol.Reason, "abort:carol@example:" + carol.Reason}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("operator events:\n got %q\nwant %q", got, want)
	}
	e.Verify(t)
}

// Regression: a task created on a dependency that a failure had already
// cancelled started cancelled with that dependency as its cause, not the
// failed task at the root of the cascade, so requeueing or skipping the root
// revived the dependency but left the late task cancelled forever. It now
// records the cascade's root, like the tasks the cascade cancelled itself.
func testLateDependentOfCascadeRevives(t *testing.T, h Harness) {
	for _, fix := range []string{"requeue", "skip"} {
		t.Run(fix, func(t *testing.T) {
			e := setup(t, h)
			a := e.Create(t, "wf", "a")
			e.Create(t, "wf", "b", "a")
			ca := e.Claim(t, "w", a.TaskID, 0)
			if _, err := e.S.Fail(e.Ctx, holder(ca), "broken", false); err != nil {
				t.Fatal(err)
			}
			late := e.Create(t, "wf", "late", "b")
			if late.State != tg.StateCancelled || !strings.Contains(late.StatusMessage, "upstream node b") {
				t.Fatalf("late dependent: %s %q", late.State, late.StatusMessage)
			}
			var err error
			var want string
			if fix == "requeue" {
				_, err = e.S.Requeue(e.Ctx, a.TaskID, alice)
				want = "a,b,late"
			} else {
				_, err = e.S.Skip(e.Ctx, a.TaskID, alice)
				want = "b,late"
			}
			if err != nil {
				t.Fatal(err)
			}
			if tk := e.WantState(t, late.TaskID, tg.StateBlocked); tk.StatusMessage != "waiting on b" {
				t.Fatalf("late: %q", tk.StatusMessage)
			}
			e.checkCounters(t)
			if got := strings.Join(e.runToCompletion(t, "wf"), ","); got != want {
				t.Fatalf("ran %s, want %s", got, want)
			}
			e.Verify(t)
		})
	}
}

// The late dependent's own dependency, left cancelled by a second failure
// when the root was requeued, revives it when that dependency is requeued in
// turn.
func testLateDependentRevivesWithItsDependency(t *testing.T, h Harness) {
	e := setup(t, h)
	ids := e.createGraph(t, "wf", []string{"a", "x", "b"}, map[string][]string{"b": {"a", "x"}})
	for _, n := range []string{"a", "x"} {
		c := e.Claim(t, "w", ids[n], 0)
		if _, err := e.S.Fail(e.Ctx, holder(c), "broken", false); err != nil {
			t.Fatal(err)
		}
	}
	late := e.Create(t, "wf", "late", "b")
	if _, err := e.S.Requeue(e.Ctx, ids["a"], alice); err != nil {
		t.Fatal(err)
	}
	e.WantState(t, ids["b"], tg.StateCancelled) // x is still failed
	e.WantState(t, late.TaskID, tg.StateCancelled)
	if _, err := e.S.Skip(e.Ctx, ids["x"], alice); err != nil {
		t.Fatal(err)
	}
	if _, err := e.S.Requeue(e.Ctx, ids["b"], alice); err != nil {
		t.Fatal(err)
	}
	e.WantState(t, late.TaskID, tg.StateBlocked)
	e.checkCounters(t)
	if got := strings.Join(e.runToCompletion(t, "wf"), ","); got != "a,b,late" {
		t.Fatalf("ran %s", got)
	}
	e.Verify(t)
}
