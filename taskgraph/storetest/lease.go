package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest/stenv"
)

// leaseTimeTests: lease time runs only while a server's store (Options.Sweep)
// runs; pauses, clock steps and downtime cost no lease.
var leaseTimeTests = []test{
	{"StopsDuringAPause", testLeaseTimeStopsDuringAPause},
	{"IgnoresAForwardClockStep", testLeaseTimeIgnoresAForwardClockStep},
	{"BackwardClockStep", testLeaseTimeBackwardClockStep},
	{"StopsWhileTheServerIsDown", testLeaseTimeStopsWhileTheServerIsDown},
	{"ShiftAppliedOnceAcrossServers", testLeaseTimeShiftAppliedOnceAcrossServers},
}

// serverOptions are the options of the server's store on clock, which is
// both its wall clock and its monotonic source.
func serverOptions(clock *lease.ManualClock) tg.Options {
	return tg.Options{Clock: clock, Monotonic: clock, Sweep: true, ClockCheckInterval: 500 * time.Millisecond}
}

// newServerEnv opens the server's store on a fresh database.
func newServerEnv(t *testing.T, h Harness) *env {
	t.Helper()
	clock := lease.NewManualClock(t0)
	return setupWith(t, h, serverOptions(clock))
}

// run lets d of server time pass in small steps, with a write (which observes
// the clocks) after each, as a running server would.
func (e *env) run(t *testing.T, d time.Duration) {
	t.Helper()
	for step := 250 * time.Millisecond; d > 0; d -= step {
		e.Clock.Advance(min(step, d))
		e.sync(t)
	}
}

// sync runs a write: it applies any observed shift and expires lapsed leases.
func (e *env) sync(t *testing.T) {
	t.Helper()
	if _, err := e.S.ExpireLeases(e.Ctx); err != nil {
		t.Fatalf("ExpireLeases: %v", err)
	}
}

func (e *env) expiry(t *testing.T, id string) time.Time {
	t.Helper()
	return e.WantState(t, id, tg.StateClaimed).LeaseExpiresAt
}

// reclaimedWithin checks that a claim whose worker died is still live just
// before left has passed and lapses by left.
func (e *env) reclaimedWithin(t *testing.T, id string, left time.Duration) {
	t.Helper()
	e.run(t, left-250*time.Millisecond)
	e.WantState(t, id, tg.StateClaimed)
	e.run(t, 250*time.Millisecond)
	if tk := e.Get(t, id); tk.State == tg.StateClaimed {
		t.Fatalf("the dead worker's claim on %s is still live %s after the server came back (lease expires %v, now %v)", id, left, tk.LeaseExpiresAt, e.Clock.Now())
	}
}

// wantShiftEvent checks that task id's history records its lease moved by
// shift to exp.
func (e *env) wantShiftEvent(t *testing.T, id string, exp time.Time, shift time.Duration) {
	t.Helper()
	ev := e.lastEvent(t, id, tg.EventLeaseShift)
	var d struct {
		Exp   int64 `json:"lease_expires_at_ms"`
		Shift int64 `json:"shift_ms"`
	}
	if err := json.Unmarshal(ev.Detail, &d); err != nil || d.Exp != exp.UnixMilli() || d.Shift != shift.Milliseconds() {
		t.Fatalf("lease_shift event %s, want lease_expires_at_ms %d and shift_ms %d", ev.Detail, exp.UnixMilli(), shift.Milliseconds())
	}
}

