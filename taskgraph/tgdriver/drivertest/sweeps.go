package drivertest

import (
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// sweepTests: the lookups of the sweeper and the store's timers, and the
// lease shift.
var sweepTests = []test{
	{"ExpiredLeasesAndNextLeaseExpiry", testExpiredLeases},
	{"ShiftLeases", testShiftLeases},
	{"DueTasksAndNextDue", testDueTasks},
	{"DueGatesAndNextGateDue", testDueGates},
}

// pruneTests: PruneCandidates and PruneWorkflow's guard.
var pruneTests = []test{
	{"CandidatesAndGuard", testPrune},
}

// aliveTests: the servers' shared alive time.
var aliveTests = []test{
	{"ReadAndTouch", testAlive},
	{"TryTouchRecordsTheFirst", testTryTouchFirst},
}

// timedLookup is one of the store's timed lookups: due lists the tasks
// due at atMS, earliest first, up to limit; next reads the earliest due
// time.
type timedLookup struct {
	name string
	due  func(e *env, tx tgdriver.Tx, atMS int64, limit int) ([]tgdriver.TaskRef, error)
	next func(e *env, r tgdriver.Reads) (int64, bool, error)
}

var (
	expiredLeases = timedLookup{"ExpiredLeases",
		func(e *env, tx tgdriver.Tx, at int64, n int) ([]tgdriver.TaskRef, error) {
			return tx.ExpiredLeases(e.ctx, at, n)
		},
		func(e *env, r tgdriver.Reads) (int64, bool, error) { return r.NextLeaseExpiry(e.ctx) }}
	dueTasks = timedLookup{"DueTasks",
		func(e *env, tx tgdriver.Tx, at int64, n int) ([]tgdriver.TaskRef, error) {
			return tx.DueTasks(e.ctx, at, n)
		},
		func(e *env, r tgdriver.Reads) (int64, bool, error) { return r.NextDue(e.ctx) }}
	dueGates = timedLookup{"DueGates",
		func(e *env, tx tgdriver.Tx, at int64, n int) ([]tgdriver.TaskRef, error) {
			return tx.DueGates(e.ctx, at, n)
		},
		func(e *env, r tgdriver.Reads) (int64, bool, error) { return r.NextGateDue(e.ctx) }}
)

// wantNone checks that l finds nothing due, however late, and no next time.
func (e *env) wantNone(l timedLookup) {
	e.t.Helper()
	e.write(func(tx tgdriver.Tx) error {
		if got, err := l.due(e, tx, 1<<40, 10); err != nil || len(got) != 0 {
			e.t.Errorf("%s with nothing of its kind due = %+v, %v; want none", l.name, got, err)
		}
		return nil
	})
	e.eachReads(func(r tgdriver.Reads) error {
		if ms, ok, err := l.next(e, r); ok || err != nil {
			return fmt.Errorf("next of %s with nothing due = %d %v %v", l.name, ms, ok, err)
		}
		return nil
	})
}

// wantTimed checks l over tasks of its kind due at 300, 100 and 200 ms
// (ref(0), ref(1), ref(2)) and later ones (due at 400 ms or beyond, in
// order): only those due by atMS, earliest first, up to limit; next 100.
func (e *env) wantTimed(l timedLookup, ref func(int) tgdriver.TaskRef, later ...tgdriver.TaskRef) {
	e.t.Helper()
	e.write(func(tx tgdriver.Tx) error {
		for _, c := range []struct {
			at    int64
			limit int
			want  []tgdriver.TaskRef
		}{
			{250, 10, []tgdriver.TaskRef{ref(1), ref(2)}},
			{250, 1, []tgdriver.TaskRef{ref(1)}},
			{200, 10, []tgdriver.TaskRef{ref(1), ref(2)}},
			{99, 10, nil},
			{1 << 40, 10, append([]tgdriver.TaskRef{ref(1), ref(2), ref(0)}, later...)},
		} {
			got, err := l.due(e, tx, c.at, c.limit)
			if err != nil || !eq(got, c.want) {
				e.t.Errorf("%s(%d, %d) = %+v, %v; want %+v", l.name, c.at, c.limit, got, err, c.want)
			}
		}
		return nil
	})
	e.eachReads(func(r tgdriver.Reads) error {
		if ms, ok, err := l.next(e, r); ms != 100 || !ok || err != nil {
			return fmt.Errorf("next of %s = %d %v %v, want 100", l.name, ms, ok, err)
		}
		return nil
	})
}

// testExpiredLeases: ExpiredLeases returns the claimed tasks whose lease
// had lapsed at atMS (expiry <= atMS), earliest expiry first, up to limit;
// NextLeaseExpiry the earliest expiry of a claimed task.
func testExpiredLeases(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.wantNone(expiredLeases)
	var rows []tgdriver.TaskRow
	for i, lease := range []int64{300, 100, 200, 400, 0} {
		r := task("wf", fmt.Sprintf("c%d", i))
		r.State, r.LeaseExpiresAtMS = "claimed", lease
		rows = append(rows, r)
	}
	lapsedPending := task("wf2", "p")
	lapsedPending.LeaseExpiresAtMS = 50 // not claimed: never an expired lease
	rows = append(rows, lapsedPending)
	rows = e.inserted(rows...)
	ref := func(i int) tgdriver.TaskRef {
		return tgdriver.TaskRef{Seq: rows[i].Seq, WorkflowID: "wf", ExpiresAtMS: rows[i].LeaseExpiresAtMS}
	}
	e.wantTimed(expiredLeases, ref, ref(3))
}

// testShiftLeases: every live lease (claimed, with an expiry) moves by
// shiftMS, to at most nowMS plus its own duration (defaultLeaseMS when it
// has none); nothing else moves.
func testShiftLeases(t *testing.T, h Harness) {
	e := newEnv(t, h)
	claimed := func(node string, lease, leaseMS int64) tgdriver.TaskRow {
		r := task("wf", node)
		r.State, r.LeaseExpiresAtMS, r.LeaseMS = "claimed", lease, leaseMS
		return r
	}
	pending := task("wf", "p")
	pending.LeaseExpiresAtMS = 7000
	rows := e.inserted(claimed("a", 10000, 5000), claimed("b", 12000, 0), claimed("c", 1000, 500), claimed("nolease", 0, 400), pending)
	shift := func(shiftMS, nowMS int64, want map[int64]int64) {
		t.Helper()
		var got []tgdriver.TaskRef
		e.write(func(tx tgdriver.Tx) error {
			var err error
			got, err = tx.ShiftLeases(e.ctx, shiftMS, nowMS, 1000)
			return err
		})
		m := map[int64]int64{}
		for _, r := range got {
			if r.WorkflowID != "wf" {
				t.Errorf("ShiftLeases ref %+v", r)
			}
			m[r.Seq] = r.ExpiresAtMS
		}
		if !maps.Equal(m, want) {
			t.Errorf("ShiftLeases(%d, %d, 1000) moved %v, want %v", shiftMS, nowMS, m, want)
		}
		for seq, ms := range want {
			if got := e.task(seq).LeaseExpiresAtMS; got != ms {
				t.Errorf("task %d: lease %d, want %d", seq, got, ms)
			}
		}
	}
	a, b, c := rows[0].Seq, rows[1].Seq, rows[2].Seq
	// a: min(70000, 20000+5000); b: min(72000, 20000+1000, the default);
	// c: min(61000, 20000+500).
	shift(60000, 20000, map[int64]int64{a: 25000, b: 21000, c: 20500})
	shift(-5000, 20000, map[int64]int64{a: 20000, b: 16000, c: 15500})
	if got := e.raw(`SELECT lease_expires_at_ms FROM tasks WHERE seq = ?`, rows[3].Seq); got[0] != "NULL" {
		t.Errorf("a claim without a lease got lease %s", got[0])
	}
	if got := e.task(rows[4].Seq); got.LeaseExpiresAtMS != 7000 {
		t.Errorf("a pending task's lease moved to %d", got.LeaseExpiresAtMS)
	}
}

// testDueTasks: DueTasks returns the pending tasks not yet promoted whose
// due time had come (0 < due <= atMS), earliest first, up to limit;
// NextDue the earliest due time of such a task.
func testDueTasks(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.wantNone(dueTasks)
	var rows []tgdriver.TaskRow
	for i, due := range []int64{300, 100, 200, 0} {
		r := task("wf", fmt.Sprintf("d%d", i))
		r.DueAtMS = due
		rows = append(rows, r)
	}
	notPending := task("wf2", "c")
	notPending.State, notPending.DueAtMS = "claimed", 50
	rows = e.inserted(append(rows, notPending)...)
	e.wantTimed(dueTasks, func(i int) tgdriver.TaskRef { return tgdriver.TaskRef{Seq: rows[i].Seq, WorkflowID: "wf"} })
}

// testDueGates: DueGates returns the gates awaiting approval (kind gate,
// blocked) whose decision time had come (0 < due <= atMS), earliest
// first, up to limit, and nothing else: not an ordinary blocked task with
// a due time, not a gate decided or without a timeout; NextGateDue the
// earliest such time. DueTasks and NextDue never see a gate.
func testDueGates(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.wantNone(dueGates)
	var rows []tgdriver.TaskRow
	for i, due := range []int64{300, 100, 200, 0} {
		r := task("wf", fmt.Sprintf("g%d", i))
		r.Kind, r.State, r.DueAtMS, r.GateTimeoutMS, r.GateOnTimeout = tgdriver.KindGate, "blocked", due, 5000, "approve"
		rows = append(rows, r)
	}
	decided := task("wf2", "done")
	decided.Kind, decided.State, decided.DueAtMS = tgdriver.KindGate, "completed", 50
	plain := task("wf2", "plain")
	plain.State, plain.DueAtMS = "blocked", 60
	rows = e.inserted(append(rows, decided, plain)...)
	e.wantTimed(dueGates, func(i int) tgdriver.TaskRef { return tgdriver.TaskRef{Seq: rows[i].Seq, WorkflowID: "wf"} })
	e.wantNone(dueTasks) // only gates and blocked tasks are due: DueTasks and NextDue never see them
}

// testPrune: PruneCandidates lists the finished workflows last changed
// before the cutoff, oldest first; PruneWorkflow removes one with its
// tasks, edges and events and records its head, only if it is still
// finished, unchanged since before the cutoff and has nothing journaled.
func testPrune(t *testing.T, h Harness) {
	e := newEnv(t, h)
	done := func(wf, node, state string) tgdriver.TaskRow {
		r := task(wf, node)
		r.State = state
		return r
	}
	mk := func(wf string, at int64) {
		e.write(func(tx tgdriver.Tx) error { _, err := tx.EnsureWorkflow(e.ctx, wf, at); return err })
	}
	mk("older", 500)
	mk("empty", 800)
	mk("journaled", 1000)
	mk("old", 1200)
	mk("busy", 900)
	mk("new", 5000)
	rows := e.inserted(done("older", "a", "completed"), done("old", "a", "completed"), done("old", "b", "failed"),
		done("old", "c", "cancelled"), done("busy", "a", "completed"), task("busy", "b"), done("new", "a", "completed"),
		done("journaled", "a", "completed"))
	e.edge(rows[1].Seq, rows[2].Seq)
	oldEvents := chain("old", 1, 2) // at 3001, 3002: old last changed at 3002
	e.write(func(tx tgdriver.Tx) error { return tx.AppendEvents(e.ctx, oldEvents) })
	e.write(func(tx tgdriver.Tx) error {
		return tx.JournalEvents(e.ctx, []tgdriver.EventRow{ev("journaled", 0, "", ""), ev("busy", 0, "", "")})
	})
	e.write(func(tx tgdriver.Tx) error {
		for _, c := range []struct {
			before int64
			limit  int
			want   []string
		}{
			{4000, 10, []string{"older", "empty", "journaled", "old"}},
			{4000, 2, []string{"older", "empty"}},
			{3002, 10, []string{"older", "empty", "journaled"}},
			{500, 10, nil},
		} {
			if got, err := tx.PruneCandidates(e.ctx, c.before, c.limit); err != nil || !eq(got, c.want) {
				t.Errorf("PruneCandidates(%d, %d) = %v, %v; want %v", c.before, c.limit, got, err, c.want)
			}
		}
		for _, c := range []struct{ wf, why string }{
			{"old", "changed at the cutoff"}, {"busy", "unfinished"}, {"journaled", "journaled events"}, {"none", "missing"},
		} {
			if p, ok, err := tx.PruneWorkflow(e.ctx, c.wf, 3002, 9000); ok || err != nil {
				t.Errorf("PruneWorkflow(%s, 3002), %s: %+v %v %v; want false", c.wf, c.why, p, ok, err)
			}
		}
		return nil
	})
	var p tgdriver.PrunedRow
	var ok bool
	e.write(func(tx tgdriver.Tx) error {
		var err error
		p, ok, err = tx.PruneWorkflow(e.ctx, "old", 4000, 9000)
		return err
	})
	if want := (tgdriver.PrunedRow{Tasks: 3, Events: 2, HeadHash: "old-2"}); !ok || p != want {
		t.Fatalf("PruneWorkflow(old) = %+v %v, want %+v", p, ok, want)
	}
	for q, want := range map[string]int{
		`SELECT COUNT(*) FROM tasks WHERE workflow_id = 'old'`:     0,
		`SELECT COUNT(*) FROM edges`:                               0,
		`SELECT COUNT(*) FROM events WHERE workflow_id = 'old'`:    0,
		`SELECT COUNT(*) FROM workflows WHERE workflow_id = 'old'`: 0,
		`SELECT COUNT(*) FROM pruned_workflows WHERE workflow_id = 'old' AND pruned_at_ms = 9000 AND task_count = 3
			AND event_count = 2 AND head_hash = 'old-2'`: 1,
		`SELECT COUNT(*) FROM tasks`:         5,
		`SELECT COUNT(*) FROM event_journal`: 2,
	} {
		if n := e.count(q); n != want {
			t.Errorf("after the prune, %s: %d, want %d", q, n, want)
		}
	}
	// A workflow that changed, or got an unfinished task, after it was a
	// candidate is no longer pruned; a pruned one is gone.
	e.write(func(tx tgdriver.Tx) error {
		late := ev("older", 1, "", "older-1")
		late.AtMS = 4500
		if err := tx.AppendEvents(e.ctx, []tgdriver.EventRow{late}); err != nil {
			return err
		}
		if _, err := InsertTask(e.ctx, tx, task("empty", "new")); err != nil {
			return err
		}
		for _, wf := range []string{"older", "empty", "old"} {
			if p, ok, err := tx.PruneWorkflow(e.ctx, wf, 4000, 9500); ok || err != nil {
				t.Errorf("PruneWorkflow(%s, 4000) after it changed: %+v %v %v; want false", wf, p, ok, err)
			}
		}
		return nil
	})
	e.eachReads(func(r tgdriver.Reads) error {
		if _, err := r.Workflow(e.ctx, "old"); !errors.Is(err, tgdriver.ErrNoRows) {
			return fmt.Errorf("Workflow(old) after the prune: %v, want ErrNoRows", err)
		}
		if _, err := r.TaskByID(e.ctx, rows[1].TaskID); !errors.Is(err, tgdriver.ErrNoRows) {
			return fmt.Errorf("a pruned task: %v, want ErrNoRows", err)
		}
		if wf, ok, err := r.OrphanEventWorkflow(e.ctx); ok || err != nil {
			return fmt.Errorf("the pruned workflow left orphan events (%q, %v)", wf, err)
		}
		if wf, id, ok, err := r.UnheldEvent(e.ctx); ok || err != nil {
			return fmt.Errorf("the prune left an event body no chain holds (%q %d, %v)", wf, id, err)
		}
		return nil
	})
}

// testAlive: ReadAlive, TouchAlive (sets the time given, even an earlier
// one) and TryTouchAlive (only forward, by less than its window).
func testAlive(t *testing.T, h Harness) {
	e := newEnv(t, h)
	read := func() (int64, bool) {
		t.Helper()
		var ms int64
		var ok bool
		e.write(func(tx tgdriver.Tx) error {
			var err error
			ms, ok, err = tx.ReadAlive(e.ctx)
			return err
		})
		return ms, ok
	}
	if ms, ok := read(); ok {
		t.Fatalf("ReadAlive on a new database = %d, want none recorded", ms)
	}
	for _, ms := range []int64{5000, 3000} {
		e.write(func(tx tgdriver.Tx) error { return tx.TouchAlive(e.ctx, ms) })
		if got, ok := read(); !ok || got != ms {
			t.Fatalf("ReadAlive after TouchAlive(%d) = %d %v", ms, got, ok)
		}
	}
	// From 3000: each touch in turn, what it reports and the alive time
	// after it.
	for _, c := range []struct {
		ms, within int64
		touched    bool
		alive      int64
	}{
		{7000, 10000, true, 7000},  // forward, within the window
		{6000, 10000, false, 7000}, // never back
		{7000, 10000, false, 7000}, // nor the same time again
		{9000, 2000, false, 7000},  // nor forward by the window or more
		{8999, 2000, true, 8999},   // just within it
	} {
		var touched bool
		e.write(func(tx tgdriver.Tx) error {
			var err error
			touched, err = tx.TryTouchAlive(e.ctx, c.ms, c.within)
			return err
		})
		if got, ok := read(); touched != c.touched || !ok || got != c.alive {
			t.Fatalf("TryTouchAlive(%d, within %d) with nothing holding the alive time: touched %v, alive %d %v; want touched %v, alive %d",
				c.ms, c.within, touched, got, ok, c.touched, c.alive)
		}
	}
}

// testTryTouchFirst: TryTouchAlive is TouchAlive when no other transaction
// holds the alive time, also before any was recorded.
func testTryTouchFirst(t *testing.T, h Harness) {
	e := newEnv(t, h)
	var touched bool
	e.write(func(tx tgdriver.Tx) error {
		var err error
		touched, err = tx.TryTouchAlive(e.ctx, 7000, 2000)
		return err
	})
	var ms int64
	var ok bool
	e.write(func(tx tgdriver.Tx) error {
		var err error
		ms, ok, err = tx.ReadAlive(e.ctx)
		return err
	})
	if !touched || !ok || ms != 7000 {
		t.Fatalf("TryTouchAlive(7000) on a new database: touched %v, then alive %d (recorded %v); want it recorded as TouchAlive would", touched, ms, ok)
	}
}
