package tgsqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/mattn/go-sqlite3"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// countCompiles counts the statements SQLite compiles from now on on the
// connection that on runs its function with, those whose authorizer
// action (the first argument of SQLite's authorizer callback) counted
// accepts: SQLite calls a connection's authorizer while it compiles a
// statement, and again when it compiles a prepared statement anew, never
// while it runs one. The authorizer is cleared when the test ends.
func countCompiles(t *testing.T, on func(func(*sql.Conn) error) error, counted func(action int) bool) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	set := func(cb func(int, string, string, string) int) error {
		return on(func(c *sql.Conn) error {
			return c.Raw(func(dc any) error {
				sc, ok := dc.(*sqlite3.SQLiteConn)
				if !ok {
					return fmt.Errorf("the connection is a %T", dc)
				}
				sc.RegisterAuthorizer(cb)
				return nil
			})
		})
	}
	// 0 is SQLITE_OK: allow everything, only count.
	if err := set(func(action int, _, _, _ string) int {
		if counted(action) {
			n.Add(1)
		}
		return 0
	}); err != nil {
		t.Fatalf("set the connection's authorizer: %v", err)
	}
	t.Cleanup(func() { _ = set(nil) })
	return &n
}

// TestWriterCompilesEachStatementOnce runs the writer's operations (the
// hot batch's rounds, the claims, completions and releases, creation, the
// sweeper's scans, keys, pauses, requests, the journal, pruning) twice,
// with other values the second time, and requires that the second run
// compiled nothing: the statements stay prepared in stmtCache. SQLite
// plans with the value of a parameter bound as a bare LIMIT ? (and of one
// compared with a column a partial index's predicate uses), so it
// compiled such a statement again whenever that parameter was bound: the
// hot batch's claim scan was compiled at every Fetch (see doc.go).
func TestWriterCompilesEachStatementOnce(t *testing.T) {
	d := openTest(t, Options{}, tgdriver.Hooks{})
	ctx := context.Background()
	write(t, d, func(tx tgdriver.Tx) error {
		for _, n := range []string{"a", "b", "c", "d"} {
			addTask(t, tx, newTask("wf1", n))
		}
		return nil
	})
	caps := []string{"gpu"}
	ops := []struct {
		name string
		run  func(tx tgdriver.Tx, i int) error
	}{
		{"a claim and its completion", func(tx tgdriver.Tx, i int) error { return cycle(tx, 2000+int64(i)) }},
		{"a guarded claim of a due task, by seq and by task id", func(tx tgdriver.Tx, i int) error {
			set := tgdriver.TaskSet{State: tgdriver.Val("claimed"), Owner: tgdriver.Val("w"), Generation: tgdriver.Val[int64](1),
				LeaseExpiresAtMS: tgdriver.Val(9000 + int64(i)), AddAttempt: true, UpdatedAtMS: 2000 + int64(i)}
			guard := tgdriver.TaskGuard{States: []string{"pending"}, Generation: tgdriver.Val[int64](7), NoUnmet: true,
				DueByMS: tgdriver.Val(2000 + int64(i)), NotPaused: true}
			if _, _, err := tx.UpdateTask(ctx, 1, set, guard); err != nil {
				return err
			}
			_, err := tx.Fetch(ctx, tgdriver.Fetch{Updates: []tgdriver.TaskUpdate{{TaskID: "wf1-d", Set: set, Guard: guard}}})
			return err
		}},
		{"a release of a lapsed lease", func(tx tgdriver.Tx, i int) error {
			_, _, err := tx.UpdateTask(ctx, 2, tgdriver.TaskSet{State: tgdriver.Val("pending"), Owner: tgdriver.Null[string](),
				TokenHash: tgdriver.Null[[]byte](), UpdatedAtMS: 2000 + int64(i)},
				tgdriver.TaskGuard{States: []string{"claimed", "blocked"}, Owner: tgdriver.Val("w"), TokenHash: tgdriver.Val([]byte("t")),
					LeaseLapsedAtMS: tgdriver.Val(2000 + int64(i))})
			return err
		}},
		{"Fetch's locks and updates by task id", func(tx tgdriver.Tx, i int) error {
			_, err := tx.Fetch(ctx, tgdriver.Fetch{Lock: []string{"wf1-a", "wf1-b"}, Updates: []tgdriver.TaskUpdate{{TaskID: "wf1-c",
				Set:   tgdriver.TaskSet{StatusMessage: tgdriver.Val("working"), UpdatedAtMS: 2000 + int64(i)},
				Guard: tgdriver.TaskGuard{States: []string{"claimed"}, Owner: tgdriver.Val("w"), LeaseLiveAtMS: tgdriver.Val(2000 + int64(i))}}}})
			return err
		}},
		{"Fetch's claim scan", func(tx tgdriver.Tx, i int) error {
			_, err := tx.Fetch(ctx, tgdriver.Fetch{Claims: []tgdriver.ClaimScan{{N: 1 + i, AtMS: 2000 + int64(i)}}})
			return err
		}},
		{"Fetch's claim scan with capabilities", func(tx tgdriver.Tx, i int) error {
			_, err := tx.Fetch(ctx, tgdriver.Fetch{Claims: []tgdriver.ClaimScan{{Caps: caps, N: 1 + i, AtMS: 2000 + int64(i)}}})
			return err
		}},
		{"Fetch's claim scan in a workflow", func(tx tgdriver.Tx, i int) error {
			_, err := tx.Fetch(ctx, tgdriver.Fetch{Claims: []tgdriver.ClaimScan{{WorkflowID: "wf1", N: 1 + i, AtMS: 2000 + int64(i)}}})
			return err
		}},
		{"Fetch's claim scan in a workflow with capabilities", func(tx tgdriver.Tx, i int) error {
			_, err := tx.Fetch(ctx, tgdriver.Fetch{Claims: []tgdriver.ClaimScan{{WorkflowID: "wf1", Caps: caps, N: 1 + i, AtMS: 2000 + int64(i)}}})
			return err
		}},
		{"CountClaimable", func(tx tgdriver.Tx, i int) error {
			for _, s := range []struct {
				wf   string
				caps []string
			}{{"", nil}, {"", caps}, {"wf1", nil}, {"wf1", caps}} {
				if _, err := tx.CountClaimable(ctx, s.wf, s.caps, 5+i); err != nil {
					return err
				}
			}
			return nil
		}},
		{"ExpiredLeases", func(tx tgdriver.Tx, i int) error { _, err := tx.ExpiredLeases(ctx, 3000+int64(i), 10+i); return err }},
		{"DueTasks", func(tx tgdriver.Tx, i int) error { _, err := tx.DueTasks(ctx, 3000+int64(i), 10+i); return err }},
		{"DueGates", func(tx tgdriver.Tx, i int) error { _, err := tx.DueGates(ctx, 3000+int64(i), 10+i); return err }},
		{"PendingWorkflows", func(tx tgdriver.Tx, i int) error { _, err := tx.PendingWorkflows(ctx, 10+i); return err }},
		{"JournaledWorkflows", func(tx tgdriver.Tx, i int) error { _, err := tx.JournaledWorkflows(ctx, 10+i); return err }},
		{"JournaledEvents", func(tx tgdriver.Tx, i int) error {
			_, err := tx.JournaledEvents(ctx, []string{"wf1"}, 10+i)
			return err
		}},
		{"Keys", func(tx tgdriver.Tx, i int) error { _, err := tx.Keys(ctx, "", 10+i); return err }},
		{"RateHeldKeys", func(tx tgdriver.Tx, i int) error {
			_, err := tx.RateHeldKeys(ctx, "", nil, 3000+int64(i), 10+i)
			return err
		}},
		{"Pauses", func(tx tgdriver.Tx, i int) error { _, err := tx.Pauses(ctx, "", 10+i); return err }},
		{"ListTasks", func(tx tgdriver.Tx, i int) error {
			_, err := tx.ListTasks(ctx, tgdriver.ListFilter{Limit: 10 + i})
			return err
		}},
		{"ListTasks of a workflow", func(tx tgdriver.Tx, i int) error {
			_, err := tx.ListTasks(ctx, tgdriver.ListFilter{WorkflowID: "wf1", Limit: 10 + i})
			return err
		}},
		{"ListTasks in a state", func(tx tgdriver.Tx, i int) error {
			_, err := tx.ListTasks(ctx, tgdriver.ListFilter{State: "pending", Limit: 10 + i})
			return err
		}},
		{"ListTasks of a workflow in a state", func(tx tgdriver.Tx, i int) error {
			_, err := tx.ListTasks(ctx, tgdriver.ListFilter{WorkflowID: "wf1", State: "pending", Limit: 10 + i})
			return err
		}},
		{"Dependencies", func(tx tgdriver.Tx, i int) error { _, err := tx.Dependencies(ctx, 1+int64(i)); return err }},
		{"UnfinishedDependents", func(tx tgdriver.Tx, i int) error { _, err := tx.UnfinishedDependents(ctx, 1+int64(i)); return err }},
		{"CancelledBy", func(tx tgdriver.Tx, i int) error { _, err := tx.CancelledBy(ctx, 1+int64(i)); return err }},
		{"UnfinishedInWorkflow", func(tx tgdriver.Tx, i int) error { _, err := tx.UnfinishedInWorkflow(ctx, "wf1"); return err }},
		{"WorkflowCounts", func(tx tgdriver.Tx, i int) error {
			_, _, err := tx.WorkflowCounts(ctx, "wf1", 3000+int64(i))
			return err
		}},
		{"TaskByNode", func(tx tgdriver.Tx, i int) error {
			_, err := tx.TaskByNode(ctx, "wf1", []string{"a", "b"}[i])
			return err
		}},
		{"TaskEvents", func(tx tgdriver.Tx, i int) error {
			_, err := tx.TaskEvents(ctx, []string{"wf1-a", "wf1-b"}[i])
			return err
		}},
		{"LastEventOfGeneration", func(tx tgdriver.Tx, i int) error {
			_, _, _, err := tx.LastEventOfGeneration(ctx, []string{"wf1-a", "wf1-b"}[i], 1+int64(i))
			return err
		}},
		{"WorkflowEvents", func(tx tgdriver.Tx, i int) error {
			return tx.WorkflowEvents(ctx, "wf1", func(tgdriver.EventRow) error { return nil })
		}},
		{"KeyHead", func(tx tgdriver.Tx, i int) error { _, _, err := tx.KeyHead(ctx, []string{"k1", "k2"}[i]); return err }},
		{"LockKeys, UpdateKey and FreeKeys", func(tx tgdriver.Tx, i int) error {
			k := []string{"k1", "k2"}[i]
			if _, _, err := tx.LockKeys(ctx, []string{k}, ""); err != nil {
				return err
			}
			if _, err := tx.UpdateKey(ctx, tgdriver.KeyRow{Key: k, MaxClaimed: 2}, tgdriver.KeyRow{Key: k, MaxClaimed: 2, Claimed: 1}); err != nil {
				return err
			}
			_, err := tx.FreeKeys(ctx, []string{k})
			return err
		}},
		{"DecrementUnmet", func(tx tgdriver.Tx, i int) error { _, err := tx.DecrementUnmet(ctx, []int64{1 + int64(i)}); return err }},
		{"a workflow's creation: its row, tasks, edges and dependencies", func(tx tgdriver.Tx, i int) error {
			wf, x, y := []string{"wf3", "wf4"}[i], "x", "y"
			if _, err := tx.EnsureWorkflow(ctx, wf, 2000+int64(i)); err != nil {
				return err
			}
			if _, err := tx.LockWorkflow(ctx, wf); err != nil {
				return err
			}
			seqs, err := tx.InsertTasks(ctx, []tgdriver.TaskRow{newTask(wf, x), newTask(wf, y)})
			if err != nil {
				return err
			}
			if err := tx.InsertEdges(ctx, []tgdriver.Edge{{Dep: seqs[0], Task: seqs[1]}}); err != nil {
				return err
			}
			if err := tx.AddWorkflowTasks(ctx, wf, 2); err != nil {
				return err
			}
			if _, err := tx.LockDependencies(ctx, wf, []string{x}); err != nil {
				return err
			}
			_, err = tx.TasksByNodes(ctx, wf, []string{x, y})
			return err
		}},
		{"ShiftLeases", func(tx tgdriver.Tx, i int) error {
			_, err := tx.ShiftLeases(ctx, 100+int64(i), 3000+int64(i), 30000)
			return err
		}},
		{"LockChains", func(tx tgdriver.Tx, i int) error {
			_, err := tx.LockChains(ctx, []string{[]string{"wf1", "wf2"}[i]})
			return err
		}},
		{"the pauses", func(tx tgdriver.Tx, i int) error {
			wf := []string{"wf5", "wf6"}[i]
			if _, err := tx.SetPause(ctx, tgdriver.PauseRow{WorkflowID: wf, AtMS: 2000 + int64(i), Reason: "r", By: "op"}); err != nil {
				return err
			}
			_, _, err := tx.ClearPause(ctx, wf)
			return err
		}},
		{"a key's locks", func(tx tgdriver.Tx, i int) error {
			k := []string{"k3", "k4"}[i]
			if err := tx.EnsureKey(ctx, k, 2000+int64(i)); err != nil {
				return err
			}
			if _, _, err := tx.LockKey(ctx, k); err != nil {
				return err
			}
			if _, _, _, err := tx.LockKeyForLimit(ctx, k); err != nil {
				return err
			}
			return tx.LockParkedOfKey(ctx, k)
		}},
		{"the kept requests", func(tx tgdriver.Tx, i int) error {
			key := []string{"r1", "r2"}[i]
			if err := tx.KeepRequest(ctx, tgdriver.RequestRow{Key: key, Principal: "p", Op: "o", Args: "{}", Answer: "{}", CreatedAtMS: 2000 + int64(i)}); err != nil {
				return err
			}
			if _, err := tx.Requests(ctx, []string{key}); err != nil {
				return err
			}
			_, err := tx.RequestPrincipals(ctx, 5+i)
			return err
		}},
		{"the alive time", func(tx tgdriver.Tx, i int) error {
			if _, _, err := tx.ReadAlive(ctx); err != nil {
				return err
			}
			_, err := tx.TryTouchAlive(ctx, 5000+int64(i), 2000)
			return err
		}},
		{"the audit chain's head and an entry", func(tx tgdriver.Tx, i int) error {
			n, head, err := tx.LockAuditHead(ctx)
			if err != nil {
				return err
			}
			return tx.AppendAudit(ctx, tgdriver.AuditRow{Seq: n + 1, Kind: "prune", WorkflowID: "gone", AtMS: 2000 + int64(i), Detail: `{}`,
				PrevHash: head, Hash: fmt.Sprintf("a%d", n+1)})
		}},
		{"the journal: JournalEvents, JournaledEvents, LinkJournaled", func(tx tgdriver.Tx, i int) error {
			if err := tx.JournalEvents(ctx, []tgdriver.EventRow{{WorkflowID: "wf1", TaskID: "wf1-a", Kind: "note", AtMS: 2000 + int64(i),
				Detail: `{}`, HashVersion: 2, ActorKind: "worker", ActorName: "w", TaskState: `{}`, Content: `{}`}}); err != nil {
				return err
			}
			evs, err := tx.JournaledEvents(ctx, []string{"wf1"}, 10+i)
			if err != nil || len(evs) == 0 {
				return fmt.Errorf("journaled events %v: %w", evs, err)
			}
			head, n, err := tx.ChainHead(ctx, "wf1")
			if err != nil {
				return err
			}
			for j := range evs {
				evs[j].Seq, evs[j].PrevHash, evs[j].Hash = n+1, head, fmt.Sprintf("j%d", n+1)
				head, n = evs[j].Hash, n+1
			}
			if err := tx.LinkJournaled(ctx, evs); err != nil {
				return err
			}
			return tx.NotifyReady(ctx, "wf1", "")
		}},
		{"Apply: an update, linked events and a kept request", func(tx tgdriver.Tx, i int) error {
			err := tx.Apply(ctx, tgdriver.Apply{
				Updates: []tgdriver.TaskUpdate{{TaskID: "wf1-c", Set: tgdriver.TaskSet{StatusMessage: tgdriver.Val("applied"), UpdatedAtMS: 2000 + int64(i)}}},
				Events: []tgdriver.EventRow{{WorkflowID: "wf1", TaskID: "wf1-c", Kind: "note", AtMS: 2000 + int64(i), Detail: `{}`, HashVersion: 2,
					ActorKind: "worker", ActorName: "w", TaskState: `{}`, Content: `{}`}},
				Link: func(e *tgdriver.EventRow, prev string, seq int64) {
					e.PrevHash, e.Seq, e.Hash = prev, seq, fmt.Sprintf("l%d", seq)
				},
				Requests: []tgdriver.RequestRow{{Key: []string{"ra1", "ra2"}[i], Principal: "p", Op: "o", Args: "{}", Answer: "{}", CreatedAtMS: 2000 + int64(i)}},
			})
			return err
		}},
		{"PruneWorkflow", func(tx tgdriver.Tx, i int) error {
			_, _, err := tx.PruneWorkflow(ctx, []string{"gone1", "gone2"}[i], 500+int64(i), 3000+int64(i))
			return err
		}},
		{"PruneCandidates", func(tx tgdriver.Tx, i int) error { _, err := tx.PruneCandidates(ctx, 500+int64(i), 10+i); return err }},
		{"PruneRequests", func(tx tgdriver.Tx, i int) error { _, err := tx.PruneRequests(ctx, 500+int64(i), 10+i); return err }},
		{"TrimRequests", func(tx tgdriver.Tx, i int) error { _, err := tx.TrimRequests(ctx, "p", 5+i, 10+i); return err }},
		{"PruneIdleKeys", func(tx tgdriver.Tx, i int) error { _, _, err := tx.PruneIdleKeys(ctx, "", 10+i); return err }},
	}
	compiles := countCompiles(t, func(fn func(*sql.Conn) error) error { return d.writerConn(ctx, fn) },
		func(int) bool { return true })
	// The first run compiles each statement (setting the authorizer
	// expires the ones already prepared); the second runs them as prepared.
	for i := range 2 {
		for _, op := range ops {
			before := compiles.Load()
			write(t, d, func(tx tgdriver.Tx) error { return op.run(tx, i) })
			if n := compiles.Load() - before; i == 1 && n > 0 {
				t.Errorf("%s compiled its statements again on its second run (%d authorizer calls); want them prepared once", op.name, n)
			}
		}
		if i == 0 && compiles.Load() == 0 {
			t.Fatal("the first run compiled nothing: the authorizer does not count compiles")
		}
	}
}

