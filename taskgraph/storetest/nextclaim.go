package storetest

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/keyrate"
)

// nextClaimTests: a completion with the next claim in the same transaction
// (Store.CompleteAndClaim), the worker's loop in one call.
var nextClaimTests = []test{
	{"CompletesThenClaims", testNextClaimCompletesThenClaims},
	{"RefusedCompletionClaimsNothing", testNextClaimRefusedCompletionClaimsNothing},
	{"NothingClaimable", testNextClaimNothingClaimable},
	{"BadRequestsRefused", testNextClaimBadRequests},
	{"WorkersDrainEachTaskOnce", testNextClaimWorkersDrainEachTaskOnce},
	{"AnswerIsTheStoredTask", testNextClaimAnswerIsTheStoredTask},
}

func testNextClaimCompletesThenClaims(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	b := e.Create(t, "wf", "b")
	ca := e.Claim(t, "w", a.TaskID, 0)
	done, next, ok, err := e.S.CompleteAndClaim(e.Ctx, holder(ca), json.RawMessage(`{"a":1}`), tg.ClaimRequest{WorkflowID: "wf"})
	if err != nil || !ok {
		t.Fatalf("CompleteAndClaim: ok=%v err=%v", ok, err)
	}
	if done.TaskID != a.TaskID || done.State != tg.StateCompleted || string(done.Result) != `{"a":1}` {
		t.Fatalf("completed %s %s %s, want a completed with its result", done.NodeID, done.State, done.Result)
	}
	if next.Task.TaskID != b.TaskID || next.Task.State != tg.StateClaimed || next.Lease.Owner != "w" || next.Lease.Token == "" {
		t.Fatalf("next claim %s %s owner %q, want b claimed by w with a token", next.Task.NodeID, next.Task.State, next.Lease.Owner)
	}
	e.WantState(t, a.TaskID, tg.StateCompleted)
	e.WantState(t, b.TaskID, tg.StateClaimed)
	// The claim is a claim like any other: its holder completes it.
	if _, err := e.S.Complete(e.Ctx, holder(next), json.RawMessage(`2`)); err != nil {
		t.Fatalf("complete the next claim: %v", err)
	}
	// The history says what happened, in order: a's completion, then b's
	// claim, and it verifies.
	evs, err := e.S.WorkflowEvents(e.Ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	node := map[string]string{a.TaskID: "a", b.TaskID: "b"}
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev.Kind+":"+node[ev.TaskID])
	}
	if got, want := strings.Join(kinds, " "), "create:a create:b claim:a complete:a claim:b complete:b"; got != want {
		t.Fatalf("history %s, want %s", got, want)
	}
	if rep, err := e.S.VerifyHistory(e.Ctx); err != nil {
		t.Fatalf("VerifyHistory: %v (%+v)", err, rep.Broken)
	}
}

func testNextClaimRefusedCompletionClaimsNothing(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	b := e.Create(t, "wf", "b")
	ca := e.Claim(t, "w", a.TaskID, 0)
	stale := holder(ca)
	stale.Token = "not-the-token"
	_, _, ok, err := e.S.CompleteAndClaim(e.Ctx, stale, json.RawMessage(`1`), tg.ClaimRequest{WorkflowID: "wf"})
	if !errors.Is(err, tg.ErrStaleClaim) || ok {
		t.Fatalf("CompleteAndClaim with a wrong token: ok=%v err=%v, want ErrStaleClaim and no claim", ok, err)
	}
	e.WantState(t, a.TaskID, tg.StateClaimed)
	e.WantState(t, b.TaskID, tg.StatePending)
}

func testNextClaimNothingClaimable(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	e.Create(t, "wf", "b", "a") // becomes ready only with a's completion
	ca := e.Claim(t, "w", a.TaskID, 0)
	done, _, ok, err := e.S.CompleteAndClaim(e.Ctx, holder(ca), json.RawMessage(`1`), tg.ClaimRequest{WorkflowID: "wf"})
	if err != nil || ok {
		t.Fatalf("CompleteAndClaim with nothing else ready: ok=%v err=%v, want the completion and no claim", ok, err)
	}
	if done.State != tg.StateCompleted {
		t.Fatalf("a is %s, want completed", done.State)
	}
	// b became ready with a's completion: an ordinary claim takes it.
	if c, ok := e.ClaimNext(t, "w", "wf"); !ok || c.Task.NodeID != "b" {
		t.Fatalf("claim-next after: ok=%v %s, want b", ok, c.Task.NodeID)
	}
}

