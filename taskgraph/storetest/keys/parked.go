package keys

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// parkedScan is one kind of claim-next the parking test asks: within a
// workflow or not, with the capability gpu or without.
type parkedScan struct {
	wf  string
	gpu bool
}

// expectNext is the task a claim-next of kind s must take, read from the
// stored rows with no regard to parking: the first ready task (due by
// the server's clock: claim-next promotes it) in claim order whose key is
// neither full nor held back by its rate at the server's time, of the
// workflow and requires the claim may take. Parking must never change it.
func (e *env) expectNext(t *testing.T, s parkedScan) string {
	t.Helper()
	q := `SELECT task_id FROM tasks WHERE state = 'pending' AND due_at_ms <= ?
		AND (concurrency_key = '' OR concurrency_key NOT IN (SELECT key FROM concurrency_keys
			WHERE (max_claimed > 0 AND claimed >= max_claimed) OR (rate_count > 0 AND rate_open_at_ms > ?)))
		AND requires IN ('', ?) AND (? = '' OR workflow_id = ?) ORDER BY priority DESC, seq LIMIT 1`
	req := "-"
	if s.gpu {
		req = "gpu"
	}
	now := e.Clock.Now().UnixMilli()
	rows := e.DB.Query(t, q, now, now, req, s.wf, s.wf)
	if len(rows) == 0 {
		return ""
	}
	return rows[0][0]
}

// parkedScans are the kinds of claim-next the parking tests run in each
// round (claimRounds).
var parkedScans = []parkedScan{{}, {wf: "a"}, {wf: "b"}, {gpu: true}, {wf: "a", gpu: true}}

// claimRounds runs every kind of claim-next of parkedScans, each checked
// against expectNext (claimAsExpected) and failing t if it takes a task
// claimedOnce holds (it records each it takes there), round after round
// until a round in which took, given each claim, answers false for all.
func (e *env) claimRounds(t *testing.T, claimedOnce map[string]bool, at string, took func(tg.Claimed) bool) {
	t.Helper()
	for progress := true; progress; {
		progress = false
		for _, s := range parkedScans {
			c, ok := e.claimAsExpected(t, s, at)
			if !ok {
				continue
			}
			if claimedOnce[c.Task.TaskID] {
				t.Fatalf("%s: %s claimed a second time", at, c.Task.NodeID)
			}
			claimedOnce[c.Task.TaskID] = true
			if took(c) {
				progress = true
			}
		}
	}
}

// claimAsExpected runs a claim-next of kind s and fails t unless it takes
// exactly the task expectNext names (or nothing when it names none).
func (e *env) claimAsExpected(t *testing.T, s parkedScan, at string) (tg.Claimed, bool) {
	t.Helper()
	want := e.expectNext(t, s)
	req := tg.ClaimRequest{Owner: "w", WorkflowID: s.wf, Lease: time.Minute}
	if s.gpu {
		req.Capabilities = []string{"gpu"}
	}
	c, ok, err := e.S.Claim(e.Ctx, req)
	if err != nil {
		t.Fatalf("%s: claim-next %+v: %v", at, s, err)
	}
	if got := c.Task.TaskID; !ok && want != "" || ok && got != want {
		t.Fatalf("%s: claim-next %+v took %q (ok %v), want %q: the first ready task of an open key", at, s, got, ok, want)
	}
	return c, ok
}

// wantParkingRule fails t unless key's ready tasks keep the parking rule
// (migrations 0018 and 0025): no task outside the ready set is parked, and
// the first K ready tasks of each (workflow, requires) group in claim
// order are not parked, K the least of max(1, free slots) with a cap and
// the rate's count with a rate (all of them when the key has neither). It
// returns how many are parked.
func (e *env) wantParkingRule(t *testing.T, key, at string) int {
	t.Helper()
	if n := e.Count(t, `SELECT COUNT(*) FROM tasks WHERE key_parked AND NOT (state = 'pending' AND due_at_ms = 0)`); n != 0 {
		t.Fatalf("%s: %d tasks parked outside the ready set", at, n)
	}
	k := e.key(t, key)
	free := 1 << 30
	if k.Limit.MaxClaimed > 0 {
		free = max(1, k.Limit.MaxClaimed-k.Claimed)
	}
	if k.Limit.Rate > 0 {
		free = min(free, k.Limit.Rate)
	}
	rows := e.DB.Query(t, `SELECT workflow_id, requires, CASE WHEN key_parked THEN 1 ELSE 0 END, task_id FROM tasks
		WHERE concurrency_key = ? AND state = 'pending' AND due_at_ms = 0 ORDER BY workflow_id, requires, priority DESC, seq`, key)
	parked, pos, group := 0, 0, ""
	for _, r := range rows {
		if g := r[0] + "/" + r[1]; g != group {
			group, pos = g, 0
		}
		pos++
		if r[2] == "1" {
			parked++
			if pos <= free {
				t.Fatalf("%s: %s is parked at place %d of group %s, with the first %d to keep of key %s (%s; claimed %d)",
					at, r[3], pos, group, free, key, k.Limit, k.Claimed)
			}
		}
	}
	return parked
}

