package taskgraph

import (
	"testing"
	"time"
)

// TestBatchSettlesDependentsTogether: two completions run as one hot batch
// settle the dependents of both in one step. A task after both becomes
// ready once, its ready event recorded as the doing of the completion the
// batch ran last (the greater task id: a batch takes its fenced writes in
// task id order); a task after one of them and a task still waiting for
// another change as they would after each completion alone.
func TestBatchSettlesDependentsTogether(t *testing.T) {
	b := setup(t)
	a, bb := b.create(t, "wf", "a"), b.create(t, "wf", "b")
	b.create(t, "wf", "c")
	both, onlyA, waits := b.create(t, "wf", "x", "a", "b"), b.create(t, "wf", "y", "a"), b.create(t, "wf", "z", "a", "c")
	ca, cb := b.claim(t, "wa", a.TaskID, time.Minute), b.claim(t, "wb", bb.TaskID, time.Minute)
	ops := []*hotOp{
		{ctx: b.ctx, kind: hotComplete, arrived: b.clock.Now(), h: holder(ca), result: []byte(`{}`)},
		{ctx: b.ctx, kind: hotComplete, arrived: b.clock.Now(), h: holder(cb), result: []byte(`{}`)},
	}
	b.s.runHotOps(ops...)
	for _, op := range ops {
		if op.ans.err != nil || op.ans.task.State != StateCompleted {
			t.Fatalf("completion of %s: %+v, %v", op.h.TaskID, op.ans.task.State, op.ans.err)
		}
	}
	for _, c := range []struct {
		id     string
		state  State
		status string
	}{{both.TaskID, StatePending, "ready to claim"}, {onlyA.TaskID, StatePending, "ready to claim"}, {waits.TaskID, StateBlocked, "waiting on c"}} {
		if got := b.get(t, c.id); got.State != c.state || got.StatusMessage != c.status {
			t.Errorf("task %s: %s %q, want %s %q", got.NodeID, got.State, got.StatusMessage, c.state, c.status)
		}
	}
	last := "wb"
	if a.TaskID > bb.TaskID {
		last = "wa"
	}
	evs, err := b.s.TaskEvents(b.ctx, both.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	var ready []Event
	for _, e := range evs {
		if e.Kind == EventReady {
			ready = append(ready, e)
		}
	}
	if len(ready) != 1 || ready[0].Actor.Name != last {
		t.Fatalf("ready events of x: %+v; want one, by %s", ready, last)
	}
	b.verify(t)
}
