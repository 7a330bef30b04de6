package stenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// Harness opens stores of one driver on fresh databases.
type Harness struct {
	// Name names the driver in failure messages ("sqlite", "postgres").
	Name string
	// NewDatabase returns a fresh, empty database for t (cleaned up with t).
	NewDatabase func(t testing.TB) Database
	// Parallel bounds how many subtests run at once, each on its own
	// database; 0 leaves the bound to go test's -parallel flag alone. A
	// harness whose databases cost server connections (PostgreSQL) sets it
	// so that the stores open at once stay under the server's limit.
	Parallel int
}

// Database is one fresh database of a Harness.
type Database interface {
	// Open opens a store on the database with opts (the suite sets Clock
	// and the options a subtest needs); the store is closed in t.Cleanup.
	// Open may be called more than once on one database.
	Open(t testing.TB, opts tg.Options) *tg.Store
	// Exec runs raw SQL on the database (tampering tests), with ?
	// placeholders (the PostgreSQL harness rewrites them to $n), outside the
	// store, as someone with access to the database would. It fails t on an
	// error.
	Exec(t testing.TB, query string, args ...any)
	// Query runs a read-only query with ? placeholders and returns its rows,
	// each value rendered as text: integers in decimal, text and byte
	// strings as their bytes, NULL as "". It fails t on an error.
	Query(t testing.TB, query string, args ...any) [][]string
	// Snapshot returns the whole database content (every row of every
	// table, in a stable order) rendered as text, for "nothing was written"
	// assertions: two snapshots are equal exactly when no row was inserted,
	// changed or deleted in between. Byte strings appear as their bytes, so a
	// secret stored in clear would appear in the snapshot.
	Snapshot(t testing.TB) string
}

// Test is one behaviour of the suite: a group of the suite, in storetest
// or a package of its own, is a list of them, and storetest.Run runs each
// on every driver's Harness.
type Test struct {
	Name string
	Fn   func(t *testing.T, h Harness)
}

// T0 is where every store's manual clock starts.
var T0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Env is one store on a fresh database, on a manual clock.
type Env struct {
	S     *tg.Store
	DB    Database
	Clock *lease.ManualClock
	Ctx   context.Context
}

// Setup opens a store on a fresh database of h, on a manual clock at T0.
func Setup(t *testing.T, h Harness) *Env {
	t.Helper()
	return SetupWith(t, h, tg.Options{})
}

// SetupWith is Setup with opts; a lease.ManualClock in opts.Clock is the
// Env's clock.
func SetupWith(t *testing.T, h Harness, opts tg.Options) *Env {
	t.Helper()
	// The env's clock is the store's when the caller gave a manual one.
	clock, ok := opts.Clock.(*lease.ManualClock)
	if !ok {
		clock = lease.NewManualClock(T0)
	}
	if opts.Clock == nil {
		opts.Clock = clock
	}
	db := h.NewDatabase(t)
	s := db.Open(t, opts)
	return &Env{S: s, DB: linkedDB{db, s}, Clock: clock, Ctx: context.Background()}
}

// linkedDB is a Database whose raw reads and writes see every event a
// store recorded in its workflow's chain: they link the journal first (see
// tg.Store.LinkHistory), as the store's own readers of the history do, so
// that the linker running in the background never changes what a test
// compares, and a tampering test edits the chain, not a journal entry on its
// way into it.
type linkedDB struct {
	Database
	s *tg.Store
}

func (d linkedDB) link(t testing.TB) {
	t.Helper()
	if err := d.s.LinkHistory(context.Background()); err != nil && !errors.Is(err, tg.ErrClosed) {
		t.Fatalf("link the history: %v", err)
	}
}

func (d linkedDB) Exec(t testing.TB, query string, args ...any) {
	t.Helper()
	d.link(t)
	d.Database.Exec(t, query, args...)
}

func (d linkedDB) Query(t testing.TB, query string, args ...any) [][]string {
	t.Helper()
	d.link(t)
	return d.Database.Query(t, query, args...)
}

