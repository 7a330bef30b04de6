package drivertest

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// pauseTests: pauses of claiming (Tx.SetPause, Tx.ClearPause,
// Reads.Pauses, TaskGuard.NotPaused, the claim scans' exclusions, a
// prune's removal of the workflow's pause) and the lease-loss count of
// poison tasks (TaskSet.LeaseLosses, TaskRow.LeaseLosses), migration 0010.
var pauseTests = []test{
	{"SetClearAndList", testPauses},
	{"ScansExcludePaused", testPausedScans},
	{"NotPausedGuard", testNotPausedGuard},
	{"PruneRemovesPause", testPrunePause},
	{"LeaseLosses", testLeaseLosses},
}

func pause(wf string, at int64) tgdriver.PauseRow {
	return tgdriver.PauseRow{WorkflowID: wf, AtMS: at, Reason: "deploy of " + wf, By: "op-" + wf}
}

// setPause records p in its own transaction and returns whether it
// replaced a pause.
func (e *env) setPause(p tgdriver.PauseRow) bool {
	e.t.Helper()
	var replaced bool
	e.write(func(tx tgdriver.Tx) error {
		var err error
		replaced, err = tx.SetPause(e.ctx, p)
		return err
	})
	return replaced
}

// clearPause removes the pause of wf in its own transaction.
func (e *env) clearPause(wf string) (tgdriver.PauseRow, bool) {
	e.t.Helper()
	var p tgdriver.PauseRow
	var ok bool
	e.write(func(tx tgdriver.Tx) error {
		var err error
		p, ok, err = tx.ClearPause(e.ctx, wf)
		return err
	})
	return p, ok
}

// testPauses: SetPause records a pause per scope (a workflow, or "" for
// all claiming), replacing the scope's pause and saying so; Pauses lists
// the pause of all claiming first, then the asked workflow's or up to
// limit workflows' in id order, on every kind of Reads; ClearPause returns
// the pause it removed, and ok false when there was none.
func testPauses(t *testing.T, h Harness) {
	e := newEnv(t, h)
	if got, err := e.d.Reads().Pauses(e.ctx, "", 10); err != nil || len(got) != 0 {
		t.Fatalf("Pauses of a fresh database = %v, %v; want none", got, err)
	}
	for _, c := range []struct {
		p    tgdriver.PauseRow
		want bool
	}{
		{pause("b", 10), false},
		{pause("a", 11), false},
		{pause("", 12), false},
		{tgdriver.PauseRow{WorkflowID: "b", AtMS: 20, Reason: "again", By: "op2"}, true},
		{pause("c", 13), false},
	} {
		if got := e.setPause(c.p); got != c.want {
			t.Errorf("SetPause(%+v) replaced = %v, want %v", c.p, got, c.want)
		}
	}
	b2 := tgdriver.PauseRow{WorkflowID: "b", AtMS: 20, Reason: "again", By: "op2"}
	all, a, c := pause("", 12), pause("a", 11), pause("c", 13)
	e.eachReads(func(r tgdriver.Reads) error {
		for _, q := range []struct {
			wf    string
			limit int
			want  []tgdriver.PauseRow
		}{
			{"", 10, []tgdriver.PauseRow{all, a, b2, c}},
			{"", 2, []tgdriver.PauseRow{all, a, b2}},
			{"b", 10, []tgdriver.PauseRow{all, b2}},
			{"none", 10, []tgdriver.PauseRow{all}},
		} {
			got, err := r.Pauses(e.ctx, q.wf, q.limit)
			if err != nil {
				return err
			}
			if !samePauses(got, q.want) {
				return fmt.Errorf("Pauses(%q, %d) = %+v, want %+v", q.wf, q.limit, got, q.want)
			}
		}
		return nil
	})
	if p, ok := e.clearPause("b"); !ok || p != b2 {
		t.Errorf("ClearPause(b) = %+v, %v; want %+v, true", p, ok, b2)
	}
	if p, ok := e.clearPause("b"); ok {
		t.Errorf("ClearPause(b) again = %+v, true; want ok false", p)
	}
	if p, ok := e.clearPause(""); !ok || p != all {
		t.Errorf("ClearPause(\"\") = %+v, %v; want %+v, true", p, ok, all)
	}
	// Without a pause of all claiming, limit bounds the workflows alone.
	for _, q := range []struct {
		limit int
		want  []tgdriver.PauseRow
	}{{10, []tgdriver.PauseRow{a, c}}, {1, []tgdriver.PauseRow{a}}} {
		if got, err := e.d.Reads().Pauses(e.ctx, "", q.limit); err != nil || !samePauses(got, q.want) {
			t.Errorf("Pauses(\"\", %d) after the clears = %+v, %v; want %+v", q.limit, got, err, q.want)
		}
	}
	if got, err := e.d.Reads().Pauses(e.ctx, "b", 10); err != nil || len(got) != 0 {
		t.Errorf("Pauses(b) after the clears = %+v, %v; want none", got, err)
	}
}

