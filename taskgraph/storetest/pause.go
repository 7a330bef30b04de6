package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest/stenv"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// pauseTests: pausing claims of a workflow or of the whole database, and
// resuming them (issue 27, item 4).
var pauseTests = []test{
	{"PauseWorkflowHoldsItsClaimsOnly", testPauseWorkflowHoldsItsClaimsOnly},
	{"PauseAllHoldsEveryClaim", testPauseAllHoldsEveryClaim},
	{"ResumeWakesParkedClaim", testResumeWakesParkedClaim},
	{"PauseRefusesAndRecords", testPauseRefusesAndRecords},
	{"PauseIsExactUnderConcurrentClaims", testPauseIsExactUnderConcurrentClaims},
	{"EmptyClaimSaysThePauseOfItsOwnTime", testEmptyClaimSaysThePauseOfItsOwnTime},
}

var bob = tg.Operator{Name: "bob", Reason: "deploy 7.3"}

// wantPausedConflict fails t unless claiming taskID by id is refused,
// naming the pause, and leaves the task pending.
func (e *env) wantPausedConflict(t *testing.T, taskID, what string) {
	t.Helper()
	_, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", TaskID: taskID, Lease: time.Minute})
	var ce *tg.ConflictError
	if ok || !errors.As(err, &ce) || !strings.Contains(ce.Detail, what) || !strings.Contains(ce.Detail, bob.Reason) {
		t.Fatalf("claim by id of %s while %s: ok=%v err=%v, want a conflict naming the pause", taskID, what, ok, err)
	}
	e.WantState(t, taskID, tg.StatePending)
}

// A paused workflow gives no claim, by claim-next or by id, and says so;
// other workflows are claimed as ever; a lease granted before the pause
// runs on (heartbeat and complete); resuming makes its tasks claimable.
func testPauseWorkflowHoldsItsClaimsOnly(t *testing.T, h Harness) {
	e := setup(t, h)
	live := e.Create(t, "a", "live")
	held := e.Create(t, "a", "held")
	other := e.Create(t, "b", "other")
	c := e.Claim(t, "w1", live.TaskID, time.Minute)
	if replaced, err := e.S.PauseClaims(e.Ctx, "a", bob); err != nil || replaced {
		t.Fatalf("pause a: replaced=%v err=%v", replaced, err)
	}
	got, ok := e.ClaimNext(t, "w2", "a")
	if ok || got.Paused == nil || got.Paused.WorkflowID != "a" || got.Paused.Operator != "bob" || got.Paused.Reason != bob.Reason {
		t.Fatalf("claim-next in paused a: ok=%v paused=%+v, want none with the pause", ok, got.Paused)
	}
	if !strings.Contains(got.Paused.String(), "workflow a is paused") {
		t.Fatalf("the pause says %q", got.Paused.String())
	}
	e.wantPausedConflict(t, held.TaskID, "workflow a is paused")
	// Claim-next over every workflow passes over a.
	if got, ok := e.ClaimNext(t, "w2", ""); !ok || got.Task.TaskID != other.TaskID {
		t.Fatalf("claim-next over all: ok=%v task %s, want %s of b", ok, got.Task.NodeID, other.NodeID)
	}
	if got, ok := e.ClaimNext(t, "w2", ""); ok || got.Paused != nil {
		t.Fatalf("claim-next over all with only a's task left: ok=%v paused=%+v; a workflow's pause does not hold a claim over all", ok, got.Paused)
	}
	// The live lease runs on.
	if _, err := e.S.Heartbeat(e.Ctx, holder(c), time.Minute); err != nil {
		t.Fatalf("heartbeat of a lease granted before the pause: %v", err)
	}
	if _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(`1`)); err != nil {
		t.Fatalf("complete of a lease granted before the pause: %v", err)
	}
	if n, _ := e.S.Pauses(e.Ctx, ""); len(n) != 1 || n[0].WorkflowID != "a" {
		t.Fatalf("pauses: %+v, want a's", n)
	}
	p, ok, err := e.S.ResumeClaims(e.Ctx, "a", alice)
	if err != nil || !ok || p.Reason != bob.Reason || p.Operator != "bob" {
		t.Fatalf("resume a: %+v ok=%v err=%v", p, ok, err)
	}
	if got, ok := e.ClaimNext(t, "w2", "a"); !ok || got.Task.TaskID != held.TaskID {
		t.Fatalf("claim-next in a after resume: ok=%v task %s", ok, got.Task.NodeID)
	}
	if _, ok, err := e.S.ResumeClaims(e.Ctx, "a", alice); err != nil || ok {
		t.Fatalf("resume of a workflow not paused: ok=%v err=%v, want ok false", ok, err)
	}
}

