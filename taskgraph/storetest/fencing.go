package storetest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// fencingTests: leases, generations and tokens decide which writes land.
var fencingTests = []test{
	{"Fencing", testFencing},
	{"ClaimTokenNeverStored", testClaimTokenNeverRead},
	{"ProtocolCancelFencesHolder", testProtocolCancelFencesHolder},
	{"HolderCancel", testHolderCancel},
	{"ClaimConflicts", testClaimConflicts},
	{"LeaseExpiryOnLastAttempt", testLeaseExpiryOnLastAttempt},
	{"ClaimScanFailsLastAttemptExpiry", testClaimScanFailsLastAttemptExpiry},
	{"ClaimByIDKeepsExpiryItReports", testClaimByIDKeepsExpiryItReports},
	{"WithArrival", testWithArrival},
	{"ExpiryJudgedAtArrival", testExpiryJudgedAtArrival},
	{"RestartKeepsLeasesAndChains", testRestartKeepsLeasesAndChains},
}

// A claims with a short lease; the clock passes the expiry; B claims with a
// higher generation; A's heartbeat and complete are rejected as stale; B
// completes; the stored result is B's.
func testFencing(t *testing.T, h Harness) {
	e := setup(t, h)
	tk := e.Create(t, "wf", "a")
	ca := e.Claim(t, "worker-a", tk.TaskID, time.Second)
	if ca.Lease.Generation != 1 || ca.Task.Attempts != 1 || ca.Task.State != tg.StateClaimed {
		t.Fatalf("first claim: %+v", ca)
	}
	e.Clock.Advance(1500 * time.Millisecond)
	// Before anyone reclaims, A is told its lease expired.
	_, err := e.S.Heartbeat(e.Ctx, holder(ca), 0)
	wantStale(t, err, lease.ReasonLeaseExpired)

	// Once the expiry is processed (the task is pending again, same
	// generation), A is still told its lease expired, not that the claim is
	// merely no longer held.
	if _, err := e.S.ExpireLeases(e.Ctx); err != nil {
		t.Fatal(err)
	}
	_, err = e.S.Heartbeat(e.Ctx, holder(ca), 0)
	wantStale(t, err, lease.ReasonLeaseExpired)
	_, err = e.S.Complete(e.Ctx, holder(ca), json.RawMessage(`"late"`))
	wantStale(t, err, lease.ReasonLeaseExpired)

	cb := e.Claim(t, "worker-b", tk.TaskID, 10*time.Second)
	if cb.Lease.Generation != 2 || cb.Task.Attempts != 2 {
		t.Fatalf("reclaim: generation %d attempts %d, want 2 and 2", cb.Lease.Generation, cb.Task.Attempts)
	}
	if cb.Lease.Token == ca.Lease.Token {
		t.Fatal("reclaim reused the claim token")
	}
	_, err = e.S.Heartbeat(e.Ctx, holder(ca), 0)
	wantStale(t, err, lease.ReasonSuperseded)
	_, err = e.S.Complete(e.Ctx, holder(ca), json.RawMessage(`"from A"`))
	wantStale(t, err, lease.ReasonSuperseded)
	// A cannot borrow B's generation without B's token, nor B's token without being B.
	forged := holder(ca)
	forged.Generation = 2
	_, err = e.S.Complete(e.Ctx, forged, json.RawMessage(`"forged"`))
	wantStale(t, err, lease.ReasonWrongOwner)
	forged = holder(cb)
	forged.Token = ca.Lease.Token
	_, err = e.S.Complete(e.Ctx, forged, json.RawMessage(`"forged"`))
	wantStale(t, err, lease.ReasonWrongToken)

	hb, err := e.S.Heartbeat(e.Ctx, holder(cb), 20*time.Second)
	if err != nil {
		t.Fatalf("B heartbeat: %v", err)
	}
	if hb.Generation != 2 || !hb.LeaseExpiresAt.Equal(e.Clock.Now().Add(20*time.Second)) {
		t.Fatalf("heartbeat: generation %d expiry %v", hb.Generation, hb.LeaseExpiresAt)
	}
	done, err := e.S.Complete(e.Ctx, holder(cb), json.RawMessage(`{"by": "B"}`))
	if err != nil {
		t.Fatalf("B complete: %v", err)
	}
	if done.State != tg.StateCompleted || string(done.Result) != `{"by":"B"}` {
		t.Fatalf("completed task: %s %s", done.State, done.Result)
	}
	got := e.WantState(t, tk.TaskID, tg.StateCompleted)
	if string(got.Result) != `{"by":"B"}` || got.Owner != "worker-b" {
		t.Fatalf("stored result %s by %s, want B's", got.Result, got.Owner)
	}
	// Terminal: every holder write is now refused, B's included.
	_, err = e.S.Heartbeat(e.Ctx, holder(cb), 0)
	wantStale(t, err, lease.ReasonTerminal)
	if st := e.S.Stats(); st.StaleRejections != 8 || st.Claims != 2 || st.Reclaims != 1 || st.Completions != 1 {
		t.Fatalf("stats: %+v", st)
	}
	e.Verify(t)
}

