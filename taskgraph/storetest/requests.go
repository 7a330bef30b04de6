package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// requestTests: a write retried with its request id is answered as the
// first time and never acts twice.
var requestTests = []test{
	{"RetriesReplayEveryWrite", testRequestRetriesReplay},
	{"ReusedIDRefused", testRequestReusedIDRefused},
	{"ScopedToPrincipalAndOwner", testRequestScope},
	{"RefusedWriteNotKept", testRequestRefusedNotKept},
	{"ConcurrentRetriesOneAnswer", testRequestConcurrentRetries},
	{"TokenSealed", testRequestTokenSealed},
	{"ExpireAfterRetention", testRequestRetention},
	{"BoundPerPrincipal", testRequestBound},
	{"BadIDRefused", testRequestBadID},
}

// withID is the env's context with request id id.
func (e *env) withID(id string) *env {
	c := *e.Env // a copy: the env it came from keeps its own context
	c.Ctx = tg.WithRequestID(e.Ctx, id)
	return &env{&c}
}

// sameJSON fails t unless a and b encode to the same JSON.
func sameJSON(t *testing.T, what string, a, b any) {
	t.Helper()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("%s: the retry answered\n%s\nthe first call answered\n%s", what, jb, ja)
	}
}

// Every write retried with its request id gets the first answer, later,
// after the state moved on, and does nothing more: no second task, no
// second claim, no second event.
func testRequestRetriesReplay(t *testing.T, h Harness) {
	e := setup(t, h)
	r := e.withID("create-1")
	spec := []tg.NodeSpec{{NodeID: "a"}, {NodeID: "b", DependsOn: []string{"a"}}, {NodeID: "c"}}
	made, err := r.S.CreateWorkflow(r.Ctx, "wf", spec)
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.S.CreateWorkflow(r.Ctx, "wf", spec)
	if err != nil {
		t.Fatalf("retried create: %v", err)
	}
	sameJSON(t, "create", made, again)
	if !again[0].Created {
		t.Fatal("the retried create answered Created false: it must repeat the first answer")
	}

	// claim-next: the retry gets the same claim, token included, and
	// claims nothing more although another task is ready.
	rc := e.withID("claim-1")
	c, ok, err := rc.S.Claim(rc.Ctx, tg.ClaimRequest{Owner: "w", WorkflowID: "wf"})
	if err != nil || !ok {
		t.Fatalf("claim-next: %v %v", ok, err)
	}
	e.Clock.Advance(time.Second)
	c2, ok, err := rc.S.Claim(rc.Ctx, tg.ClaimRequest{Owner: "w", WorkflowID: "wf"})
	if err != nil || !ok {
		t.Fatalf("retried claim-next: %v %v", ok, err)
	}
	sameJSON(t, "claim-next", c, c2)
	if c2.Lease.Token != c.Lease.Token || c2.Lease.Token == "" {
		t.Fatal("the retried claim-next did not return the claim's token")
	}
	if n := e.Count(t, `SELECT COUNT(*) FROM tasks WHERE state = 'claimed'`); n != 1 {
		t.Fatalf("%d tasks claimed after a retried claim-next, want 1", n)
	}

	// heartbeat: the retry answers the first expiry, not a new one.
	hb, err := e.S.Heartbeat(tg.WithRequestID(e.Ctx, "hb-1"), holder(c), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(time.Second)
	hb2, err := e.S.Heartbeat(tg.WithRequestID(e.Ctx, "hb-1"), holder(c), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "heartbeat", hb, hb2)
	if got := e.Get(t, c.Task.TaskID); !got.LeaseExpiresAt.Equal(hb.LeaseExpiresAt) {
		t.Fatalf("the retried heartbeat moved the lease to %v (first: %v)", got.LeaseExpiresAt, hb.LeaseExpiresAt)
	}

	// complete: the retry gets the acknowledgement, not "already finished".
	rd := e.withID("done-1")
	done, err := rd.S.Complete(rd.Ctx, holder(c), json.RawMessage(`{"ok":true}`))
	if err != nil {
		t.Fatal(err)
	}
	done2, err := rd.S.Complete(rd.Ctx, holder(c), json.RawMessage(`{"ok": true}`))
	if err != nil {
		t.Fatalf("retried complete: %v", err)
	}
	sameJSON(t, "complete", done, done2)

	// claim by id, fail, release, holder cancel, protocol cancel.
	ids := map[string]string{}
	for _, n := range made {
		ids[n.Task.NodeID] = n.Task.TaskID
	}
	claimB := tg.ClaimRequest{Owner: "w", TaskID: ids["b"], Lease: 5 * time.Second}
	cb, _, err := e.S.Claim(tg.WithRequestID(e.Ctx, "claim-b"), claimB)
	if err != nil {
		t.Fatal(err)
	}
	cb2, _, err := e.S.Claim(tg.WithRequestID(e.Ctx, "claim-b"), claimB)
	if err != nil {
		t.Fatalf("retried claim by id: %v", err)
	}
	sameJSON(t, "claim by id", cb, cb2)
	failed, err := e.S.FailRetryAfter(tg.WithRequestID(e.Ctx, "fail-b"), holder(cb), "flaky", 0)
	if err != nil {
		t.Fatal(err)
	}
	failed2, err := e.S.FailRetryAfter(tg.WithRequestID(e.Ctx, "fail-b"), holder(cb), "flaky", 0)
	if err != nil {
		t.Fatalf("retried fail: %v", err)
	}
	sameJSON(t, "fail", failed, failed2)
	if got := e.Get(t, ids["b"]); got.Attempts != 1 || got.State != tg.StatePending {
		t.Fatalf("after a retried fail: %s with %d attempts, want pending with 1", got.State, got.Attempts)
	}
	cb3 := e.Claim(t, "w", ids["b"], 0)
	rel, err := e.S.Release(tg.WithRequestID(e.Ctx, "rel-b"), holder(cb3))
	if err != nil {
		t.Fatal(err)
	}
	rel2, err := e.S.Release(tg.WithRequestID(e.Ctx, "rel-b"), holder(cb3))
	if err != nil {
		t.Fatalf("retried release: %v", err)
	}
	sameJSON(t, "release", rel, rel2)
	cc := e.Claim(t, "w", ids["c"], 0)
	can, err := e.S.Cancel(tg.WithRequestID(e.Ctx, "cancel-c"), holder(cc))
	if err != nil {
		t.Fatal(err)
	}
	can2, err := e.S.Cancel(tg.WithRequestID(e.Ctx, "cancel-c"), holder(cc))
	if err != nil {
		t.Fatalf("retried holder cancel: %v", err)
	}
	sameJSON(t, "holder cancel", can, can2)
	pc, changed, err := e.S.CancelTask(tg.WithRequestID(e.Ctx, "cancel-b"), ids["b"], "")
	if err != nil || !changed {
		t.Fatalf("protocol cancel: %v %v", changed, err)
	}
	pc2, changed2, err := e.S.CancelTask(tg.WithRequestID(e.Ctx, "cancel-b"), ids["b"], "")
	if err != nil || !changed2 {
		t.Fatalf("retried protocol cancel: changed %v (want the first answer, true) %v", changed2, err)
	}
	sameJSON(t, "protocol cancel", pc, pc2)

	// One event per write, whatever the retries.
	for _, want := range []struct {
		node, kind string
		n          int
	}{{"a", tg.EventClaim, 1}, {"a", tg.EventHeartbeat, 1}, {"a", tg.EventComplete, 1}, {"b", tg.EventRetry, 1}, {"b", tg.EventRelease, 1}, {"b", tg.EventCancel, 1}, {"c", tg.EventCancel, 1}} {
		n := 0
		for _, ev := range e.Events(t, ids[want.node]) {
			if ev.Kind == want.kind {
				n++
			}
		}
		if n != want.n {
			t.Fatalf("task %s has %d %s events, want %d", want.node, n, want.kind, want.n)
		}
	}
	if st := e.S.Stats(); st.Replays != 9 {
		t.Fatalf("stats: %d replays, want 9", st.Replays)
	}
	e.Verify(t)
}

// A request id names one write: reusing it for another operation or other
// arguments is refused, naming the difference, and writes nothing.
func testRequestReusedIDRefused(t *testing.T, h Harness) {
	e := setup(t, h)
	tk := e.Create(t, "wf", "a")
	r := e.withID("id-1")
	c, _, err := r.S.Claim(r.Ctx, tg.ClaimRequest{Owner: "w", TaskID: tk.TaskID, Lease: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = r.S.Claim(r.Ctx, tg.ClaimRequest{Owner: "w", TaskID: tk.TaskID, Lease: 6 * time.Second})
	wantInvalid(t, err, "request_id", "with a different lease_ms")
	_, _, err = r.S.Claim(r.Ctx, tg.ClaimRequest{Owner: "w", WorkflowID: "wf", Lease: 5 * time.Second})
	wantInvalid(t, err, "request_id", "task_id, workflow_id")
	_, err = r.S.Heartbeat(r.Ctx, holder(c), 0)
	wantInvalid(t, err, "request_id", `"id-1" was used for a claim`)
	// A completion whose fence holds, under the claim's id: refused, and
	// nothing written (a batch reads the kept answers in its first round,
	// after which this completion's update had run).
	unchanged := e.DB.Snapshot(t)
	_, err = r.S.Complete(r.Ctx, holder(c), json.RawMessage(`1`))
	wantInvalid(t, err, "request_id", `"id-1" was used for a claim`)
	if e.DB.Snapshot(t) != unchanged {
		t.Fatal("a completion refused for its request id wrote to the database")
	}
	r2 := e.withID("id-2")
	if _, err := r2.S.Complete(r2.Ctx, holder(c), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	before := e.DB.Snapshot(t)
	_, err = r2.S.Complete(r2.Ctx, holder(c), json.RawMessage(`2`))
	wantInvalid(t, err, "request_id", "different result")
	if e.DB.Snapshot(t) != before {
		t.Fatal("a refused reuse of a request id wrote to the database")
	}
}

// An id is scoped to its principal and owner: the same id from another
// worker or principal is another request.
func testRequestScope(t *testing.T, h Harness) {
	e := setup(t, h)
	e.Create(t, "wf", "a")
	e.Create(t, "wf", "b")
	e.Create(t, "wf", "c")
	ctx := tg.WithRequestID(e.Ctx, "same")
	c1, ok1, err1 := e.S.Claim(ctx, tg.ClaimRequest{Owner: "w1", WorkflowID: "wf"})
	c2, ok2, err2 := e.S.Claim(ctx, tg.ClaimRequest{Owner: "w2", WorkflowID: "wf"})
	c3, ok3, err3 := e.S.Claim(tg.WithPrincipal(ctx, "other"), tg.ClaimRequest{Owner: "w1", WorkflowID: "wf"})
	if err1 != nil || err2 != nil || err3 != nil || !ok1 || !ok2 || !ok3 {
		t.Fatalf("claims: %v %v %v", err1, err2, err3)
	}
	if c1.Task.TaskID == c2.Task.TaskID || c1.Task.TaskID == c3.Task.TaskID || c2.Task.TaskID == c3.Task.TaskID {
		t.Fatalf("one id in three scopes claimed %s, %s, %s: want three claims", c1.Task.TaskID, c2.Task.TaskID, c3.Task.TaskID)
	}
}

// A write that was refused is not kept: its retry is judged anew.
func testRequestRefusedNotKept(t *testing.T, h Harness) {
	e := setup(t, h)
	r := e.withID("next")
	if _, ok, err := r.S.Claim(r.Ctx, tg.ClaimRequest{Owner: "w", WorkflowID: "wf"}); err != nil || ok {
		t.Fatalf("claim-next on nothing: %v %v", ok, err)
	}
	tk := e.Create(t, "wf", "a")
	c, ok, err := r.S.Claim(r.Ctx, tg.ClaimRequest{Owner: "w", WorkflowID: "wf"})
	if err != nil || !ok || c.Task.TaskID != tk.TaskID {
		t.Fatalf("the retry of a claim-next that found nothing: %v %v, want the new task", ok, err)
	}
	stale := holder(c)
	stale.Generation++
	_, err = e.S.Complete(tg.WithRequestID(e.Ctx, "done"), stale, json.RawMessage(`{}`))
	wantStale(t, err, lease.ReasonUnknownGen)
	// Nothing was kept for the refused try: the id is free for the write
	// the worker meant.
	if _, err := e.S.Complete(tg.WithRequestID(e.Ctx, "done"), holder(c), json.RawMessage(`{}`)); err != nil {
		t.Fatalf("the id of a refused write, with the right claim: %v", err)
	}
}

// Many calls with one request id at once get one answer: one claim, one
// token, whatever how they were batched or which transaction won.
func testRequestConcurrentRetries(t *testing.T, h Harness) {
	e := setup(t, h)
	for i := range 8 {
		e.Create(t, "wf", fmt.Sprintf("n%d", i))
	}
	const n = 16
	var wg sync.WaitGroup
	got := make([]tg.Claimed, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ok bool
			got[i], ok, errs[i] = e.S.Claim(tg.WithRequestID(e.Ctx, "once"), tg.ClaimRequest{Owner: "w", WorkflowID: "wf"})
			if errs[i] == nil && !ok {
				errs[i] = errors.New("found no task")
			}
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if !reflect.DeepEqual(got[i].Lease, got[0].Lease) || got[i].Task.TaskID != got[0].Task.TaskID {
			t.Fatalf("call %d got %s %+v, call 0 got %s %+v", i, got[i].Task.TaskID, got[i].Lease, got[0].Task.TaskID, got[0].Lease)
		}
	}
	if c := e.Count(t, `SELECT COUNT(*) FROM tasks WHERE state = 'claimed'`); c != 1 {
		t.Fatalf("%d tasks claimed by %d calls with one request id, want 1", c, n)
	}
}

// The token of a kept claim is not in the database in clear.
func testRequestTokenSealed(t *testing.T, h Harness) {
	e := setup(t, h)
	tk := e.Create(t, "wf", "a")
	r := e.withID("6f1c3e0e-6b0e-4f8e-9a51-8a4b2f7c9d10")
	c, _, err := r.S.Claim(r.Ctx, tg.ClaimRequest{Owner: "w", TaskID: tk.TaskID})
	if err != nil {
		t.Fatal(err)
	}
	snap := e.DB.Snapshot(t)
	if strings.Contains(snap, c.Lease.Token) {
		t.Fatal("the claim token of a kept claim is stored in clear")
	}
	if strings.Contains(snap, "6f1c3e0e-6b0e-4f8e-9a51-8a4b2f7c9d10") {
		t.Fatal("the request id, the key of the sealed token, is stored in clear")
	}
}

// Answers are kept for the retention, then removed: a retry after that
// acts again.
func testRequestRetention(t *testing.T, h Harness) {
	e := setup(t, h)
	tk := e.Create(t, "wf", "a")
	c := e.Claim(t, "w", tk.TaskID, lease.MaxDuration)
	hbCtx := tg.WithRequestID(e.Ctx, "hb")
	first, err := e.S.Heartbeat(hbCtx, holder(c), lease.MaxDuration)
	if err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(tg.RequestRetention - time.Millisecond)
	if n, err := e.S.PruneRequests(e.Ctx); err != nil || n != 0 {
		t.Fatalf("prune before the retention: %d %v", n, err)
	}
	if again, err := e.S.Heartbeat(hbCtx, holder(c), lease.MaxDuration); err != nil || !again.LeaseExpiresAt.Equal(first.LeaseExpiresAt) {
		t.Fatalf("a retry within the retention: %v %v, want the first answer", again.LeaseExpiresAt, err)
	}
	e.Clock.Advance(2 * time.Millisecond)
	if n, err := e.S.PruneRequests(e.Ctx); err != nil || n != 1 {
		t.Fatalf("prune after the retention: %d %v, want 1", n, err)
	}
	if again, err := e.S.Heartbeat(hbCtx, holder(c), lease.MaxDuration); err == nil && again.LeaseExpiresAt.Equal(first.LeaseExpiresAt) {
		t.Fatal("a retry after the retention was answered from a removed answer")
	}
}

// A principal's oldest answers beyond the bound are removed; its newest
// still replay, and another principal's are not counted against it.
func testRequestBound(t *testing.T, h Harness) {
	e := setupWith(t, h, tg.Options{MaxRequestsPerPrincipal: 2})
	p := tg.WithPrincipal(e.Ctx, "busy")
	first := map[int]tg.Created{}
	for i := range 3 {
		c, err := e.S.CreateTask(tg.WithRequestID(p, fmt.Sprint("c", i)), "wf", tg.NodeSpec{NodeID: fmt.Sprint("n", i)})
		if err != nil || !c.Created {
			t.Fatalf("create %d: %v %v", i, c.Created, err)
		}
		first[i] = c
		e.Clock.Advance(time.Millisecond)
	}
	if _, err := e.S.CreateTask(tg.WithRequestID(tg.WithPrincipal(e.Ctx, "calm"), "c0"), "wf", tg.NodeSpec{NodeID: "m"}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.S.PruneRequests(e.Ctx); err != nil || n != 1 {
		t.Fatalf("prune: %d %v, want the one answer beyond the bound removed", n, err)
	}
	// The oldest is gone: its retry acts again (and finds the node it made).
	if c, err := e.S.CreateTask(tg.WithRequestID(p, "c0"), "wf", tg.NodeSpec{NodeID: "n0"}); err != nil || c.Created {
		t.Fatalf("retry of the removed c0: created %v %v, want the node found anew (Created false)", c.Created, err)
	}
	for i := 1; i < 3; i++ {
		c, err := e.S.CreateTask(tg.WithRequestID(p, fmt.Sprint("c", i)), "wf", tg.NodeSpec{NodeID: fmt.Sprint("n", i)})
		if err != nil || !c.Created {
			t.Fatalf("retry of kept c%d: created %v %v, want the first answer (Created true)", i, c.Created, err)
		}
	}
	if c, err := e.S.CreateTask(tg.WithRequestID(tg.WithPrincipal(e.Ctx, "calm"), "c0"), "wf", tg.NodeSpec{NodeID: "m"}); err != nil || !c.Created {
		t.Fatalf("another principal's answer: created %v %v, want it kept", c.Created, err)
	}
}

func testRequestBadID(t *testing.T, h Harness) {
	e := setup(t, h)
	before := e.DB.Snapshot(t)
	for _, id := range []string{strings.Repeat("x", tg.MaxRequestIDLen+1), "has space", "tab\there", "é", "-leading-dash"} {
		_, err := e.S.CreateTask(tg.WithRequestID(e.Ctx, id), "wf", tg.NodeSpec{NodeID: "a"})
		wantInvalid(t, err, "request_id", "must ")
	}
	if e.DB.Snapshot(t) != before {
		t.Fatal("a refused request id wrote to the database")
	}
	if _, err := e.S.CreateTask(tg.WithRequestID(e.Ctx, strings.Repeat("x", tg.MaxRequestIDLen)), "wf", tg.NodeSpec{NodeID: "a"}); err != nil {
		t.Fatalf("an id of the longest length: %v", err)
	}
}