func testNextClaimBadRequests(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	ca := e.Claim(t, "w", a.TaskID, 0)
	for _, tc := range []struct {
		name  string
		ctx   *env
		next  tg.ClaimRequest
		field string
	}{
		{"another owner", e, tg.ClaimRequest{Owner: "x"}, "owner"},
		{"a task id", e, tg.ClaimRequest{TaskID: a.TaskID}, "task_id"},
		{"a wait", e, tg.ClaimRequest{Wait: 1}, "wait_ms"},
		{"a request id", e.withID("r-1"), tg.ClaimRequest{}, "request_id"},
		{"a bad workflow", e, tg.ClaimRequest{WorkflowID: "no spaces"}, "workflow_id"},
	} {
		_, _, _, err := e.S.CompleteAndClaim(tc.ctx.Ctx, holder(ca), json.RawMessage(`1`), tc.next)
		if !errors.Is(err, tg.ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
			t.Fatalf("%s: err %v, want ErrInvalidInput naming %s", tc.name, err, tc.field)
		}
	}
	// Nothing was written by the refused calls.
	e.WantState(t, a.TaskID, tg.StateClaimed)
}

func testNextClaimWorkersDrainEachTaskOnce(t *testing.T, h Harness) {
	e := setup(t, h)
	const n, workers = 40, 4
	for i := range n {
		e.Create(t, "wf", "t"+string(rune('A'+i/26))+string(rune('a'+i%26)))
	}
	var mu sync.Mutex
	completed := map[string]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func(owner string) {
			defer wg.Done()
			c, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: owner, WorkflowID: "wf"})
			for err == nil && ok {
				var done tg.Task
				done, c, ok, err = e.S.CompleteAndClaim(e.Ctx, holder(c), json.RawMessage(`1`), tg.ClaimRequest{WorkflowID: "wf"})
				if err == nil {
					mu.Lock()
					completed[done.TaskID]++
					mu.Unlock()
				}
			}
			if err != nil {
				t.Errorf("%s: %v", owner, err)
			}
		}(string(rune('p' + w)))
	}
	wg.Wait()
	if len(completed) != n {
		t.Fatalf("%d tasks completed, want %d", len(completed), n)
	}
	for id, k := range completed {
		if k != 1 {
			t.Fatalf("task %s completed %d times", id, k)
		}
	}
	if rep, err := e.S.VerifyHistory(e.Ctx); err != nil {
		t.Fatalf("VerifyHistory: %v (%+v)", err, rep.Broken)
	}
}

// testNextClaimAnswerIsTheStoredTask: a claim-next answers with its task
// as the store built it from the row it locked (the driver reads nothing
// back after the claim's update), and that is the task as stored, field
// for field: a first claim of a task with a priority, a payload and a
// concurrency key; a reclaim after its lease lapsed; a claim after an
// attempt that reported usage and was retried (the report folds into the
// prior usage); and the next claim of a completion.
func testNextClaimAnswerIsTheStoredTask(t *testing.T, h Harness) {
	e := setup(t, h)
	a, err := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "a", Priority: 5, ConcurrencyKey: "k", KeyLimit: &keyrate.Limit{MaxClaimed: 2},
		Payload: json.RawMessage(`{"n":"a","deep":[1,{"x":"é"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	b := e.Create(t, "wf", "b")
	same := func(what string, c tg.Claimed, ok bool, want tg.Task, gen int64) {
		t.Helper()
		if !ok {
			t.Fatalf("%s: nothing claimed", what)
		}
		if c.Task.TaskID != want.TaskID || c.Lease.Generation != gen {
			t.Fatalf("%s: claimed %s at generation %d, want %s at %d", what, c.Task.NodeID, c.Lease.Generation, want.NodeID, gen)
		}
		if got := e.Get(t, c.Task.TaskID); !reflect.DeepEqual(c.Task, got) {
			t.Fatalf("%s: the claim answered\n%+v\nthe store holds\n%+v", what, c.Task, got)
		}
	}
	c1, ok := e.ClaimNext(t, "w1", "wf")
	same("a first claim", c1, ok, a.Task, 1)

	e.Clock.Advance(lease.DefaultDuration + time.Second)
	c2, ok := e.ClaimNext(t, "w2", "wf")
	same("a reclaim of a lapsed lease", c2, ok, a.Task, 2)

	usage := &tg.Usage{InputTokens: 150, OutputTokens: 20, CostUSD: 0.75}
	if _, err := e.S.FailRetryAfter(tg.WithReport(e.Ctx, tg.Report{Usage: usage, StatusMessage: "rate limited"}), holder(c2), "upstream 429", 0); err != nil {
		t.Fatal(err)
	}
	c3, ok := e.ClaimNext(t, "w3", "wf")
	same("a claim after a retried attempt", c3, ok, a.Task, 3)
	if c3.Task.Report != nil || c3.Task.TotalUsage != *usage {
		t.Fatalf("the claim after a retried attempt: report %+v, total usage %+v, want none and %+v", c3.Task.Report, c3.Task.TotalUsage, *usage)
	}

	_, c4, ok, err := e.S.CompleteAndClaim(e.Ctx, holder(c3), json.RawMessage(`1`), tg.ClaimRequest{WorkflowID: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	same("the next claim of a completion", c4, ok, b, 1)
	e.Verify(t)
}