// TestReadsCompileEachStatementOnce runs every read of tgdriver.Reads on
// the read pool and in a snapshot three times, with other values each
// time, on a pool of one reading connection (the change watcher holds its
// own), and requires that the later runs compile nothing: the pool keeps
// its statements prepared (readStmts) instead of compiling each at every
// call, and no read binds a parameter SQLite plans with (see doc.go). With
// one connection, a snapshot that prepared through the pool would wait
// for its own connection for ever, and go test's timeout would end the
// test.
func TestReadsCompileEachStatementOnce(t *testing.T) {
	d := openTest(t, Options{ReadConns: 1}, tgdriver.Hooks{})
	ctx := context.Background()
	write(t, d, func(tx tgdriver.Tx) error {
		for _, n := range []string{"a", "b"} {
			addTask(t, tx, newTask("wf1", n))
		}
		return nil
	})
	// database/sql begins and ends a snapshot with BEGIN and ROLLBACK, which
	// the SQLite driver compiles from their text every time: statements of
	// one instruction, without a plan. Count the rest.
	compiles := countCompiles(t, func(fn func(*sql.Conn) error) error {
		c, err := d.rdb.Conn(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		return fn(c)
	}, func(action int) bool { return action != sqlite3.SQLITE_TRANSACTION })
	// reads runs every read of tgdriver.Reads once, with the values of run
	// i, and returns the authorizer calls each made, by name.
	reads := func(r tgdriver.Reads, i int) (map[string]int64, error) {
		id, wf, n := []string{"wf1-a", "wf1-b"}[i], []string{"wf1", "wf2"}[i], int64(i)
		type call struct {
			name string
			run  func() error
		}
		calls := []call{
			{"TaskByID", func() error { _, err := r.TaskByID(ctx, id); return err }},
			{"TaskBySeq", func() error { _, err := r.TaskBySeq(ctx, 1+n); return err }},
			{"TaskByNode", func() error { _, err := r.TaskByNode(ctx, "wf1", []string{"a", "b"}[i]); return err }},
			{"ListTasks of a workflow in a state", func() error {
				_, err := r.ListTasks(ctx, tgdriver.ListFilter{WorkflowID: wf, State: "pending", Limit: 10 + i})
				return err
			}},
			{"ListTasks without bodies", func() error {
				_, err := r.ListTasks(ctx, tgdriver.ListFilter{State: "pending", Limit: 10 + i, NoBodies: true})
				return err
			}},
			{"ListTasks", func() error { _, err := r.ListTasks(ctx, tgdriver.ListFilter{Limit: 10 + i}); return err }},
			{"CountByState", func() error { _, err := r.CountByState(ctx); return err }},
			{"NextLeaseExpiry", func() error { _, _, err := r.NextLeaseExpiry(ctx); return err }},
			{"Dependencies", func() error { _, err := r.Dependencies(ctx, 1+n); return err }},
			{"LastEventOfGeneration", func() error { _, _, _, err := r.LastEventOfGeneration(ctx, id, 1+n); return err }},
			{"Workflow", func() error { _, err := r.Workflow(ctx, wf); return err }},
			{"Workflows", func() error { _, err := r.Workflows(ctx); return err }},
			{"WorkflowEdges", func() error { _, err := r.WorkflowEdges(ctx, wf); return err }},
			{"TaskEvents", func() error { _, err := r.TaskEvents(ctx, id); return err }},
			{"WorkflowEvents", func() error { return r.WorkflowEvents(ctx, wf, func(tgdriver.EventRow) error { return nil }) }},
			{"OrphanEventWorkflow", func() error { _, _, err := r.OrphanEventWorkflow(ctx); return err }},
			{"UnheldEvent", func() error { _, _, _, err := r.UnheldEvent(ctx); return err }},
			{"AuditHead", func() error { _, _, _, err := r.AuditHead(ctx); return err }},
			{"AuditEntries", func() error { return r.AuditEntries(ctx, func(tgdriver.AuditRow) error { return nil }) }},
			{"EventCount", func() error { _, err := r.EventCount(ctx); return err }},
			{"PendingWorkflows", func() error { _, err := r.PendingWorkflows(ctx, 10+i); return err }},
			{"CountClaimable in a workflow", func() error { _, err := r.CountClaimable(ctx, wf, nil, 5+i); return err }},
			{"CountClaimable with capabilities", func() error {
				_, err := r.CountClaimable(ctx, "", []string{"gpu"}, 5+i)
				return err
			}},
			{"NextDue", func() error { _, _, err := r.NextDue(ctx); return err }},
			{"NextGateDue", func() error { _, _, err := r.NextGateDue(ctx); return err }},
			{"JournaledWorkflows", func() error { _, err := r.JournaledWorkflows(ctx, 10+i); return err }},
			{"WorkflowTaskStates", func() error {
				return r.WorkflowTaskStates(ctx, wf, func(tgdriver.TaskStateRow) error { return nil })
			}},
			{"WorkflowCounts", func() error { _, _, err := r.WorkflowCounts(ctx, wf, 3000+n); return err }},
			{"WorkflowUsage", func() error { _, err := r.WorkflowUsage(ctx, wf); return err }},
			{"Pauses", func() error { _, err := r.Pauses(ctx, wf, 10+i); return err }},
			{"Key", func() error { _, _, err := r.Key(ctx, []string{"k1", "k2"}[i]); return err }},
			{"Keys", func() error { _, err := r.Keys(ctx, "", 10+i); return err }},
			{"KeyHead", func() error { _, _, err := r.KeyHead(ctx, []string{"k1", "k2"}[i]); return err }},
			{"RateHeldKeys", func() error { _, err := r.RateHeldKeys(ctx, wf, nil, 3000+n, 10+i); return err }},
			{"EventHashAt", func() error { _, _, err := r.EventHashAt(ctx, wf, 1+n); return err }},
		}
		made := map[string]int64{}
		for _, c := range calls {
			before := compiles.Load()
			if err := c.run(); err != nil && !errors.Is(err, tgdriver.ErrNoRows) {
				return nil, fmt.Errorf("%s: %w", c.name, err)
			}
			if n := compiles.Load() - before; n > 0 {
				made[c.name] = n
			}
		}
		return made, nil
	}
	// A snapshot never prepares (its connection is taken): a text it ran
	// first is prepared by the next snapshot before it begins, so its
	// reads are all prepared by the third run; the pool's, by the second.
	for i := range 3 {
		pool, err := reads(d.Reads(), i%2)
		if err != nil {
			t.Fatalf("reads on the pool: %v", err)
		}
		var snap map[string]int64
		if err := d.Snapshot(ctx, func(r tgdriver.Reads) error { snap, err = reads(r, i%2); return err }); err != nil {
			t.Fatalf("reads in a snapshot: %v", err)
		}
		switch {
		case i == 0 && len(pool) == 0:
			t.Fatal("the first run compiled nothing: the authorizer does not count compiles")
		case i > 0 && len(pool) > 0:
			t.Errorf("run %d compiled these reads on the pool again (authorizer calls): %v; want each prepared once on the connection", i+1, pool)
		case i == 2 && len(snap) > 0:
			t.Errorf("run %d compiled these reads in a snapshot again (authorizer calls): %v; want each prepared once on the connection", i+1, snap)
		}
	}
}
