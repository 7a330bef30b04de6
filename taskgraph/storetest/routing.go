package storetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest/stenv"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// routingTests: capability routing (NodeSpec.Requires, ClaimRequest.
// Capabilities) and retry timing (backoff, retry_after, NotBefore).
var routingTests = []test{
	{"RequiresBoundsAndCanonicalForm", testRequiresBounds},
	{"ClaimNextMatchesCapabilities", testClaimNextMatchesCapabilities},
	{"ClaimByIDNamesMissingCapabilities", testClaimByIDMissingCapabilities},
	{"WakeGoesToACapableWaiter", testWakeGoesToCapableWaiter},
	{"AnotherStoresRoutedTaskWakesACapableWaiter", testAnotherStoresRoutedTask},
	{"RetryAfterDelaysTheRetry", testRetryAfter},
	{"RetryBackoffFromRetryDelay", testRetryBackoff},
	{"NotBeforeDelaysTheFirstClaim", testNotBefore},
	{"PromotionWakesParkedClaim", testPromotionWakesParkedClaim},
	{"ReleaseAndRequeueAreImmediate", testReleaseRequeueImmediate},
}

func (e *env) createSpec(t *testing.T, wf string, spec tg.NodeSpec) tg.Task {
	t.Helper()
	c, err := e.S.CreateTask(e.Ctx, wf, spec)
	if err != nil {
		t.Fatalf("create %s/%s: %v", wf, spec.NodeID, err)
	}
	return c.Task
}

func (e *env) claimCaps(t *testing.T, wf string, caps ...string) (tg.Claimed, bool) {
	t.Helper()
	c, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", WorkflowID: wf, Capabilities: caps})
	if err != nil {
		t.Fatalf("claim-next with %v: %v", caps, err)
	}
	return c, ok
}

func wantInvalid(t *testing.T, err error, field, phrase string) {
	t.Helper()
	var ve *tg.ValidationError
	if !errors.As(err, &ve) || ve.Field != field || !strings.Contains(err.Error(), phrase) {
		t.Fatalf("got %v, want an invalid %s naming %q", err, field, phrase)
	}
}

func testRequiresBounds(t *testing.T, h Harness) {
	e := setup(t, h)
	before := e.DB.Snapshot(t)
	_, err := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "a", Requires: []string{"GPU"}})
	wantInvalid(t, err, "requires", tg.TagPattern)
	many := make([]string, tg.MaxRequires+1)
	for i := range many {
		many[i] = "t" + strings.Repeat("x", i)
	}
	_, err = e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "a", Requires: many})
	wantInvalid(t, err, "requires", "at most 16 tags")
	_, _, err = e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", Capabilities: []string{"ok", "not ok"}})
	wantInvalid(t, err, "capabilities", tg.TagPattern)
	_, _, err = e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", Capabilities: make([]string, tg.MaxCapabilities+1)})
	wantInvalid(t, err, "capabilities", "at most 64 tags")
	e.Unchanged(t, before, "refused creates and claims")

	// Stored sorted and deduplicated; a repeat in another order is the same
	// node, one with other requires a conflict.
	tk := e.createSpec(t, "wf", tg.NodeSpec{NodeID: "a", Requires: []string{"gpu", "cuda-12", "gpu"}})
	if !slices.Equal(tk.Requires, []string{"cuda-12", "gpu"}) {
		t.Fatalf("requires = %v, want [cuda-12 gpu]", tk.Requires)
	}
	if got := e.Get(t, tk.TaskID).Requires; !slices.Equal(got, tk.Requires) {
		t.Fatalf("stored requires = %v", got)
	}
	again, err := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "a", Requires: []string{"cuda-12", "gpu"}})
	if err != nil || again.Created || again.Task.TaskID != tk.TaskID {
		t.Fatalf("idempotent repeat: %+v %v", again, err)
	}
	_, err = e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "a", Requires: []string{"gpu"}})
	wantConflict(t, err, "different requires")
	e.Verify(t)
}