// Pausing all claiming holds every claim, by claim-next (over all or one
// workflow) and by id, and says so; a workflow's own pause outlives the
// pause of all.
func testPauseAllHoldsEveryClaim(t *testing.T, h Harness) {
	e := setup(t, h)
	x := e.Create(t, "a", "x")
	y := e.Create(t, "b", "y")
	if _, err := e.S.PauseClaims(e.Ctx, "b", bob); err != nil {
		t.Fatal(err)
	}
	if _, err := e.S.PauseClaims(e.Ctx, "", bob); err != nil {
		t.Fatal(err)
	}
	for _, wf := range []string{"", "a", "b"} {
		got, ok := e.ClaimNext(t, "w", wf)
		if ok || got.Paused == nil || got.Paused.WorkflowID != "" || !strings.Contains(got.Paused.String(), "all claiming on this database is paused") {
			t.Fatalf("claim-next in %q while all is paused: ok=%v paused=%+v", wf, ok, got.Paused)
		}
	}
	e.wantPausedConflict(t, x.TaskID, "all claiming on this database is paused")
	ps, err := e.S.Pauses(e.Ctx, "")
	if err != nil || len(ps) != 2 || ps[0].WorkflowID != "" || ps[1].WorkflowID != "b" {
		t.Fatalf("pauses: %+v %v, want all's then b's", ps, err)
	}
	if _, ok, err := e.S.ResumeClaims(e.Ctx, "", alice); err != nil || !ok {
		t.Fatalf("resume all: ok=%v err=%v", ok, err)
	}
	if got, ok := e.ClaimNext(t, "w", ""); !ok || got.Task.TaskID != x.TaskID {
		t.Fatalf("claim-next after resuming all: ok=%v task %s, want x (b is still paused)", ok, got.Task.NodeID)
	}
	e.wantPausedConflict(t, y.TaskID, "workflow b is paused")
}

// A claim-next parked while claiming is paused takes the task once it is
// resumed: the resume wakes it.
func testResumeWakesParkedClaim(t *testing.T, h Harness) {
	e := setup(t, h)
	task := e.Create(t, "a", "x")
	if _, err := e.S.PauseClaims(e.Ctx, "", bob); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	out := make(chan stenv.ParkedResult, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	e.ParkWaiters(t, ctx, 1, "a", out, &wg)
	if _, ok, err := e.S.ResumeClaims(e.Ctx, "", alice); err != nil || !ok {
		t.Fatalf("resume: ok=%v err=%v", ok, err)
	}
	testwait.Recv(t, "the parked claim's answer", out).WantWoken(t, task.TaskID, "the resume")
}

// Pausing refuses a workflow that does not exist and a missing reason,
// writing nothing; pause and resume are recorded in the audit chain, which
// verifies.
func testPauseRefusesAndRecords(t *testing.T, h Harness) {
	e := setup(t, h)
	e.Create(t, "a", "x")
	before := e.DB.Snapshot(t)
	if _, err := e.S.PauseClaims(e.Ctx, "nope", bob); !errors.Is(err, tg.ErrNotFound) {
		t.Fatalf("pause of an unknown workflow: %v, want ErrNotFound", err)
	}
	if _, err := e.S.PauseClaims(e.Ctx, "a", tg.Operator{Name: "bob"}); !errors.Is(err, tg.ErrInvalid) || !strings.Contains(err.Error(), "reason") {
		t.Fatalf("pause without a reason: %v, want ErrInvalid naming reason", err)
	}
	if after := e.DB.Snapshot(t); after != before {
		t.Fatal("a refused pause wrote to the database")
	}
	if _, err := e.S.PauseClaims(e.Ctx, "a", bob); err != nil {
		t.Fatal(err)
	}
	again := tg.Operator{Name: "carol", Reason: "still deploying"}
	if replaced, err := e.S.PauseClaims(e.Ctx, "a", again); err != nil || !replaced {
		t.Fatalf("pause again: replaced=%v err=%v, want true", replaced, err)
	}
	if ps, _ := e.S.Pauses(e.Ctx, "a"); len(ps) != 1 || ps[0].Operator != "carol" || ps[0].Reason != again.Reason {
		t.Fatalf("pauses after a second pause: %+v, want carol's", ps)
	}
	if _, _, err := e.S.ResumeClaims(e.Ctx, "a", alice); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range e.DB.Query(t, `SELECT kind, workflow_id, detail FROM audit_chain WHERE kind IN ('pause', 'resume') ORDER BY seq`) {
		var d map[string]any
		if err := json.Unmarshal([]byte(r[2]), &d); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, fmt.Sprintf("%s %s %v %v", r[0], r[1], d["operator"], d["reason"]))
	}
	want := []string{"pause a bob deploy 7.3", "pause a carol still deploying", "resume a alice " + alice.Reason}
	if strings.Join(kinds, "|") != strings.Join(want, "|") {
		t.Fatalf("audit entries:\n%s\nwant\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"))
	}
	if rep, err := e.S.VerifyHistory(e.Ctx); err != nil || rep.Broken != nil {
		t.Fatalf("verify: %v %+v", err, rep.Broken)
	}
}

