package taskgraph

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// rawDB opens a second, writable connection on the store's file, as someone
// with file access would: the store cannot stop it, only detect what it did.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// historyFixture builds two workflows with a few events each: "aa" (2
// events) and "wf" (a: create, claim, heartbeat, complete; b: create, ready,
// claim, fail), so wf's chain has 8 events.
func historyFixture(t *testing.T) *bundle {
	t.Helper()
	b := setup(t)
	b.create(t, "aa", "x")
	b.create(t, "aa", "y")
	a := b.create(t, "wf", "a")
	b.create(t, "wf", "b", "a")
	c := b.claim(t, "w", a.TaskID, 0)
	b.clock.Advance(time.Second)
	if _, err := b.s.Heartbeat(b.ctx, holder(c), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Complete(b.ctx, holder(c), json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	cb, ok := b.claimNext(t, "w", "wf")
	if !ok {
		t.Fatal("b not claimable")
	}
	if _, err := b.s.Fail(b.ctx, holder(cb), "broken", false); err != nil {
		t.Fatal(err)
	}
	rep := b.verify(t)
	if rep.Workflows != 2 || rep.Events != 10 {
		t.Fatalf("fixture: %+v", rep)
	}
	return b
}

// Each kind of tampering is detected, and the report names the first broken
// link: the workflow and the chain position.
func TestTamperDetected(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, db *sql.DB)
		seq    int64
		reason string
	}{
		{"edit detail", func(t *testing.T, db *sql.DB) {
			mustExec(t, db, `UPDATE events SET detail = '{"result_sha256":"00"}' WHERE workflow_id = 'wf' AND wseq = 6`)
		}, 6, "the event was edited"},
		{"edit owner", func(t *testing.T, db *sql.DB) {
			mustExec(t, db, `UPDATE events SET owner = 'mallory' WHERE workflow_id = 'wf' AND wseq = 3`)
		}, 3, "the event was edited"},
		{"edit time", func(t *testing.T, db *sql.DB) {
			mustExec(t, db, `UPDATE events SET at_ms = at_ms - 1 WHERE workflow_id = 'wf' AND wseq = 4`)
		}, 4, "the event was edited"},
		{"delete an event", func(t *testing.T, db *sql.DB) {
			mustExec(t, db, `DELETE FROM events WHERE workflow_id = 'wf' AND wseq = 3`)
		}, 4, "sequence 4 found where 3 was expected"},
		{"delete the first event", func(t *testing.T, db *sql.DB) {
			mustExec(t, db, `DELETE FROM events WHERE workflow_id = 'wf' AND wseq = 1`)
		}, 2, "sequence 2 found where 1 was expected"},
		{"change a hash", func(t *testing.T, db *sql.DB) {
			mustExec(t, db, `UPDATE events SET hash = printf('%064d', 0) WHERE workflow_id = 'wf' AND wseq = 5`)
		}, 5, "the event was edited"},
		{"edit and rehash", func(t *testing.T, db *sql.DB) {
			// A forger who recomputes the edited event's hash breaks the
			// next link instead.
			var e Event
			var at int64
			var detail string
			if err := db.QueryRow(`SELECT workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash FROM events WHERE workflow_id = 'wf' AND wseq = 6`).
				Scan(&e.WorkflowID, &e.Seq, &e.TaskID, &e.Kind, &e.Owner, &e.Generation, &at, &detail, &e.PrevHash); err != nil {
				t.Fatal(err)
			}
			e.At, e.Owner = time.UnixMilli(at), "mallory"
			e.Detail = json.RawMessage(detail)
			h, err := EventHash(e)
			if err != nil {
				t.Fatal(err)
			}
			mustExec(t, db, `UPDATE events SET owner = ?, hash = ? WHERE workflow_id = 'wf' AND wseq = 6`, e.Owner, h)
		}, 7, "prev_hash does not match the hash of event 6"},
		{"reorder", func(t *testing.T, db *sql.DB) {
			mustExec(t, db, `UPDATE events SET wseq = -1 WHERE workflow_id = 'wf' AND wseq = 4`)
			mustExec(t, db, `UPDATE events SET wseq = 4 WHERE workflow_id = 'wf' AND wseq = 5`)
			mustExec(t, db, `UPDATE events SET wseq = 5 WHERE workflow_id = 'wf' AND wseq = -1`)
		}, 4, "prev_hash does not match the hash of event 3"},
		{"two edits report the first", func(t *testing.T, db *sql.DB) {
			mustExec(t, db, `UPDATE events SET detail = '{}' WHERE workflow_id = 'wf' AND wseq IN (7, 2)`)
		}, 2, "the event was edited"},
		{"delete the newest event", func(t *testing.T, db *sql.DB) {
			mustExec(t, db, `DELETE FROM events WHERE workflow_id = 'wf' AND wseq = 8`)
		}, 0, "the chain has 7 events"},
		{"move the head", func(t *testing.T, db *sql.DB) {
			mustExec(t, db, `UPDATE workflows SET head_hash = (SELECT hash FROM events WHERE workflow_id = 'wf' AND wseq = 7), event_count = 7 WHERE workflow_id = 'wf'`)
		}, 0, "the workflow's head records 7"},
		{"append a forged event", func(t *testing.T, db *sql.DB) {
			mustExec(t, db, `INSERT INTO events (workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash)
				SELECT workflow_id, 9, task_id, 'complete', owner, generation, at_ms, detail, hash, hash FROM events WHERE workflow_id = 'wf' AND wseq = 8`)
		}, 9, "the event was edited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := historyFixture(t)
			tc.tamper(t, rawDB(t, b.path))
			rep, err := b.s.VerifyHistory(b.ctx)
			if !errors.Is(err, ErrBrokenChain) {
				t.Fatalf("VerifyHistory after tampering: %v", err)
			}
			if rep.Broken == nil || rep.Broken.WorkflowID != "wf" || rep.Broken.Seq != tc.seq || !strings.Contains(rep.Broken.Reason, tc.reason) {
				t.Fatalf("broken link %+v, want wf at %d saying %q", rep.Broken, tc.seq, tc.reason)
			}
			if want := fmt.Sprintf("workflow wf event %d", tc.seq); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
			if rep.Workflows != 2 {
				t.Errorf("stopped after %d workflows, want 2 (aa verified first)", rep.Workflows)
			}
		})
	}
	t.Run("orphan events", func(t *testing.T) {
		b := historyFixture(t)
		db := rawDB(t, b.path)
		mustExec(t, db, `INSERT INTO events (workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash)
			SELECT 'ghost', wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash FROM events WHERE workflow_id = 'aa'`)
		rep, err := b.s.VerifyHistory(b.ctx)
		if !errors.Is(err, ErrBrokenChain) || rep.Broken == nil || rep.Broken.WorkflowID != "ghost" {
			t.Fatalf("orphan events: %+v %v", rep.Broken, err)
		}
	})
}