func testClaimTokenNeverRead(t *testing.T, h Harness) {
	e := setup(t, h)
	tk := e.Create(t, "wf", "a")
	c := e.Claim(t, "w", tk.TaskID, 0)
	if c.Lease.Token == "" || !c.Lease.ExpiresAt.Equal(t0.Add(lease.DefaultDuration)) {
		t.Fatalf("lease: %+v", c.Lease)
	}
	for _, ev := range e.Events(t, tk.TaskID) {
		if strings.Contains(string(ev.Detail), c.Lease.Token) {
			t.Fatal("the claim token leaked into the history")
		}
	}
	// Only a hash of the token is stored: the token appears nowhere in the
	// database.
	if strings.Contains(e.DB.Snapshot(t), c.Lease.Token) {
		t.Fatal("the claim token is stored in clear")
	}
}

func testProtocolCancelFencesHolder(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	d := e.Create(t, "wf", "d", "a")
	c := e.Claim(t, "w", a.TaskID, 0)
	tk, changed, err := e.S.CancelTask(e.Ctx, a.TaskID, "")
	if err != nil || !changed || tk.State != tg.StateCancelled {
		t.Fatalf("cancel: %+v %v %v", tk, changed, err)
	}
	_, err = e.S.Heartbeat(e.Ctx, holder(c), 0)
	wantStale(t, err, lease.ReasonTerminal)
	_, err = e.S.Complete(e.Ctx, holder(c), json.RawMessage(`1`))
	wantStale(t, err, lease.ReasonTerminal)
	e.WantState(t, d.TaskID, tg.StateCancelled)
	// A terminal task is left unchanged.
	before := e.DB.Snapshot(t)
	tk, changed, err = e.S.CancelTask(e.Ctx, a.TaskID, "")
	if err != nil || changed || tk.State != tg.StateCancelled {
		t.Fatalf("second cancel: %v %v", changed, err)
	}
	if e.DB.Snapshot(t) != before {
		t.Fatal("cancelling a terminal task wrote")
	}
	if _, _, err := e.S.CancelTask(e.Ctx, "01ARZ3NDEKTSV4RRFFQ69G5FAV", ""); !errors.Is(err, tg.ErrNotFound) {
		t.Fatalf("unknown task: %v", err)
	}
}

func testHolderCancel(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	c := e.Claim(t, "w", a.TaskID, 0)
	tk, err := e.S.Cancel(e.Ctx, holder(c))
	if err != nil || tk.State != tg.StateCancelled {
		t.Fatalf("%+v %v", tk, err)
	}
	_, err = e.S.Cancel(e.Ctx, holder(c))
	wantStale(t, err, lease.ReasonTerminal)
}

func testClaimConflicts(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	blocked := e.Create(t, "wf", "b", "a")
	_, _, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", TaskID: blocked.TaskID})
	if !errors.Is(err, tg.ErrConflict) || !strings.Contains(err.Error(), "waiting on a") {
		t.Fatalf("claim blocked: %v", err)
	}
	e.Claim(t, "w", a.TaskID, 0)
	_, _, err = e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "v", TaskID: a.TaskID})
	if !errors.Is(err, tg.ErrConflict) || !strings.Contains(err.Error(), "already claimed by w") {
		t.Fatalf("claim claimed: %v", err)
	}
	_, _, err = e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "v", TaskID: "01ARZ3NDEKTSV4RRFFQ69G5FAV"})
	if !errors.Is(err, tg.ErrNotFound) {
		t.Fatalf("claim unknown: %v", err)
	}
}

