package keys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest/stenv"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// Tests are the suite's group "Key": concurrency keys and rate limits
// per key (issue 27, items 1 and 2). storetest.Run runs them on every
// driver's Harness.
var Tests = []stenv.Test{
	{Name: "KeyLimitHoldsUnderConcurrentClaimers", Fn: testKeyLimitHoldsUnderConcurrentClaimers},
	{Name: "KeySlotFreesOnEveryEnd", Fn: testKeySlotFreesOnEveryEnd},
	{Name: "KeyRateByServerTime", Fn: testKeyRateByServerTime},
	{Name: "KeyFreedSlotWakesParkedClaim", Fn: testKeyFreedSlotWakesParkedClaim},
	{Name: "KeyLimitChangedByOperator", Fn: testKeyLimitChangedByOperator},
	{Name: "KeyCreateRules", Fn: testKeyCreateRules},
	{Name: "KeyClaimByID", Fn: testKeyClaimByID},
	{Name: "KeyThousandTasksTwoAtOnceTenASecond", Fn: testKeyThousandTasks},
	{Name: "KeyNextClaimableAtForTheClaimAsked", Fn: testKeyNextClaimableAt},
	{Name: "KeyRowPrunedWhenIdleWithoutLimit", Fn: testKeyRowPruned},
	{Name: "KeyRowsLockedInOneOrder", Fn: testKeyLockOrder},
	{Name: "KeyRowsNeverClaimedPrunedBySweeper", Fn: testKeyRowsNeverClaimedPruned},
	{Name: "KeyCreateBesideEndingClaimLocksInOrder", Fn: testKeyCreateBesideEndingClaim},
	{Name: "KeyParkedTasksLeaveTheScan", Fn: testKeyParkedTasksLeaveTheScan},
	{Name: "KeyParkingUnderConcurrentWriters", Fn: testKeyParkingUnderConcurrentWriters},
	{Name: "KeyRateParkedTasksLeaveTheScan", Fn: testKeyRateParkedTasksLeaveTheScan},
	{Name: "KeyBatchWavesLockInOrder", Fn: testKeyBatchWavesLockInOrder},
	{Name: "KeyCreateDepsBesideBatchLockInOrder", Fn: testKeyCreateDepsBesideBatchLockInOrder},
	{Name: "KeyUnparkBesideTaskLockers", Fn: testKeyUnparkBesideTaskLockers},
	{Name: "KeyLimitChangeBesideClaimEndsLocksInOrder", Fn: testKeyLimitChangeBesideClaimEndsLockInOrder},
	{Name: "KeyCapSetOnClaimedKeyCountsThem", Fn: testKeyCapSetOnClaimedKeyCountsThem},
	{Name: "KeyClaimsRacingLimitChanges", Fn: testKeyClaimsRacingLimitChanges},
}

// createKeyed creates node of workflow wf with concurrency key key and,
// when limit is not nil, that limit.
func (e *env) createKeyed(t *testing.T, wf, node, key string, limit *tg.KeyLimit) tg.Task {
	t.Helper()
	return e.createKeyedAt(t, wf, node, key, limit, 0)
}

// createKeyedAt is createKeyed at priority prio, the node requiring req.
func (e *env) createKeyedAt(t *testing.T, wf, node, key string, limit *tg.KeyLimit, prio int, req ...string) tg.Task {
	t.Helper()
	c, err := e.S.CreateTask(e.Ctx, wf, tg.NodeSpec{NodeID: node, Payload: json.RawMessage(`{}`), ConcurrencyKey: key, KeyLimit: limit,
		Priority: prio, Requires: req})
	if err != nil {
		t.Fatalf("create %s/%s with key %s: %v", wf, node, key, err)
	}
	if c.Task.ConcurrencyKey != key {
		t.Fatalf("created %s with key %q, want %q", node, c.Task.ConcurrencyKey, key)
	}
	return c.Task
}

func (e *env) key(t *testing.T, key string) tg.Key {
	t.Helper()
	k, ok, err := e.S.KeyInfo(e.Ctx, key)
	if err != nil || !ok {
		t.Fatalf("key %s: ok=%v err=%v", key, ok, err)
	}
	return k
}

// wantClaimedOfKey fails t unless the stored claimed tasks of the key
// are want, and so is the key's counter when the key has a cap (0 when
// it has none: no count is kept while uncapped, Key.Claimed).
func (e *env) wantClaimedOfKey(t *testing.T, key string, want int) {
	t.Helper()
	stored := e.Count(t, `SELECT COUNT(*) FROM tasks WHERE concurrency_key = ? AND state = 'claimed'`, key)
	k := e.key(t, key)
	counter := want
	if k.Limit.MaxClaimed == 0 {
		counter = 0
	}
	if k.Claimed != counter || stored != int64(want) {
		t.Fatalf("key %s (cap %d): counter %d, %d tasks stored claimed; want %d claimed, counter %d", key, k.Limit.MaxClaimed, k.Claimed, stored, want, counter)
	}
}