// Prune removes finished workflows older than the cutoff with their tasks,
// edges and events, keeps unfinished and recent ones, records each removal
// with the chain head, and leaves a history that verifies.
func TestPrune(t *testing.T) {
	b := setup(t)
	finish := func(wf string, nodes ...string) {
		t.Helper()
		for _, n := range nodes {
			c, ok := b.claimNext(t, "w", wf)
			if !ok || c.Task.NodeID != n {
				t.Fatalf("%s: claimed %q (ok=%v), want %s", wf, c.Task.NodeID, ok, n)
			}
			if _, err := b.s.Complete(b.ctx, holder(c), json.RawMessage(`1`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Old and finished: all completed; and failed with cancelled dependents.
	createGraph(t, b, "old-done", []string{"a", "b"}, map[string][]string{"b": {"a"}})
	finish("old-done", "a", "b")
	createGraph(t, b, "old-failed", []string{"a", "b", "c"}, map[string][]string{"b": {"a"}, "c": {"a", "b"}})
	cf, _ := b.claimNext(t, "w", "old-failed")
	if _, err := b.s.Fail(b.ctx, holder(cf), "no", false); err != nil {
		t.Fatal(err)
	}
	// Old but unfinished: a task still pending, another claimed.
	createGraph(t, b, "old-running", []string{"a", "b"}, nil)
	finish("old-running", "a")
	b.claimNext(t, "w", "old-running")
	// Old, finished, but touched recently.
	createGraph(t, b, "old-touched", []string{"a"}, nil)
	b.clock.Advance(47 * time.Hour)
	finish("old-touched", "a")
	b.clock.Advance(time.Hour)
	// Recent and finished.
	createGraph(t, b, "new-done", []string{"a"}, nil)
	finish("new-done", "a")

	raw := rawDB(t, b.path)
	type head struct {
		hash         string
		tasks, evnts int64
	}
	heads := map[string]head{}
	for _, wf := range []string{"old-done", "old-failed"} {
		var h head
		if err := raw.QueryRow(`SELECT head_hash, task_count, event_count FROM workflows WHERE workflow_id = ?`, wf).Scan(&h.hash, &h.tasks, &h.evnts); err != nil {
			t.Fatal(err)
		}
		evs, err := b.s.WorkflowEvents(b.ctx, wf)
		if err != nil || len(evs) == 0 || evs[len(evs)-1].Hash != h.hash || int64(len(evs)) != h.evnts {
			t.Fatalf("%s head %+v does not match its %d events (%v)", wf, h, len(evs), err)
		}
		heads[wf] = h
	}
	count := func(q string) int {
		t.Helper()
		var n int
		if err := raw.QueryRow(q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const prunedTasks = `(SELECT seq FROM tasks WHERE workflow_id IN ('old-done', 'old-failed'))`
	if n := count(`SELECT COUNT(*) FROM edges WHERE task_seq IN ` + prunedTasks + ` OR dep_seq IN ` + prunedTasks); n != 4 {
		t.Fatalf("fixture has %d edges in the old workflows, want 4", n)
	}
	keptEdges := count(`SELECT COUNT(*) FROM edges`) - 4

	cutoff := b.clock.Now().Add(-24 * time.Hour)
	res, err := b.s.Prune(b.ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.Workflows, ","); got != "old-done,old-failed" {
		t.Fatalf("pruned %s", got)
	}
	if res.Tasks != 5 || res.Events != heads["old-done"].evnts+heads["old-failed"].evnts {
		t.Fatalf("prune result %+v", res)
	}
	for _, wf := range []string{"old-done", "old-failed"} {
		for _, q := range []string{
			`SELECT COUNT(*) FROM tasks WHERE workflow_id = '` + wf + `'`,
			`SELECT COUNT(*) FROM events WHERE workflow_id = '` + wf + `'`,
			`SELECT COUNT(*) FROM workflows WHERE workflow_id = '` + wf + `'`,
		} {
			if n := count(q); n != 0 {
				t.Errorf("%s: %d rows left by %s", wf, n, q)
			}
		}
		if _, err := b.s.Workflow(b.ctx, wf); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s still readable: %v", wf, err)
		}
		var got head
		var at int64
		if err := raw.QueryRow(`SELECT head_hash, task_count, event_count, pruned_at_ms FROM pruned_workflows WHERE workflow_id = ?`, wf).Scan(&got.hash, &got.tasks, &got.evnts, &at); err != nil {
			t.Fatalf("%s: no pruned_workflows record: %v", wf, err)
		}
		if got != heads[wf] || at != b.clock.Now().UnixMilli() {
			t.Errorf("%s pruned record %+v at %d, want %+v at %d", wf, got, at, heads[wf], b.clock.Now().UnixMilli())
		}
	}
	if n := count(`SELECT COUNT(*) FROM edges`); n != keptEdges {
		t.Errorf("%d edges left, want %d", n, keptEdges)
	}
	for _, wf := range []string{"old-running", "old-touched", "new-done"} {
		if _, err := b.s.Workflow(b.ctx, wf); err != nil {
			t.Errorf("%s was pruned: %v", wf, err)
		}
	}
	rep := b.verify(t)
	if rep.Workflows != 3 {
		t.Fatalf("%d workflows verified, want 3", rep.Workflows)
	}
	// Nothing more to prune at the same cutoff.
	before := fingerprint(t, b.path)
	if res, err := b.s.Prune(b.ctx, cutoff); err != nil || len(res.Workflows) != 0 {
		t.Fatalf("second prune: %+v %v", res, err)
	}
	if fingerprint(t, b.path) != before {
		t.Fatal("a prune with nothing to remove wrote")
	}
	// A pruned workflow id can be used again; it starts a new chain.
	b.create(t, "old-done", "a")
	if evs, _ := b.s.WorkflowEvents(b.ctx, "old-done"); len(evs) != 1 || evs[0].Seq != 1 || evs[0].PrevHash != "" {
		t.Fatalf("re-created workflow's chain: %+v", evs)
	}
	b.verify(t)
}

// Prune works through more finished workflows than one batch holds.
func TestPruneManyWorkflows(t *testing.T) {
	b := setupWith(t, Options{Sync: SyncNormal})
	const n = 250
	for i := 0; i < n; i++ {
		wf := fmt.Sprintf("wf%03d", i)
		b.create(t, wf, "a")
		if _, err := b.s.AbortWorkflow(b.ctx, wf, alice); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Millisecond)
	}
	b.create(t, "live", "a")
	res, err := b.s.Prune(b.ctx, b.clock.Now().Add(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Workflows) != n || res.Workflows[0] != "wf000" || res.Workflows[n-1] != fmt.Sprintf("wf%03d", n-1) || res.Tasks != n || res.Events != 2*n {
		t.Fatalf("pruned %d workflows (%v ... ), %d tasks, %d events", len(res.Workflows), res.Workflows[:3], res.Tasks, res.Events)
	}
	if rep := b.verify(t); rep.Workflows != 1 {
		t.Fatalf("%+v", rep)
	}
}
