package taskgraph

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
)

var alice = Operator{Name: "alice", Reason: "INC-42: the upstream API is back"}

// checkCounters asserts the readiness invariant on every unfinished task: its
// unmet count equals the number of its dependencies that have not completed,
// it is blocked exactly when that count is positive, and it carries no
// cancellation cause.
func checkCounters(t *testing.T, b *bundle) {
	t.Helper()
	rows, err := b.s.rdb.QueryContext(b.ctx, `SELECT t.node_id, t.state, t.unmet,
		(SELECT COUNT(*) FROM edges e JOIN tasks d ON d.seq = e.dep_seq WHERE e.task_seq = t.seq AND d.state <> 'completed'),
		t.cancel_cause IS NOT NULL
		FROM tasks t WHERE t.state IN ('blocked', 'pending', 'claimed')`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var node, state string
		var unmet, want int
		var caused bool
		if err := rows.Scan(&node, &state, &unmet, &want, &caused); err != nil {
			t.Fatal(err)
		}
		if unmet != want || (state == string(StateBlocked)) != (want > 0) || caused {
			t.Errorf("node %s is %s with unmet %d (cause set %v), but %d dependencies have not completed", node, state, unmet, caused, want)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// createGraph creates nodes in workflow wf; deps maps a node to its
// dependencies. It returns task ids by node id.
func createGraph(t *testing.T, b *bundle, wf string, order []string, deps map[string][]string) map[string]string {
	t.Helper()
	specs := make([]NodeSpec, len(order))
	for i, n := range order {
		specs[i] = NodeSpec{NodeID: n, DependsOn: deps[n], Payload: json.RawMessage(`{"n":"` + n + `"}`)}
	}
	out, err := b.s.CreateWorkflow(b.ctx, wf, specs)
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
func runToCompletion(t *testing.T, b *bundle, wf string) []string {
	t.Helper()
	var order []string
	for {
		var wave []Claimed
		for {
			c, ok := b.claimNext(t, "runner", wf)
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
			if _, err := b.s.Complete(b.ctx, holder(c), json.RawMessage(`"ok"`)); err != nil {
				t.Fatalf("complete %s: %v", c.Task.NodeID, err)
			}
		}
		checkCounters(t, b)
	}
}

// lastEvent returns the newest event of kind on task id.
func lastEvent(t *testing.T, b *bundle, id, kind string) Event {
	t.Helper()
	evs := mustEvents(t, b, id)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == kind {
			return evs[i]
		}
	}
	t.Fatalf("task %s has no %s event", id, kind)
	return Event{}
}

// wantOperatorEvent asserts that task id's newest event of kind records op
// and, when holder is set, the fenced-out holder.
func wantOperatorEvent(t *testing.T, b *bundle, id, kind string, op Operator, holder string) Event {
	t.Helper()
	e := lastEvent(t, b, id, kind)
	var d map[string]any
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		t.Fatal(err)
	}
	if d["operator"] != op.Name || d["reason"] != op.Reason {
		t.Errorf("%s event of %s records operator %v reason %v, want %q %q", kind, id, d["operator"], d["reason"], op.Name, op.Reason)
	}
	if holder != "" && e.Owner != holder {
		t.Errorf("%s event of %s records owner %q, want the fenced holder %q", kind, id, e.Owner, holder)
	}
	return e
}

func wantConflict(t *testing.T, err error, phrase string) {
	t.Helper()
	var ce *ConflictError
	if !errors.Is(err, ErrConflict) || !errors.As(err, &ce) || !strings.Contains(err.Error(), phrase) {
		t.Fatalf("got %v, want a conflict saying %q", err, phrase)
	}
}

// Requeue of a claimed task fences the holder out and makes the task
// claimable again, at a higher generation.
func TestRequeueClaimedFencesHolder(t *testing.T) {
	b := setup(t)
	a := b.create(t, "wf", "a")
	old := b.claim(t, "worker-1", a.TaskID, time.Minute)
	tk, err := b.s.Requeue(b.ctx, a.TaskID, alice)
	if err != nil {
		t.Fatal(err)
	}
	if tk.State != StatePending || tk.Owner != "" || tk.Attempts != 0 || !tk.LeaseExpiresAt.IsZero() || !strings.Contains(tk.StatusMessage, "requeued by alice") {
		t.Fatalf("requeued task: %+v", tk)
	}
	// The lease has not expired, yet the old holder can no longer write.
	_, err = b.s.Heartbeat(b.ctx, holder(old), 0)
	wantStale(t, err, lease.ReasonNotHeld)
	_, err = b.s.Complete(b.ctx, holder(old), json.RawMessage(`"stale"`))
	wantStale(t, err, lease.ReasonNotHeld)
	_, err = b.s.Fail(b.ctx, holder(old), "stale", false)
	wantStale(t, err, lease.ReasonNotHeld)

	c, ok := b.claimNext(t, "worker-2", "wf")
	if !ok || c.Task.TaskID != a.TaskID || c.Lease.Generation != old.Lease.Generation+1 || c.Task.Attempts != 1 {
		t.Fatalf("reclaim after requeue: ok=%v %+v", ok, c)
	}
	_, err = b.s.Complete(b.ctx, holder(old), json.RawMessage(`"stale"`))
	wantStale(t, err, lease.ReasonSuperseded)
	if _, err := b.s.Complete(b.ctx, holder(c), json.RawMessage(`"fresh"`)); err != nil {
		t.Fatal(err)
	}
	if got := b.wantState(t, a.TaskID, StateCompleted); string(got.Result) != `"fresh"` {
		t.Fatalf("result %s", got.Result)
	}
	e := wantOperatorEvent(t, b, a.TaskID, EventRequeue, alice, "worker-1")
	if !strings.Contains(string(e.Detail), `"from":"claimed"`) {
		t.Errorf("requeue event detail %s does not record the previous state", e.Detail)
	}
	b.verify(t)
}

// Requeue of a failed task revives the dependents its failure cancelled: in
// a diamond, failing A cancels B, C and D; requeueing A makes them blocked
// again, and the workflow then runs to completion in dependency order.
func TestRequeueFailedRevivesDiamond(t *testing.T) {
	b := setup(t)
	ids := createGraph(t, b, "dia", []string{"a", "b", "c", "d", "solo"}, map[string][]string{"b": {"a"}, "c": {"a"}, "d": {"b", "c"}})
	ca, _ := b.claimNext(t, "w", "dia")
	if ca.Task.NodeID != "a" {
		t.Fatalf("claimed %s first", ca.Task.NodeID)
	}
	if _, err := b.s.Fail(b.ctx, holder(ca), "boom", false); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"b", "c", "d"} {
		b.wantState(t, ids[n], StateCancelled)
	}
	b.wantState(t, ids["solo"], StatePending)

	tk, err := b.s.Requeue(b.ctx, ids["a"], alice)
	if err != nil {
		t.Fatal(err)
	}
	if tk.State != StatePending || tk.Attempts != 0 {
		t.Fatalf("requeued a: %s attempts %d", tk.State, tk.Attempts)
	}
	for n, waiting := range map[string]string{"b": "waiting on a", "c": "waiting on a", "d": "waiting on b, c"} {
		got := b.wantState(t, ids[n], StateBlocked)
		if got.StatusMessage != waiting {
			t.Errorf("%s status %q, want %q", n, got.StatusMessage, waiting)
		}
		e := lastEvent(t, b, ids[n], EventRevive)
		if !strings.Contains(string(e.Detail), ids["a"]) {
			t.Errorf("revive event of %s does not name a: %s", n, e.Detail)
		}
	}
	checkCounters(t, b)
	wantOperatorEvent(t, b, ids["a"], EventRequeue, alice, "")
	order := runToCompletion(t, b, "dia")
	if got := strings.Join(order, ","); got != "a,solo,b,c,d" {
		t.Fatalf("ran %s, want a,solo,b,c,d", got)
	}
	v, err := b.s.Workflow(b.ctx, "dia")
	if err != nil || v.Counts[StateCompleted] != 5 {
		t.Fatalf("counts %v %v", v.Counts, err)
	}
	b.verify(t)
}

// A dependent that also depends on another task that failed on its own stays
// cancelled when the first failure is requeued; it revives when the second
// is dealt with too.
func TestRequeueLeavesDependentsOfOtherFailures(t *testing.T) {
	b := setup(t)
	ids := createGraph(t, b, "wf", []string{"a", "x", "b", "d"}, map[string][]string{"b": {"a"}, "d": {"b", "x"}})
	for _, n := range []string{"a", "x"} {
		c := b.claim(t, "w", ids[n], 0)
		if _, err := b.s.Fail(b.ctx, holder(c), n+" broke", false); err != nil {
			t.Fatal(err)
		}
	}
	b.wantState(t, ids["d"], StateCancelled)
	if _, err := b.s.Requeue(b.ctx, ids["a"], alice); err != nil {
		t.Fatal(err)
	}
	b.wantState(t, ids["b"], StateBlocked)
	b.wantState(t, ids["d"], StateCancelled) // x is still failed
	// d cannot be requeued while x has failed.
	_, err := b.s.Requeue(b.ctx, ids["d"], alice)
	wantConflict(t, err, "its dependency x")
	if _, err := b.s.Skip(b.ctx, ids["x"], alice); err != nil {
		t.Fatal(err)
	}
	// d was cancelled by a, not x, so skipping x does not revive it ...
	b.wantState(t, ids["d"], StateCancelled)
	// ... but it can now be requeued itself.
	if tk, err := b.s.Requeue(b.ctx, ids["d"], alice); err != nil || tk.State != StateBlocked || tk.StatusMessage != "waiting on b" {
		t.Fatalf("requeue d: %+v %v", tk, err)
	}
	checkCounters(t, b)
	if got := strings.Join(runToCompletion(t, b, "wf"), ","); got != "a,b,d" {
		t.Fatalf("ran %s", got)
	}
	b.verify(t)
}

// Requeue refuses what it cannot sensibly redo, and writes nothing.
func TestRequeueRefuses(t *testing.T) {
	b := setup(t)
	ids := createGraph(t, b, "wf", []string{"a", "b", "c", "done", "later"}, map[string][]string{"b": {"a"}, "c": {"b"}, "later": {"done"}})
	cd := b.claim(t, "w", ids["done"], 0)
	if _, err := b.s.Complete(b.ctx, holder(cd), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	before := fingerprint(t, b.path)
	_, err := b.s.Requeue(b.ctx, ids["done"], alice)
	wantConflict(t, err, "a completed task cannot be requeued")
	_, err = b.s.Requeue(b.ctx, ids["b"], alice)
	wantConflict(t, err, "has not run yet (waiting on a)")
	_, err = b.s.Requeue(b.ctx, "01ARZ3NDEKTSV4RRFFQ69G5FAV", alice)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown task: %v", err)
	}
	if fingerprint(t, b.path) != before {
		t.Fatal("a refused requeue wrote")
	}
	ca := b.claim(t, "w", ids["a"], 0)
	if _, err := b.s.Fail(b.ctx, holder(ca), "broken", false); err != nil {
		t.Fatal(err)
	}
	before = fingerprint(t, b.path)
	// b and c were cancelled because a failed: they cannot run until a is
	// dealt with. b names a directly; c names b, which is cancelled.
	_, err = b.s.Requeue(b.ctx, ids["b"], alice)
	wantConflict(t, err, "its dependency a (task "+ids["a"]+", failed) did not complete")
	_, err = b.s.Requeue(b.ctx, ids["c"], alice)
	wantConflict(t, err, "its dependency b")
	if fingerprint(t, b.path) != before {
		t.Fatal("a refused requeue wrote")
	}
	for _, id := range []string{ids["b"], ids["c"]} {
		for _, e := range mustEvents(t, b, id) {
			if e.Kind == EventRequeue {
				t.Fatalf("a refused requeue is in the history of %s", id)
			}
		}
	}
}

// Skip of a failed task completes it with a null result and revives and
// unblocks the dependents its failure cancelled.
func TestSkipFailedRevivesDependents(t *testing.T) {
	b := setup(t)
	ids := createGraph(t, b, "wf", []string{"a", "b", "c", "d"}, map[string][]string{"b": {"a"}, "c": {"a"}, "d": {"b", "c"}})
	ca := b.claim(t, "w", ids["a"], 0)
	if _, err := b.s.Fail(b.ctx, holder(ca), "broken", false); err != nil {
		t.Fatal(err)
	}
	tk, err := b.s.Skip(b.ctx, ids["a"], alice)
	if err != nil {
		t.Fatal(err)
	}
	if tk.State != StateCompleted || string(tk.Result) != "null" || !strings.Contains(tk.StatusMessage, "skipped by operator alice: "+alice.Reason) {
		t.Fatalf("skipped task: %+v", tk)
	}
	b.wantState(t, ids["b"], StatePending)
	b.wantState(t, ids["c"], StatePending)
	if d := b.wantState(t, ids["d"], StateBlocked); d.StatusMessage != "waiting on b, c" {
		t.Fatalf("d: %q", d.StatusMessage)
	}
	checkCounters(t, b)
	e := wantOperatorEvent(t, b, ids["a"], EventSkip, alice, "")
	if !strings.Contains(string(e.Detail), `"from":"failed"`) {
		t.Errorf("skip detail %s", e.Detail)
	}
	if got := strings.Join(runToCompletion(t, b, "wf"), ","); got != "b,c,d" {
		t.Fatalf("ran %s", got)
	}
	_, err = b.s.Skip(b.ctx, ids["a"], alice)
	wantConflict(t, err, "already completed")
	b.verify(t)
}

// Skip of a blocked task completes it and decrements its dependents' counts;
// when its own upstream completes afterwards, the counts stay right (the
// skipped task is not decremented below zero, its dependents not twice).
func TestSkipBlockedKeepsCountersRight(t *testing.T) {
	b := setup(t)
	// a -> b -> c, a -> c, and b -> e alone.
	ids := createGraph(t, b, "wf", []string{"a", "b", "c", "e"}, map[string][]string{"b": {"a"}, "c": {"a", "b"}, "e": {"b"}})
	if _, err := b.s.Skip(b.ctx, ids["b"], alice); err != nil {
		t.Fatal(err)
	}
	b.wantState(t, ids["b"], StateCompleted)
	b.wantState(t, ids["e"], StatePending) // its only dependency is done
	b.wantState(t, ids["c"], StateBlocked) // still waiting on a
	checkCounters(t, b)
	wantOperatorEvent(t, b, ids["b"], EventSkip, alice, "")
	// Now the upstream of the skipped task completes.
	ca := b.claim(t, "w", ids["a"], 0)
	if _, err := b.s.Complete(b.ctx, holder(ca), json.RawMessage(`1`)); err != nil {
		t.Fatalf("completing the upstream of a skipped task: %v", err)
	}
	b.wantState(t, ids["b"], StateCompleted)
	b.wantState(t, ids["c"], StatePending)
	checkCounters(t, b)
	if got := strings.Join(runToCompletion(t, b, "wf"), ","); got != "c,e" {
		t.Fatalf("ran %s", got)
	}
	b.verify(t)
}

// Skip of a claimed task fences the holder: its writes are refused as
// writes to a finished task.
func TestSkipClaimedFencesHolder(t *testing.T) {
	b := setup(t)
	a := b.create(t, "wf", "a")
	d := b.create(t, "wf", "d", "a")
	c := b.claim(t, "w", a.TaskID, time.Minute)
	if _, err := b.s.Skip(b.ctx, a.TaskID, alice); err != nil {
		t.Fatal(err)
	}
	_, err := b.s.Complete(b.ctx, holder(c), json.RawMessage(`"late"`))
	wantStale(t, err, lease.ReasonTerminal)
	_, err = b.s.Heartbeat(b.ctx, holder(c), 0)
	wantStale(t, err, lease.ReasonTerminal)
	if got := b.wantState(t, a.TaskID, StateCompleted); string(got.Result) != "null" {
		t.Fatalf("result %s", got.Result)
	}
	b.wantState(t, d.TaskID, StatePending)
	wantOperatorEvent(t, b, a.TaskID, EventSkip, alice, "w")
	b.verify(t)
}

// AbortWorkflow cancels every unfinished task of the workflow, fences out
// their holders, leaves finished tasks and other workflows alone, and records
// each cancellation with the operator and reason.
func TestAbortWorkflow(t *testing.T) {
	b := setup(t)
	ids := createGraph(t, b, "wf", []string{"done", "held", "ready", "blocked", "failed"}, map[string][]string{"blocked": {"held"}})
	other := b.create(t, "other", "x")
	cd := b.claim(t, "w", ids["done"], 0)
	if _, err := b.s.Complete(b.ctx, holder(cd), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	cf := b.claim(t, "w", ids["failed"], 0)
	if _, err := b.s.Fail(b.ctx, holder(cf), "no", false); err != nil {
		t.Fatal(err)
	}
	ch := b.claim(t, "holder", ids["held"], time.Minute)
	otherBefore := b.get(t, other.TaskID)

	n, err := b.s.AbortWorkflow(b.ctx, "wf", alice)
	if err != nil || n != 3 {
		t.Fatalf("abort: n=%d err=%v, want 3", n, err)
	}
	for _, node := range []string{"held", "ready", "blocked"} {
		tk := b.wantState(t, ids[node], StateCancelled)
		if tk.StatusMessage != "aborted by operator alice: "+alice.Reason {
			t.Errorf("%s status %q", node, tk.StatusMessage)
		}
		holderName := ""
		if node == "held" {
			holderName = "holder"
		}
		wantOperatorEvent(t, b, ids[node], EventAbort, alice, holderName)
	}
	b.wantState(t, ids["done"], StateCompleted)
	b.wantState(t, ids["failed"], StateFailed)
	if got := b.get(t, other.TaskID); got.State != StatePending || !got.UpdatedAt.Equal(otherBefore.UpdatedAt) {
		t.Fatalf("another workflow's task changed: %+v", got)
	}
	_, err = b.s.Heartbeat(b.ctx, holder(ch), 0)
	wantStale(t, err, lease.ReasonTerminal)
	_, err = b.s.Complete(b.ctx, holder(ch), json.RawMessage(`1`))
	wantStale(t, err, lease.ReasonTerminal)
	if _, ok := b.claimNext(t, "w", "wf"); ok {
		t.Fatal("a task of an aborted workflow was claimable")
	}
	// Aborting again finds nothing left to cancel.
	before := fingerprint(t, b.path)
	if n, err := b.s.AbortWorkflow(b.ctx, "wf", alice); err != nil || n != 0 {
		t.Fatalf("second abort: %d %v", n, err)
	}
	if fingerprint(t, b.path) != before {
		t.Fatal("an abort with nothing to cancel wrote")
	}
	if _, err := b.s.AbortWorkflow(b.ctx, "nope", alice); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `workflow "nope" not found`) {
		t.Fatalf("unknown workflow: %v", err)
	}
	if st := b.s.Stats(); st.Cancels != 3 {
		t.Fatalf("stats %+v", st)
	}
	b.verify(t)
}

// Every operator action of a mixed session is in the history with the
// operator's name and reason, in the order it happened, and the history
// verifies afterwards.
func TestOperatorActionsRecorded(t *testing.T) {
	b := setup(t)
	ids := createGraph(t, b, "wf", []string{"a", "b", "c"}, map[string][]string{"b": {"a"}})
	bob := Operator{Name: "bob", Reason: "retry after the fix"}
	carol := Operator{Name: "carol@example", Reason: "obsolete — not needed any more"}
	ca := b.claim(t, "w", ids["a"], 0)
	if _, err := b.s.Fail(b.ctx, holder(ca), "x", false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Requeue(b.ctx, ids["a"], bob); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Skip(b.ctx, ids["a"], alice); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.AbortWorkflow(b.ctx, "wf", carol); err != nil {
		t.Fatal(err)
	}
	evs, err := b.s.WorkflowEvents(b.ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		switch e.Kind {
		case EventRequeue, EventSkip, EventAbort:
			var d struct{ Operator, Reason string }
			if err := json.Unmarshal(e.Detail, &d); err != nil {
				t.Fatal(err)
			}
			got = append(got, e.Kind+":"+d.Operator+":"+d.Reason)
		}
	}
	want := []string{"requeue:bob:" + bob.Reason, "skip:alice:" + alice.Reason, "abort:carol@example:" + carol.Reason, "abort:carol@example:" + carol.Reason}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("operator events:\n got %q\nwant %q", got, want)
	}
	b.verify(t)
}