func testLeaseExpiryOnLastAttempt(t *testing.T, h Harness) {
	e := setup(t, h)
	c, _ := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "n", MaxAttempts: 2})
	dep := e.Create(t, "wf", "dep", "n")
	e.Claim(t, "a", c.Task.TaskID, time.Second)
	e.Clock.Advance(2 * time.Second)
	// Expired with an attempt left: claim-next reclaims it.
	c2, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "b", Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !ok || c2.Task.TaskID != c.Task.TaskID || c2.Lease.Generation != 2 {
		t.Fatalf("reclaim: %+v %v", c2, ok)
	}
	e.Clock.Advance(2 * time.Second)
	// Expired on the last attempt: inspect shows it failed, dependents cancelled.
	tk := e.WantState(t, c.Task.TaskID, tg.StateFailed)
	if tk.Error != "lease expired after 2 attempts" {
		t.Fatalf("error %q", tk.Error)
	}
	e.WantState(t, dep.TaskID, tg.StateCancelled)
	kinds := []string{}
	for _, ev := range e.Events(t, c.Task.TaskID) {
		kinds = append(kinds, ev.Kind)
	}
	if got := strings.Join(kinds, ","); got != "create,claim,expire,claim,expire" {
		t.Fatalf("events %s", got)
	}
	if st := e.S.Stats(); st.Expiries != 2 || st.Failures != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func testClaimScanFailsLastAttemptExpiry(t *testing.T, h Harness) {
	e := setup(t, h)
	c, _ := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "n", MaxAttempts: 1})
	e.Claim(t, "a", c.Task.TaskID, time.Second)
	e.Clock.Advance(time.Second)
	if _, ok := e.ClaimNext(t, "b", ""); ok {
		t.Fatal("claimed a task whose last attempt expired")
	}
	if st := e.StoredState(t, c.Task.TaskID); st != "failed" {
		t.Fatalf("stored state %q, want failed after the claim scan", st)
	}
}

// Regression: claiming by id a task whose lease lapsed on its last attempt
// processed the expiry (failed, dependents cancelled) and then reported the
// conflict as the operation's error, which rolled the expiry back: the caller
// was told the task had failed while the database still showed it claimed.
// The expiry now commits; the conflict is still reported, and a conflict
// with nothing to expire writes nothing.
func testClaimByIDKeepsExpiryItReports(t *testing.T, h Harness) {
	e := setup(t, h)
	c, err := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "once", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	dep := e.Create(t, "wf", "dep", "once")
	e.Claim(t, "a", c.Task.TaskID, time.Second)
	// A conflict with a live claim writes nothing.
	before := e.DB.Snapshot(t)
	_, _, err = e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "b", TaskID: c.Task.TaskID})
	if !errors.Is(err, tg.ErrConflict) {
		t.Fatalf("claim of a held task: %v", err)
	}
	if e.DB.Snapshot(t) != before {
		t.Fatal("a refused claim wrote")
	}
	e.Clock.Advance(2 * time.Second)
	_, _, err = e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "b", TaskID: c.Task.TaskID})
	if !errors.Is(err, tg.ErrConflict) || !strings.Contains(err.Error(), "failed") {
		t.Fatalf("claim of a task whose last lease lapsed: %v", err)
	}
	// Read the stored rows directly: Task() would process the expiry itself.
	st, depSt := e.StoredState(t, c.Task.TaskID), e.StoredState(t, dep.TaskID)
	if st != "failed" || depSt != "cancelled" {
		t.Fatalf("stored states %s and %s after the reported failure, want failed and cancelled", st, depSt)
	}
	if ev := e.lastEvent(t, c.Task.TaskID, tg.EventExpire); !strings.Contains(string(ev.Detail), `"next":"failed"`) {
		t.Fatalf("expire event %s", ev.Detail)
	}
	e.Verify(t)
}

// WithArrival lets a transport stamp the request earlier than the store call;
// both lease.Check and the fenced UPDATE use that time.
func testWithArrival(t *testing.T, h Harness) {
	e := setup(t, h)
	x := e.Create(t, "wf", "x")
	y := e.Create(t, "wf", "y")
	cx := e.Claim(t, "w", x.TaskID, 5*time.Second)
	cy := e.Claim(t, "w", y.TaskID, 5*time.Second)
	before := e.Clock.Advance(4 * time.Second)
	e.Clock.Advance(2 * time.Second) // both leases have lapsed now
	if _, err := e.S.Complete(tg.WithArrival(e.Ctx, before), holder(cx), json.RawMessage(`1`)); err != nil {
		t.Fatalf("complete stamped before the expiry: %v", err)
	}
	e.WantState(t, x.TaskID, tg.StateCompleted)
	_, err := e.S.Complete(tg.WithArrival(e.Ctx, e.Clock.Now()), holder(cy), json.RawMessage(`1`))
	wantStale(t, err, lease.ReasonLeaseExpired)
}