// The queued tasks of a full key are parked out of the ready indexes
// (0018) and never change what a claim-next takes: with the key full and
// while each way a slot frees (complete, fail, release, lease expiry,
// cancel, a claim by id of a parked task, an operator's cancel of a
// queued task, a cap raised, lowered,
// lifted), every claim-next of every kind takes exactly the task it would
// take with nothing parked, the key never holds more than its cap, and
// every task is claimed once.
func testKeyParkedTasksLeaveTheScan(t *testing.T, h Harness) {
	e := setup(t, h)
	lim := &tg.KeyLimit{MaxClaimed: 2}
	create := func(wf, node string, prio int, req ...string) {
		t.Helper()
		e.createKeyedAt(t, wf, node, "k", lim, prio, req...)
	}
	for i := range 10 {
		create("a", "k"+strconv.Itoa(i), 5)
	}
	for i := range 3 {
		create("b", "k"+strconv.Itoa(i), 5)
	}
	create("a", "g0", 5, "gpu")
	create("a", "g1", 5, "gpu")
	for i := range 30 {
		e.Create(t, "a", "free"+strconv.Itoa(i))
	}
	claims := map[string]tg.Claimed{} // live claims of key k
	claimedOnce := map[string]bool{}
	// claimAll runs every kind of claim-next until none takes a task of
	// k (claimRounds); the free tasks it takes are completed, so that
	// they are never ahead of k's.
	claimAll := func(at string) {
		t.Helper()
		e.claimRounds(t, claimedOnce, at, func(c tg.Claimed) bool {
			if c.Task.ConcurrencyKey == "" {
				if _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(`1`)); err != nil {
					t.Fatal(err)
				}
				return false
			}
			claims[c.Task.TaskID] = c
			if k := e.key(t, "k"); k.Limit.MaxClaimed > 0 && k.Claimed > k.Limit.MaxClaimed {
				t.Fatalf("%s: key k holds %d claims, cap %d", at, k.Claimed, k.Limit.MaxClaimed)
			}
			return true
		})
		e.wantParkingRule(t, "k", at)
	}
	// one takes a live claim of k (the least task id) out of claims.
	one := func() tg.Claimed {
		t.Helper()
		var c tg.Claimed
		for _, x := range claims {
			if c.Task.TaskID == "" || x.Task.TaskID < c.Task.TaskID {
				c = x
			}
		}
		if c.Task.TaskID == "" {
			t.Fatal("no live claim of key k")
		}
		delete(claims, c.Task.TaskID)
		return c
	}
	claimAll("start")
	e.wantClaimedOfKey(t, "k", 2)
	// Full: of 13 queued tasks in three groups, all but each group's first.
	if n := e.wantParkingRule(t, "k", "full"); n != 10 {
		t.Fatalf("full key: %d tasks parked, want 10 (all but the first of each of 3 groups of 13)", n)
	}
	create("a", "late0", 5)
	create("a", "late1", 9) // ahead of every queued task of its group
	if n := e.wantParkingRule(t, "k", "created while full"); n != 11 {
		t.Fatalf("created while full: %d tasks parked, want 11", n)
	}

	ends := []struct {
		name string
		end  func()
	}{
		{"complete", func() {
			if _, err := e.S.Complete(e.Ctx, holder(one()), json.RawMessage(`1`)); err != nil {
				t.Fatal(err)
			}
		}},
		{"fail", func() {
			if _, err := e.S.Fail(e.Ctx, holder(one()), "boom", false); err != nil {
				t.Fatal(err)
			}
		}},
		{"claim by id of a parked task", func() {
			if _, err := e.S.Complete(e.Ctx, holder(one()), json.RawMessage(`1`)); err != nil {
				t.Fatal(err)
			}
			rows := e.DB.Query(t, `SELECT task_id FROM tasks WHERE concurrency_key = 'k' AND key_parked ORDER BY seq DESC LIMIT 1`)
			if len(rows) == 0 {
				t.Fatal("no parked task to claim by id")
			}
			c := e.Claim(t, "w", rows[0][0], time.Minute)
			claims[c.Task.TaskID], claimedOnce[c.Task.TaskID] = c, true
		}},
		{"release", func() {
			c := one()
			delete(claimedOnce, c.Task.TaskID) // it is claimable again
			if _, err := e.S.Release(e.Ctx, holder(c)); err != nil {
				t.Fatal(err)
			}
		}},
		{"expiry", func() {
			for id := range claims {
				delete(claimedOnce, id)
			}
			clear(claims)
			e.Clock.Advance(2 * time.Minute)
			if _, err := e.S.ExpireLeases(e.Ctx); err != nil {
				t.Fatal(err)
			}
		}},
		{"cancel", func() {
			if _, err := e.S.Cancel(e.Ctx, holder(one())); err != nil {
				t.Fatal(err)
			}
		}},
		{"operator cancel of the queued heads", func() {
			// The unparked first task of each group leaves: the next of
			// its group must take its place, though the key stays full.
			for _, r := range e.DB.Query(t, `SELECT task_id FROM tasks WHERE concurrency_key = 'k' AND state = 'pending' AND NOT key_parked`) {
				if _, _, err := e.S.CancelTask(e.Ctx, r[0], "not needed"); err != nil {
					t.Fatal(err)
				}
			}
			e.wantParkingRule(t, "k", "heads cancelled")
			if _, err := e.S.Complete(e.Ctx, holder(one()), json.RawMessage(`1`)); err != nil {
				t.Fatal(err)
			}
		}},
		{"cap raised", func() {
			if _, err := e.S.SetKeyLimit(e.Ctx, "k", tg.KeyLimit{MaxClaimed: 5}, bob); err != nil {
				t.Fatal(err)
			}
		}},
		{"two freed at once", func() {
			for range 3 {
				if _, err := e.S.Complete(e.Ctx, holder(one()), json.RawMessage(`1`)); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"cap lowered", func() {
			if _, err := e.S.SetKeyLimit(e.Ctx, "k", tg.KeyLimit{MaxClaimed: 1}, bob); err != nil {
				t.Fatal(err)
			}
			for len(claims) > 0 {
				if _, err := e.S.Complete(e.Ctx, holder(one()), json.RawMessage(`1`)); err != nil {
					t.Fatal(err)
				}
				e.wantParkingRule(t, "k", "cap lowered, a claim ended")
			}
		}},
		{"cap lifted", func() {
			if _, err := e.S.SetKeyLimit(e.Ctx, "k", tg.KeyLimit{}, alice); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, end := range ends {
		before := len(claims)
		end.end()
		e.wantParkingRule(t, "k", end.name)
		claimAll(end.name)
		if len(claims) == 0 && end.name != "cap lifted" {
			t.Fatalf("after %s: no claim of key k live (had %d)", end.name, before)
		}
	}
	if n := e.wantParkingRule(t, "k", "end"); n != 0 {
		t.Fatalf("a key without a cap keeps %d tasks parked", n)
	}
	for len(claims) > 0 {
		if _, err := e.S.Complete(e.Ctx, holder(one()), json.RawMessage(`1`)); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.Count(t, `SELECT COUNT(*) FROM tasks WHERE state NOT IN ('completed', 'failed', 'cancelled')`); n != 0 {
		t.Fatalf("%d tasks left unfinished", n)
	}
	if rep := e.Verify(t); rep.Broken != nil {
		t.Fatalf("the history does not verify: %+v", rep.Broken)
	}
}

// Claimers, creators, a canceller and an operator changing the cap run at
// once on a key with many queued tasks (on PostgreSQL, in concurrent
// transactions): no task is ever held by two claims, and once they stop
// the parking rule holds and every claim-next, drained one by one, takes
// exactly the task it would take with nothing parked, until every task
// has ended.
func testKeyParkingUnderConcurrentWriters(t *testing.T, h Harness) {
	e := setup(t, h)
	lim := &tg.KeyLimit{MaxClaimed: 3}
	create := func(node string, i int, lim *tg.KeyLimit) error {
		spec := tg.NodeSpec{NodeID: node, Payload: json.RawMessage(`{}`), ConcurrencyKey: "k", KeyLimit: lim, Priority: i % 3}
		if i%5 == 0 {
			spec.Requires = []string{"gpu"}
		}
		_, err := e.S.CreateTask(e.Ctx, []string{"a", "b"}[i%2], spec)
		return err
	}
	for i := range 60 {
		if err := create("q"+strconv.Itoa(i), i, lim); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu   sync.Mutex
		live = map[string]string{} // task id: the worker holding it
		wg   sync.WaitGroup
		errs = make(chan error, 16)
	)
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				errs <- err
			}
		}()
	}
	for w := range 4 {
		run(func() error {
			owner := "w" + strconv.Itoa(w)
			req := tg.ClaimRequest{Owner: owner, Lease: time.Minute, WorkflowID: []string{"", "a", "", "b"}[w]}
			if w%2 == 1 {
				req.Capabilities = []string{"gpu"}
			}
			for i := range 15 {
				c, ok, err := e.S.Claim(e.Ctx, req)
				if err != nil {
					return fmt.Errorf("%s: claim-next: %w", owner, err)
				}
				if !ok {
					continue
				}
				mu.Lock()
				other, held := live[c.Task.TaskID]
				if !held {
					live[c.Task.TaskID] = owner
				}
				mu.Unlock()
				if held {
					return fmt.Errorf("%s claimed %s while %s holds it", owner, c.Task.NodeID, other)
				}
				mu.Lock()
				delete(live, c.Task.TaskID)
				mu.Unlock()
				switch i % 3 {
				case 0:
					_, err = e.S.Complete(e.Ctx, holder(c), json.RawMessage(`1`))
				case 1:
					_, err = e.S.Release(e.Ctx, holder(c))
				default:
					_, err = e.S.Fail(e.Ctx, holder(c), "again", true)
				}
				if err != nil && !errors.Is(err, tg.ErrStaleClaim) { // cancelled meanwhile
					return fmt.Errorf("%s: end %s: %w", owner, c.Task.NodeID, err)
				}
			}
			return nil
		})
	}
	run(func() error {
		for i := range 20 {
			if err := create("late"+strconv.Itoa(i), i, nil); err != nil {
				return err
			}
		}
		return nil
	})
	var cancel []string
	for i := 0; i < 60; i += 7 {
		cancel = append(cancel, e.DB.Query(t, `SELECT task_id FROM tasks WHERE node_id = ?`, "q"+strconv.Itoa(i))[0][0])
	}
	run(func() error {
		for i, id := range cancel {
			if _, _, err := e.S.CancelTask(e.Ctx, id, "not needed"); err != nil && !errors.Is(err, tg.ErrConflict) {
				return fmt.Errorf("cancel q%d: %w", 7*i, err)
			}
		}
		return nil
	})
	run(func() error {
		for _, n := range []int{5, 2, 4, 3} {
			if _, err := e.S.SetKeyLimit(e.Ctx, "k", tg.KeyLimit{MaxClaimed: n}, bob); err != nil {
				return err
			}
		}
		return nil
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	e.wantParkingRule(t, "k", "after the concurrent writers")
	// Drain: fail-retryable tasks wait for their backoff; the clock moves
	// past it whenever no claim-next takes anything.
	scans := []parkedScan{{}, {wf: "a"}, {wf: "b"}, {gpu: true}, {wf: "b", gpu: true}}
	for left := e.Count(t, `SELECT COUNT(*) FROM tasks WHERE state IN ('pending', 'claimed', 'blocked')`); left > 0; {
		took := false
		for _, s := range scans {
			c, ok := e.claimAsExpected(t, s, "drain")
			if !ok {
				continue
			}
			took = true
			e.wantParkingRule(t, "k", "drain, claimed")
			if _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(`1`)); err != nil {
				t.Fatal(err)
			}
			e.wantParkingRule(t, "k", "drain, completed")
		}
		now := e.Count(t, `SELECT COUNT(*) FROM tasks WHERE state IN ('pending', 'claimed', 'blocked')`)
		if !took {
			if now != left || e.Count(t, `SELECT COUNT(*) FROM tasks WHERE state = 'pending' AND due_at_ms > 0`) == 0 {
				t.Fatalf("%d tasks left and no claim-next takes one, none waiting for a retry time", now)
			}
			e.Clock.Advance(time.Minute)
		}
		left = now
	}
	if rep := e.Verify(t); rep.Broken != nil {
		t.Fatalf("the history does not verify: %+v", rep.Broken)
	}
}