// Many claimers at once never hold more tasks of a key than its cap;
// tasks without a key are claimed past it.
func testKeyLimitHoldsUnderConcurrentClaimers(t *testing.T, h Harness) {
	e := setup(t, h)
	lim := &tg.KeyLimit{MaxClaimed: 2}
	for i := range 12 {
		e.createKeyed(t, "a", fmt.Sprintf("k%02d", i), "llm", lim)
	}
	for i := range 3 {
		e.Create(t, "a", fmt.Sprintf("plain%d", i))
	}
	const claimers = 10
	var wg sync.WaitGroup
	got := make(chan tg.Claimed, claimers)
	errs := make(chan error, claimers)
	for i := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: fmt.Sprintf("w%d", i), Lease: time.Minute})
			if err != nil {
				errs <- err
				return
			}
			if ok {
				got <- c
			}
		}()
	}
	wg.Wait()
	close(got)
	close(errs)
	for err := range errs {
		t.Fatalf("claim-next: %v", err)
	}
	keyed, plain := 0, 0
	for c := range got {
		if c.Task.ConcurrencyKey == "llm" {
			keyed++
		} else {
			plain++
		}
	}
	if keyed != 2 || plain != 3 {
		t.Fatalf("%d claimers got %d tasks of key llm (cap 2) and %d without a key (3 ready), want 2 and 3", claimers, keyed, plain)
	}
	e.wantClaimedOfKey(t, "llm", 2)
	if c, ok := e.ClaimNext(t, "late", ""); ok {
		t.Fatalf("claim-next with the key full and nothing else ready took %s", c.Task.NodeID)
	}
}

// The slot a claim holds comes back whichever way the claim ends:
// complete, fail, release, cancel by the holder, cancel by an operator,
// lease expiry (on the injected clock), and an expired lease reclaimed by
// id.
func testKeySlotFreesOnEveryEnd(t *testing.T, h Harness) {
	e := setup(t, h)
	lim := &tg.KeyLimit{MaxClaimed: 1}
	ends := []struct {
		name string
		end  func(c tg.Claimed) error
	}{
		{"complete", func(c tg.Claimed) error { _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(`1`)); return err }},
		{"fail", func(c tg.Claimed) error { _, err := e.S.Fail(e.Ctx, holder(c), "boom", false); return err }},
		{"fail-retryable", func(c tg.Claimed) error { _, err := e.S.Fail(e.Ctx, holder(c), "again", true); return err }},
		{"release", func(c tg.Claimed) error { _, err := e.S.Release(e.Ctx, holder(c)); return err }},
		{"cancel", func(c tg.Claimed) error { _, err := e.S.Cancel(e.Ctx, holder(c)); return err }},
		{"operator-cancel", func(c tg.Claimed) error {
			_, _, err := e.S.CancelTask(e.Ctx, c.Task.TaskID, "not needed")
			return err
		}},
		{"expiry", func(c tg.Claimed) error {
			e.Clock.Advance(2 * time.Minute)
			_, err := e.S.ExpireLeases(e.Ctx)
			return err
		}},
	}
	for i := range ends {
		e.createKeyed(t, "a", fmt.Sprintf("t%d", i), "k", lim)
	}
	e.createKeyed(t, "a", "last", "k", lim)
	for _, end := range ends {
		c, ok := e.claimNextLease(t, "w", time.Minute)
		if !ok {
			t.Fatalf("before %s: claim-next found nothing with the key's slot free", end.name)
		}
		if _, ok := e.ClaimNext(t, "w2", ""); ok {
			t.Fatalf("before %s: a second claim-next took a task of a key capped at 1", end.name)
		}
		e.wantClaimedOfKey(t, "k", 1)
		if err := end.end(c); err != nil {
			t.Fatalf("%s: %v", end.name, err)
		}
		e.wantClaimedOfKey(t, "k", 0)
	}
	// A lapsed lease reclaimed by id: the expiry gives the slot back and
	// the claim takes it again, in one transaction.
	c, ok := e.claimNextLease(t, "w", time.Minute)
	if !ok {
		t.Fatal("claim-next found nothing with the key's slot free")
	}
	e.Clock.Advance(2 * time.Minute)
	re := e.Claim(t, "w3", c.Task.TaskID, time.Minute)
	if re.Lease.Generation != c.Lease.Generation+1 {
		t.Fatalf("reclaim by id: generation %d after %d", re.Lease.Generation, c.Lease.Generation)
	}
	e.wantClaimedOfKey(t, "k", 1)
	if rep := e.Verify(t); rep.Broken != nil {
		t.Fatalf("the history does not verify: %+v", rep.Broken)
	}
}