func testClaimNextMatchesCapabilities(t *testing.T, h Harness) {
	e := setup(t, h)
	gc := e.createSpec(t, "wf", tg.NodeSpec{NodeID: "gc", Priority: 10, Requires: []string{"gpu", "cuda"}})
	g := e.createSpec(t, "wf", tg.NodeSpec{NodeID: "g", Priority: 5, Requires: []string{"gpu"}})
	p := e.createSpec(t, "wf", tg.NodeSpec{NodeID: "p"})
	p2 := e.createSpec(t, "other", tg.NodeSpec{NodeID: "p2", Priority: -1})
	// Without capabilities: only tasks that require nothing, whatever
	// their priority.
	if c, ok := e.claimCaps(t, ""); !ok || c.Task.TaskID != p.TaskID {
		t.Fatalf("claim without capabilities took %s (ok %v), want p", c.Task.NodeID, ok)
	}
	// With gpu only: g (gc also needs cuda), ahead of the plain p2 by
	// priority.
	if c, ok := e.claimCaps(t, "", "gpu", "arm64"); !ok || c.Task.TaskID != g.TaskID {
		t.Fatalf("claim with gpu took %s (ok %v), want g", c.Task.NodeID, ok)
	}
	if _, ok := e.claimCaps(t, "wf", "gpu"); ok {
		t.Fatal("a claim with gpu in wf took a task needing cuda too")
	}
	if c, ok := e.claimCaps(t, "wf", "cuda", "gpu", "x"); !ok || c.Task.TaskID != gc.TaskID {
		t.Fatalf("claim with cuda+gpu in wf took %s (ok %v), want gc", c.Task.NodeID, ok)
	}
	// A capable worker takes plain tasks too.
	if c, ok := e.claimCaps(t, "", "gpu"); !ok || c.Task.TaskID != p2.TaskID {
		t.Fatalf("claim with gpu took %s (ok %v), want p2", c.Task.NodeID, ok)
	}
	if _, ok := e.claimCaps(t, "", "gpu", "cuda"); ok {
		t.Fatal("claimed from an empty store")
	}
	e.Verify(t)
}

func testClaimByIDMissingCapabilities(t *testing.T, h Harness) {
	e := setup(t, h)
	tk := e.createSpec(t, "wf", tg.NodeSpec{NodeID: "a", Requires: []string{"gpu", "cuda", "fp8"}})
	before := e.DB.Snapshot(t)
	_, _, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", TaskID: tk.TaskID, Capabilities: []string{"gpu"}})
	var me *tg.MissingCapabilitiesError
	if !errors.Is(err, tg.ErrMissingCapabilities) || !errors.Is(err, tg.ErrConflict) || !errors.As(err, &me) ||
		!slices.Equal(me.Missing, []string{"cuda", "fp8"}) || !strings.Contains(err.Error(), "missing cuda, fp8") {
		t.Fatalf("claim by id without cuda, fp8: %v", err)
	}
	_, _, err = e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", TaskID: tk.TaskID})
	if !errors.As(err, &me) || len(me.Missing) != 3 {
		t.Fatalf("claim by id without capabilities: %v", err)
	}
	e.Unchanged(t, before, "refused claims by id")
	c, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", TaskID: tk.TaskID, Capabilities: []string{"fp8", "cuda", "gpu", "x"}})
	if err != nil || !ok || c.Task.State != tg.StateClaimed {
		t.Fatalf("claim by id with every capability: %v %v", ok, err)
	}
	e.Verify(t)
}

// A routed task wakes a parked claim that can take it, not an older one
// that cannot; the one that cannot keeps waiting for work it can take.
func testWakeGoesToCapableWaiter(t *testing.T, h Harness) {
	e := setup(t, h)
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	plain, gpu := e.parkPlainAndGPU(t, ctx, &wg)
	g := e.createSpec(t, "wf", tg.NodeSpec{NodeID: "g", Requires: []string{"gpu"}})
	wantTakenBy(t, gpu, plain, g.TaskID, "a gpu task")
	if e.S.Waiters() != 1 {
		t.Fatalf("%d waiters, want the one without capabilities still parked", e.S.Waiters())
	}
	p := e.Create(t, "wf", "p")
	wantTakenBy(t, plain, nil, p.TaskID, "a plain task")
}

