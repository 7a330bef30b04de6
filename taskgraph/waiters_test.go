package taskgraph

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

type parkedResult struct {
	group string
	c     Claimed
	ok    bool
	err   error
}

// park starts n claim-next calls on workflow wf ("" for any) that wait up to
// MaxClaimWait, and returns once each has made its first attempt.
func parkWaiters(t testing.TB, s *Store, ctx context.Context, n int, wf string, out chan<- parkedResult, wg *sync.WaitGroup) {
	t.Helper()
	base := s.claimAttempts.Load()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, ok, err := s.Claim(ctx, ClaimRequest{Owner: "w", WorkflowID: wf, Wait: MaxClaimWait})
			out <- parkedResult{group: wf, c: c, ok: ok, err: err}
		}()
	}
	testwait.For(t, fmt.Sprintf("%d claim-next calls to make their first attempt", n), func() bool { return s.claimAttempts.Load() >= base+int64(n) })
}

// With thousands of parked claim-next calls, a create makes O(1) claim
// attempts: it wakes one waiter, not all.
func TestCreateWakesOneOfManyWaiters(t *testing.T) {
	const most, batch = 5000, 250
	b := setupWith(t, Options{MaxWaiters: most + 1000})
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	out := make(chan parkedResult, most)
	var wg sync.WaitGroup
	// Every waiter must still be parked when the creates come, so parking
	// (a claim attempt each, slow under -race on a loaded machine) stops
	// before a third of their MaxClaimWait would pass, judged by how long
	// the last batch took (one batch on a machine at load 24 took several
	// times the one before it, so the margin is four batches): a slow
	// machine parks fewer, at least one batch, up to 5,000. The bound is
	// the waiters' own wait, scaled by the progress seen.
	start, n, last := time.Now(), 0, time.Duration(0)
	for n < most && (n == 0 || time.Since(start)+4*last < MaxClaimWait/3) {
		t0 := time.Now()
		parkWaiters(t, b.s, ctx, batch, "", out, &wg)
		last = time.Since(t0)
		n += batch
	}
	if got := b.s.Waiters(); got != n {
		t.Fatalf("Waiters = %d, want %d", got, n)
	}
	base := b.s.claimAttempts.Load()
	for i := range 2 {
		task := b.create(t, "wf", fmt.Sprint("n", i))
		if r := testwait.Recv(t, "a waiter woken by the create", out); r.err != nil || !r.ok || r.c.Task.TaskID != task.TaskID {
			t.Fatalf("a woken waiter got %+v", r)
		}
	}
	if extra := b.s.claimAttempts.Load() - base; extra > 6 {
		t.Fatalf("two creates with %d parked waiters made %d claim attempts, want at most 6", n, extra)
	}
	t.Logf("%d waiters parked in %v", n, time.Since(start).Round(time.Millisecond))
	cancel()
	wg.Wait()
	close(out)
	for r := range out {
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("a parked waiter ended with %+v, want context.Canceled", r)
		}
	}
	if got := b.s.Waiters(); got != 0 {
		t.Fatalf("Waiters = %d after every waiter left", got)
	}
}

// A task that becomes ready wakes only waiters whose workflow filter it
// matches.
func TestWakeRespectsWorkflowFilter(t *testing.T) {
	b := setup(t)
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	out := make(chan parkedResult, 200)
	var wg sync.WaitGroup
	parkWaiters(t, b.s, ctx, 100, "x", out, &wg)
	parkWaiters(t, b.s, ctx, 100, "y", out, &wg)
	base := b.s.claimAttempts.Load()
	task := b.create(t, "y", "only")
	r := <-out
	if r.group != "y" || !r.ok || r.c.Task.TaskID != task.TaskID {
		t.Fatalf("got %+v, want a waiter on y to claim %s", r, task.TaskID)
	}
	if extra := b.s.claimAttempts.Load() - base; extra > 3 {
		t.Fatalf("a create in y made %d claim attempts, want at most 3", extra)
	}
	cancel()
	wg.Wait()
}

