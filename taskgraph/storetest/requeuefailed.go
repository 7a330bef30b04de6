package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// byNode is tasks sorted by node id (tasks created in one transaction
// share their creation time, so their order is not the nodes').
func byNode(tasks []tg.RequeuedTask) []tg.RequeuedTask {
	out := slices.Clone(tasks)
	slices.SortFunc(out, func(a, b tg.RequeuedTask) int { return strings.Compare(a.NodeID, b.NodeID) })
	return out
}

// failTask claims the pending task id and fails it (not retryably) with
// cause.
func (e *env) failTask(t *testing.T, id, cause string) {
	t.Helper()
	c := e.Claim(t, "w", id, 0)
	if _, err := e.S.Fail(e.Ctx, holder(c), cause, false); err != nil {
		t.Fatal(err)
	}
}

// testRequeueFailedReplaysDeadLetters: RequeueFailed requeues exactly the
// workflow's failed tasks, each recorded with the operator, and revives the
// dependents their failures cancelled; its dry run reports the same and
// writes nothing.
func testRequeueFailedReplaysDeadLetters(t *testing.T, h Harness) {
	e := setup(t, h)
	ids := e.createGraph(t, "wf", []string{"a", "b", "c", "d", "e"}, map[string][]string{"b": {"a"}, "c": {"b"}})
	other := e.createGraph(t, "other", []string{"x"}, nil)
	ca := e.Claim(t, "w", ids["a"], 0)
	if _, err := e.S.Complete(e.Ctx, holder(ca), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	e.failTask(t, ids["b"], "disk full")
	e.failTask(t, ids["d"], "timeout calling the API")
	e.failTask(t, other["x"], "elsewhere")
	e.WantState(t, ids["c"], tg.StateCancelled)

	before := e.DB.Snapshot(t)
	dry, err := e.S.RequeueFailed(e.Ctx, "wf", alice, true)
	if err != nil {
		t.Fatal(err)
	}
	if e.DB.Snapshot(t) != before {
		t.Fatal("the dry run wrote to the database")
	}
	want := fmt.Sprintf("[{%s b disk full pending } {%s d timeout calling the API pending }]", ids["b"], ids["d"])
	if got := fmt.Sprint(byNode(dry.Tasks)); got != want || !dry.DryRun || dry.Requeued != 2 || dry.Refused != 0 {
		t.Fatalf("dry run %+v, want tasks %s", dry, want)
	}

	rep, err := e.S.RequeueFailed(e.Ctx, "wf", alice, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(byNode(rep.Tasks)); got != want || rep.DryRun || rep.Requeued != 2 {
		t.Fatalf("report %+v, want tasks %s", rep, want)
	}
	for _, n := range []string{"b", "d"} {
		tk := e.WantState(t, ids[n], tg.StatePending)
		if tk.Attempts != 0 {
			t.Errorf("%s: attempts %d after the requeue", n, tk.Attempts)
		}
		evs := e.Events(t, ids[n])
		last := evs[len(evs)-1]
		if last.Kind != tg.EventRequeue || last.Actor.Kind != tg.ActorOperator || last.Actor.Name != "alice" || !strings.Contains(string(last.Detail), alice.Reason) {
			t.Errorf("%s: last event %s by %+v (%s), want a requeue by operator alice with the reason", n, last.Kind, last.Actor, last.Detail)
		}
	}
	e.WantState(t, ids["c"], tg.StateBlocked) // revived: waits for b again
	e.WantState(t, other["x"], tg.StateFailed)
	e.checkCounters(t)
	e.Verify(t)

	again, err := e.S.RequeueFailed(e.Ctx, "wf", alice, false)
	if err != nil || len(again.Tasks) != 0 {
		t.Fatalf("a second run found %+v, %v; want nothing failed", again, err)
	}
	if _, err := e.S.RequeueFailed(e.Ctx, "nope", alice, true); !errors.Is(err, tg.ErrNotFound) {
		t.Errorf("unknown workflow: %v, want ErrNotFound", err)
	}
	if _, err := e.S.RequeueFailed(e.Ctx, "wf", tg.Operator{Name: "alice"}, false); !errors.Is(err, tg.ErrInvalid) {
		t.Errorf("no reason: %v, want ErrInvalid", err)
	}
}

// testRequeueFailedBatchesAndRefuses: more failed tasks than one batch are
// all requeued; a task Requeue refuses (here a failed task whose
// dependency no longer completed, which only a database edited behind the
// store's back holds) is reported with the reason and left failed, and the
// others of its batch are requeued.
func testRequeueFailedBatchesAndRefuses(t *testing.T, h Harness) {
	e := setup(t, h)
	n := tg.RequeueFailedBatch + 5
	order := []string{"root"}
	deps := map[string][]string{}
	for i := range n {
		node := fmt.Sprintf("n%03d", i)
		order = append(order, node)
		deps[node] = []string{"root"}
	}
	ids := e.createGraph(t, "wf", order, deps)
	cr := e.Claim(t, "w", ids["root"], 0)
	if _, err := e.S.Complete(e.Ctx, holder(cr), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		e.failTask(t, ids[fmt.Sprintf("n%03d", i)], fmt.Sprintf("cause %d", i))
	}
	e.DB.Exec(t, `UPDATE tasks SET state = 'cancelled' WHERE task_id = '`+ids["root"]+`'`)
	before := e.DB.Snapshot(t)
	dry, err := e.S.RequeueFailed(e.Ctx, "wf", alice, true)
	if err != nil || e.DB.Snapshot(t) != before {
		t.Fatalf("dry run: %v (or it wrote)", err)
	}
	if len(dry.Tasks) != n || dry.Refused != n || !strings.Contains(dry.Tasks[0].Refused, "its dependency root (task ") || !strings.HasPrefix(dry.Tasks[n-1].Cause, "cause ") {
		t.Fatalf("dry run over a cancelled root: %d tasks, %d refused, first %+v", len(dry.Tasks), dry.Refused, dry.Tasks[0])
	}
	e.DB.Exec(t, `UPDATE tasks SET state = 'completed' WHERE task_id = '`+ids["root"]+`'`)
	// One refused task in the middle of the first batch: its dependency
	// edited to cancelled.
	extra := e.createGraph(t, "wf", []string{"dep", "late"}, map[string][]string{"late": {"dep"}})
	cd := e.Claim(t, "w", extra["dep"], 0)
	if _, err := e.S.Complete(e.Ctx, holder(cd), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	e.failTask(t, extra["late"], "late cause")
	e.DB.Exec(t, `UPDATE tasks SET state = 'cancelled' WHERE task_id = '`+extra["dep"]+`'`)
	rep, err := e.S.RequeueFailed(e.Ctx, "wf", alice, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tasks) != n+1 || rep.Requeued != n || rep.Refused != 1 {
		t.Fatalf("report: %d tasks, %d requeued, %d refused; want %d, %d, 1", len(rep.Tasks), rep.Requeued, rep.Refused, n+1, n)
	}
	last := rep.Tasks[len(rep.Tasks)-1]
	for _, rt := range rep.Tasks {
		if rt.Refused != "" {
			last = rt
		}
	}
	if last.TaskID != extra["late"] || last.Cause != "late cause" || !strings.Contains(last.Refused, "its dependency dep (task ") || last.State != "" {
		t.Errorf("refused task: %+v", last)
	}
	e.WantState(t, extra["late"], tg.StateFailed)
	for i := range n {
		e.WantState(t, ids[fmt.Sprintf("n%03d", i)], tg.StatePending)
	}
}