// The same through another store on the database (another process or
// replica): its routed task wakes the parked claim that can take it, and
// its plain task the one without capabilities.
func testAnotherStoresRoutedTask(t *testing.T, h Harness) {
	e := setup(t, h)
	other := e.DB.Open(t, tg.Options{Clock: e.Clock})
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	plain, gpu := e.parkPlainAndGPU(t, ctx, &wg)
	g, err := other.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "g", Requires: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	wantTakenBy(t, gpu, plain, g.Task.TaskID, "the other store's gpu task")
	p, err := other.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	wantTakenBy(t, plain, nil, p.Task.TaskID, "the other store's plain task")
}

// parkPlainAndGPU parks two claim-next calls that wait for work until ctx
// ends: the older without capabilities (plain), the younger with gpu.
func (e *env) parkPlainAndGPU(t *testing.T, ctx context.Context, wg *sync.WaitGroup) (plain, gpu chan stenv.ParkedResult) {
	t.Helper()
	plain, gpu = make(chan stenv.ParkedResult, 1), make(chan stenv.ParkedResult, 1)
	park := func(out chan stenv.ParkedResult, caps ...string) {
		base := e.S.Waiters()
		wg.Add(1)
		go func() {
			defer wg.Done()
			out <- e.ParkedClaim(ctx, tg.ClaimRequest{Owner: "w", Wait: tg.MaxClaimWait, Capabilities: caps})
		}()
		testwait.For(t, "the claim-next to park", func() bool { return e.S.Waiters() > base })
	}
	park(plain)
	park(gpu, "gpu")
	return plain, gpu
}

// wantTakenBy waits for the parked claim on want to take task taskID (what
// names it), failing if the claim on not (nil: none) answers first.
func wantTakenBy(t *testing.T, want, not <-chan stenv.ParkedResult, taskID, what string) {
	t.Helper()
	ctx := testwait.Context(t)
	select {
	case r := <-want:
		r.WantWoken(t, taskID, what)
	case r := <-not:
		t.Fatalf("the waiter that cannot take %s answered: %+v", what, r)
	case <-ctx.Done():
		t.Fatalf("no waiter that can take %s answered before the test's deadline", what)
	}
}

