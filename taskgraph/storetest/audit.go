package storetest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// auditTests: the audit trail covers task state, content, actors and whole
// workflows (hash format 2, the database-wide chain); format 1 events keep
// verifying.
var auditTests = []test{
	{"EveryTransitionVerifies", testEveryTransitionVerifies},
	{"ActorsRecorded", testActorsRecorded},
	{"TamperRowsDetected", testTamperRowsDetected},
	{"WorkflowDeletedWhole", testWorkflowDeletedWhole},
	{"V1EventsKeepVerifying", testV1EventsKeepVerifying},
	{"TamperInLongChainsDetected", testTamperInLongChainsDetected},
}

// Every kind of transition leaves task rows that equal what their events
// record: verify passes after each step of a run that retries, expires,
// requeues, skips, cascades, revives, aborts and prunes.
func testEveryTransitionVerifies(t *testing.T, h Harness) {
	e := setup(t, h)
	check := func(step string) {
		t.Helper()
		rep, err := e.S.VerifyHistory(e.Ctx)
		if err != nil {
			t.Fatalf("after %s: %v (%+v)", step, err, rep.Broken)
		}
		if rep.V1Events != 0 || rep.V2Events != rep.Events || rep.Tasks == 0 || rep.AuditEntries == 0 {
			t.Fatalf("after %s: report %+v", step, rep)
		}
	}
	e.createGraph(t, "wf", []string{"a", "b", "c", "d"}, map[string][]string{"b": {"a"}, "c": {"b"}, "d": {"a"}})
	check("create")
	ca, _ := e.ClaimNext(t, "w1", "wf")
	check("claim")
	if _, err := e.S.Fail(e.Ctx, holder(ca), "flaky <&> \u2028 \x01", true); err != nil {
		t.Fatal(err)
	}
	check("retry")
	e.ClaimNext(t, "w2", "wf") // finds nothing: the retry is not due yet
	e.Clock.Advance(time.Hour)
	if _, err := e.S.ExpireLeases(e.Ctx); err != nil {
		t.Fatal(err)
	}
	check("expire")
	ca, _ = e.ClaimNext(t, "w3", "wf")
	if _, err := e.S.Complete(e.Ctx, holder(ca), json.RawMessage(`{"z":1,"a":[1,2]}`)); err != nil {
		t.Fatal(err)
	}
	check("complete and ready")
	cb, ok := e.ClaimNext(t, "w1", "wf")
	if !ok {
		t.Fatal("nothing to claim")
	}
	if _, err := e.S.Fail(e.Ctx, holder(cb), "fatal", false); err != nil {
		t.Fatal(err)
	}
	check("fail and cascade")
	if _, err := e.S.Requeue(e.Ctx, cb.Task.TaskID, alice); err != nil {
		t.Fatal(err)
	}
	check("requeue and revive")
	if _, err := e.S.Skip(e.Ctx, cb.Task.TaskID, alice); err != nil {
		t.Fatal(err)
	}
	check("skip")
	e.Create(t, "other", "x")
	if _, _, err := e.S.CancelTask(e.Ctx, e.Create(t, "other", "y").TaskID, "no longer needed"); err != nil {
		t.Fatal(err)
	}
	check("cancel by request")
	if _, err := e.S.AbortWorkflow(e.Ctx, "wf", alice); err != nil {
		t.Fatal(err)
	}
	check("abort")
	if _, err := e.S.AbortWorkflow(e.Ctx, "other", alice); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(48 * time.Hour)
	if res, err := e.S.Prune(e.Ctx, e.Clock.Now()); err != nil || len(res.Workflows) != 2 {
		t.Fatalf("prune: %+v %v", res, err)
	}
	e.Create(t, "wf", "again")
	check("prune and re-create")
}