func (e *env) claimNextLease(t *testing.T, owner string, d time.Duration) (tg.Claimed, bool) {
	t.Helper()
	c, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: owner, Lease: d})
	if err != nil {
		t.Fatalf("claim-next by %s: %v", owner, err)
	}
	return c, ok
}

// A key's rate counts claims by the server's (injected) clock over any
// window of its interval; a claim-next held back by it says when the next
// is claimable, and is granted from that time on.
func testKeyRateByServerTime(t *testing.T, h Harness) {
	e := setup(t, h)
	lim := &tg.KeyLimit{Rate: 2, RateInterval: time.Second}
	for i := range 5 {
		e.createKeyed(t, "a", fmt.Sprintf("r%d", i), "api", lim)
	}
	start := e.Clock.Now()
	c0, ok := e.ClaimNext(t, "w", "")
	if !ok {
		t.Fatal("first claim refused")
	}
	e.Clock.Advance(400 * time.Millisecond)
	if _, ok := e.ClaimNext(t, "w", ""); !ok {
		t.Fatal("second claim within the rate refused")
	}
	// Completing frees no rate: the rate counts claims, not claimed tasks.
	if _, err := e.S.Complete(e.Ctx, holder(c0), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	got, ok := e.ClaimNext(t, "w", "")
	if ok {
		t.Fatalf("third claim within one second granted (%s)", got.Task.NodeID)
	}
	if want := start.Add(time.Second); !got.NextClaimableAt.Equal(want) {
		t.Fatalf("held back by the rate: next claimable at %v, want %v", got.NextClaimableAt, want)
	}
	if k := e.key(t, "api"); !k.NextClaimableAt.Equal(start.Add(time.Second)) {
		t.Fatalf("key api: next claimable at %v, want %v", k.NextClaimableAt, start.Add(time.Second))
	}
	e.Clock.Advance(599 * time.Millisecond) // 1 ms before the first claim leaves the window
	if _, ok := e.ClaimNext(t, "w", ""); ok {
		t.Fatal("claim 1 ms before the window moved on granted")
	}
	e.Clock.Advance(time.Millisecond)
	if _, ok := e.ClaimNext(t, "w", ""); !ok {
		t.Fatal("claim once the first left the window refused")
	}
	// A claim by id is held to the rate too, and says when.
	left := e.listKeyPending(t, "api")
	_, _, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", TaskID: left, Lease: time.Minute})
	wantConflict(t, err, "claims per 1s")
	e.WantState(t, left, tg.StatePending)
}

func (e *env) listKeyPending(t *testing.T, key string) string {
	t.Helper()
	rows := e.DB.Query(t, `SELECT task_id FROM tasks WHERE concurrency_key = ? AND state = 'pending' ORDER BY seq LIMIT 1`, key)
	if len(rows) != 1 {
		t.Fatalf("no pending task of key %s", key)
	}
	return rows[0][0]
}

// A claim-next parked while the only ready task's key is full wakes when
// a claim of the key ends, and takes it.
func testKeyFreedSlotWakesParkedClaim(t *testing.T, h Harness) {
	e := setup(t, h)
	lim := &tg.KeyLimit{MaxClaimed: 1}
	e.createKeyed(t, "a", "one", "k", lim)
	two := e.createKeyed(t, "a", "two", "k", lim)
	c, ok := e.claimNextLease(t, "w1", time.Minute)
	if !ok {
		t.Fatal("first claim refused")
	}
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	out := make(chan stenv.ParkedResult, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	e.ParkWaiters(t, ctx, 1, "", out, &wg)
	if _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	testwait.Recv(t, "the parked claim's answer", out).WantWoken(t, two.TaskID, "the end of the key's claim")
}

// An operator raises, lowers and lifts a key's limit; each change is in
// the audit chain with the operator and applies to the next claim; claims
// granted before run on.
func testKeyLimitChangedByOperator(t *testing.T, h Harness) {
	e := setup(t, h)
	lim := &tg.KeyLimit{MaxClaimed: 1}
	for i := range 4 {
		e.createKeyed(t, "a", fmt.Sprintf("t%d", i), "k", lim)
	}
	if _, ok := e.ClaimNext(t, "w", ""); !ok {
		t.Fatal("first claim refused")
	}
	if _, ok := e.ClaimNext(t, "w", ""); ok {
		t.Fatal("a claim past the cap granted")
	}
	k, err := e.S.SetKeyLimit(e.Ctx, "k", tg.KeyLimit{MaxClaimed: 3}, bob)
	if err != nil || k.Limit.MaxClaimed != 3 || k.Claimed != 1 || k.UpdatedBy != "bob" {
		t.Fatalf("raise the cap: %+v %v", k, err)
	}
	for i := range 2 {
		if _, ok := e.ClaimNext(t, "w", ""); !ok {
			t.Fatalf("claim %d under the raised cap refused", i+2)
		}
	}
	if _, ok := e.ClaimNext(t, "w", ""); ok {
		t.Fatal("a claim past the raised cap granted")
	}
	// Lowered below what is claimed: the claims run on, none is added.
	if _, err := e.S.SetKeyLimit(e.Ctx, "k", tg.KeyLimit{MaxClaimed: 1}, bob); err != nil {
		t.Fatal(err)
	}
	e.wantClaimedOfKey(t, "k", 3)
	if _, ok := e.ClaimNext(t, "w", ""); ok {
		t.Fatal("a claim past the lowered cap granted")
	}
	// Lifted: no limit.
	if _, err := e.S.SetKeyLimit(e.Ctx, "k", tg.KeyLimit{}, alice); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.ClaimNext(t, "w", ""); !ok {
		t.Fatal("a claim of a key without a limit refused")
	}
	// Refused changes write nothing and name the field.
	before := e.DB.Snapshot(t)
	for _, bad := range []struct {
		key   string
		limit tg.KeyLimit
		op    tg.Operator
		field string
	}{
		{"k", tg.KeyLimit{MaxClaimed: -1}, bob, "max_claimed"},
		{"k", tg.KeyLimit{Rate: 5}, bob, "rate_interval_ms"},
		{"k", tg.KeyLimit{RateInterval: time.Second}, bob, "rate_interval_ms"},
		{"k", tg.KeyLimit{Rate: tg.MaxKeyRate + 1, RateInterval: time.Second}, bob, "rate"},
		{"bad key!", tg.KeyLimit{}, bob, "key"},
		{"k", tg.KeyLimit{}, tg.Operator{Name: "bob"}, "reason"},
	} {
		if _, err := e.S.SetKeyLimit(e.Ctx, bad.key, bad.limit, bad.op); !errors.Is(err, tg.ErrInvalid) || !strings.Contains(err.Error(), bad.field) {
			t.Fatalf("SetKeyLimit(%q, %+v): %v, want ErrInvalid naming %s", bad.key, bad.limit, err, bad.field)
		}
	}
	e.Unchanged(t, before, "refused limit changes")
	rows := e.DB.Query(t, `SELECT detail FROM audit_chain WHERE kind = ? ORDER BY seq`, tg.AuditLimit)
	if len(rows) != 3 || !strings.Contains(rows[0][0], `"operator":"bob"`) || !strings.Contains(rows[2][0], `"operator":"alice"`) || !strings.Contains(rows[0][0], `"max_claimed":3`) {
		t.Fatalf("the audit chain's limit entries: %v", rows)
	}
	if rep := e.Verify(t); rep.Broken != nil {
		t.Fatalf("the history does not verify: %+v", rep.Broken)
	}
}

// A key is an identifier; a limit needs a key; a create may set a key's
// limit while it has none or repeat it, never change it; the node's key
// is part of its identity for idempotent creates.
func testKeyCreateRules(t *testing.T, h Harness) {
	e := setup(t, h)
	one := &tg.KeyLimit{MaxClaimed: 1}
	before := e.DB.Snapshot(t)
	for _, bad := range []struct {
		spec  tg.NodeSpec
		field string
	}{
		{tg.NodeSpec{NodeID: "x", ConcurrencyKey: "no spaces"}, "concurrency_key"},
		{tg.NodeSpec{NodeID: "x", ConcurrencyKey: strings.Repeat("k", 200)}, "concurrency_key"},
		{tg.NodeSpec{NodeID: "x", KeyLimit: one}, "concurrency_key"},
		{tg.NodeSpec{NodeID: "x", ConcurrencyKey: "k", KeyLimit: &tg.KeyLimit{MaxClaimed: tg.MaxKeyClaimed + 1}}, "concurrency_max_claimed"},
		{tg.NodeSpec{NodeID: "x", ConcurrencyKey: "k", KeyLimit: &tg.KeyLimit{Rate: 3}}, "concurrency_rate_interval_ms"},
	} {
		if _, err := e.S.CreateTask(e.Ctx, "a", bad.spec); !errors.Is(err, tg.ErrInvalid) || !strings.Contains(err.Error(), bad.field) {
			t.Fatalf("create %+v: %v, want ErrInvalid naming %s", bad.spec, err, bad.field)
		}
	}
	e.Unchanged(t, before, "refused creates")
	e.createKeyed(t, "a", "x", "k", nil)
	if k := e.key(t, "k"); k.Limit != (tg.KeyLimit{}) {
		t.Fatalf("a key created without a limit has %+v", k.Limit)
	}
	e.createKeyed(t, "a", "y", "k", one) // sets it: it had none
	e.createKeyed(t, "a", "z", "k", one) // repeats it
	if _, err := e.S.CreateTask(e.Ctx, "a", tg.NodeSpec{NodeID: "w", ConcurrencyKey: "k", KeyLimit: &tg.KeyLimit{MaxClaimed: 5}}); !errors.Is(err, tg.ErrConflict) || !strings.Contains(err.Error(), "admin limit") {
		t.Fatalf("create changing a key's limit: %v, want a conflict", err)
	}
	if _, err := e.S.CreateTask(e.Ctx, "a", tg.NodeSpec{NodeID: "x", Payload: json.RawMessage(`{}`), ConcurrencyKey: "other"}); !errors.Is(err, tg.ErrConflict) || !strings.Contains(err.Error(), "concurrency_key") {
		t.Fatalf("create of node x again with another key: %v, want a conflict naming concurrency_key", err)
	}
	if c, err := e.S.CreateTask(e.Ctx, "a", tg.NodeSpec{NodeID: "x", Payload: json.RawMessage(`{}`), ConcurrencyKey: "k"}); err != nil || c.Created {
		t.Fatalf("identical create: created=%v err=%v", c.Created, err)
	}
	evs := e.Events(t, e.listKeyPending(t, "k"))
	if len(evs) == 0 || !strings.Contains(string(evs[0].Detail), `"concurrency_key":"k"`) {
		t.Fatalf("the create event does not name the key: %s", evs[0].Detail)
	}
}

// A claim by id takes the key's slot too: refused, naming the key, when
// it is full; the refusal writes nothing.
func testKeyClaimByID(t *testing.T, h Harness) {
	e := setup(t, h)
	lim := &tg.KeyLimit{MaxClaimed: 1}
	a := e.createKeyed(t, "a", "a", "k", lim)
	b := e.createKeyed(t, "a", "b", "k", lim)
	e.Claim(t, "w", a.TaskID, time.Minute)
	before := e.DB.Snapshot(t)
	_, _, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", TaskID: b.TaskID, Lease: time.Minute})
	wantConflict(t, err, "concurrency key k has its maximum of 1")
	e.Unchanged(t, before, "a refused claim by id")
}

// The proof of issue 27 (items 1 and 2), on the injected clock: 1,000
// tasks of one key limited to 2 claimed at once and 10 claims a second,
// claimed by 4 concurrent workers that complete what they claim. When a
// round of claims found nothing, the clock moves on to the time the
// answers name (NextClaimableAt). The
// history's server times show never more than 2 claimed at once and never
// more than 10 claims in any second; every task completes.
func testKeyThousandTasks(t *testing.T, h Harness) {
	e := setup(t, h)
	const n, workers = 1000, 4
	lim := tg.KeyLimit{MaxClaimed: 2, Rate: 10, RateInterval: time.Second}
	nodes := make([]tg.NodeSpec, n)
	for i := range nodes {
		nodes[i] = tg.NodeSpec{NodeID: fmt.Sprintf("t%04d", i), ConcurrencyKey: "provider", KeyLimit: &lim}
	}
	if _, err := e.S.CreateWorkflow(e.Ctx, "proof", nodes); err != nil {
		t.Fatal(err)
	}
	done := 0
	testwait.Progress(t, "every task of the key done", func() (bool, int64) {
		var wg sync.WaitGroup
		got := make([]tg.Claimed, workers)
		oks := make([]bool, workers)
		errs := make([]error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[w], oks[w], errs[w] = e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w" + strconv.Itoa(w), Lease: time.Minute})
			}()
		}
		wg.Wait()
		granted := 0
		for w := range workers {
			if errs[w] != nil {
				t.Fatalf("claim-next: %v", errs[w])
			}
			if oks[w] {
				granted++
			}
		}
		if granted > 2 {
			t.Fatalf("%d claims granted at once of a key capped at 2", granted)
		}
		for w := range workers {
			if oks[w] {
				if _, err := e.S.Complete(e.Ctx, holder(got[w]), json.RawMessage(`1`)); err != nil {
					t.Fatal(err)
				}
				done++
			}
		}
		if granted == 0 {
			// Held back by the rate: on to the time the answer names.
			step := 50 * time.Millisecond
			for w := range workers {
				if at := got[w].NextClaimableAt; !at.IsZero() && at.After(e.Clock.Now()) {
					step = at.Sub(e.Clock.Now())
				}
			}
			e.Clock.Advance(step)
		}
		return done == n, int64(done)
	})
	// The history, in chain order, with its server times.
	rows := e.DB.Query(t, `SELECT kind, at_ms FROM events WHERE workflow_id = 'proof' AND kind IN ('claim', 'complete') ORDER BY wseq`)
	var claims []int64
	held, most := 0, 0
	for _, r := range rows {
		at, _ := strconv.ParseInt(r[1], 10, 64)
		switch r[0] {
		case tg.EventClaim:
			held++
			claims = append(claims, at)
		case tg.EventComplete:
			held--
		}
		most = max(most, held)
	}
	if most > 2 {
		t.Fatalf("the history holds %d tasks claimed at once", most)
	}
	if len(claims) != n {
		t.Fatalf("%d claims in the history, want %d", len(claims), n)
	}
	for i := range claims {
		if i > 0 && claims[i] < claims[i-1] {
			t.Fatalf("claim %d at %d before claim %d at %d", i, claims[i], i-1, claims[i-1])
		}
		if j := i + 10; j < len(claims) && claims[j]-claims[i] < 1000 {
			t.Fatalf("claims %d..%d (11 of them) within %d ms: more than 10 claims in one second", i, j, claims[j]-claims[i])
		}
	}
	if got := e.Count(t, `SELECT COUNT(*) FROM tasks WHERE workflow_id = 'proof' AND state = 'completed'`); got != n {
		t.Fatalf("%d tasks completed, want %d", got, n)
	}
	e.wantClaimedOfKey(t, "provider", 0)
	t.Logf("1,000 claims over %v of server time", time.Duration(claims[n-1]-claims[0])*time.Millisecond)
}

// createKeyedSpec creates spec in workflow wf.
func (e *env) createKeyedSpec(t *testing.T, wf string, spec tg.NodeSpec) tg.Task {
	t.Helper()
	if spec.Payload == nil {
		spec.Payload = json.RawMessage(`{}`)
	}
	c, err := e.S.CreateTask(e.Ctx, wf, spec)
	if err != nil {
		t.Fatalf("create %s/%s: %v", wf, spec.NodeID, err)
	}
	return c.Task
}

// A claim-next that finds nothing says when a key's rate next lets it
// take a task: the earliest key that holds back a task of its workflow
// and capabilities, not a key whose held tasks it could not take; on the
// answer of a completion with a next claim too (with the pause that holds
// it). Past its bound of keys held back without such a task, the answer
// is the last one's opening, marked a lower bound.
func testKeyNextClaimableAt(t *testing.T, h Harness) {
	e := setup(t, h)
	start := e.Clock.Now()
	rate := func(d time.Duration) *tg.KeyLimit { return &tg.KeyLimit{Rate: 1, RateInterval: d} }
	// Each key: two tasks, the first claimed now, so the second waits for
	// the key's rate.
	keys := []struct {
		wf, key  string
		every    time.Duration
		requires []string
	}{
		{"other", "early", time.Second, nil},
		{"a", "gpu", 1500 * time.Millisecond, []string{"gpu"}},
		{"a", "late", 2 * time.Second, nil},
	}
	held := map[string]tg.Claimed{}
	for _, k := range keys {
		var first tg.Task
		for i := range 2 {
			task := e.createKeyedSpec(t, k.wf, tg.NodeSpec{NodeID: fmt.Sprintf("%s%d", k.key, i), ConcurrencyKey: k.key, KeyLimit: rate(k.every), Requires: k.requires})
			if i == 0 {
				first = task
			}
		}
		c, _, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", TaskID: first.TaskID, Capabilities: k.requires})
		if err != nil {
			t.Fatalf("claim the first task of key %s: %v", k.key, err)
		}
		held[k.key] = c
	}
	for _, c := range []struct {
		wf   string
		caps []string
		want time.Duration
	}{
		{"", nil, time.Second},                          // any workflow: early
		{"a", nil, 2 * time.Second},                     // not early (another workflow's), not gpu (requires gpu)
		{"a", []string{"gpu"}, 1500 * time.Millisecond}, // gpu now counts
		{"other", []string{"gpu"}, time.Second},
	} {
		got, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", WorkflowID: c.wf, Capabilities: c.caps})
		if err != nil || ok {
			t.Fatalf("claim-next in %q with %v: ok=%v err=%v, want nothing claimable", c.wf, c.caps, ok, err)
		}
		if want := start.Add(c.want); !got.NextClaimableAt.Equal(want) || got.NextClaimableAtLowerBound {
			t.Fatalf("claim-next in %q with %v: next claimable at %v (lower bound %v), want %v exactly", c.wf, c.caps, got.NextClaimableAt, got.NextClaimableAtLowerBound, want)
		}
	}
	// A workflow with no keyed task: no rate holds anything back for it.
	e.Create(t, "plainwf", "p0")
	if _, ok := e.ClaimNext(t, "w", "plainwf"); !ok {
		t.Fatal("claim-next of a plain task refused")
	}
	if got, ok := e.ClaimNext(t, "w", "plainwf"); ok || !got.NextClaimableAt.IsZero() {
		t.Fatalf("claim-next of an empty workflow: ok=%v next claimable at %v, want none", ok, got.NextClaimableAt)
	}

	// The completion's next claim says it too, and names the pause.
	_, next, ok, err := e.S.CompleteAndClaim(e.Ctx, holder(held["late"]), json.RawMessage(`1`), tg.ClaimRequest{WorkflowID: "a"})
	if err != nil || ok {
		t.Fatalf("complete with a next claim in a: ok=%v err=%v, want accepted with nothing claimable", ok, err)
	}
	if want := start.Add(2 * time.Second); !next.NextClaimableAt.Equal(want) || next.Paused != nil {
		t.Fatalf("next claim in a: next claimable at %v, paused %v; want %v and no pause", next.NextClaimableAt, next.Paused, want)
	}
	if _, err := e.S.PauseClaims(e.Ctx, "other", tg.Operator{Name: "op", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	_, next, ok, err = e.S.CompleteAndClaim(e.Ctx, holder(held["early"]), json.RawMessage(`1`), tg.ClaimRequest{WorkflowID: "other"})
	if err != nil || ok || next.Paused == nil || next.Paused.WorkflowID != "other" || !next.NextClaimableAt.IsZero() {
		t.Fatalf("next claim in paused other: ok=%v err=%v paused=%v next claimable at %v; want the pause and no time (its tasks are not claimable)", ok, err, next.Paused, next.NextClaimableAt)
	}

	// More keys held back than the bound, none with a task for workflow
	// b: the answer is the bound's last key's opening, a lower bound; b's
	// own key, which opens later, is past it.
	const many = 101 // more than the store reads (100)
	for i := range many {
		key := fmt.Sprintf("m%03d", i)
		for j := range 2 {
			e.createKeyed(t, "many", fmt.Sprintf("%s-%d", key, j), key, rate(time.Hour))
		}
	}
	for i := range many {
		if _, ok := e.ClaimNext(t, "w", "many"); !ok {
			t.Fatalf("claim %d in many refused", i)
		}
	}
	e.createKeyed(t, "b", "b0", "bkey", rate(2*time.Hour))
	e.createKeyed(t, "b", "b1", "bkey", nil)
	if _, ok := e.ClaimNext(t, "w", "b"); !ok {
		t.Fatal("first claim in b refused")
	}
	got, ok := e.ClaimNext(t, "w", "b")
	if ok || !got.NextClaimableAt.Equal(start.Add(time.Hour)) || !got.NextClaimableAtLowerBound {
		t.Fatalf("claim-next in b past the bound: ok=%v next claimable at %v (lower bound %v), want %v as a lower bound", ok, got.NextClaimableAt, got.NextClaimableAtLowerBound, start.Add(time.Hour))
	}
	got, ok = e.ClaimNext(t, "w", "many")
	if ok || !got.NextClaimableAt.Equal(start.Add(time.Hour)) || got.NextClaimableAtLowerBound {
		t.Fatalf("claim-next in many: ok=%v next claimable at %v (lower bound %v), want %v exactly", ok, got.NextClaimableAt, got.NextClaimableAtLowerBound, start.Add(time.Hour))
	}
}

// A key's row without a limit goes when the last claim of the key ends
// and none of its tasks is ready (in that transaction): such a row is
// what a missing one means (no limit, nothing claimed), and the next
// claim of the key makes it again. A key with a limit, or with ready
// tasks, keeps its row.
func testKeyRowPruned(t *testing.T, h Harness) {
	e := setup(t, h)
	rows := func(key string) int64 {
		return e.Count(t, `SELECT COUNT(*) FROM concurrency_keys WHERE key = ?`, key)
	}
	e.createKeyed(t, "a", "p0", "plain", nil)
	e.createKeyed(t, "a", "p1", "plain", nil)
	e.createKeyed(t, "a", "l0", "limited", &tg.KeyLimit{MaxClaimed: 3})
	c0, ok := e.ClaimNext(t, "w", "a")
	if !ok || c0.Task.NodeID != "p0" {
		t.Fatalf("first claim: ok=%v %s", ok, c0.Task.NodeID)
	}
	if _, err := e.S.Complete(e.Ctx, holder(c0), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	// p1 is ready: the row stays.
	if n := rows("plain"); n != 1 {
		t.Fatalf("key plain with a ready task: %d rows, want 1", n)
	}
	c1, ok := e.ClaimNext(t, "w", "a")
	if !ok || c1.Task.NodeID != "p1" {
		t.Fatalf("second claim: ok=%v %s", ok, c1.Task.NodeID)
	}
	c2, ok := e.ClaimNext(t, "w", "a")
	if !ok || c2.Task.NodeID != "l0" {
		t.Fatalf("third claim: ok=%v %s", ok, c2.Task.NodeID)
	}
	// The last claim of plain ends by a release, the other paths' way.
	if _, err := e.S.Release(e.Ctx, holder(c1)); err != nil {
		t.Fatal(err)
	}
	if n := rows("plain"); n != 1 {
		t.Fatalf("key plain after a release that made p1 ready again: %d rows, want 1", n)
	}
	c1, ok = e.ClaimNext(t, "w", "a")
	if !ok || c1.Task.NodeID != "p1" {
		t.Fatalf("claim after the release: ok=%v %s", ok, c1.Task.NodeID)
	}
	if _, err := e.S.Complete(e.Ctx, holder(c1), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	if n := rows("plain"); n != 0 {
		t.Fatalf("key plain, idle with no limit and no ready task: %d rows, want 0 (pruned)", n)
	}
	if _, ok, err := e.S.KeyInfo(e.Ctx, "plain"); ok || err != nil {
		t.Fatalf("KeyInfo(plain) after the prune: ok=%v err=%v", ok, err)
	}
	if _, err := e.S.Complete(e.Ctx, holder(c2), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	if n := rows("limited"); n != 1 {
		t.Fatalf("key limited, idle with a limit: %d rows, want 1 (kept)", n)
	}
	// The key comes back with its next task, and its claims count again.
	e.createKeyed(t, "b", "p2", "plain", nil)
	c3, ok := e.ClaimNext(t, "w", "b")
	if !ok || c3.Task.NodeID != "p2" {
		t.Fatalf("claim of a pruned key's new task: ok=%v %s", ok, c3.Task.NodeID)
	}
	e.wantClaimedOfKey(t, "plain", 1)
	// A row pruned under a task that was created before (here: deleted
	// by hand, as a prune racing the create would) is made again by the
	// claim: a missing row means no limit.
	e.createKeyed(t, "b", "p3", "plain", nil)
	if _, err := e.S.Complete(e.Ctx, holder(c3), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	e.DB.Exec(t, `DELETE FROM concurrency_keys WHERE key = ?`, "plain")
	c4, ok := e.ClaimNext(t, "w", "b")
	if !ok || c4.Task.NodeID != "p3" {
		t.Fatalf("claim of a task whose key has no row: ok=%v %s", ok, c4.Task.NodeID)
	}
	e.wantClaimedOfKey(t, "plain", 1)
	// An operator's limit on a key with no row makes one and is kept.
	if _, err := e.S.SetKeyLimit(e.Ctx, "plain", tg.KeyLimit{MaxClaimed: 1}, tg.Operator{Name: "op", Reason: "cap"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.S.Complete(e.Ctx, holder(c4), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	if n := rows("plain"); n != 1 {
		t.Fatalf("key plain with an operator's limit: %d rows, want 1", n)
	}
}

// Transactions that lock several keys' rows lock them in one order (by
// key), so two of them that name the same keys in opposite orders never
// deadlock: here whole-graph creates of two workflows whose nodes name
// the same new keys (with a limit, which locks the row) in opposite
// orders, at once, round after round. A
// deadlock would be retried by the PostgreSQL driver: the test reads its
// log for one.
func testKeyLockOrder(t *testing.T, h Harness) {
	e := setupLocks(t, h, 1)
	const nKeys, rounds = 24, 4
	lim := &tg.KeyLimit{MaxClaimed: 5}
	for r := range rounds {
		stenv.Concurrently(t, 2, func(side int) error {
			nodes := make([]tg.NodeSpec, nKeys)
			for i := range nKeys {
				k := i
				if side == 1 {
					k = nKeys - 1 - i
				}
				nodes[i] = tg.NodeSpec{NodeID: fmt.Sprintf("n%02d", i), Payload: json.RawMessage(`{}`), ConcurrencyKey: fmt.Sprintf("r%d-k%02d", r, k), KeyLimit: lim}
			}
			_, err := e.S.CreateWorkflow(e.Ctx, fmt.Sprintf("r%d-side%d", r, side), nodes)
			return err
		})
	}
	if n := e.Count(t, `SELECT COUNT(*) FROM concurrency_keys`); n != nKeys*rounds {
		t.Fatalf("%d key rows, want %d", n, nKeys*rounds)
	}
	e.wantNoDeadlock(t, "creates locked several keys' rows named in opposite orders")
}
