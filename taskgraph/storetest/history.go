package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// historyTests: the hash chain detects tampering; prune keeps it verifiable.
var historyTests = []test{
	{"TamperDetected", testTamperDetected},
	{"Prune", testPrune},
	{"PruneManyWorkflows", testPruneManyWorkflows},
}

// historyFixture builds two workflows with a few events each: "aa" (2
// events) and "wf" (a: create, claim, heartbeat, complete; b: create, ready,
// claim, fail), so wf's chain has 8 events.
func historyFixture(t *testing.T, h Harness) *env {
	t.Helper()
	e := setup(t, h)
	e.Create(t, "aa", "x")
	e.Create(t, "aa", "y")
	a := e.Create(t, "wf", "a")
	e.Create(t, "wf", "b", "a")
	c := e.Claim(t, "w", a.TaskID, 0)
	e.Clock.Advance(time.Second)
	if _, err := e.S.Heartbeat(e.Ctx, holder(c), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	cb, ok := e.ClaimNext(t, "w", "wf")
	if !ok {
		t.Fatal("b not claimable")
	}
	if _, err := e.S.Fail(e.Ctx, holder(cb), "broken", false); err != nil {
		t.Fatal(err)
	}
	rep := e.Verify(t)
	if rep.Workflows != 2 || rep.Events != 10 {
		t.Fatalf("fixture: %+v", rep)
	}
	return e
}

// Each kind of tampering is detected, and the report names the first broken
// link: the workflow and the chain position.
func testTamperDetected(t *testing.T, h Harness) {
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, db Database)
		seq    int64
		reason string
	}{
		{"edit detail", func(t *testing.T, db Database) {
			db.Exec(t, `UPDATE events SET detail = '{"result_sha256":"00"}' WHERE workflow_id = 'wf' AND wseq = 6`)
		}, 6, "the event was edited"},
		{"edit owner", func(t *testing.T, db Database) {
			db.Exec(t, `UPDATE events SET owner = 'mallory' WHERE workflow_id = 'wf' AND wseq = 3`)
		}, 3, "the event was edited"},
		{"edit time", func(t *testing.T, db Database) {
			db.Exec(t, `UPDATE events SET at_ms = at_ms - 1 WHERE workflow_id = 'wf' AND wseq = 4`)
		}, 4, "the event was edited"},
		{"delete an event", func(t *testing.T, db Database) {
			db.Exec(t, `DELETE FROM events WHERE workflow_id = 'wf' AND wseq = 3`)
		}, 4, "sequence 4 found where 3 was expected"},
		{"delete the first event", func(t *testing.T, db Database) {
			db.Exec(t, `DELETE FROM events WHERE workflow_id = 'wf' AND wseq = 1`)
		}, 2, "sequence 2 found where 1 was expected"},
		{"change a hash", func(t *testing.T, db Database) {
			db.Exec(t, `UPDATE events SET hash = '0000000000000000000000000000000000000000000000000000000000000000' WHERE workflow_id = 'wf' AND wseq = 5`)
		}, 5, "the event was edited"},
		{"edit and rehash", func(t *testing.T, db Database) {
			// A forger who recomputes the edited event's hash breaks the
			// next link instead.
			ev := readEvent(t, db, "wf", 6)
			ev.Owner = "mallory"
			hash, err := tg.EventHash(ev)
			if err != nil {
				t.Fatal(err)
			}
			db.Exec(t, `UPDATE events SET owner = ?, hash = ? WHERE workflow_id = 'wf' AND wseq = 6`, ev.Owner, hash)
		}, 7, "prev_hash does not match the hash of event 6"},
		{"reorder", func(t *testing.T, db Database) {
			db.Exec(t, `UPDATE events SET wseq = -1 WHERE workflow_id = 'wf' AND wseq = 4`)
			db.Exec(t, `UPDATE events SET wseq = 4 WHERE workflow_id = 'wf' AND wseq = 5`)
			db.Exec(t, `UPDATE events SET wseq = 5 WHERE workflow_id = 'wf' AND wseq = -1`)
		}, 4, "prev_hash does not match the hash of event 3"},
		{"two edits report the first", func(t *testing.T, db Database) {
			db.Exec(t, `UPDATE events SET detail = '{}' WHERE workflow_id = 'wf' AND wseq IN (7, 2)`)
		}, 2, "the event was edited"},
		{"delete the newest event", func(t *testing.T, db Database) {
			db.Exec(t, `DELETE FROM events WHERE workflow_id = 'wf' AND wseq = 8`)
		}, 0, "the chain has 7 events"},
		{"move the head", func(t *testing.T, db Database) {
			db.Exec(t, `UPDATE workflows SET head_hash = (SELECT hash FROM events WHERE workflow_id = 'wf' AND wseq = 7), event_count = 7 WHERE workflow_id = 'wf'`)
		}, 0, "the workflow's head records 7"},
		{"append a forged event", func(t *testing.T, db Database) {
			db.Exec(t, `INSERT INTO events (workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash)
				SELECT workflow_id, 9, task_id, 'complete', owner, generation, at_ms, detail, hash, hash FROM events WHERE workflow_id = 'wf' AND wseq = 8`)
		}, 9, "the event was edited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := historyFixture(t, h)
			tc.tamper(t, e.DB)
			rep, err := e.S.VerifyHistory(e.Ctx)
			if !errors.Is(err, tg.ErrBrokenChain) {
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
		e := historyFixture(t, h)
		e.DB.Exec(t, `INSERT INTO events (workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash)
			SELECT 'ghost', wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash FROM events WHERE workflow_id = 'aa'`)
		rep, err := e.S.VerifyHistory(e.Ctx)
		if !errors.Is(err, tg.ErrBrokenChain) || rep.Broken == nil || rep.Broken.WorkflowID != "ghost" {
			t.Fatalf("orphan events: %+v %v", rep.Broken, err)
		}
	})
}

