package taskgraph

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
)

// A claims with a short lease; the clock passes the expiry; B claims with a
// higher generation; A's heartbeat and complete are rejected as stale; B
// completes; the stored result is B's.
func TestFencing(t *testing.T) {
	b := setup(t)
	tk := b.create(t, "wf", "a")
	ca := b.claim(t, "worker-a", tk.TaskID, time.Second)
	if ca.Lease.Generation != 1 || ca.Task.Attempts != 1 || ca.Task.State != StateClaimed {
		t.Fatalf("first claim: %+v", ca)
	}
	b.clock.Advance(1500 * time.Millisecond)
	// Before anyone reclaims, A is told its lease expired.
	_, err := b.s.Heartbeat(b.ctx, holder(ca), 0)
	wantStale(t, err, lease.ReasonLeaseExpired)

	// Once the expiry is processed (the task is pending again, same
	// generation), A is still told its lease expired, not that the claim is
	// merely no longer held.
	if _, err := b.s.ExpireLeases(b.ctx); err != nil {
		t.Fatal(err)
	}
	_, err = b.s.Heartbeat(b.ctx, holder(ca), 0)
	wantStale(t, err, lease.ReasonLeaseExpired)
	_, err = b.s.Complete(b.ctx, holder(ca), json.RawMessage(`"late"`))
	wantStale(t, err, lease.ReasonLeaseExpired)

	cb := b.claim(t, "worker-b", tk.TaskID, 10*time.Second)
	if cb.Lease.Generation != 2 || cb.Task.Attempts != 2 {
		t.Fatalf("reclaim: generation %d attempts %d, want 2 and 2", cb.Lease.Generation, cb.Task.Attempts)
	}
	if cb.Lease.Token == ca.Lease.Token {
		t.Fatal("reclaim reused the claim token")
	}
	_, err = b.s.Heartbeat(b.ctx, holder(ca), 0)
	wantStale(t, err, lease.ReasonSuperseded)
	_, err = b.s.Complete(b.ctx, holder(ca), json.RawMessage(`"from A"`))
	wantStale(t, err, lease.ReasonSuperseded)
	// A cannot borrow B's generation without B's token, nor B's token without being B.
	forged := holder(ca)
	forged.Generation = 2
	_, err = b.s.Complete(b.ctx, forged, json.RawMessage(`"forged"`))
	wantStale(t, err, lease.ReasonWrongOwner)
	forged = holder(cb)
	forged.Token = ca.Lease.Token
	_, err = b.s.Complete(b.ctx, forged, json.RawMessage(`"forged"`))
	wantStale(t, err, lease.ReasonWrongToken)

	hb, err := b.s.Heartbeat(b.ctx, holder(cb), 20*time.Second)
	if err != nil {
		t.Fatalf("B heartbeat: %v", err)
	}
	if hb.Generation != 2 || !hb.LeaseExpiresAt.Equal(b.clock.Now().Add(20*time.Second)) {
		t.Fatalf("heartbeat: generation %d expiry %v", hb.Generation, hb.LeaseExpiresAt)
	}
	done, err := b.s.Complete(b.ctx, holder(cb), json.RawMessage(`{"by": "B"}`))
	if err != nil {
		t.Fatalf("B complete: %v", err)
	}
	if done.State != StateCompleted || string(done.Result) != `{"by":"B"}` {
		t.Fatalf("completed task: %s %s", done.State, done.Result)
	}
	got := b.wantState(t, tk.TaskID, StateCompleted)
	if string(got.Result) != `{"by":"B"}` || got.Owner != "worker-b" {
		t.Fatalf("stored result %s by %s, want B's", got.Result, got.Owner)
	}
	// Terminal: every holder write is now refused, B's included.
	_, err = b.s.Heartbeat(b.ctx, holder(cb), 0)
	wantStale(t, err, lease.ReasonTerminal)
	if st := b.s.Stats(); st.StaleRejections != 8 || st.Claims != 2 || st.Reclaims != 1 || st.Completions != 1 {
		t.Fatalf("stats: %+v", st)
	}
	b.verify(t)
}

func TestClaimTokenNeverRead(t *testing.T) {
	b := setup(t)
	tk := b.create(t, "wf", "a")
	c := b.claim(t, "w", tk.TaskID, 0)
	if c.Lease.Token == "" || !c.Lease.ExpiresAt.Equal(t0.Add(lease.DefaultDuration)) {
		t.Fatalf("lease: %+v", c.Lease)
	}
	for _, e := range mustEvents(t, b, tk.TaskID) {
		if strings.Contains(string(e.Detail), c.Lease.Token) {
			t.Fatal("the claim token leaked into the history")
		}
	}
	var n int
	db := b.s.rdb
	if err := db.QueryRow(`SELECT COUNT(*) FROM tasks WHERE token_hash = ? OR CAST(token_hash AS TEXT) = ?`, []byte(c.Lease.Token), c.Lease.Token).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the token is stored in clear (n=%d, err=%v)", n, err)
	}
}

