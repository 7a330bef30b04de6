package keys

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// wantAllButKeptParked fails t unless every ready task of key past the
// first kept of its (workflow, requires) group is parked: what a key
// parks when it closes (migration 0025), with nothing for scans to walk
// past those.
func (e *env) wantAllButKeptParked(t *testing.T, key string, kept int, at string) {
	t.Helper()
	want := 0
	for _, r := range e.DB.Query(t, `SELECT COUNT(*) FROM tasks WHERE concurrency_key = ? AND state = 'pending' AND due_at_ms = 0
		GROUP BY workflow_id, requires`, key) {
		n, err := strconv.Atoi(r[0])
		if err != nil {
			t.Fatal(err)
		}
		want += max(0, n-kept)
	}
	if got := e.wantParkingRule(t, key, at); got != want {
		t.Fatalf("%s: %d ready tasks of key %s parked, want %d (all but the first %d of each group)", at, got, key, want, kept)
	}
}

// The queued tasks of a key held back by its rate are parked too
// (0025), all but the first Rate of each group, since no window allows
// more claims than that, and a rate opens by time alone. While the rate
// holds, through its opening by the clock, releases, cancels of queued
// heads, creates, and an operator's raise and lift of the rate: every
// claim-next takes exactly the task it would take with nothing parked,
// the key never grants more than its rate in a window, claimers racing
// at the window's opening each take a task, and every task is claimed.
func testKeyRateParkedTasksLeaveTheScan(t *testing.T, h Harness) {
	e := setup(t, h)
	const rate = 3
	lim := &tg.KeyLimit{Rate: rate, RateInterval: time.Minute}
	create := func(wf, node string, prio int, req ...string) {
		t.Helper()
		e.createKeyedAt(t, wf, node, "r", lim, prio, req...)
	}
	for i := range 20 {
		create("a", "r"+strconv.Itoa(i), 5)
	}
	for i := range 8 {
		create("b", "r"+strconv.Itoa(i), 5)
	}
	for i := range 4 {
		create("a", "g"+strconv.Itoa(i), 5, "gpu")
	}
	for i := range 10 {
		e.Create(t, "a", "free"+strconv.Itoa(i))
	}
	if n := e.wantParkingRule(t, "r", "created"); n != 0 {
		t.Fatalf("an open key parks %d tasks", n)
	}
	claimedOnce := map[string]bool{}
	// window claims with every kind of claim-next until none takes a task
	// of r (claimRounds), completes each, and returns how many of r's it
	// took.
	window := func(at string) int {
		t.Helper()
		took := 0
		e.claimRounds(t, claimedOnce, at, func(c tg.Claimed) bool {
			if _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(`1`)); err != nil {
				t.Fatal(err)
			}
			// The row of a key without a limit goes with its last task.
			if _, ok, err := e.S.KeyInfo(e.Ctx, "r"); err != nil {
				t.Fatal(err)
			} else if ok {
				e.wantParkingRule(t, "r", at)
			}
			if c.Task.ConcurrencyKey != "r" {
				return false
			}
			took++
			return true
		})
		if lim != nil && took > lim.Rate {
			t.Fatalf("%s: key r granted %d claims in one window, its rate is %d", at, took, lim.Rate)
		}
		return took
	}
	if n := window("first window"); n != rate {
		t.Fatalf("first window: %d claims of r, want %d", n, rate)
	}
	e.wantAllButKeptParked(t, "r", rate, "held by its rate")
	c, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", WorkflowID: "b", Lease: time.Minute})
	if err != nil || ok || c.NextClaimableAt.IsZero() {
		t.Fatalf("claim-next of b while r's rate holds: ok %v, next claimable at %v, err %v; want nothing, with when", ok, c.NextClaimableAt, err)
	}
	create("a", "late0", 5)
	create("a", "late1", 9) // ahead of every queued task of its group
	e.wantParkingRule(t, "r", "created while held")

	// Claimers racing at the window's opening, in concurrent transactions
	// on PostgreSQL: each takes a task of b, none the same.
	e.Clock.Advance(time.Minute)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		racers = map[string]bool{}
		held   []tg.Claimed
		errs   = make(chan error, rate)
	)
	for w := range rate {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "racer" + strconv.Itoa(w), WorkflowID: "b", Lease: time.Minute})
			switch {
			case err != nil:
				errs <- err
			case !ok:
				errs <- fmt.Errorf("racer %d took nothing from b while r's rate allows %d claims (next claimable at %v)", w, rate, c.NextClaimableAt)
			default:
				mu.Lock()
				defer mu.Unlock()
				if racers[c.Task.TaskID] || claimedOnce[c.Task.TaskID] {
					errs <- fmt.Errorf("racer %d took %s/%s (%s, state %s), already claimed", w, c.Task.WorkflowID, c.Task.NodeID, c.Task.TaskID, c.Task.State)
				}
				racers[c.Task.TaskID] = true
				held = append(held, c)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, c := range held { // claimable again, the window spent
		if _, err := e.S.Release(e.Ctx, holder(c)); err != nil {
			t.Fatal(err)
		}
	}
	e.wantParkingRule(t, "r", "released while held")

	steps := []struct {
		name string
		step func()
	}{
		{"window opened", func() { e.Clock.Advance(time.Minute) }},
		{"queued heads cancelled", func() {
			for _, r := range e.DB.Query(t, `SELECT task_id FROM tasks WHERE concurrency_key = 'r' AND state = 'pending' AND NOT key_parked`) {
				if _, _, err := e.S.CancelTask(e.Ctx, r[0], "not needed"); err != nil {
					t.Fatal(err)
				}
			}
			e.wantParkingRule(t, "r", "heads cancelled")
			e.Clock.Advance(time.Minute)
		}},
		{"rate raised", func() {
			lim = &tg.KeyLimit{Rate: 10, RateInterval: time.Minute}
			if _, err := e.S.SetKeyLimit(e.Ctx, "r", *lim, bob); err != nil {
				t.Fatal(err)
			}
		}},
		{"rate lifted", func() {
			lim = nil
			if _, err := e.S.SetKeyLimit(e.Ctx, "r", tg.KeyLimit{}, alice); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, s := range steps {
		s.step()
		e.wantParkingRule(t, "r", s.name)
		if n := window(s.name); n == 0 {
			t.Fatalf("%s: no claim of r", s.name)
		}
	}
	if n := e.Count(t, `SELECT COUNT(*) FROM tasks WHERE key_parked`); n != 0 {
		t.Fatalf("a key without a limit keeps %d tasks parked", n)
	}
	if n := e.Count(t, `SELECT COUNT(*) FROM tasks WHERE state NOT IN ('completed', 'failed', 'cancelled')`); n != 0 {
		t.Fatalf("%d tasks left unfinished", n)
	}
	if rep := e.Verify(t); rep.Broken != nil {
		t.Fatalf("the history does not verify: %+v", rep.Broken)
	}
}
