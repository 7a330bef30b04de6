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

// flowTests: work that flows through the graph (issue 16): upstream results
// on claim and read, tasks found by node, release without penalty.
var flowTests = []test{
	{"ClaimCarriesUpstreamResults", testClaimCarriesUpstreamResults},
	{"DependenciesReadShowsUnfinished", testDependenciesReadShowsUnfinished},
	{"DependencyResultsBounded", testDependencyResultsBounded},
	{"TaskByNode", testTaskByNode},
	{"ReleaseReturnsClaimWithoutPenalty", testReleaseReturnsClaimWithoutPenalty},
	{"ReleaseFencesOutReleasedGeneration", testReleaseFencesOutReleasedGeneration},
	{"ReleaseLeavesDownstreamAlone", testReleaseLeavesDownstreamAlone},
	{"ClaimNextByPriorityThenAge", testClaimNextByPriorityThenAge},
	{"PriorityBoundsAndIdempotence", testPriorityBoundsAndIdempotence},
}

// completeNode claims node id and completes it with result.
func (e *env) completeWith(t *testing.T, id, result string) {
	t.Helper()
	c := e.Claim(t, "up", id, 0)
	if _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(result)); err != nil {
		t.Fatalf("complete %s: %v", id, err)
	}
}

func depSummary(ds []tg.Dependency) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.NodeID + ":" + string(d.State) + ":" + string(d.Result))
		if d.ResultOmitted {
			b.WriteString(":omitted")
		}
		b.WriteString(" ")
	}
	return strings.TrimSpace(b.String())
}

