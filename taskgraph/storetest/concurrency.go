package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest/stenv"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// concurrencyTests: many goroutines at once, and claim-next calls that wait.
var concurrencyTests = []test{
	{"ConcurrentClaimComplete", testConcurrentClaimComplete},
	{"ClaimNextWaitsForCreate", testClaimNextWaitsForCreate},
	{"ClaimNextWaitTimesOut", testClaimNextWaitTimesOut},
	{"ClaimNextSeesAnotherStoresWrites", testClaimNextSeesAnotherStoresWrites},
	{"ClosedStoreRefusesWrites", testClosedStoreRefusesWrites},
	{"MaxWaiters", testMaxWaiters},
	{"SweeperWakesWaiterForExpiredLease", testSweeperWakesWaiterForExpiredLease},
}

// 16 goroutines run claim-next / complete over 2,000 tasks: every task is
// completed exactly once, no claim is lost, and the event chain verifies.
func testConcurrentClaimComplete(t *testing.T, h Harness) {
	e := setup(t, h)
	const tasks, workers = 2000, 16
	nodes := make([]tg.NodeSpec, 0, 500)
	for i := 0; i < tasks; i++ {
		nodes = append(nodes, tg.NodeSpec{NodeID: fmt.Sprintf("n%04d", i)})
		if len(nodes) == 500 {
			if _, err := e.S.CreateWorkflow(e.Ctx, fmt.Sprintf("wf%d", i/500), nodes); err != nil {
				t.Fatal(err)
			}
			nodes = nodes[:0]
		}
	}
	var mu sync.Mutex
	completedBy := map[string]string{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(owner string) {
			defer wg.Done()
			for {
				c, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: owner, Lease: time.Minute})
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					return
				}
				if _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(strconv.Quote(owner))); err != nil {
					errs <- fmt.Errorf("complete %s: %w", c.Task.TaskID, err)
					return
				}
				mu.Lock()
				if prev, dup := completedBy[c.Task.TaskID]; dup {
					mu.Unlock()
					errs <- fmt.Errorf("task %s completed by %s and %s", c.Task.TaskID, prev, owner)
					return
				}
				completedBy[c.Task.TaskID] = owner
				mu.Unlock()
			}
		}(fmt.Sprintf("worker-%02d", w))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(completedBy) != tasks {
		t.Fatalf("%d tasks completed, want %d", len(completedBy), tasks)
	}
	counts, err := e.S.CountByState(e.Ctx)
	if err != nil || counts[tg.StateCompleted] != tasks {
		t.Fatalf("counts %v %v", counts, err)
	}
	if n := e.Count(t, `SELECT COUNT(*) FROM (SELECT task_id FROM events WHERE kind = 'complete' GROUP BY task_id HAVING COUNT(*) > 1) AS dup`); n != 0 {
		t.Fatalf("%d tasks have more than one complete event", n)
	}
	if n := e.Count(t, `SELECT COUNT(*) FROM events WHERE kind = 'complete'`); n != tasks {
		t.Fatalf("%d complete events, want %d", n, tasks)
	}
	rep := e.Verify(t)
	if rep.Events != 3*tasks {
		t.Fatalf("verified %d events, want %d", rep.Events, 3*tasks)
	}
}

// A parked claim-next is woken by a create at once.
func testClaimNextWaitsForCreate(t *testing.T, h Harness) {
	e := setup(t, h)
	got := make(chan stenv.ParkedResult, 1)
	go func() { got <- e.ParkedClaim(e.Ctx, tg.ClaimRequest{Owner: "w", Wait: tg.MaxClaimWait}) }()
	// The waiter is parked on the notifier; a create wakes it at once.
	testwait.For(t, "the claim-next to park", func() bool { return e.S.Waiters() > 0 })
	tk := e.Create(t, "wf", "late")
	testwait.Recv(t, "the parked claim-next to return", got).WantWoken(t, tk.TaskID, "the create")
}