func testRetryAfter(t *testing.T, h Harness) {
	e := setup(t, h)
	tk := e.Create(t, "wf", "a")
	c := e.Claim(t, "w", tk.TaskID, 0)
	if _, err := e.S.FailRetryAfter(e.Ctx, holder(c), "down", -time.Millisecond); err == nil {
		t.Fatal("a negative retry_after was accepted")
	} else {
		wantInvalid(t, err, "retry_after_ms", "between 0 and 86400000")
	}
	if _, err := e.S.FailRetryAfter(e.Ctx, holder(c), "down", tg.MaxRetryAfter+time.Millisecond); err == nil {
		t.Fatal("retry_after beyond a day was accepted")
	}
	got, err := e.S.FailRetryAfter(e.Ctx, holder(c), "service down", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	due := e.Clock.Now().Add(5 * time.Second).Truncate(time.Millisecond)
	if got.State != tg.StatePending || !got.DueAt.Equal(due) || !strings.HasPrefix(got.StatusMessage, "waiting until "+due.Format(time.RFC3339Nano)) {
		t.Fatalf("after a retry_after of 5 s: %s due %v %q", got.State, got.DueAt, got.StatusMessage)
	}
	if _, ok := e.ClaimNext(t, "w", ""); ok {
		t.Fatal("claim-next took a task not yet due")
	}
	_, _, err = e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", TaskID: tk.TaskID})
	wantConflict(t, err, "not claimable until "+due.Format(time.RFC3339Nano))
	e.Clock.Advance(5*time.Second - time.Millisecond)
	if _, ok := e.ClaimNext(t, "w", ""); ok {
		t.Fatal("claim-next took the task a millisecond early")
	}
	e.Clock.Advance(time.Millisecond)
	c2, ok := e.ClaimNext(t, "w", "")
	if !ok || c2.Task.TaskID != tk.TaskID || c2.Task.Attempts != 2 || !c2.Task.DueAt.IsZero() {
		t.Fatalf("claim-next once due: %+v %v", c2.Task, ok)
	}
	// 0 retries at once.
	got, err = e.S.FailRetryAfter(e.Ctx, holder(c2), "again", 0)
	if err != nil || !got.DueAt.IsZero() || !strings.HasPrefix(got.StatusMessage, "ready to claim") {
		t.Fatalf("retry_after 0: %+v %v", got, err)
	}
	if _, ok := e.ClaimNext(t, "w", ""); !ok {
		t.Fatal("a retry_after of 0 was not claimable at once")
	}
	e.Verify(t)
}

func testRetryBackoff(t *testing.T, h Harness) {
	e := setup(t, h)
	bad := tg.MaxRetryDelay + time.Millisecond
	_, err := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "x", RetryDelay: &bad})
	wantInvalid(t, err, "retry_delay_ms", "between 0 and 900000")
	zero, ten := time.Duration(0), 10*time.Minute
	now := e.createSpec(t, "wf", tg.NodeSpec{NodeID: "now", RetryDelay: &zero})
	slow := e.createSpec(t, "wf", tg.NodeSpec{NodeID: "slow", RetryDelay: &ten, MaxAttempts: 4})
	if now.RetryDelay != 0 || slow.RetryDelay != ten {
		t.Fatalf("retry delays %v %v", now.RetryDelay, slow.RetryDelay)
	}
	c := e.Claim(t, "w", now.TaskID, 0)
	if got, err := e.S.Fail(e.Ctx, holder(c), "x", true); err != nil || !got.DueAt.IsZero() {
		t.Fatalf("retry_delay 0: %+v %v", got, err)
	}
	// 10 min, then 20 min capped at 15, then 15 again.
	for i, want := range []time.Duration{10 * time.Minute, 15 * time.Minute, 15 * time.Minute} {
		c := e.Claim(t, "w", slow.TaskID, 0)
		got, err := e.S.Fail(e.Ctx, holder(c), "x", true)
		if err != nil {
			t.Fatal(err)
		}
		if !got.DueAt.Equal(e.Clock.Now().Add(want).Truncate(time.Millisecond)) {
			t.Fatalf("retry %d: due in %v, want %v", i+1, got.DueAt.Sub(e.Clock.Now()), want)
		}
		e.Clock.Advance(want)
	}
	e.Verify(t)
}