func samePauses(got, want []tgdriver.PauseRow) bool {
	return len(got) == len(want) && (len(got) == 0 || reflect.DeepEqual(got, want))
}

// testPausedScans: a paused workflow's tasks, and every task while all
// claiming is paused, are left out of NextPending, CountClaimable and
// Fetch's claim scans; clearing the pause gives them back.
func testPausedScans(t *testing.T, h Harness) {
	e := newEnv(t, h)
	fx := newClaimFixture(e)
	check := func(when, next string, count int, scan string) {
		t.Helper()
		e.write(func(tx tgdriver.Tx) error {
			got, err := fx.next(e, tx, "", nil)
			if err != nil {
				return err
			}
			if got != next {
				t.Errorf("%s: NextPending = %q, want %q", when, got, next)
			}
			f, err := tx.Fetch(e.ctx, tgdriver.Fetch{Claims: []tgdriver.ClaimScan{{N: 20}}})
			if err != nil {
				return err
			}
			if len(f.Claimable) != 1 {
				return fmt.Errorf("%s: %d claim scans answered, want 1", when, len(f.Claimable))
			}
			if got := fx.nodes(seqsOf(f.Claimable[0])); got != scan {
				t.Errorf("%s: Fetch's claim scan took %s, want %s", when, got, scan)
			}
			return nil
		})
		e.eachReads(func(r tgdriver.Reads) error {
			if n, err := r.CountClaimable(e.ctx, "", nil, 100); err != nil || n != count {
				return fmt.Errorf("%s: CountClaimable = %d, %v; want %d", when, n, err, count)
			}
			return nil
		})
	}
	check("nothing paused", "q7", 6, "[q7 p5 p5b p0 q0 neg]")
	e.setPause(pause("wf1", 10))
	check("wf1 paused", "q7", 2, "[q7 q0]")
	e.setPause(pause("wf2", 11))
	check("wf1 and wf2 paused", "", 0, "[]")
	e.clearPause("wf1")
	e.clearPause("wf2")
	e.setPause(pause("", 12))
	check("all claiming paused", "", 0, "[]")
	e.setPause(pause("wf2", 13))
	e.clearPause("")
	check("wf2 paused after all was", "p5", 4, "[p5 p5b p0 neg]")
	e.clearPause("wf2")
	check("nothing paused again", "q7", 6, "[q7 p5 p5b p0 q0 neg]")
}

// testNotPausedGuard: an update guarded by NotPaused applies only while
// neither the task's workflow nor all claiming is paused, on every update
// path (Apply fails as a whole with ErrGuardFailed when it does not hold).
func testNotPausedGuard(t *testing.T, h Harness) {
	eachPath(t, h, func(t *testing.T, e *env, p updatePath) {
		rows := e.inserted(task("wf1", "a"), task("wf2", "b"))
		a, b := rows[0], rows[1]
		g := tgdriver.TaskGuard{States: []string{"pending"}, NotPaused: true}
		try := func(when string, r tgdriver.TaskRow, want bool) {
			t.Helper()
			var got []tgdriver.Updated
			err := e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
				var err error
				got, err = p.run(e, tx, []tgdriver.TaskUpdate{ref(p, r, true, tgdriver.TaskSet{StatusMessage: tgdriver.Val(when), UpdatedAtMS: 5}, g)})
				return err
			})
			if p.name == "Apply" && !want {
				if !errors.Is(err, tgdriver.ErrGuardFailed) {
					t.Errorf("%s: Apply of %s: %v, want ErrGuardFailed", when, r.NodeID, err)
				}
			} else if err != nil {
				t.Fatalf("%s: %s: %v", when, r.NodeID, err)
			} else if got[0].OK != want {
				t.Errorf("%s: update of %s ok %v, want %v", when, r.NodeID, got[0].OK, want)
			}
			if msg := e.task(r.Seq).StatusMessage; (msg == when) != want {
				t.Errorf("%s: %s's status message is %q after an update that should apply: %v", when, r.NodeID, msg, want)
			}
		}
		e.setPause(pause("wf1", 10))
		try("wf1 paused", a, false)
		try("wf1 paused", b, true)
		e.setPause(pause("", 11))
		try("all paused", b, false)
		e.clearPause("")
		e.clearPause("wf1")
		try("resumed", a, true)
	})
}