// Prune removes finished workflows older than the cutoff with their tasks,
// edges and events, keeps unfinished and recent ones, records each removal
// with the chain head, and leaves a history that verifies.
func testPrune(t *testing.T, h Harness) {
	e := setup(t, h)
	finish := func(wf string, nodes ...string) {
		t.Helper()
		for _, n := range nodes {
			c, ok := e.ClaimNext(t, "w", wf)
			if !ok || c.Task.NodeID != n {
				t.Fatalf("%s: claimed %q (ok=%v), want %s", wf, c.Task.NodeID, ok, n)
			}
			if _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(`1`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Old and finished: all completed; and failed with cancelled dependents.
	e.createGraph(t, "old-done", []string{"a", "b"}, map[string][]string{"b": {"a"}})
	finish("old-done", "a", "b")
	e.createGraph(t, "old-failed", []string{"a", "b", "c"}, map[string][]string{"b": {"a"}, "c": {"a", "b"}})
	cf, _ := e.ClaimNext(t, "w", "old-failed")
	if _, err := e.S.Fail(e.Ctx, holder(cf), "no", false); err != nil {
		t.Fatal(err)
	}
	// Old but unfinished: a task still pending, another claimed.
	e.createGraph(t, "old-running", []string{"a", "b"}, nil)
	finish("old-running", "a")
	e.ClaimNext(t, "w", "old-running")
	// Old, finished, but touched recently.
	e.createGraph(t, "old-touched", []string{"a"}, nil)
	e.Clock.Advance(47 * time.Hour)
	finish("old-touched", "a")
	e.Clock.Advance(time.Hour)
	// Recent and finished.
	e.createGraph(t, "new-done", []string{"a"}, nil)
	finish("new-done", "a")

	type head struct {
		hash         string
		tasks, evnts int64
	}
	heads := map[string]head{}
	for _, wf := range []string{"old-done", "old-failed"} {
		rows := e.DB.Query(t, `SELECT head_hash, task_count, event_count FROM workflows WHERE workflow_id = ?`, wf)
		if len(rows) != 1 {
			t.Fatalf("workflow %s: %d rows", wf, len(rows))
		}
		h := head{hash: rows[0][0], tasks: atoi(t, rows[0][1]), evnts: atoi(t, rows[0][2])}
		evs, err := e.S.WorkflowEvents(e.Ctx, wf)
		if err != nil || len(evs) == 0 || evs[len(evs)-1].Hash != h.hash || int64(len(evs)) != h.evnts {
			t.Fatalf("%s head %+v does not match its %d events (%v)", wf, h, len(evs), err)
		}
		heads[wf] = h
	}
	count := func(q string) int64 {
		t.Helper()
		return e.Count(t, q)
	}
	const prunedTasks = `(SELECT seq FROM tasks WHERE workflow_id IN ('old-done', 'old-failed'))`
	if n := count(`SELECT COUNT(*) FROM edges WHERE task_seq IN ` + prunedTasks + ` OR dep_seq IN ` + prunedTasks); n != 4 {
		t.Fatalf("fixture has %d edges in the old workflows, want 4", n)
	}
	keptEdges := count(`SELECT COUNT(*) FROM edges`) - 4

	cutoff := e.Clock.Now().Add(-24 * time.Hour)
	res, err := e.S.Prune(e.Ctx, cutoff)
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
		if _, err := e.S.Workflow(e.Ctx, wf); !errors.Is(err, tg.ErrNotFound) {
			t.Errorf("%s still readable: %v", wf, err)
		}
		rows := e.DB.Query(t, `SELECT head_hash, task_count, event_count, pruned_at_ms FROM pruned_workflows WHERE workflow_id = ?`, wf)
		if len(rows) != 1 {
			t.Fatalf("%s: %d pruned_workflows records, want 1", wf, len(rows))
		}
		got := head{hash: rows[0][0], tasks: atoi(t, rows[0][1]), evnts: atoi(t, rows[0][2])}
		at := atoi(t, rows[0][3])
		if got != heads[wf] || at != e.Clock.Now().UnixMilli() {
			t.Errorf("%s pruned record %+v at %d, want %+v at %d", wf, got, at, heads[wf], e.Clock.Now().UnixMilli())
		}
	}
	if n := count(`SELECT COUNT(*) FROM edges`); n != keptEdges {
		t.Errorf("%d edges left, want %d", n, keptEdges)
	}
	for _, wf := range []string{"old-running", "old-touched", "new-done"} {
		if _, err := e.S.Workflow(e.Ctx, wf); err != nil {
			t.Errorf("%s was pruned: %v", wf, err)
		}
	}
	rep := e.Verify(t)
	if rep.Workflows != 3 {
		t.Fatalf("%d workflows verified, want 3", rep.Workflows)
	}
	// Nothing more to prune at the same cutoff.
	before := e.DB.Snapshot(t)
	if res, err := e.S.Prune(e.Ctx, cutoff); err != nil || len(res.Workflows) != 0 {
		t.Fatalf("second prune: %+v %v", res, err)
	}
	if e.DB.Snapshot(t) != before {
		t.Fatal("a prune with nothing to remove wrote")
	}
	// A pruned workflow id can be used again; it starts a new chain.
	e.Create(t, "old-done", "a")
	if evs, _ := e.S.WorkflowEvents(e.Ctx, "old-done"); len(evs) != 1 || evs[0].Seq != 1 || evs[0].PrevHash != "" {
		t.Fatalf("re-created workflow's chain: %+v", evs)
	}
	e.Verify(t)
}

// Prune works through more finished workflows than one batch holds.
func testPruneManyWorkflows(t *testing.T, h Harness) {
	e := setup(t, h)
	const n = 250
	for i := 0; i < n; i++ {
		wf := fmt.Sprintf("wf%03d", i)
		e.Create(t, wf, "a")
		if _, err := e.S.AbortWorkflow(e.Ctx, wf, alice); err != nil {
			t.Fatal(err)
		}
		e.Clock.Advance(time.Millisecond)
	}
	e.Create(t, "live", "a")
	res, err := e.S.Prune(e.Ctx, e.Clock.Now().Add(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Workflows) != n || res.Workflows[0] != "wf000" || res.Workflows[n-1] != fmt.Sprintf("wf%03d", n-1) || res.Tasks != n || res.Events != 2*n {
		t.Fatalf("pruned %d workflows (%v ... ), %d tasks, %d events", len(res.Workflows), res.Workflows[:3], res.Tasks, res.Events)
	}
	if rep := e.Verify(t); rep.Workflows != 1 {
		t.Fatalf("%+v", rep)
	}
}

// readEvent reads event seq of workflow wf behind the store's back.
func readEvent(t *testing.T, db Database, wf string, seq int64) tg.Event {
	t.Helper()
	rows := db.Query(t, `SELECT workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash,
		hash_version, actor_kind, actor_name, actor_principal, task_state, content FROM events WHERE workflow_id = ? AND wseq = ?`, wf, seq)
	if len(rows) != 1 {
		t.Fatalf("event %s/%d: %d rows", wf, seq, len(rows))
	}
	r := rows[0]
	return tg.Event{WorkflowID: r[0], Seq: atoi(t, r[1]), TaskID: r[2], Kind: r[3], Owner: r[4], Generation: atoi(t, r[5]),
		At: time.UnixMilli(atoi(t, r[6])), Detail: json.RawMessage(r[7]), PrevHash: r[8], Hash: r[9],
		HashVersion: int(atoi(t, r[10])), Actor: tg.Actor{Kind: r[11], Name: r[12], Principal: r[13]},
		State: json.RawMessage(r[14]), Content: json.RawMessage(r[15])}
}

// atoi parses an integer rendered by Database.Query.
func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("not an integer: %q", s)
	}
	return n
}