// A claim, a sweep or a read queued ahead of a holder write decides which
// leases lapsed at its own arrival: one that arrived before the expiry never
// expires the lease that the holder write queued behind it renews.
func testExpiryJudgedAtArrival(t *testing.T, h Harness) {
	e := setup(t, h)
	x := e.Create(t, "wf", "x")
	cx := e.Claim(t, "w1", x.TaskID, 5*time.Second)
	early := e.Clock.Advance(4 * time.Second)
	e.Clock.Advance(10 * time.Second) // the lease lapsed 9 s ago
	if _, ok, err := e.S.Claim(tg.WithArrival(e.Ctx, early), tg.ClaimRequest{Owner: "w2"}); err != nil || ok {
		t.Fatalf("claim-next that arrived before the expiry: ok=%v err=%v, want no task", ok, err)
	}
	if _, _, err := e.S.Claim(tg.WithArrival(e.Ctx, early), tg.ClaimRequest{Owner: "w2", TaskID: x.TaskID}); !errors.Is(err, tg.ErrConflict) {
		t.Fatalf("claim of the task that arrived before the expiry: %v, want a conflict", err)
	}
	if n, err := e.S.ExpireLeases(tg.WithArrival(e.Ctx, early)); err != nil || n != 0 {
		t.Fatalf("sweep that arrived before the expiry expired %d (err %v)", n, err)
	}
	if tk, err := e.S.Task(tg.WithArrival(e.Ctx, early), x.TaskID); err != nil || tk.State != tg.StateClaimed {
		t.Fatalf("read that arrived before the expiry: %v %v", tk.State, err)
	}
	if _, err := e.S.Heartbeat(tg.WithArrival(e.Ctx, early.Add(500*time.Millisecond)), holder(cx), 0); err != nil {
		t.Fatalf("heartbeat that arrived before the expiry, after the others: %v", err)
	}
	e.WantState(t, x.TaskID, tg.StateClaimed)
	// Judged now, a lapsed lease is expired as before.
	e.Clock.Advance(time.Minute)
	c, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w2"})
	if err != nil || !ok || c.Lease.Generation != 2 {
		t.Fatalf("claim-next after the renewed lease lapsed: ok=%v err=%v gen=%d", ok, err, c.Lease.Generation)
	}
}

// Closing and reopening the same database keeps leases, generations and
// hash chains: a claim made before the close can still be heartbeated and
// completed after it, and a lapsed one is reclaimed at the next generation.
func testRestartKeepsLeasesAndChains(t *testing.T, h Harness) {
	e := setup(t, h)
	long := e.Create(t, "wf", "long")
	after := e.Create(t, "wf", "after", "long")
	short := e.Create(t, "wf", "short")
	cl := e.Claim(t, "worker-1", long.TaskID, time.Minute)
	cs := e.Claim(t, "worker-2", short.TaskID, 10*time.Second)
	if _, err := e.S.Heartbeat(e.Ctx, holder(cl), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	before := e.Verify(t)
	evBefore, err := e.S.WorkflowEvents(e.Ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	snap := e.DB.Snapshot(t)
	if err := e.S.Close(); err != nil {
		t.Fatal(err)
	}

	e.S = e.DB.Open(t, tg.Options{Clock: e.Clock})
	e.Unchanged(t, snap, "reopening")
	got := e.WantState(t, long.TaskID, tg.StateClaimed)
	if got.Owner != "worker-1" || got.Generation != 1 || !got.LeaseExpiresAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("lease after reopen: %+v", got)
	}
	if rep := e.Verify(t); rep != before {
		t.Fatalf("history after reopen %+v, before %+v", rep, before)
	}
	e.Clock.Advance(30 * time.Second)
	// The claim made before the restart is still the live one.
	hb, err := e.S.Heartbeat(e.Ctx, holder(cl), time.Minute)
	if err != nil {
		t.Fatalf("heartbeat after reopen: %v", err)
	}
	if hb.Generation != 1 || !hb.LeaseExpiresAt.Equal(e.Clock.Now().Add(time.Minute)) {
		t.Fatalf("heartbeat: %+v", hb)
	}
	// The short lease lapsed across the restart: its holder is refused and
	// the task is reclaimed at generation 2.
	_, err = e.S.Heartbeat(e.Ctx, holder(cs), 0)
	wantStale(t, err, lease.ReasonLeaseExpired)
	re, ok := e.ClaimNext(t, "worker-3", "wf")
	if !ok || re.Task.TaskID != short.TaskID || re.Lease.Generation != 2 {
		t.Fatalf("reclaim after reopen: %v %+v", ok, re)
	}
	_, err = e.S.Complete(e.Ctx, holder(cs), json.RawMessage(`1`))
	wantStale(t, err, lease.ReasonSuperseded)
	if _, err := e.S.Complete(e.Ctx, holder(cl), json.RawMessage(`"done"`)); err != nil {
		t.Fatalf("complete after reopen: %v", err)
	}
	e.WantState(t, after.TaskID, tg.StatePending)
	// The chain went on from where it stopped.
	evs, err := e.S.WorkflowEvents(e.Ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	n := len(evBefore)
	if len(evs) <= n || evs[n].Seq != int64(n+1) || evs[n].PrevHash != evBefore[n-1].Hash {
		t.Fatalf("the chain did not continue: %d events before, next %+v", n, evs[n])
	}
	e.Verify(t)
}