func mustEvents(t *testing.T, b *bundle, id string) []Event {
	t.Helper()
	evs, err := b.s.TaskEvents(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestDiamondOrder(t *testing.T) {
	b := setup(t)
	out, err := b.s.CreateWorkflow(b.ctx, "diamond", []NodeSpec{
		{NodeID: "d", DependsOn: []string{"b", "c"}},
		{NodeID: "b", DependsOn: []string{"a"}},
		{NodeID: "c", DependsOn: []string{"a"}},
		{NodeID: "a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, c := range out {
		ids[c.Task.NodeID] = c.Task.TaskID
	}
	b.wantState(t, ids["a"], StatePending)
	b.wantState(t, ids["d"], StateBlocked)
	step := func(wantNodes ...string) {
		t.Helper()
		var got []string
		var claims []Claimed
		for {
			c, ok := b.claimNext(t, "w", "diamond")
			if !ok {
				break
			}
			got = append(got, c.Task.NodeID)
			claims = append(claims, c)
		}
		if strings.Join(got, ",") != strings.Join(wantNodes, ",") {
			t.Fatalf("claimable %v, want %v", got, wantNodes)
		}
		for _, c := range claims {
			if _, err := b.s.Complete(b.ctx, holder(c), json.RawMessage(`1`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	step("a")
	step("b", "c")
	step("d")
	step()
	v, err := b.s.Workflow(b.ctx, "diamond")
	if err != nil {
		t.Fatal(err)
	}
	if !v.Finished() || v.Counts[StateCompleted] != 4 || len(v.Edges) != 4 {
		t.Fatalf("workflow view: counts %v edges %v", v.Counts, v.Edges)
	}
	b.verify(t)
}

func TestRejectedGraphsWriteNothing(t *testing.T) {
	b := setup(t)
	b.create(t, "wf", "root")
	before := fingerprint(t, b.path)
	for name, nodes := range map[string][]NodeSpec{
		"cycle":      {{NodeID: "x", DependsOn: []string{"y"}}, {NodeID: "y", DependsOn: []string{"z"}}, {NodeID: "z", DependsOn: []string{"x"}}},
		"self":       {{NodeID: "x", DependsOn: []string{"x"}}},
		"unknown":    {{NodeID: "x", DependsOn: []string{"root"}}, {NodeID: "y", DependsOn: []string{"nope"}}},
		"duplicates": {{NodeID: "x"}, {NodeID: "x"}},
	} {
		_, err := b.s.CreateWorkflow(b.ctx, "wf", nodes)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field == "" {
			t.Errorf("%s: no field named in %v", name, err)
		}
		if after := fingerprint(t, b.path); after != before {
			t.Errorf("%s: the database changed", name)
		}
	}
	_, err := b.s.CreateWorkflow(b.ctx, "wf", []NodeSpec{{NodeID: "x", DependsOn: []string{"y"}}, {NodeID: "y", DependsOn: []string{"x"}}})
	if err == nil || !strings.Contains(err.Error(), "cycle") || !strings.Contains(err.Error(), "x, y") {
		t.Errorf("cycle error does not name the nodes: %v", err)
	}
}

func TestFailureCancelsDownstream(t *testing.T) {
	b := setup(t)
	a := b.create(t, "wf", "a")
	bb := b.create(t, "wf", "b", "a")
	c := b.create(t, "wf", "c", "b")
	other := b.create(t, "wf", "other")
	ca := b.claim(t, "w", a.TaskID, 0)
	failed, err := b.s.Fail(b.ctx, holder(ca), "disk full", false)
	if err != nil {
		t.Fatal(err)
	}
	if failed.State != StateFailed || failed.Error != "disk full" {
		t.Fatalf("failed task: %+v", failed)
	}
	for _, id := range []string{bb.TaskID, c.TaskID} {
		tk := b.wantState(t, id, StateCancelled)
		if !strings.Contains(tk.StatusMessage, a.TaskID) || !strings.Contains(tk.StatusMessage, "failed") {
			t.Errorf("status %q does not name the upstream task", tk.StatusMessage)
		}
	}
	b.wantState(t, other.TaskID, StatePending)
	// A task created on a failed dependency cannot run: it starts cancelled.
	late := b.create(t, "wf", "late", "c")
	if late.State != StateCancelled {
		t.Fatalf("late dependent is %s", late.State)
	}
	b.verify(t)
}

func TestRetryUpToMaxAttempts(t *testing.T) {
	b := setup(t)
	c, err := b.s.CreateTask(b.ctx, "wf", NodeSpec{NodeID: "flaky", MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	dep := b.create(t, "wf", "after", "flaky")
	for attempt := 1; attempt <= 3; attempt++ {
		cl, ok := b.claimNext(t, "w", "wf")
		if !ok || cl.Task.TaskID != c.Task.TaskID || cl.Task.Attempts != attempt {
			t.Fatalf("attempt %d: claimed %+v ok=%v", attempt, cl.Task, ok)
		}
		tk, err := b.s.Fail(b.ctx, holder(cl), "timeout", true)
		if err != nil {
			t.Fatal(err)
		}
		want := StatePending
		if attempt == 3 {
			want = StateFailed
		}
		if tk.State != want {
			t.Fatalf("after attempt %d: %s, want %s", attempt, tk.State, want)
		}
		if want == StatePending && (tk.Owner != "" || tk.LeaseExpiresAt != (time.Time{})) {
			t.Fatalf("retry kept the owner or lease: %+v", tk)
		}
	}
	b.wantState(t, dep.TaskID, StateCancelled)
	if _, ok := b.claimNext(t, "w", "wf"); ok {
		t.Fatal("a failed task was claimable")
	}
	st := b.s.Stats()
	if st.Retries != 2 || st.Failures != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestLeaseExpiryOnLastAttempt(t *testing.T) {
	b := setup(t)
	c, _ := b.s.CreateTask(b.ctx, "wf", NodeSpec{NodeID: "n", MaxAttempts: 2})
	dep := b.create(t, "wf", "dep", "n")
	b.claim(t, "a", c.Task.TaskID, time.Second)
	b.clock.Advance(2 * time.Second)
	// Expired with an attempt left: claim-next reclaims it.
	c2, ok, err := b.s.Claim(b.ctx, ClaimRequest{Owner: "b", Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !ok || c2.Task.TaskID != c.Task.TaskID || c2.Lease.Generation != 2 {
		t.Fatalf("reclaim: %+v %v", c2, ok)
	}
	b.clock.Advance(2 * time.Second)
	// Expired on the last attempt: inspect shows it failed, dependents cancelled.
	tk := b.wantState(t, c.Task.TaskID, StateFailed)
	if tk.Error != "lease expired after 2 attempts" {
		t.Fatalf("error %q", tk.Error)
	}
	b.wantState(t, dep.TaskID, StateCancelled)
	kinds := []string{}
	for _, e := range mustEvents(t, b, c.Task.TaskID) {
		kinds = append(kinds, e.Kind)
	}
	if got := strings.Join(kinds, ","); got != "create,claim,expire,claim,expire" {
		t.Fatalf("events %s", got)
	}
	if st := b.s.Stats(); st.Expiries != 2 || st.Failures != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestClaimScanFailsLastAttemptExpiry(t *testing.T) {
	b := setup(t)
	c, _ := b.s.CreateTask(b.ctx, "wf", NodeSpec{NodeID: "n", MaxAttempts: 1})
	b.claim(t, "a", c.Task.TaskID, time.Second)
	b.clock.Advance(time.Second)
	if _, ok := b.claimNext(t, "b", ""); ok {
		t.Fatal("claimed a task whose last attempt expired")
	}
	var st string
	if err := b.s.rdb.QueryRow(`SELECT state FROM tasks WHERE task_id = ?`, c.Task.TaskID).Scan(&st); err != nil || st != "failed" {
		t.Fatalf("stored state %q (%v), want failed after the claim scan", st, err)
	}
}

func TestIdempotentCreate(t *testing.T) {
	b := setup(t)
	first, err := b.s.CreateTask(b.ctx, "wf", NodeSpec{NodeID: "a", Payload: json.RawMessage(`{"x": 1, "y": [1,2]}`)})
	if err != nil || !first.Created {
		t.Fatalf("first create: %+v %v", first, err)
	}
	b.create(t, "wf", "b")
	before := fingerprint(t, b.path)
	again, err := b.s.CreateTask(b.ctx, "wf", NodeSpec{NodeID: "a", Payload: json.RawMessage(`{"y":[1,2],"x":1}`), MaxAttempts: DefaultMaxAttempts})
	if err != nil || again.Created || again.Task.TaskID != first.Task.TaskID {
		t.Fatalf("repeat create: %+v %v", again, err)
	}
	if fingerprint(t, b.path) != before {
		t.Fatal("an idempotent repeat wrote to the database")
	}
	for name, spec := range map[string]NodeSpec{
		"payload":      {NodeID: "a", Payload: json.RawMessage(`{"x":2,"y":[1,2]}`)},
		"depends_on":   {NodeID: "a", Payload: json.RawMessage(`{"x":1,"y":[1,2]}`), DependsOn: []string{"b"}},
		"max_attempts": {NodeID: "a", Payload: json.RawMessage(`{"x":1,"y":[1,2]}`), MaxAttempts: 7},
	} {
		_, err := b.s.CreateTask(b.ctx, "wf", spec)
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s clash: %v", name, err)
		}
	}
	if fingerprint(t, b.path) != before {
		t.Fatal("a conflicting create wrote to the database")
	}
	// A workflow batch that repeats existing nodes and adds new ones.
	out, err := b.s.CreateWorkflow(b.ctx, "wf", []NodeSpec{{NodeID: "b", Payload: json.RawMessage(`{"n":"b"}`)}, {NodeID: "c", DependsOn: []string{"a", "b"}}})
	if err != nil || out[0].Created || !out[1].Created || out[1].Task.State != StateBlocked {
		t.Fatalf("mixed batch: %+v %v", out, err)
	}
}

func TestProtocolCancelFencesHolder(t *testing.T) {
	b := setup(t)
	a := b.create(t, "wf", "a")
	d := b.create(t, "wf", "d", "a")
	c := b.claim(t, "w", a.TaskID, 0)
	tk, changed, err := b.s.CancelTask(b.ctx, a.TaskID, "")
	if err != nil || !changed || tk.State != StateCancelled {
		t.Fatalf("cancel: %+v %v %v", tk, changed, err)
	}
	_, err = b.s.Heartbeat(b.ctx, holder(c), 0)
	wantStale(t, err, lease.ReasonTerminal)
	_, err = b.s.Complete(b.ctx, holder(c), json.RawMessage(`1`))
	wantStale(t, err, lease.ReasonTerminal)
	b.wantState(t, d.TaskID, StateCancelled)
	// A terminal task is left unchanged.
	before := fingerprint(t, b.path)
	tk, changed, err = b.s.CancelTask(b.ctx, a.TaskID, "")
	if err != nil || changed || tk.State != StateCancelled {
		t.Fatalf("second cancel: %v %v", changed, err)
	}
	if fingerprint(t, b.path) != before {
		t.Fatal("cancelling a terminal task wrote")
	}
	if _, _, err := b.s.CancelTask(b.ctx, "01ARZ3NDEKTSV4RRFFQ69G5FAV", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown task: %v", err)
	}
}

func TestHolderCancel(t *testing.T) {
	b := setup(t)
	a := b.create(t, "wf", "a")
	c := b.claim(t, "w", a.TaskID, 0)
	tk, err := b.s.Cancel(b.ctx, holder(c))
	if err != nil || tk.State != StateCancelled {
		t.Fatalf("%+v %v", tk, err)
	}
	_, err = b.s.Cancel(b.ctx, holder(c))
	wantStale(t, err, lease.ReasonTerminal)
}

func TestClaimConflicts(t *testing.T) {
	b := setup(t)
	a := b.create(t, "wf", "a")
	blocked := b.create(t, "wf", "b", "a")
	_, _, err := b.s.Claim(b.ctx, ClaimRequest{Owner: "w", TaskID: blocked.TaskID})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "waiting on a") {
		t.Fatalf("claim blocked: %v", err)
	}
	b.claim(t, "w", a.TaskID, 0)
	_, _, err = b.s.Claim(b.ctx, ClaimRequest{Owner: "v", TaskID: a.TaskID})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "already claimed by w") {
		t.Fatalf("claim claimed: %v", err)
	}
	_, _, err = b.s.Claim(b.ctx, ClaimRequest{Owner: "v", TaskID: "01ARZ3NDEKTSV4RRFFQ69G5FAV"})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("claim unknown: %v", err)
	}
}

func TestBlockedStatusNamesOnlyUnfinishedDependencies(t *testing.T) {
	b := setup(t)
	a := b.create(t, "wf", "a")
	b.create(t, "wf", "b")
	d := b.create(t, "wf", "d", "a", "b")
	if got := b.get(t, d.TaskID).StatusMessage; got != "waiting on a, b" {
		t.Fatalf("status %q", got)
	}
	c := b.claim(t, "w", a.TaskID, 0)
	if _, err := b.s.Complete(b.ctx, holder(c), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	if got := b.get(t, d.TaskID).StatusMessage; got != "waiting on b" {
		t.Fatalf("after a completed: status %q, want %q", got, "waiting on b")
	}
}
