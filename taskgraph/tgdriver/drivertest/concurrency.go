package drivertest

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// concurrencyTests: what the locks promise when writers run at once. The
// "serialises" clauses run on every driver (read, then write what was
// read, under the lock: no update is lost); the others need two open
// transactions at once and run only on drivers of many writers.
var concurrencyTests = []test{
	{"LockWorkflowSerialises", testLockWorkflowSerialises},
	{"LockAuditHeadSerialises", testLockAuditSerialises},
	{"ReadAliveSerialises", testReadAliveSerialises},
	{"FetchLockSerialises", testFetchLockSerialises},
	{"ClaimsTakeEachTaskOnce", testClaimsOnce},
	{"LocksWait", testLocksWait},
	{"ClaimScansSkipHeldTasksWithoutWaiting", testScansSkipHeld},
	{"ClaimsIgnoreTheWorkflowLock", testClaimsIgnoreWorkflowLock},
	{"TryTouchAliveNeverWaits", testTryTouchNeverWaits},
}

const (
	writers   = 4
	perWriter = 5
)

// concurrently runs fn writers times at once, each perWriter times, each
// run in a write transaction of its own, and fails the test on an error.
func concurrently(t *testing.T, e *env, fn func(tx tgdriver.Tx) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter)
	for range writers {
		wg.Go(func() {
			for range perWriter {
				if err := e.d.Write(e.ctx, fn); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// testLockWorkflowSerialises: writers that extend a chain from a plain read
// of its head after LockWorkflow never find the head moved.
func testLockWorkflowSerialises(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.insert(task("wf", "a"))
	concurrently(t, e, func(tx tgdriver.Tx) error {
		if ok, err := tx.LockWorkflow(e.ctx, "wf"); !ok || err != nil {
			return fmt.Errorf("LockWorkflow: %v %v", ok, err)
		}
		w, err := tx.Workflow(e.ctx, "wf")
		if err != nil {
			return err
		}
		n := w.EventCount + 1
		return tx.AppendEvents(e.ctx, []tgdriver.EventRow{ev("wf", n, w.HeadHash, "wf-"+strconv.FormatInt(n, 10))})
	})
	got, err := events(e, e.d.Reads(), "wf")
	if err != nil || len(got) != writers*perWriter {
		t.Fatalf("%d events, %v; want %d", len(got), err, writers*perWriter)
	}
}

// testLockAuditSerialises: appenders of the audit chain that read its head
// with LockAuditHead never find it moved.
func testLockAuditSerialises(t *testing.T, h Harness) {
	e := newEnv(t, h)
	concurrently(t, e, func(tx tgdriver.Tx) error {
		n, head, err := tx.LockAuditHead(e.ctx)
		if err != nil {
			return err
		}
		return tx.AppendAudit(e.ctx, tgdriver.AuditRow{Seq: n + 1, Kind: "k", AtMS: n, Detail: `{}`, PrevHash: head, Hash: "a" + strconv.FormatInt(n+1, 10)})
	})
	if n, _, _, err := e.d.Reads().AuditHead(e.ctx); err != nil || n != writers*perWriter {
		t.Fatalf("audit head at %d entries (%v), want %d", n, err, writers*perWriter)
	}
}

// testReadAliveSerialises: ReadAlive locks the alive time: increments of
// it are never lost.
func testReadAliveSerialises(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.write(func(tx tgdriver.Tx) error { return tx.TouchAlive(e.ctx, 1) })
	concurrently(t, e, func(tx tgdriver.Tx) error {
		ms, ok, err := tx.ReadAlive(e.ctx)
		if err != nil || !ok {
			return fmt.Errorf("ReadAlive: %v %v", ok, err)
		}
		return tx.TouchAlive(e.ctx, ms+1)
	})
	var ms int64
	e.write(func(tx tgdriver.Tx) error {
		var err error
		ms, _, err = tx.ReadAlive(e.ctx)
		return err
	})
	if ms != 1+writers*perWriter {
		t.Fatalf("alive %d after %d increments from 1", ms, writers*perWriter)
	}
}

// testFetchLockSerialises: Fetch's locks hold a task for the transaction:
// increments of a column read through them are never lost.
func testFetchLockSerialises(t *testing.T, h Harness) {
	e := newEnv(t, h)
	x := e.inserted(task("wf", "x"))[0]
	concurrently(t, e, func(tx tgdriver.Tx) error {
		f, err := tx.Fetch(e.ctx, tgdriver.Fetch{Lock: []string{x.TaskID}})
		if err != nil || len(f.Locked) != 1 {
			return fmt.Errorf("the lock of Fetch: %+v %v", f.Locked, err)
		}
		_, ok, err := tx.UpdateTask(e.ctx, x.Seq, tgdriver.TaskSet{Attempts: tgdriver.Val(f.Locked[0].Attempts + 1), UpdatedAtMS: 2}, tgdriver.TaskGuard{})
		if err == nil && !ok {
			err = errors.New("update of the locked task changed no row")
		}
		return err
	})
	if got := e.task(x.Seq).Attempts; got != writers*perWriter {
		t.Fatalf("attempts %d after %d increments", got, writers*perWriter)
	}
}

// testClaimsOnce: claimers at once (by claim scans and by NextPending)
// each take a task of their own: their guarded claims, decided on rows the
// scan locked, always hold, and every task is claimed once.
func testClaimsOnce(t *testing.T, h Harness) {
	e := newEnv(t, h)
	const n = 24
	var rows []tgdriver.TaskRow
	for i := range n {
		rows = append(rows, task("wf"+strconv.Itoa(i%3), fmt.Sprintf("n%02d", i)))
	}
	e.insert(rows...)
	var mu sync.Mutex
	claimed := map[int64]int{}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			var backoff testwait.Backoff
			for {
				var got int64
				err := e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
					got = 0
					var cand tgdriver.TaskRow
					var ok bool
					if w%2 == 0 {
						f, err := tx.Fetch(e.ctx, tgdriver.Fetch{Claims: []tgdriver.ClaimScan{{N: 1}}})
						if err != nil {
							return err
						}
						if ok = len(f.Claimable[0]) == 1; ok {
							cand = f.Claimable[0][0]
						}
					} else {
						var err error
						if cand, ok, err = tx.NextPending(e.ctx, "", nil); err != nil {
							return err
						}
					}
					if !ok {
						return nil
					}
					err := tx.Apply(e.ctx, tgdriver.Apply{Updates: []tgdriver.TaskUpdate{{Seq: cand.Seq,
						Set:   tgdriver.TaskSet{State: tgdriver.Val("claimed"), Owner: tgdriver.Val(fmt.Sprintf("w%d", w)), UpdatedAtMS: 5},
						Guard: tgdriver.TaskGuard{States: []string{"pending"}, Owner: tgdriver.Null[string]()}}}})
					got = cand.Seq
					return err
				})
				if err != nil {
					errs <- err
					return
				}
				if got == 0 {
					// None left, or every one left is held by another
					// claimer, which commits soon.
					left, err := e.d.Reads().CountClaimable(e.ctx, "", nil, 1)
					if err != nil {
						errs <- err
						return
					}
					if left == 0 {
						return
					}
					if !backoff.Wait(e.ctx) { // back off while the holders commit
						errs <- fmt.Errorf("tasks left claimable but held: %w", e.ctx.Err())
						return
					}
					continue
				}
				backoff.Reset()
				mu.Lock()
				claimed[got]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(claimed) != n {
		t.Fatalf("%d tasks claimed, want %d", len(claimed), n)
	}
	for seq, k := range claimed {
		if k != 1 {
			t.Errorf("task %d claimed %d times", seq, k)
		}
	}
}

// contend runs hold in a write transaction that stays open, then try in
// another, and reports whether try waited for a lock (told by the
// database, LockWatcher) before it finished; when it waits, the holder
// commits, and try finishes after it. It returns try's error.
func contend(t *testing.T, e *env, hold, try func(tx tgdriver.Tx) error) (waited bool, err error) {
	t.Helper()
	lw, ok := e.db.(LockWatcher)
	if !ok {
		t.Fatalf("a driver of many writers (Info().Connections %d) needs a database that implements LockWatcher", e.info.Connections)
	}
	release := blocking(t, e, hold)
	done := make(chan error, 1)
	go func() { done <- e.d.Write(e.ctx, try) }()
	finished := false
	testwait.For(t, "the second transaction to finish or to wait for a lock", func() bool {
		select {
		case err = <-done:
			finished = true
			return true
		default:
		}
		if lw.LockWaits(t) > 0 {
			waited = true
			return true
		}
		return false
	})
	if herr := release(); herr != nil {
		t.Fatalf("the holding transaction: %v", herr)
	}
	if !finished {
		err = <-done
	}
	return waited, err
}

// needManyWriters skips a clause that needs two open write transactions.
func needManyWriters(t *testing.T, e *env) {
	if !e.manyWriters() {
		t.Skipf("the driver runs one write transaction at a time (Info().Connections = 0)")
	}
}

// testLocksWait: a lock taken by LockWorkflow (or EnsureWorkflow, LockChains),
// LockAuditHead, ReadAlive, Fetch's Lock or a claim scan holds off another
// transaction that takes it (or updates the locked task) until the holder
// commits; LockDependencies (of one task, or of each task it names)
// holds off a change of the task but not another LockDependencies; a
// transaction that takes another lock does not wait.
func testLocksWait(t *testing.T, h Harness) {
	e := newEnv(t, h)
	needManyWriters(t, e)
	rows := e.inserted(task("wf", "a"), task("wf", "b"), task("wf2", "c"))
	a, b := rows[0], rows[1]
	e.write(func(tx tgdriver.Tx) error { return tx.TouchAlive(e.ctx, 1) })
	lockWF := func(wf string) func(tx tgdriver.Tx) error {
		return func(tx tgdriver.Tx) error {
			ok, err := tx.LockWorkflow(e.ctx, wf)
			if err == nil && !ok {
				err = fmt.Errorf("LockWorkflow(%s): no such workflow", wf)
			}
			return err
		}
	}
	chains := func(wfs ...string) func(tx tgdriver.Tx) error {
		return func(tx tgdriver.Tx) error { _, err := tx.LockChains(e.ctx, wfs); return err }
	}
	lockTask := func(id string) func(tx tgdriver.Tx) error {
		return func(tx tgdriver.Tx) error {
			f, err := tx.Fetch(e.ctx, tgdriver.Fetch{Lock: []string{id}})
			if err == nil && len(f.Locked) != 1 {
				err = fmt.Errorf("the lock of Fetch did not read %s", id)
			}
			return err
		}
	}
	scan := func(tx tgdriver.Tx) error {
		r, ok, err := tx.NextPending(e.ctx, "wf", nil)
		if err == nil && (!ok || r.Seq != a.Seq) {
			err = fmt.Errorf("NextPending(wf) = %d %v, want %d", r.Seq, ok, a.Seq)
		}
		return err
	}
	update := func(seq int64) func(tx tgdriver.Tx) error {
		return func(tx tgdriver.Tx) error {
			_, _, err := tx.UpdateTask(e.ctx, seq, hit, tgdriver.TaskGuard{})
			return err
		}
	}
	dependency := func(tx tgdriver.Tx) error { _, err := LockDependency(e.ctx, tx, "wf", "a"); return err }
	dependencies := func(tx tgdriver.Tx) error {
		_, err := tx.LockDependencies(e.ctx, "wf", []string{"b", "none", "a"})
		return err
	}
	audit := func(tx tgdriver.Tx) error { _, _, err := tx.LockAuditHead(e.ctx); return err }
	alive := func(tx tgdriver.Tx) error { _, _, err := tx.ReadAlive(e.ctx); return err }
	ensure := func(tx tgdriver.Tx) error { _, err := tx.EnsureWorkflow(e.ctx, "wf", 1); return err }
	for _, c := range []struct {
		name      string
		hold, try func(tx tgdriver.Tx) error
		wait      bool
	}{
		{"LockWorkflow, then LockWorkflow", lockWF("wf"), lockWF("wf"), true},
		{"LockWorkflow, then EnsureWorkflow", lockWF("wf"), ensure, true},
		{"LockWorkflow, then another workflow's", lockWF("wf"), lockWF("wf2"), false},
		{"LockChains, then LockWorkflow", chains("wf2", "wf"), lockWF("wf"), true},
		{"LockWorkflow, then LockChains", lockWF("wf2"), chains("wf", "wf2"), true},
		{"LockChains, then other workflows' LockChains", chains("wf"), chains("wf2", "none"), false},
		{"LockAuditHead, then LockAuditHead", audit, audit, true},
		{"ReadAlive, then ReadAlive", alive, alive, true},
		{"Fetch lock, then Fetch lock", lockTask(a.TaskID), lockTask(a.TaskID), true},
		{"Fetch lock, then an update of the task", lockTask(a.TaskID), update(a.Seq), true},
		{"Fetch lock, then another task's lock", lockTask(a.TaskID), lockTask(b.TaskID), false},
		{"claim scan, then an update of the task", scan, update(a.Seq), true},
		{"LockDependency, then an update of the task", dependency, update(a.Seq), true},
		{"LockDependency, then LockDependency", dependency, dependency, false},
		{"LockDependencies, then an update of one", dependencies, update(a.Seq), true},
		{"LockDependencies, then LockDependency", dependencies, dependency, false},
		{"claim scan, then an update of another task", scan, update(b.Seq), false},
	} {
		waited, err := contend(t, e, c.hold, c.try)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if waited != c.wait {
			t.Errorf("%s: waited %v, want %v", c.name, waited, c.wait)
		}
	}
}

// testScansSkipHeld: while one transaction holds tasks (a claim scan or
// Fetch's lock took them), claim scans and NextPending of another skip
// them without waiting, and find none where every task is held.
func testScansSkipHeld(t *testing.T, h Harness) {
	e := newEnv(t, h)
	needManyWriters(t, e)
	rows := []tgdriver.TaskRow{task("wf", "a"), task("wf", "b"), task("wf", "c"), task("wf2", "d")}
	for i, p := range []int{5, 3, 1, 0} {
		rows[i].Priority = p
	}
	rows = e.inserted(rows...)
	a, b, c, d := rows[0].Seq, rows[1].Seq, rows[2].Seq, rows[3].Seq
	holds := map[string]func(tx tgdriver.Tx) error{
		"claim scan": func(tx tgdriver.Tx) error {
			f, err := tx.Fetch(e.ctx, tgdriver.Fetch{Claims: []tgdriver.ClaimScan{{N: 1}, {WorkflowID: "wf2", N: 1}}})
			if err == nil && (!eq(seqsOf(f.Claimable[0]), []int64{a}) || !eq(seqsOf(f.Claimable[1]), []int64{d})) {
				err = fmt.Errorf("the holder's scans took %v and %v, want [%d] and [%d]", seqsOf(f.Claimable[0]), seqsOf(f.Claimable[1]), a, d)
			}
			return err
		},
		"Fetch lock": func(tx tgdriver.Tx) error {
			_, err := tx.Fetch(e.ctx, tgdriver.Fetch{Lock: []string{rows[3].TaskID, rows[0].TaskID}})
			return err
		},
	}
	for name, hold := range holds {
		var scans tgdriver.Fetched
		var next, nextWF tgdriver.TaskRow
		var ok, okWF, okWF2 bool
		waited, err := contend(t, e, hold, func(tx tgdriver.Tx) error {
			var err error
			if scans, err = tx.Fetch(e.ctx, tgdriver.Fetch{Claims: []tgdriver.ClaimScan{{N: 2}, {WorkflowID: "wf", N: 5}, {WorkflowID: "wf2", N: 5}}}); err != nil {
				return err
			}
			if next, ok, err = tx.NextPending(e.ctx, "", nil); err != nil {
				return err
			}
			if nextWF, okWF, err = tx.NextPending(e.ctx, "wf", nil); err != nil {
				return err
			}
			_, okWF2, err = tx.NextPending(e.ctx, "wf2", nil)
			return err
		})
		if err != nil || waited {
			t.Errorf("held by a %s: the scans waited %v, %v; want them never to wait", name, waited, err)
			continue
		}
		for i, want := range [][]int64{{b, c}, {b, c}, nil} {
			if got := seqsOf(scans.Claimable[i]); !eq(got, want) {
				t.Errorf("held by a %s: scan %d: %v, want %v", name, i, got, want)
			}
		}
		if !ok || next.Seq != b || !okWF || nextWF.Seq != b || okWF2 {
			t.Errorf("held by a %s: NextPending any %d %v, of wf %d %v, of wf2 (all held) %v; want %d, %d, none", name, next.Seq, ok, nextWF.Seq, okWF, okWF2, b, b)
		}
	}
}

// testClaimsIgnoreWorkflowLock: writers of tasks lock task rows only: a
// transaction holding a workflow's row (a creation, a prune, the linker)
// does not hold up claims of its tasks.
func testClaimsIgnoreWorkflowLock(t *testing.T, h Harness) {
	e := newEnv(t, h)
	needManyWriters(t, e)
	a := e.inserted(task("wf", "a"))[0]
	var got tgdriver.TaskRow
	var ok bool
	var f tgdriver.Fetched
	waited, err := contend(t, e, func(tx tgdriver.Tx) error {
		_, err := tx.LockWorkflow(e.ctx, "wf")
		return err
	}, func(tx tgdriver.Tx) error {
		var err error
		if got, ok, err = tx.NextPending(e.ctx, "wf", nil); err != nil {
			return err
		}
		f, err = tx.Fetch(e.ctx, tgdriver.Fetch{Claims: []tgdriver.ClaimScan{{WorkflowID: "wf", N: 1}},
			Updates: []tgdriver.TaskUpdate{{Seq: a.Seq, Set: hit, Guard: tgdriver.TaskGuard{States: []string{"pending"}}}}})
		return err
	})
	if err != nil || waited {
		t.Fatalf("claims while the workflow is locked: waited %v, %v; want no wait", waited, err)
	}
	if !ok || got.Seq != a.Seq || len(f.Claimable[0]) != 1 || !f.Updated[0].OK {
		t.Fatalf("claims while the workflow is locked: NextPending %d %v, scan %v, update %+v", got.Seq, ok, seqsOf(f.Claimable[0]), f.Updated)
	}
}

// testTryTouchNeverWaits: TryTouchAlive reports false, without waiting,
// while another transaction holds the alive time, and changes nothing.
func testTryTouchNeverWaits(t *testing.T, h Harness) {
	e := newEnv(t, h)
	needManyWriters(t, e)
	e.write(func(tx tgdriver.Tx) error { return tx.TouchAlive(e.ctx, 1) })
	// Held by a reader (ReadAlive locks it) or by a writer whose new
	// alive time is not yet committed: neither holds up TryTouchAlive.
	for name, hold := range map[string]func(tx tgdriver.Tx) error{
		"ReadAlive": func(tx tgdriver.Tx) error {
			_, _, err := tx.ReadAlive(e.ctx)
			return err
		},
		"TouchAlive": func(tx tgdriver.Tx) error { return tx.TouchAlive(e.ctx, 5) },
	} {
		var touched bool
		waited, err := contend(t, e, hold, func(tx tgdriver.Tx) error {
			var err error
			touched, err = tx.TryTouchAlive(e.ctx, 9000, 1<<40)
			return err
		})
		if err != nil || waited || touched {
			t.Fatalf("TryTouchAlive while a %s holds the alive time: touched %v, waited %v, %v; want false at once", name, touched, waited, err)
		}
		want := map[string]string{"ReadAlive": "1", "TouchAlive": "5"}[name]
		if got := e.raw(`SELECT alive_at_ms FROM server_clock`); got[0] != want {
			t.Fatalf("alive %s after a %s and a TryTouchAlive that reported false, want %s", got[0], name, want)
		}
		e.write(func(tx tgdriver.Tx) error { return tx.TouchAlive(e.ctx, 1) })
	}
}