func (d linkedDB) Snapshot(t testing.TB) string {
	t.Helper()
	d.link(t)
	return d.Database.Snapshot(t)
}

// Create creates node of workflow wf depending on deps, with a payload
// naming it, and fails t on an error.
func (e *Env) Create(t *testing.T, wf, node string, deps ...string) tg.Task {
	t.Helper()
	c, err := e.S.CreateTask(e.Ctx, wf, tg.NodeSpec{NodeID: node, DependsOn: deps, Payload: json.RawMessage(fmt.Sprintf(`{"n":%q}`, node))})
	if err != nil {
		t.Fatalf("create %s/%s: %v", wf, node, err)
	}
	return c.Task
}

// Claim claims taskID for owner with lease d (0: the default), and fails
// t unless it was claimed.
func (e *Env) Claim(t *testing.T, owner, taskID string, d time.Duration) tg.Claimed {
	t.Helper()
	c, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: owner, TaskID: taskID, Lease: d})
	if err != nil || !ok {
		t.Fatalf("claim %s by %s: ok=%v err=%v", taskID, owner, ok, err)
	}
	return c
}

// ClaimNext claims the next claimable task of wf (any workflow when wf is
// empty) for owner, without waiting; ok is false when none was claimable.
func (e *Env) ClaimNext(t *testing.T, owner, wf string) (tg.Claimed, bool) {
	t.Helper()
	c, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: owner, WorkflowID: wf})
	if err != nil {
		t.Fatalf("claim-next by %s: %v", owner, err)
	}
	return c, ok
}

// Holder is the lease.Holder of claim c.
func Holder(c tg.Claimed) lease.Holder {
	return lease.Holder{TaskID: c.Task.TaskID, Owner: c.Lease.Owner, Generation: c.Lease.Generation, Token: c.Lease.Token}
}

// Get returns task id as the store reads it.
func (e *Env) Get(t *testing.T, id string) tg.Task {
	t.Helper()
	tk, err := e.S.Task(e.Ctx, id)
	if err != nil {
		t.Fatalf("Task(%s): %v", id, err)
	}
	return tk
}

// WantState fails t unless task id is in state want, and returns it.
func (e *Env) WantState(t *testing.T, id string, want tg.State) tg.Task {
	t.Helper()
	tk := e.Get(t, id)
	if tk.State != want {
		t.Fatalf("task %s (%s) is %s (%q), want %s", id, tk.NodeID, tk.State, tk.StatusMessage, want)
	}
	return tk
}

// StoredState reads a task's state from the database itself: Store.Task
// would process a lapsed lease on its own.
func (e *Env) StoredState(t *testing.T, id string) string {
	t.Helper()
	rows := e.DB.Query(t, `SELECT state FROM tasks WHERE task_id = ?`, id)
	if len(rows) != 1 {
		t.Fatalf("task %s: %d stored rows", id, len(rows))
	}
	return rows[0][0]
}