// A claim-next with nothing to claim gives up at the end of its wait, or
// when its context ends.
func testClaimNextWaitTimesOut(t *testing.T, h Harness) {
	e := setup(t, h)
	_, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", Wait: 50 * time.Millisecond})
	if err != nil || ok {
		t.Fatalf("empty store: ok=%v err=%v", ok, err)
	}
	ctx, cancel := context.WithCancel(e.Ctx)
	cancel()
	if _, _, err := e.S.Claim(ctx, tg.ClaimRequest{Owner: "w", Wait: time.Second}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}

// At Options.MaxWaiters, a claim-next with a wait still takes a ready task,
// and otherwise answers at once with ErrWaitLimit and ok false.
func testMaxWaiters(t *testing.T, h Harness) {
	e := setupWith(t, h, tg.Options{MaxWaiters: 2})
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	out := make(chan stenv.ParkedResult, 2)
	var wg sync.WaitGroup
	e.ParkWaiters(t, ctx, 2, "x", out, &wg)
	_, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", Wait: tg.MaxClaimWait})
	if ok || !errors.Is(err, tg.ErrWaitLimit) {
		t.Fatalf("claim-next at the bound: ok=%v err=%v, want tg.ErrWaitLimit", ok, err)
	}
	task := e.Create(t, "y", "ready")
	c, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", Wait: tg.MaxClaimWait})
	if err != nil || !ok || c.Task.TaskID != task.TaskID {
		t.Fatalf("claim-next at the bound with a ready task: ok=%v err=%v", ok, err)
	}
	cancel()
	wg.Wait()
	close(out)
	for r := range out {
		if !errors.Is(r.Err, context.Canceled) {
			t.Errorf("a parked waiter ended with %+v, want context.Canceled", r)
		}
	}
}

// The server's sweeper expires a lapsed lease and wakes a parked waiter,
// which claims the task at the next generation.
func testSweeperWakesWaiterForExpiredLease(t *testing.T, h Harness) {
	e := setupWith(t, h, tg.Options{Sweep: true})
	task := e.Create(t, "wf", "a")
	e.Claim(t, "dead", task.TaskID, 5*time.Second)
	// A live worker keeps writing while time passes, as on a running
	// server: the time is not taken for the server having been away (with a
	// clock shared by replicas, that is the time no write refreshed the
	// servers' alive time).
	keeper := e.Create(t, "wf", "keeper")
	kc := e.Claim(t, "alive", keeper.TaskID, time.Minute)
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	out := make(chan stenv.ParkedResult, 50)
	var wg sync.WaitGroup
	e.ParkWaiters(t, ctx, 50, "", out, &wg)
	for range 24 {
		e.Clock.Advance(250 * time.Millisecond)
		if _, err := e.S.Heartbeat(e.Ctx, holder(kc), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	r := testwait.Recv(t, "a parked claim-next to take the expired task", out)
	r.WantWoken(t, task.TaskID, "the sweeper's expiry")
	if r.C.Lease.Generation != 2 {
		t.Fatalf("got %+v, want the expired task at generation 2", r)
	}
	cancel()
	wg.Wait()
	close(out)
	for r := range out {
		if !errors.Is(r.Err, context.Canceled) {
			t.Errorf("a parked waiter ended with %+v, want context.Canceled", r)
		}
	}
}

// A claim-next parked on one store is woken by a task created through
// another store on the same database (another process, or another replica),
// well within its wait.
func testClaimNextSeesAnotherStoresWrites(t *testing.T, h Harness) {
	e := setup(t, h)
	other := e.DB.Open(t, tg.Options{Clock: e.Clock})
	got := make(chan stenv.ParkedResult, 1)
	go func() { got <- e.ParkedClaim(e.Ctx, tg.ClaimRequest{Owner: "w", Wait: tg.MaxClaimWait}) }()
	testwait.For(t, "the claim-next to park", func() bool { return e.S.Waiters() > 0 })
	tk, err := other.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Recv(t, "the parked claim-next to return", got).WantWoken(t, tk.Task.TaskID, "the other store's create")
}

// A closed store refuses every write with ErrClosed and keeps what it
// acknowledged.
func testClosedStoreRefusesWrites(t *testing.T, h Harness) {
	e := setup(t, h)
	tk := e.Create(t, "wf", "a")
	if err := e.S.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "b"}); !errors.Is(err, tg.ErrClosed) {
		t.Fatalf("create after close: %v, want ErrClosed", err)
	}
	if _, _, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w"}); !errors.Is(err, tg.ErrClosed) {
		t.Fatalf("claim after close: %v, want ErrClosed", err)
	}
	e.S = e.DB.Open(t, tg.Options{Clock: e.Clock})
	e.WantState(t, tk.TaskID, tg.StatePending)
	if n := e.Count(t, `SELECT COUNT(*) FROM tasks`); n != 1 {
		t.Fatalf("%d tasks stored, want 1", n)
	}
}