// Each event records who caused it, with the request's principal.
func testActorsRecorded(t *testing.T, h Harness) {
	e := setup(t, h)
	pctx := tg.WithPrincipal(e.Ctx, "svc-ci")
	if _, err := e.S.CreateTask(pctx, "wf", tg.NodeSpec{NodeID: "a"}); err != nil {
		t.Fatal(err)
	}
	e.Create(t, "wf", "b")
	c := e.Claim(t, "w1", e.taskID(t, "wf", "a"), 0)
	e.Clock.Advance(time.Hour)
	if _, err := e.S.ExpireLeases(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.S.Requeue(e.Ctx, c.Task.TaskID, alice); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.S.CancelTask(pctx, e.taskID(t, "wf", "b"), ""); err != nil {
		t.Fatal(err)
	}
	evs, err := e.S.WorkflowEvents(e.Ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		if ev.HashVersion != tg.HashV2 {
			t.Fatalf("event %d has hash version %d", ev.Seq, ev.HashVersion)
		}
		got = append(got, ev.Kind+":"+ev.Actor.Kind+"/"+ev.Actor.Name+"/"+ev.Actor.Principal)
	}
	want := []string{"create:submitter//svc-ci", "create:submitter//", "claim:worker/w1/", "expire:sweeper//",
		"requeue:operator/alice/", "cancel:requestor//svc-ci"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("actors\n got %v\nwant %v", got, want)
	}
	e.Verify(t)
}

// taskID returns the id of node of wf.
func (e *env) taskID(t *testing.T, wf, node string) string {
	t.Helper()
	rows := e.DB.Query(t, `SELECT task_id FROM tasks WHERE workflow_id = ? AND node_id = ?`, wf, node)
	if len(rows) != 1 {
		t.Fatalf("%s/%s: %d rows", wf, node, len(rows))
	}
	return rows[0][0]
}

// A task's stored content or state changed without an event is detected,
// naming the task and the event whose record it contradicts.
func testTamperRowsDetected(t *testing.T, h Harness) {
	for _, tc := range []struct {
		name, node, sql string
		seq             int64
		reason          string
	}{
		{"edit payload", "a", `UPDATE tasks SET payload = '{"n":"evil"}' WHERE workflow_id = 'wf' AND node_id = 'a'`, 1, "stored payload does not match the digest in its create event 1"},
		{"edit result", "a", `UPDATE tasks SET result = '{"ok":false}' WHERE workflow_id = 'wf' AND node_id = 'a'`, 5, "stored result differs from what its last event 5 left"},
		{"edit error", "b", `UPDATE tasks SET error = 'fine' WHERE workflow_id = 'wf' AND node_id = 'b'`, 8, "stored error differs"},
		{"change state", "b", `UPDATE tasks SET state = 'completed' WHERE workflow_id = 'wf' AND node_id = 'b'`, 8, "stored state differs"},
		{"change owner", "a", `UPDATE tasks SET owner = 'mallory' WHERE workflow_id = 'wf' AND node_id = 'a'`, 5, "stored owner differs"},
		{"change generation", "b", `UPDATE tasks SET generation = generation + 1 WHERE workflow_id = 'wf' AND node_id = 'b'`, 8, "stored generation differs"},
		{"change attempts", "b", `UPDATE tasks SET attempts = 0 WHERE workflow_id = 'wf' AND node_id = 'b'`, 8, "stored attempts differs"},
		{"delete a task", "b", `DELETE FROM tasks WHERE workflow_id = 'wf' AND node_id = 'b'`, 0, "which is not stored"},
		// The columns fixed at creation, recorded in the create event's detail.
		{"raise the priority", "a", `UPDATE tasks SET priority = 100 WHERE workflow_id = 'wf' AND node_id = 'a'`, 1, "stored priority 100, but its create event 1 recorded 0"},
		{"drop a requirement", "b", `UPDATE tasks SET requires = 'gpu' WHERE workflow_id = 'wf' AND node_id = 'b'`, 2, `stored requires "gpu", but its create event 2 recorded ""`},
		{"grant attempts", "b", `UPDATE tasks SET max_attempts = 9 WHERE workflow_id = 'wf' AND node_id = 'b'`, 2, "stored max_attempts 9, but its create event 2 recorded 3"},
		{"change the retry delay", "a", `UPDATE tasks SET retry_delay_ms = 0 WHERE workflow_id = 'wf' AND node_id = 'a'`, 1, "stored retry_delay_ms 0, but its create event 1 recorded 1000"},
		{"rename a node", "a", `UPDATE tasks SET node_id = 'z' WHERE workflow_id = 'wf' AND node_id = 'a'`, 1, `stored node_id "z", but its create event 1 recorded "a"`},
		{"rewrite dependencies", "b", `UPDATE tasks SET depends_on = '[]' WHERE workflow_id = 'wf' AND node_id = 'b'`, 2, `stored depends_on [], but its create event 2 recorded ["a"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := historyFixture(t, h)
			id := e.taskID(t, "wf", tc.node)
			e.DB.Exec(t, tc.sql)
			rep, err := e.S.VerifyHistory(e.Ctx)
			if !errors.Is(err, tg.ErrBrokenChain) {
				t.Fatalf("VerifyHistory after tampering: %v", err)
			}
			b := rep.Broken
			if b == nil || b.WorkflowID != "wf" || b.TaskID != id || b.Seq != tc.seq || !strings.Contains(b.Reason, tc.reason) {
				t.Fatalf("broken %+v, want wf task %s at %d saying %q", b, id, tc.seq, tc.reason)
			}
			if !strings.Contains(err.Error(), "task "+id) {
				t.Errorf("error %q does not name the task", err)
			}
		})
	}
}

// A workflow deleted whole (tasks, events and head) is detected through the
// database-wide chain, which names the entry that recorded it; so is an
// edited or removed audit entry.
func testWorkflowDeletedWhole(t *testing.T, h Harness) {
	deleteWF := func(t *testing.T, db Database) {
		db.Exec(t, `DELETE FROM events WHERE workflow_id = 'wf'`)
		db.Exec(t, `DELETE FROM edges WHERE task_seq IN (SELECT seq FROM tasks WHERE workflow_id = 'wf')`)
		db.Exec(t, `DELETE FROM tasks WHERE workflow_id = 'wf'`)
		db.Exec(t, `DELETE FROM workflows WHERE workflow_id = 'wf'`)
	}
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, db Database)
		reason string
	}{
		{"delete a workflow", deleteWF, "workflow wf, recorded live by audit entry 3, is missing"},
		{"delete it and its audit entry", func(t *testing.T, db Database) {
			deleteWF(t, db)
			db.Exec(t, `DELETE FROM audit_chain WHERE workflow_id = 'wf'`)
		}, "the audit chain has 2 entries"},
		{"delete it and rewrite the audit head", func(t *testing.T, db Database) {
			deleteWF(t, db)
			db.Exec(t, `DELETE FROM audit_chain WHERE workflow_id = 'wf'`)
			db.Exec(t, `UPDATE audit_head SET entry_count = 2, head_hash = (SELECT hash FROM audit_chain WHERE seq = 2)`)
		}, ""}, // consistent again: only an anchor catches this (see the anchor tests)
		{"edit an audit entry", func(t *testing.T, db Database) {
			db.Exec(t, `UPDATE audit_chain SET workflow_id = 'zz' WHERE workflow_id = 'wf'`)
		}, "the audit entry was edited"},
		{"add a workflow behind the store's back", func(t *testing.T, db Database) {
			db.Exec(t, `INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms) VALUES ('sneaky', 0, 0)`)
		}, "records no creation of it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := historyFixture(t, h)
			if rows := e.DB.Query(t, `SELECT seq, kind FROM audit_chain WHERE workflow_id = 'wf'`); len(rows) != 1 || rows[0][0] != "3" || rows[0][1] != "create" {
				t.Fatalf("audit entries of wf: %v", rows)
			}
			tc.tamper(t, e.DB)
			rep, err := e.S.VerifyHistory(e.Ctx)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("consistent rewrite: %v", err)
				}
				return
			}
			if !errors.Is(err, tg.ErrBrokenChain) || rep.Broken == nil || !strings.Contains(rep.Broken.Reason, tc.reason) {
				t.Fatalf("VerifyHistory: %v (%+v), want %q", err, rep.Broken, tc.reason)
			}
		})
	}
}

// Events in hash format 1 (written before migration 0003) verify, in a
// chain that goes on in format 2; editing one is still detected.
func testV1EventsKeepVerifying(t *testing.T, h Harness) {
	e := historyFixture(t, h)
	// Rewrite aa's two events as a pre-0003 store wrote them.
	prev := ""
	for seq := int64(1); seq <= 2; seq++ {
		ev := readEvent(t, e.DB, "aa", seq)
		ev.HashVersion, ev.Actor, ev.State, ev.Content, ev.PrevHash = tg.HashV1, tg.Actor{}, nil, nil, prev
		hash, err := tg.EventHash(ev)
		if err != nil {
			t.Fatal(err)
		}
		e.DB.Exec(t, `UPDATE events SET hash_version = 1, actor_kind = '', actor_name = '', actor_principal = '', task_state = '', content = '',
			prev_hash = ?, hash = ? WHERE workflow_id = 'aa' AND wseq = ?`, prev, hash, seq)
		prev = hash
	}
	e.DB.Exec(t, `UPDATE workflows SET head_hash = ? WHERE workflow_id = 'aa'`, prev)
	rep := e.Verify(t)
	if rep.V1Events != 2 || rep.V2Events != 8 {
		t.Fatalf("report %+v", rep)
	}
	// The chain goes on in format 2.
	e.Create(t, "aa", "z")
	if evs, _ := e.S.WorkflowEvents(e.Ctx, "aa"); len(evs) != 3 || evs[2].HashVersion != tg.HashV2 || evs[2].PrevHash != prev {
		t.Fatalf("aa's chain after a new event: %+v", evs)
	}
	if rep := e.Verify(t); rep.V1Events != 2 || rep.V2Events != 9 {
		t.Fatalf("report %+v", rep)
	}
	e.DB.Exec(t, `UPDATE events SET owner = 'mallory' WHERE workflow_id = 'aa' AND wseq = 1`)
	rep, err := e.S.VerifyHistory(e.Ctx)
	if !errors.Is(err, tg.ErrBrokenChain) || rep.Broken == nil || rep.Broken.WorkflowID != "aa" || rep.Broken.Seq != 1 {
		t.Fatalf("edited v1 event: %v %+v", err, rep.Broken)
	}
}