func testClaimCarriesUpstreamResults(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	b := e.Create(t, "wf", "b")
	c := e.Create(t, "wf", "c", "b", "a")
	ca := e.Claim(t, "w", a.TaskID, 0)
	if ca.Dependencies == nil || len(ca.Dependencies) != 0 {
		t.Fatalf("a task without dependencies: Dependencies = %#v, want empty and not nil", ca.Dependencies)
	}
	if _, err := e.S.Complete(e.Ctx, holder(ca), json.RawMessage(`{"x":1}`)); err != nil {
		t.Fatal(err)
	}
	e.completeWith(t, b.TaskID, `"two"`)
	got, ok := e.ClaimNext(t, "w", "wf")
	if !ok || got.Task.TaskID != c.TaskID {
		t.Fatalf("claim-next got %v %s, want c", ok, got.Task.NodeID)
	}
	// In creation order of the dependencies, whatever depends_on's order.
	want := `a:completed:{"x":1} b:completed:"two"`
	if s := depSummary(got.Dependencies); s != want {
		t.Fatalf("claim's dependencies %s, want %s", s, want)
	}
	if got.Dependencies[0].TaskID != a.TaskID || got.Dependencies[1].TaskID != b.TaskID {
		t.Fatalf("dependency task ids %s %s, want %s %s", got.Dependencies[0].TaskID, got.Dependencies[1].TaskID, a.TaskID, b.TaskID)
	}
	ds, err := e.S.Dependencies(e.Ctx, c.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if s := depSummary(ds); s != want {
		t.Fatalf("Dependencies %s, want %s", s, want)
	}
}

func testDependenciesReadShowsUnfinished(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	e.Create(t, "wf", "b")
	c := e.Create(t, "wf", "c", "a", "b")
	e.completeWith(t, a.TaskID, `[1,2]`)
	before := e.DB.Snapshot(t)
	ds, err := e.S.Dependencies(e.Ctx, c.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if s, want := depSummary(ds), `a:completed:[1,2] b:pending:`; s != want {
		t.Fatalf("Dependencies %s, want %s", s, want)
	}
	e.Unchanged(t, before, "Dependencies")
	if _, err := e.S.Dependencies(e.Ctx, "01ARZ3NDEKTSV4RRFFQ69G5FAV"); !errors.Is(err, tg.ErrNotFound) {
		t.Fatalf("unknown task: %v, want ErrNotFound", err)
	}
	// A malformed id is answered as Task answers it.
	_, terr := e.S.Task(e.Ctx, "nope")
	if _, err := e.S.Dependencies(e.Ctx, "nope"); err == nil || errors.Is(err, tg.ErrNotFound) != errors.Is(terr, tg.ErrNotFound) || errors.Is(err, tg.ErrInvalid) != errors.Is(terr, tg.ErrInvalid) {
		t.Fatalf("malformed task id: %v, want as Task: %v", err, terr)
	}
}

// bigResult is a JSON string of n bytes in all.
func bigResult(n int) string { return `"` + strings.Repeat("r", n-2) + `"` }

func testDependencyResultsBounded(t *testing.T, h Harness) {
	e := setup(t, h)
	big := tg.MaxDependencyResultBytes * 3 / 4
	a := e.Create(t, "wf", "a")
	b := e.Create(t, "wf", "b")
	c := e.Create(t, "wf", "c")
	e.Create(t, "wf", "d", "a", "b", "c")
	e.completeWith(t, a.TaskID, bigResult(big))
	e.completeWith(t, b.TaskID, bigResult(big)) // does not fit in what a left
	e.completeWith(t, c.TaskID, `"small"`)      // still fits
	got, ok := e.ClaimNext(t, "w", "wf")
	if !ok || got.Task.NodeID != "d" {
		t.Fatalf("claim-next: %v %s, want d", ok, got.Task.NodeID)
	}
	check := func(what string, ds []tg.Dependency) {
		t.Helper()
		if len(ds) != 3 {
			t.Fatalf("%s: %d dependencies, want 3", what, len(ds))
		}
		total := 0
		for _, d := range ds {
			total += len(d.Result)
		}
		if total > tg.MaxDependencyResultBytes {
			t.Fatalf("%s: %d bytes of results, over the bound %d", what, total, tg.MaxDependencyResultBytes)
		}
		if len(ds[0].Result) != big || ds[0].ResultOmitted {
			t.Fatalf("%s: a's result %d bytes (omitted %v), want it whole", what, len(ds[0].Result), ds[0].ResultOmitted)
		}
		if ds[1].Result != nil || !ds[1].ResultOmitted {
			t.Fatalf("%s: b's result %d bytes (omitted %v), want it omitted", what, len(ds[1].Result), ds[1].ResultOmitted)
		}
		if string(ds[2].Result) != `"small"` || ds[2].ResultOmitted {
			t.Fatalf("%s: c's result %s (omitted %v), want it carried", what, ds[2].Result, ds[2].ResultOmitted)
		}
	}
	check("claim", got.Dependencies)
	ds, err := e.S.Dependencies(e.Ctx, got.Task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	check("Dependencies", ds)
	// Reading the omitted dependency itself returns its result whole.
	if bt := e.Get(t, b.TaskID); len(bt.Result) != big {
		t.Fatalf("b read alone: %d bytes, want %d", len(bt.Result), big)
	}
}

func testTaskByNode(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	got, err := e.S.TaskByNode(e.Ctx, "wf", "a")
	if err != nil || got.TaskID != a.TaskID {
		t.Fatalf("TaskByNode: %s %v, want %s", got.TaskID, err, a.TaskID)
	}
	if _, err := e.S.TaskByNode(e.Ctx, "wf", "zz"); !errors.Is(err, tg.ErrNotFound) {
		t.Fatalf("unknown node: %v, want ErrNotFound", err)
	}
	if _, err := e.S.TaskByNode(e.Ctx, "other", "a"); !errors.Is(err, tg.ErrNotFound) {
		t.Fatalf("unknown workflow: %v, want ErrNotFound", err)
	}
	var ve *tg.ValidationError
	if _, err := e.S.TaskByNode(e.Ctx, "wf", "bad id!"); !errors.As(err, &ve) || ve.Field != "node_id" {
		t.Fatalf("malformed node id: %v, want invalid node_id", err)
	}
	// A lapsed lease is processed as Task does.
	e.Claim(t, "w", a.TaskID, lease.MinDuration)
	e.Clock.Advance(lease.MinDuration + time.Millisecond)
	if got, err := e.S.TaskByNode(e.Ctx, "wf", "a"); err != nil || got.State != tg.StatePending {
		t.Fatalf("after the lease lapsed: %s %v, want pending", got.State, err)
	}
}

func testReleaseReturnsClaimWithoutPenalty(t *testing.T, h Harness) {
	e := setup(t, h)
	c, err := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "a", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	id := c.Task.TaskID
	// With max_attempts 1 a retryable failure would fail the task; a
	// release, any number of times, never does.
	for i := range 3 {
		cl := e.Claim(t, "w", id, 0)
		rt, err := e.S.Release(e.Ctx, holder(cl))
		if err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
		if rt.State != tg.StatePending || rt.Attempts != 0 || rt.Owner != "" || !rt.LeaseExpiresAt.IsZero() || rt.Generation != cl.Lease.Generation {
			t.Fatalf("after release %d: state %s attempts %d owner %q lease %v generation %d", i, rt.State, rt.Attempts, rt.Owner, rt.LeaseExpiresAt, rt.Generation)
		}
		if !strings.Contains(rt.StatusMessage, "released by w") {
			t.Fatalf("status %q does not say who released it", rt.StatusMessage)
		}
		ev := e.lastEvent(t, id, tg.EventRelease)
		if ev.Owner != "w" || ev.Generation != cl.Lease.Generation {
			t.Fatalf("release event by %q at %d, want w at %d", ev.Owner, ev.Generation, cl.Lease.Generation)
		}
	}
	got, ok := e.ClaimNext(t, "other", "wf")
	if !ok || got.Task.TaskID != id || got.Lease.Generation != 4 || got.Task.Attempts != 1 {
		t.Fatalf("claim after releases: ok %v generation %d attempts %d", ok, got.Lease.Generation, got.Task.Attempts)
	}
	if r := e.Verify(t); r.Broken != nil {
		t.Fatalf("history: %+v", r)
	}
}

func testReleaseFencesOutReleasedGeneration(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	cl := e.Claim(t, "w", a.TaskID, 0)
	if _, err := e.S.Release(e.Ctx, holder(cl)); err != nil {
		t.Fatal(err)
	}
	before := e.DB.Snapshot(t)
	_, err := e.S.Complete(e.Ctx, holder(cl), json.RawMessage(`1`))
	wantStale(t, err, lease.ReasonNotHeld)
	_, err = e.S.Release(e.Ctx, holder(cl))
	wantStale(t, err, lease.ReasonNotHeld)
	e.Unchanged(t, before, "writes of the released claim")
	next := e.Claim(t, "v", a.TaskID, 0)
	_, err = e.S.Heartbeat(e.Ctx, holder(cl), 0)
	wantStale(t, err, lease.ReasonSuperseded)
	if _, err := e.S.Complete(e.Ctx, holder(next), json.RawMessage(`1`)); err != nil {
		t.Fatalf("the new claim after a release: %v", err)
	}
	// A release with a wrong token changes nothing.
	b := e.Create(t, "wf", "b")
	cb := e.Claim(t, "w", b.TaskID, 0)
	forged := holder(cb)
	forged.Token = strings.Repeat("x", len(forged.Token))
	if _, err := e.S.Release(e.Ctx, forged); !errors.Is(err, tg.ErrStaleClaim) {
		t.Fatalf("release with a forged token: %v, want a stale claim", err)
	}
	e.WantState(t, b.TaskID, tg.StateClaimed)
}

func testReleaseLeavesDownstreamAlone(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	b := e.Create(t, "wf", "b", "a")
	before := e.Get(t, b.TaskID)
	cl := e.Claim(t, "w", a.TaskID, 0)
	if _, err := e.S.Release(e.Ctx, holder(cl)); err != nil {
		t.Fatal(err)
	}
	after := e.Get(t, b.TaskID)
	if after.State != tg.StateBlocked || after.StatusMessage != before.StatusMessage || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("downstream after release: %s %q, want blocked and untouched", after.State, after.StatusMessage)
	}
	if n := len(e.Events(t, b.TaskID)); n != 1 {
		t.Fatalf("downstream has %d events, want only its create", n)
	}
}

func testClaimNextByPriorityThenAge(t *testing.T, h Harness) {
	e := setup(t, h)
	for _, n := range []struct {
		wf, node string
		prio     int
	}{{"w1", "low", -5}, {"w1", "plain", 0}, {"w2", "high", 10}, {"w1", "high2", 10}, {"w2", "top", 100}, {"w1", "bottom", -100}, {"w2", "plain2", 0}} {
		c, err := e.S.CreateTask(e.Ctx, n.wf, tg.NodeSpec{NodeID: n.node, Priority: n.prio})
		if err != nil {
			t.Fatal(err)
		}
		if c.Task.Priority != n.prio {
			t.Fatalf("%s: priority %d, want %d", n.node, c.Task.Priority, n.prio)
		}
	}
	// Within one workflow: its own order.
	c, ok := e.ClaimNext(t, "w", "w1")
	if !ok || c.Task.NodeID != "high2" {
		t.Fatalf("claim-next in w1: %v %s, want high2", ok, c.Task.NodeID)
	}
	var got []string
	for {
		c, ok := e.ClaimNext(t, "w", "")
		if !ok {
			break
		}
		got = append(got, c.Task.NodeID)
	}
	if s, want := strings.Join(got, ","), "top,high,plain,plain2,low,bottom"; s != want {
		t.Fatalf("claim-next order %s, want %s", s, want)
	}
	// A task back in pending keeps its priority and its place by age.
	a := e.Get(t, e.mustNode(t, "w1", "low"))
	if a.Priority != -5 {
		t.Fatalf("stored priority %d", a.Priority)
	}
}

func (e *env) mustNode(t *testing.T, wf, node string) string {
	t.Helper()
	tk, err := e.S.TaskByNode(e.Ctx, wf, node)
	if err != nil {
		t.Fatal(err)
	}
	return tk.TaskID
}

func testPriorityBoundsAndIdempotence(t *testing.T, h Harness) {
	e := setup(t, h)
	before := e.DB.Snapshot(t)
	for _, p := range []int{-101, 101, 1 << 40} {
		_, err := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "a", Priority: p})
		var ve *tg.ValidationError
		if !errors.As(err, &ve) || ve.Field != "priority" || !strings.Contains(ve.Rule, "between -100 and 100") {
			t.Fatalf("priority %d: %v, want invalid priority", p, err)
		}
	}
	e.Unchanged(t, before, "rejected priorities")
	if _, err := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "a", Priority: 7}); err != nil {
		t.Fatal(err)
	}
	again, err := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "a", Priority: 7})
	if err != nil || again.Created {
		t.Fatalf("identical create: %v created=%v", err, again.Created)
	}
	_, err = e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "a"})
	wantConflict(t, err, "different priority")
}