// Once PauseClaims returns, no claim commits, whatever claims run at
// once: the claimed tasks read right after the pause are the claimed
// tasks at the end, after every claimer saw the pause several times.
func testPauseIsExactUnderConcurrentClaims(t *testing.T, h Harness) {
	e := setup(t, h)
	const tasks, claimers = 3000, 4
	specs := make([]tg.NodeSpec, tasks)
	for i := range specs {
		specs[i] = tg.NodeSpec{NodeID: fmt.Sprintf("n%04d", i)}
	}
	for i := 0; i < tasks; i += 500 {
		if _, err := e.S.CreateWorkflow(e.Ctx, "a", specs[i:i+500]); err != nil {
			t.Fatal(err)
		}
	}
	claimed := func() int64 { return e.Count(t, `SELECT COUNT(*) FROM tasks WHERE state = 'claimed'`) }
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	var granted, pausedSeen atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, claimers)
	for i := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c, ok, err := e.S.Claim(ctx, tg.ClaimRequest{Owner: fmt.Sprintf("w%d", i), Lease: time.Minute})
				switch {
				case err != nil && ctx.Err() == nil:
					errs <- err
					return
				case ok:
					granted.Add(1)
				case c.Paused != nil:
					pausedSeen.Add(1)
				}
			}
		}()
	}
	failed := func() bool { return len(errs) > 0 }
	testwait.For(t, "claims to be granted", func() bool { return granted.Load() >= 10 || failed() })
	if _, err := e.S.PauseClaims(e.Ctx, "", bob); err != nil {
		t.Fatal(err)
	}
	atPause := claimed()
	testwait.For(t, "every claimer to see the pause", func() bool { return pausedSeen.Load() >= 5*claimers || failed() })
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a claimer: %v", err)
	}
	if end := claimed(); end != atPause || end != granted.Load() || end == tasks {
		t.Fatalf("claimed tasks: %d right after the pause returned, %d at the end, %d granted (of %d): a claim committed after the pause", atPause, end, granted.Load(), tasks)
	}
}

// A claim-next that finds nothing says why from a read made after it was
// asked, though many such claim-nexts share their reads: right after a
// pause every one says paused, each with a pause of its own, and right
// after the resume none does, while other claim-nexts of the same workflow
// keep finding nothing (and reading) all along.
func testEmptyClaimSaysThePauseOfItsOwnTime(t *testing.T, h Harness) {
	e := setup(t, h)
	c := e.Create(t, "a", "only")
	e.Claim(t, "holder", c.TaskID, time.Minute) // a has nothing claimable
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	// Background claim-nexts of a keep reads of its pauses running, so
	// that the claims below arrive while one is under way.
	var wg sync.WaitGroup
	var background atomic.Int64
	errs := make(chan error, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, ok, err := e.S.Claim(ctx, tg.ClaimRequest{Owner: fmt.Sprintf("bg%d", i), WorkflowID: "a", Lease: time.Minute}); ok || (err != nil && ctx.Err() == nil) {
					errs <- fmt.Errorf("background claim-next of a: ok=%v err=%v, want nothing", ok, err)
					return
				}
				background.Add(1)
			}
		}()
	}
	testwait.For(t, "background claim-nexts", func() bool { return background.Load() >= 8 || len(errs) > 0 })
	const rounds, claimers = 20, 8
	for round := range rounds {
		if _, err := e.S.PauseClaims(e.Ctx, "a", bob); err != nil {
			t.Fatal(err)
		}
		seen := make([]*tg.Pause, claimers)
		var cw sync.WaitGroup
		for i := range claimers {
			cw.Add(1)
			go func() {
				defer cw.Done()
				got, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", WorkflowID: "a", Lease: time.Minute})
				if err != nil || ok {
					errs <- fmt.Errorf("claim-next of a while paused: ok=%v err=%v", ok, err)
					return
				}
				seen[i] = got.Paused
			}()
		}
		cw.Wait()
		for i, p := range seen {
			if p == nil || p.WorkflowID != "a" || p.Reason != bob.Reason {
				t.Fatalf("round %d: claim-next %d right after the pause says paused=%+v, want a's pause", round, i, p)
			}
			for _, q := range seen[:i] {
				if p == q {
					t.Fatalf("round %d: two claim-nexts were handed the same *Pause; each answer is its own", round)
				}
			}
		}
		if _, ok, err := e.S.ResumeClaims(e.Ctx, "a", alice); err != nil || !ok {
			t.Fatalf("resume a: ok=%v err=%v", ok, err)
		}
		for i := range claimers {
			got, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", WorkflowID: "a", Lease: time.Minute})
			if err != nil || ok || got.Paused != nil {
				t.Fatalf("round %d: claim-next %d right after the resume: ok=%v paused=%+v err=%v, want nothing and no pause (a read from before it was asked)", round, i, ok, got.Paused, err)
			}
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