// A pause of the process (SIGSTOP, a VM freeze: wall and monotonic time both
// jump with no observation between) longer than the lease gives live leases
// back the time: a queued heartbeat of a healthy worker succeeds, and a dead
// worker's claim lapses within one lease after the server is back.
func testLeaseTimeStopsDuringAPause(t *testing.T, h Harness) {
	e := newServerEnv(t, h)
	live := e.Create(t, "wf", "live")
	dead := e.Create(t, "wf", "dead")
	cl := e.Claim(t, "w1", live.TaskID, 5*time.Second)
	e.Claim(t, "w2", dead.TaskID, 5*time.Second)
	e.run(t, 2*time.Second) // 3 s left on both
	e.Clock.Advance(8 * time.Second)
	arrived := e.Clock.Now()
	if _, err := e.S.Heartbeat(tg.WithArrival(e.Ctx, arrived), holder(cl), 5*time.Second); err != nil {
		t.Fatalf("the heartbeat that arrived after an 8 s pause was rejected: %v", err)
	}
	if got, want := e.expiry(t, dead.TaskID), arrived.Add(3*time.Second); !got.Equal(want) {
		t.Fatalf("after the pause the dead worker's lease expires at %v, want %v (the 3 s it had left)", got, want)
	}
	e.wantShiftEvent(t, dead.TaskID, arrived.Add(3*time.Second), 8*time.Second)
	e.reclaimedWithin(t, dead.TaskID, 3*time.Second)
	if _, err := e.S.Complete(e.Ctx, holder(cl), json.RawMessage(`"ok"`)); err != nil {
		t.Fatalf("complete after the pause: %v", err)
	}
	if tk := e.WantState(t, live.TaskID, tg.StateCompleted); tk.Attempts != 1 {
		t.Fatalf("attempts = %d, want 1", tk.Attempts)
	}
}

// A forward step of the wall clock costs no lease: a task on its last attempt
// does not fail and nothing cascades.
func testLeaseTimeIgnoresAForwardClockStep(t *testing.T, h Harness) {
	e := newServerEnv(t, h)
	ts, err := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "last", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	after := e.Create(t, "wf", "after", "last")
	c := e.Claim(t, "w", ts.Task.TaskID, 5*time.Second)
	e.run(t, time.Second)
	e.Clock.Step(20 * time.Minute)
	e.sync(t)
	if got, want := e.expiry(t, ts.Task.TaskID), e.Clock.Now().Add(4*time.Second); !got.Equal(want) {
		t.Fatalf("after a +20 min step the lease expires at %v, want %v", got, want)
	}
	if _, err := e.S.Heartbeat(e.Ctx, holder(c), 0); err != nil {
		t.Fatalf("heartbeat after a +20 min step: %v", err)
	}
	e.WantState(t, after.TaskID, tg.StateBlocked)
}

// A backward step never leaves a lease longer than its duration: a dead
// worker's claim lapses within one lease, not after the step's size.
func testLeaseTimeBackwardClockStep(t *testing.T, h Harness) {
	e := newServerEnv(t, h)
	dead := e.Create(t, "wf", "dead")
	live := e.Create(t, "wf", "live")
	e.Claim(t, "w1", dead.TaskID, 5*time.Second)
	cl := e.Claim(t, "w2", live.TaskID, 5*time.Second)
	e.run(t, time.Second)
	e.Clock.Step(-2 * time.Hour)
	e.sync(t)
	// It had 4 s left. Replicas sharing a clock measure the step from the
	// recorded alive time, which a touch skipped while another transaction
	// of the server held the alive row can leave a little older, so the
	// lease may keep a little more: never less than it had left, and never
	// more than its duration.
	now := e.Clock.Now()
	got := e.expiry(t, dead.TaskID)
	if got.Before(now.Add(4*time.Second)) || got.After(now.Add(5*time.Second)) {
		t.Fatalf("after a -2 h step the lease expires at %v, want between %v (the 4 s it had left) and %v (its duration)", got, now.Add(4*time.Second), now.Add(5*time.Second))
	}
	if _, err := e.S.Heartbeat(e.Ctx, holder(cl), 5*time.Second); err != nil {
		t.Fatalf("heartbeat after a -2 h step: %v", err)
	}
	e.reclaimedWithin(t, dead.TaskID, got.Sub(now))

	// The clamp: a lease stored far beyond its duration (as a step between a
	// claim and the server noticing it could leave) is cut to now + duration
	// at the next shift.
	far := e.Create(t, "wf", "far")
	e.Claim(t, "w3", far.TaskID, 5*time.Second)
	e.DB.Exec(t, `UPDATE tasks SET lease_expires_at_ms = ? WHERE task_id = ?`, e.Clock.Now().Add(2*time.Hour).UnixMilli(), far.TaskID)
	e.Clock.Step(-3 * time.Second)
	e.sync(t)
	if got, want := e.expiry(t, far.TaskID), e.Clock.Now().Add(5*time.Second); !got.Equal(want) {
		t.Fatalf("a lease 2 h out was left at %v after a shift, want %v (now + its duration)", got, want)
	}
}