// testPrunePause: pruning a paused workflow removes its pause (the row
// goes with the workflow); other pauses stay.
func testPrunePause(t *testing.T, h Harness) {
	e := newEnv(t, h)
	for _, wf := range []string{"gone", "kept"} {
		e.write(func(tx tgdriver.Tx) error { _, err := tx.EnsureWorkflow(e.ctx, wf, 500); return err })
		r := task(wf, "a")
		r.State = "completed"
		e.insert(r)
		e.setPause(pause(wf, 600))
	}
	e.write(func(tx tgdriver.Tx) error {
		if _, ok, err := tx.PruneWorkflow(e.ctx, "gone", 4000, 9000); err != nil || !ok {
			return fmt.Errorf("PruneWorkflow(gone) = %v, %v; want ok", ok, err)
		}
		return nil
	})
	if got, err := e.d.Reads().Pauses(e.ctx, "", 10); err != nil || !samePauses(got, []tgdriver.PauseRow{pause("kept", 600)}) {
		t.Errorf("Pauses after the prune of a paused workflow = %+v, %v; want only kept's", got, err)
	}
}

// testLeaseLosses: a new task has lost no lease; LeaseLosses sets the
// count exactly (zero included) on every update path, an update that
// leaves it unset keeps it, every read returns it, and NULL is refused
// (ErrBadUpdate).
func testLeaseLosses(t *testing.T, h Harness) {
	eachPath(t, h, func(t *testing.T, e *env, p updatePath) {
		r := e.inserted(fullTask("wf", "a"))[0]
		if got := e.task(r.Seq).LeaseLosses; got != 0 {
			t.Fatalf("a new task has LeaseLosses %d, want 0", got)
		}
		for _, c := range []struct {
			set  tgdriver.TaskSet
			want int
		}{
			{tgdriver.TaskSet{LeaseLosses: tgdriver.Val(2), UpdatedAtMS: 5}, 2},
			{tgdriver.TaskSet{StatusMessage: tgdriver.Val("unset"), UpdatedAtMS: 6}, 2},
			{tgdriver.TaskSet{LeaseLosses: tgdriver.Val(3), AddAttempt: true, UpdatedAtMS: 7}, 3},
			{tgdriver.TaskSet{LeaseLosses: tgdriver.Val(0), UpdatedAtMS: 8}, 0},
		} {
			got := e.apply(p, []tgdriver.TaskUpdate{ref(p, r, true, c.set, tgdriver.TaskGuard{})})
			if !got[0].OK || got[0].Row.LeaseLosses != c.want {
				t.Errorf("%+v: the row returned has LeaseLosses %d (ok %v), want %d", c.set, got[0].Row.LeaseLosses, got[0].OK, c.want)
			}
			read := e.task(r.Seq)
			if read.LeaseLosses != c.want {
				t.Errorf("%+v: read back LeaseLosses %d, want %d", c.set, read.LeaseLosses, c.want)
			}
			if d := diffTask(got[0].Row, read); got[0].OK && d != "" {
				t.Errorf("%+v: the row returned and the row read back differ: %s", c.set, d)
			}
			if n := e.count(`SELECT COUNT(*) FROM tasks WHERE seq = ? AND lease_losses = ?`, r.Seq, c.want); n != 1 {
				t.Errorf("%+v: the stored lease_losses is not %d", c.set, c.want)
			}
		}
		err := e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
			_, err := p.run(e, tx, []tgdriver.TaskUpdate{ref(p, r, false, tgdriver.TaskSet{LeaseLosses: tgdriver.Null[int](), UpdatedAtMS: 9}, tgdriver.TaskGuard{})})
			return err
		})
		if !errors.Is(err, tgdriver.ErrBadUpdate) {
			t.Errorf("LeaseLosses NULL: %v, want ErrBadUpdate", err)
		}
	})
}
