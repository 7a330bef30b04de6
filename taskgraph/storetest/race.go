package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// raceTests: writers racing on one workflow's chain head, one task's claim,
// and the readiness counts of a DAG. With one writer goroutine (SQLite) they
// hold by construction; with concurrent transactions (PostgreSQL) they hold
// only if every guard is in its write's predicate or under a row lock.
var raceTests = []test{
	{"ConcurrentDAG", testConcurrentDAG},
	{"ConcurrentCreatesShareOneChain", testConcurrentCreatesShareOneChain},
	{"ConcurrentClaimsOfOneTask", testConcurrentClaimsOfOneTask},
}

// 8 workers run a layered DAG (each node depends on up to 3 nodes of the
// layer before): every task completes exactly once, none is claimed before
// all its dependencies completed (in the workflow's chain order), the
// readiness counts stay right, and the chain verifies.
func testConcurrentDAG(t *testing.T, h Harness) {
	e := setup(t, h)
	const layers, width, workers = 6, 30, 8
	deps := map[string][]string{}
	var order []string
	for l := range layers {
		for i := range width {
			n := fmt.Sprintf("l%d-%02d", l, i)
			order = append(order, n)
			if l > 0 {
				for k := range 3 {
					d := fmt.Sprintf("l%d-%02d", l-1, (i*7+k*11)%width)
					if !contains(deps[n], d) {
						deps[n] = append(deps[n], d)
					}
				}
			}
		}
	}
	ids := e.createGraph(t, "dag", order, deps)
	var mu sync.Mutex
	completed := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func(owner string) {
			defer wg.Done()
			for {
				c, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: owner, WorkflowID: "dag", Lease: time.Minute, Wait: 50 * time.Millisecond})
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					v, err := e.S.Workflow(e.Ctx, "dag")
					if err != nil {
						errs <- err
						return
					}
					if v.Finished() {
						return
					}
					continue
				}
				if _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(`1`)); err != nil {
					errs <- fmt.Errorf("complete %s: %w", c.Task.NodeID, err)
					return
				}
				mu.Lock()
				completed[c.Task.NodeID]++
				mu.Unlock()
			}
		}(fmt.Sprintf("w%d", w))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(completed) != len(order) {
		t.Fatalf("%d tasks completed, want %d", len(completed), len(order))
	}
	for n, k := range completed {
		if k != 1 {
			t.Errorf("%s completed %d times", n, k)
		}
	}
	evs, err := e.S.WorkflowEvents(e.Ctx, "dag")
	if err != nil {
		t.Fatal(err)
	}
	node := map[string]string{}
	for n, id := range ids {
		node[id] = n
	}
	done := map[string]bool{}
	for _, ev := range evs {
		n := node[ev.TaskID]
		switch ev.Kind {
		case tg.EventClaim:
			for _, d := range deps[n] {
				if !done[d] {
					t.Errorf("%s was claimed (event %d) before its dependency %s completed", n, ev.Seq, d)
				}
			}
		case tg.EventComplete:
			done[n] = true
		}
	}
	e.checkCounters(t)
	if n := e.Count(t, `SELECT task_count FROM workflows WHERE workflow_id = 'dag'`); n != int64(len(order)) {
		t.Errorf("task_count %d, want %d", n, len(order))
	}
	e.Verify(t)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// 16 goroutines create tasks in one workflow at once, some depending on
// tasks another goroutine created, some repeating a node another creates:
// every node exists once, the workflow counts them, and its one chain
// verifies.
func testConcurrentCreatesShareOneChain(t *testing.T, h Harness) {
	e := setup(t, h)
	e.Create(t, "wf", "root")
	const goroutines, each = 16, 15
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				spec := tg.NodeSpec{NodeID: fmt.Sprintf("g%02d-%02d", g, i), DependsOn: []string{"root"}}
				if i%3 == 0 {
					spec = tg.NodeSpec{NodeID: fmt.Sprintf("shared-%02d", i)} // every goroutine repeats it
				}
				if _, err := e.S.CreateTask(e.Ctx, "wf", spec); err != nil {
					errs <- fmt.Errorf("create %s: %w", spec.NodeID, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	const shared = (each + 2) / 3
	want := 1 + goroutines*(each-shared) + shared
	v, err := e.S.Workflow(e.Ctx, "wf")
	if err != nil || len(v.Tasks) != want {
		t.Fatalf("%d tasks, want %d (%v)", len(v.Tasks), want, err)
	}
	if n := e.Count(t, `SELECT task_count FROM workflows WHERE workflow_id = 'wf'`); n != int64(want) {
		t.Errorf("task_count %d, want %d", n, want)
	}
	if n := e.Count(t, `SELECT COUNT(*) FROM events WHERE workflow_id = 'wf' AND kind = 'create'`); n != int64(want) {
		t.Errorf("%d create events, want %d (one per task)", n, want)
	}
	e.checkCounters(t)
	if rep := e.Verify(t); rep.Events != int64(want) {
		t.Errorf("verified %d events, want %d", rep.Events, want)
	}
}

// Racing claims of one task grant exactly one lease; after it lapses, the
// old holder and the new one race to complete it, and only the new one
// lands.
func testConcurrentClaimsOfOneTask(t *testing.T, h Harness) {
	e := setup(t, h)
	tk := e.Create(t, "wf", "a")
	const racers = 16
	claims := make(chan tg.Claimed, racers)
	var wg sync.WaitGroup
	var others sync.Map
	for r := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: fmt.Sprintf("r%02d", r), TaskID: tk.TaskID, Lease: time.Second})
			switch {
			case err == nil && ok:
				claims <- c
			case errors.Is(err, tg.ErrConflict): // the others lost the race
			default:
				others.Store(r, err)
			}
		}()
	}
	wg.Wait()
	close(claims)
	others.Range(func(k, v any) bool { t.Errorf("racer %v: %v", k, v); return true })
	var won []tg.Claimed
	for c := range claims {
		won = append(won, c)
	}
	if len(won) != 1 {
		t.Fatalf("%d racers were granted the claim, want exactly 1", len(won))
	}
	first := won[0]
	e.Clock.Advance(2 * time.Second)
	second := e.Claim(t, "late", tk.TaskID, time.Minute)
	results := make(chan error, 2*racers)
	for i := range 2 * racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hd := holder(first)
			if i%2 == 1 {
				hd = holder(second)
			}
			_, err := e.S.Complete(e.Ctx, hd, json.RawMessage(fmt.Sprintf(`{"by":%q}`, hd.Owner)))
			results <- err
		}()
	}
	wg.Wait()
	close(results)
	ok := 0
	for err := range results {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, tg.ErrStaleClaim):
		default:
			t.Errorf("complete: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d completes landed, want exactly 1", ok)
	}
	got := e.WantState(t, tk.TaskID, tg.StateCompleted)
	if got.Owner != "late" || string(got.Result) != `{"by":"late"}` {
		t.Fatalf("completed by %s with %s, want the new holder's result", got.Owner, got.Result)
	}
	if n := e.Count(t, `SELECT COUNT(*) FROM events WHERE task_id = ? AND kind = 'complete'`, tk.TaskID); n != 1 {
		t.Fatalf("%d complete events", n)
	}
	e.Verify(t)
}