// A restart whose downtime is longer than the lease keeps the remaining lease
// of every live claim: the same claim's heartbeat and complete succeed, the
// task is completed on its first attempt, and a dead worker's claim lapses
// within what it had left. A one-shot (operator) store opened meanwhile, and
// writing, does not count as the server being alive.
func testLeaseTimeStopsWhileTheServerIsDown(t *testing.T, h Harness) {
	e := newServerEnv(t, h)
	clock := e.Clock
	live := e.Create(t, "wf", "live")
	dead := e.Create(t, "wf", "dead")
	cl := e.Claim(t, "w1", live.TaskID, 5*time.Second)
	e.Claim(t, "w2", dead.TaskID, 5*time.Second)
	e.run(t, 2*time.Second)
	if err := e.S.Close(); err != nil {
		t.Fatal(err)
	}

	clock.Advance(time.Hour) // the deploy
	op := e.DB.Open(t, tg.Options{Clock: clock})
	if _, err := op.CreateTask(e.Ctx, "ops", tg.NodeSpec{NodeID: "note"}); err != nil {
		t.Fatal(err)
	}
	if err := op.Close(); err != nil {
		t.Fatal(err)
	}

	e.S = e.DB.Open(t, serverOptions(clock))
	if got, want := e.expiry(t, dead.TaskID), clock.Now().Add(3*time.Second); !got.Equal(want) {
		t.Fatalf("after an hour down the lease expires at %v, want %v (the 3 s left at the stop)", got, want)
	}
	e.wantShiftEvent(t, dead.TaskID, clock.Now().Add(3*time.Second), time.Hour)
	e.Verify(t)
	if _, err := e.S.Heartbeat(e.Ctx, holder(cl), 5*time.Second); err != nil {
		t.Fatalf("heartbeat of the same claim after the restart: %v", err)
	}
	e.reclaimedWithin(t, dead.TaskID, 3*time.Second)
	if _, err := e.S.Complete(e.Ctx, holder(cl), json.RawMessage(`1`)); err != nil {
		t.Fatalf("complete of the same claim after the restart: %v", err)
	}
	if tk := e.WantState(t, live.TaskID, tg.StateCompleted); tk.Attempts != 1 || tk.Generation != 1 {
		t.Fatalf("attempts %d generation %d, want 1 and 1", tk.Attempts, tk.Generation)
	}
}

// Two servers on one database see the same clock step: the leases move once,
// not once per server. A server paused while the other kept serving moves
// nothing.
func testLeaseTimeShiftAppliedOnceAcrossServers(t *testing.T, h Harness) {
	a := newServerEnv(t, h)
	clock := a.Clock
	b := &env{&stenv.Env{S: a.DB.Open(t, serverOptions(clock)), DB: a.DB, Clock: clock, Ctx: a.Ctx}}
	task := a.Create(t, "wf", "n")
	c := a.Claim(t, "w", task.TaskID, 10*time.Second)
	both := func(d time.Duration) {
		for step := 250 * time.Millisecond; d > 0; d -= step {
			clock.Advance(min(step, d))
			a.sync(t)
			b.sync(t)
		}
	}
	both(time.Second) // 9 s left
	for _, step := range []time.Duration{-2 * time.Hour, 20 * time.Minute} {
		clock.Step(step)
		a.sync(t)
		b.sync(t)
		// Moved once: a second backward move would leave the lease
		// expired, a second forward one would clamp it to its duration.
		// A step is measured from the recorded alive time, which a touch
		// one server skipped while the other's transaction held the alive
		// row can leave a little older: the lease may keep a little more
		// than the 9 s it had, never its whole duration.
		got, want := a.expiry(t, task.TaskID), clock.Now().Add(9*time.Second)
		if got.Before(want) || !got.Before(clock.Now().Add(10*time.Second)) {
			t.Fatalf("after a %v step seen by two servers the lease expires at %v, want %v (moved once)", step, got, want)
		}
	}
	// b is paused for 3 s while a serves.
	before := a.expiry(t, task.TaskID)
	a.run(t, 3*time.Second)
	b.sync(t)
	if got := a.expiry(t, task.TaskID); !got.Equal(before) {
		t.Fatalf("a server paused while another served moved the lease from %v to %v", before, got)
	}
	if _, err := b.S.Heartbeat(b.Ctx, holder(c), 0); err != nil {
		t.Fatalf("heartbeat through the other server: %v", err)
	}
}