// The server's sweeper expires a lapsed lease and wakes a waiter for it;
// waiters themselves do not wake at lease expiries.
func TestSweeperWakesWaiterForExpiredLease(t *testing.T) {
	b := setupWith(t, Options{Sweep: true})
	task := b.create(t, "wf", "a")
	b.claim(t, "dead", task.TaskID, 5*time.Second)
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	out := make(chan parkedResult, 50)
	var wg sync.WaitGroup
	parkWaiters(t, b.s, ctx, 50, "", out, &wg)
	base := b.s.claimAttempts.Load()
	b.clock.Advance(6 * time.Second)
	r := <-out
	if !r.ok || r.c.Task.TaskID != task.TaskID || r.c.Lease.Generation != 2 {
		t.Fatalf("got %+v, want the expired task at generation 2", r)
	}
	if extra := b.s.claimAttempts.Load() - base; extra > 3 {
		t.Fatalf("%d claim attempts among 50 waiters for one expiry", extra)
	}
	cancel()
	wg.Wait()
}

// A write by another process wakes at most as many waiters as there are
// pending tasks.
func TestWatcherWakesByPendingCount(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	clock := lease.NewManualClock(t0)
	a, err := openSQLite(context.Background(), path, Options{Clock: clock}, tgsqlite.Options{WatchInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	other, err := openSQLite(context.Background(), path, Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan parkedResult, 200)
	var wg sync.WaitGroup
	parkWaiters(t, a, ctx, 100, "", out, &wg)
	parkWaiters(t, a, ctx, 100, "wf", out, &wg)
	base := a.claimAttempts.Load()
	if _, err := other.CreateTask(ctx, "wf", NodeSpec{NodeID: "n"}); err != nil {
		t.Fatal(err)
	}
	if r := <-out; !r.ok {
		t.Fatalf("got %+v", r)
	}
	// A task of another workflow: only a waiter on any workflow may take it.
	if _, err := other.CreateTask(ctx, "other", NodeSpec{NodeID: "n"}); err != nil {
		t.Fatal(err)
	}
	if r := <-out; !r.ok {
		t.Fatalf("got %+v", r)
	}
	if extra := a.claimAttempts.Load() - base; extra > 4 {
		t.Fatalf("two creates by another process made %d claim attempts among 200 waiters, want at most 4", extra)
	}
	cancel()
	wg.Wait()
}

func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCreateWithParkedWaiters measures the CPU a create costs with 0 and
// 5,000 claim-next calls parked on another workflow (cpu-ns/op: user + system
// time of the whole process, per create).
func BenchmarkCreateWithParkedWaiters(b *testing.B) {
	for _, n := range []int{0, 5000} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "tasks.db")
			s, err := openSQLite(context.Background(), path, Options{MaxWaiters: 6000}, tgsqlite.Options{Sync: tgsqlite.SyncNormal})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx, cancel := context.WithCancel(context.Background())
			out := make(chan parkedResult, n)
			var wg sync.WaitGroup
			parkWaiters(b, s, ctx, n, "idle", out, &wg)
			b.ResetTimer()
			start := cpuTime(b)
			for i := 0; i < b.N; i++ {
				if _, err := s.CreateTask(ctx, "work", NodeSpec{NodeID: fmt.Sprint("n", i)}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
			b.StopTimer()
			cancel()
			wg.Wait()
		})
	}
}

// The server's sweeper promotes a task whose due time came (here a retry's
// backoff) and wakes a waiter for it, without any claim arriving; the other
// waiters stay parked.
func TestSweeperPromotesDueTask(t *testing.T) {
	b := setupWith(t, Options{Sweep: true})
	task := b.create(t, "wf", "a")
	c := b.claim(t, "w", task.TaskID, 30*time.Second)
	if _, err := b.s.FailRetryAfter(b.ctx, holder(c), "service down", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	out := make(chan parkedResult, 20)
	var wg sync.WaitGroup
	parkWaiters(t, b.s, ctx, 20, "", out, &wg)
	base := b.s.claimAttempts.Load()
	b.clock.Advance(10 * time.Second)
	r := <-out
	if !r.ok || r.c.Task.TaskID != task.TaskID || r.c.Task.Attempts != 2 {
		t.Fatalf("got %+v, want the retried task on its second attempt", r)
	}
	if extra := b.s.claimAttempts.Load() - base; extra > 3 {
		t.Fatalf("%d claim attempts among 20 waiters for one due task", extra)
	}
	cancel()
	wg.Wait()
}