func testNotBefore(t *testing.T, h Harness) {
	e := setup(t, h)
	_, err := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "far", NotBefore: e.Clock.Now().Add(tg.MaxNotBefore + time.Second)})
	wantInvalid(t, err, "not_before", "at most 365 days")
	past := e.createSpec(t, "wf", tg.NodeSpec{NodeID: "past", NotBefore: e.Clock.Now().Add(-time.Hour)})
	if !past.DueAt.IsZero() || past.StatusMessage != "ready to claim" {
		t.Fatalf("not_before in the past: %+v", past)
	}
	at := e.Clock.Now().Add(time.Hour)
	later := e.createSpec(t, "wf", tg.NodeSpec{NodeID: "later", NotBefore: at})
	if later.State != tg.StatePending || !later.DueAt.Equal(at) || !strings.HasPrefix(later.StatusMessage, "waiting until "+at.Format(time.RFC3339Nano)) {
		t.Fatalf("not_before ahead: %s %v %q", later.State, later.DueAt, later.StatusMessage)
	}
	// A dependent with a not_before: ready once its dependency completes,
	// claimable once due.
	dep := e.createSpec(t, "wf", tg.NodeSpec{NodeID: "dep", DependsOn: []string{"past"}, NotBefore: at.Add(time.Minute)})
	if dep.State != tg.StateBlocked {
		t.Fatalf("dependent: %s", dep.State)
	}
	c, ok := e.ClaimNext(t, "w", "")
	if !ok || c.Task.TaskID != past.TaskID {
		t.Fatalf("claim-next took %s, want past", c.Task.NodeID)
	}
	if _, err := e.S.Complete(e.Ctx, holder(c), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if got := e.Get(t, dep.TaskID); got.State != tg.StatePending || !strings.HasPrefix(got.StatusMessage, "waiting until ") {
		t.Fatalf("dependent after its dependency: %s %q", got.State, got.StatusMessage)
	}
	if _, ok := e.ClaimNext(t, "w", ""); ok {
		t.Fatal("claim-next took a task before its not_before")
	}
	e.Clock.Advance(time.Hour)
	c, ok = e.ClaimNext(t, "w", "")
	if !ok || c.Task.TaskID != later.TaskID {
		t.Fatalf("at not_before: took %s (ok %v), want later", c.Task.NodeID, ok)
	}
	if _, err := e.S.Complete(e.Ctx, holder(c), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(time.Minute)
	// The sweeper's promotion makes it claimable and says so.
	if n, err := e.S.PromoteDue(e.Ctx); err != nil || n != 1 {
		t.Fatalf("PromoteDue = %d, %v", n, err)
	}
	if got := e.Get(t, dep.TaskID); !got.DueAt.IsZero() || !strings.HasPrefix(got.StatusMessage, "ready to claim") {
		t.Fatalf("promoted: %v %q", got.DueAt, got.StatusMessage)
	}
	if n, err := e.S.PromoteDue(e.Ctx); err != nil || n != 0 {
		t.Fatalf("second PromoteDue = %d, %v", n, err)
	}
	if c, ok := e.ClaimNext(t, "w", ""); !ok || c.Task.TaskID != dep.TaskID {
		t.Fatalf("after promotion: took %s (ok %v), want dep", c.Task.NodeID, ok)
	}
	e.Verify(t)
}

// A task promoted by PromoteDue (the sweeper) wakes a parked claim-next.
func testPromotionWakesParkedClaim(t *testing.T, h Harness) {
	e := setup(t, h)
	tk := e.createSpec(t, "wf", tg.NodeSpec{NodeID: "a", NotBefore: e.Clock.Now().Add(time.Minute), Requires: []string{"gpu"}})
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	out := make(chan stenv.ParkedResult, 1)
	go func() {
		out <- e.ParkedClaim(ctx, tg.ClaimRequest{Owner: "w", Wait: tg.MaxClaimWait, Capabilities: []string{"gpu"}})
	}()
	testwait.For(t, "the claim-next to park", func() bool { return e.S.Waiters() > 0 })
	e.Clock.Advance(time.Minute)
	// The parked claim may have woken for another reason meanwhile (a
	// driver's change notice) and promoted the task at its own retry; then
	// there is nothing left to promote.
	if n, err := e.S.PromoteDue(e.Ctx); err != nil || n > 1 {
		t.Fatalf("PromoteDue = %d, %v", n, err)
	}
	testwait.Recv(t, "the parked claim-next to return", out).WantWoken(t, tk.TaskID, "the promotion")
}

// Releases and operator requeues are claimable at once, whatever the
// task's retry delay.
func testReleaseRequeueImmediate(t *testing.T, h Harness) {
	e := setup(t, h)
	ten := 10 * time.Minute
	tk := e.createSpec(t, "wf", tg.NodeSpec{NodeID: "a", RetryDelay: &ten, MaxAttempts: 1})
	c := e.Claim(t, "w", tk.TaskID, 0)
	if got, err := e.S.Release(e.Ctx, holder(c)); err != nil || !got.DueAt.IsZero() {
		t.Fatalf("release: %+v %v", got, err)
	}
	c = e.Claim(t, "w", tk.TaskID, 0)
	if got, err := e.S.Fail(e.Ctx, holder(c), "x", true); err != nil || got.State != tg.StateFailed {
		t.Fatalf("last attempt: %+v %v", got, err)
	}
	got, err := e.S.Requeue(e.Ctx, tk.TaskID, tg.Operator{Name: "op", Reason: "retry now"})
	if err != nil || got.State != tg.StatePending || !got.DueAt.IsZero() {
		t.Fatalf("requeue: %+v %v", got, err)
	}
	if _, ok := e.ClaimNext(t, "w", ""); !ok {
		t.Fatal("a requeued task was not claimable at once")
	}
	e.Verify(t)
}