// Count runs a query whose single value is an integer.
func (e *Env) Count(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	rows := e.DB.Query(t, query, args...)
	if len(rows) != 1 || len(rows[0]) != 1 {
		t.Fatalf("%s: %d rows, want one value", query, len(rows))
	}
	n, err := strconv.ParseInt(rows[0][0], 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// Verify verifies the store's whole history and fails t on an error, a
// broken chain included (VerifyHistory returns ErrBrokenChain with the
// report's Broken set), so callers need not check Broken themselves.
func (e *Env) Verify(t *testing.T) tg.VerifyReport {
	t.Helper()
	rep, err := e.S.VerifyHistory(e.Ctx)
	if err != nil {
		t.Fatalf("VerifyHistory: %v", err)
	}
	return rep
}

// Events returns the events of task id, in order.
func (e *Env) Events(t *testing.T, id string) []tg.Event {
	t.Helper()
	evs, err := e.S.TaskEvents(e.Ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// Unchanged fails t when the database differs from the snapshot before.
func (e *Env) Unchanged(t *testing.T, before, what string) {
	t.Helper()
	if after := e.DB.Snapshot(t); after != before {
		t.Errorf("%s: the database changed", what)
	}
}

// WantStale fails t unless err is a stale claim for reason.
func WantStale(t *testing.T, err error, reason lease.Reason) {
	t.Helper()
	var se *lease.StaleClaimError
	if !errors.Is(err, tg.ErrStaleClaim) || !errors.As(err, &se) || se.Reason != reason {
		t.Fatalf("got %v, want a stale claim with reason %q", err, reason)
	}
}

// WantConflict fails t unless err is a conflict whose text holds phrase.
func WantConflict(t *testing.T, err error, phrase string) {
	t.Helper()
	var ce *tg.ConflictError
	if !errors.Is(err, tg.ErrConflict) || !errors.As(err, &ce) || !strings.Contains(err.Error(), phrase) {
		t.Fatalf("got %v, want a conflict saying %q", err, phrase)
	}
}

// ParkedResult is the answer of a claim-next that may have parked.
type ParkedResult struct {
	C    tg.Claimed
	OK   bool
	Err  error
	Took time.Duration // from the call to the answer
	Wait time.Duration // the claim's ClaimRequest.Wait
}

// ParkedClaim makes a claim that may park, and times it.
func (e *Env) ParkedClaim(ctx context.Context, req tg.ClaimRequest) ParkedResult {
	start := time.Now()
	c, ok, err := e.S.Claim(ctx, req)
	return ParkedResult{C: c, OK: ok, Err: err, Took: time.Since(start), Wait: req.Wait}
}

// WantWoken fails t unless r claimed taskID before its wait ran out. A
// parked claim that slept through its whole wait was not woken by the event
// under test (by), even if it then found the task: that is what the
// comparison with the claim's own wait (the store's timer, MaxClaimWait in
// these tests) tells, not a bound on the test's speed. The tests make the
// event right after the claim parks.
func (r ParkedResult) WantWoken(t *testing.T, taskID, by string) {
	t.Helper()
	if r.Err != nil || !r.OK || r.C.Task.TaskID != taskID {
		t.Fatalf("the claim-next parked before %s got ok=%v err=%v task %s, want task %s", by, r.OK, r.Err, r.C.Task.TaskID, taskID)
	}
	if r.Took >= r.Wait {
		t.Fatalf("the claim-next parked before %s answered after %v, its whole %v wait: %s did not wake it", by, r.Took, r.Wait, by)
	}
}

// ParkWaiters starts n claim-next calls on workflow wf ("" for any) that
// wait up to MaxClaimWait, and returns once all of them are parked.
func (e *Env) ParkWaiters(t *testing.T, ctx context.Context, n int, wf string, out chan<- ParkedResult, wg *sync.WaitGroup) {
	t.Helper()
	base := e.S.Waiters()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out <- e.ParkedClaim(ctx, tg.ClaimRequest{Owner: "w", WorkflowID: wf, Wait: tg.MaxClaimWait})
		}()
	}
	testwait.For(t, fmt.Sprintf("%d claim-next calls to park", n), func() bool { return e.S.Waiters() >= base+n })
}

// Concurrently runs fn(0) .. fn(n-1) each in a goroutine of its own, all
// at once, waits for them all, and fails t with every error they returned
// (a concurrency test's fan-out: an operation that fails, a deadlock a
// driver let through among them, fails the test).
func Concurrently(t testing.TB, n int, fn func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("%d goroutines at once: %v", n, err)
	}
}

// RetryLog is a store's log (tg.Options.Logger, at debug level) kept for
// the retries of transactions it records: PostgreSQL reports a deadlock
// (40P01) and the driver runs the transaction again, which a caller never
// sees but a lock-order test counts.
type RetryLog struct{ buf testwait.Buffer }

// Logger returns the logger that writes to l.
func (l *RetryLog) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(&l.buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Deadlocks returns the lines of l that report a deadlock (40P01).
func (l *RetryLog) Deadlocks() []string {
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if strings.Contains(line, "40P01") {
			out = append(out, line)
		}
	}
	return out
}
