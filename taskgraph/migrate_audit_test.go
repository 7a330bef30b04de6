package taskgraph

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"
)

// downgradeToV2 turns the closed database at path into what schema version
// 2 (before the audit trail) held: every event in hash format 1, no audit
// columns or tables.
func downgradeToV2(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT event_id, workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail FROM events ORDER BY workflow_id, wseq`)
	if err != nil {
		t.Fatal(err)
	}
	type ev struct {
		id int64
		e  Event
	}
	var evs []ev
	for rows.Next() {
		var x ev
		var at int64
		var detail string
		if err := rows.Scan(&x.id, &x.e.WorkflowID, &x.e.Seq, &x.e.TaskID, &x.e.Kind, &x.e.Owner, &x.e.Generation, &at, &detail); err != nil {
			t.Fatal(err)
		}
		x.e.At, x.e.Detail = timeMS(at), []byte(detail)
		evs = append(evs, x)
	}
	rows.Close()
	heads := map[string]string{}
	for _, x := range evs {
		x.e.PrevHash = heads[x.e.WorkflowID]
		h, err := EventHash(x.e)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`UPDATE events SET prev_hash = ?, hash = ? WHERE event_id = ?`, x.e.PrevHash, h, x.id); err != nil {
			t.Fatal(err)
		}
		heads[x.e.WorkflowID] = h
	}
	for wf, h := range heads {
		if _, err := db.Exec(`UPDATE workflows SET head_hash = ? WHERE workflow_id = ?`, h, wf); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		// The later migrations' additions go too (0004 graph data, 0005
		// principals, 0006 routing, 0007 journal, 0008 requests), so that
		// the file is a schema-2 database again.
		// 0020 a task's events by its seq:
		`DROP INDEX events_by_task_seq`, `ALTER TABLE events DROP COLUMN task_seq`,
		`CREATE INDEX events_by_task ON events (task_id, event_id)`,
		// 0019 links by run (event_links, always empty on SQLite, back to
		// its shape of 0016):
		`DROP TABLE event_links`,
		`CREATE TABLE event_links (event_id INTEGER NOT NULL, wseq INTEGER NOT NULL, workflow_id TEXT NOT NULL,
			prev_hash TEXT NOT NULL, hash TEXT NOT NULL, PRIMARY KEY (workflow_id, wseq))`,
		`CREATE UNIQUE INDEX event_links_by_event ON event_links (event_id)`,
		// 0018 keys parked:
		`DROP TRIGGER tasks_key_park_insert`, `DROP TRIGGER tasks_key_park_ready`, `DROP TRIGGER tasks_key_unpark`,
		`DROP TRIGGER tasks_key_leave`, `DROP TRIGGER concurrency_keys_park`, `DROP TRIGGER concurrency_keys_unpark_all`,
		`DROP TRIGGER concurrency_keys_unpark_heads`,
		`DROP INDEX tasks_ready_by_key_group`, `DROP INDEX tasks_ready_plain`, `DROP INDEX tasks_ready_by_priority`,
		`DROP INDEX tasks_ready_by_workflow_priority`, `ALTER TABLE tasks DROP COLUMN key_parked`,
		`CREATE INDEX tasks_ready_plain ON tasks (priority DESC, seq) WHERE state = 'pending' AND due_at_ms = 0 AND requires = ''`,
		`CREATE INDEX tasks_ready_by_priority ON tasks (priority DESC, seq, requires) WHERE state = 'pending' AND due_at_ms = 0`,
		`CREATE INDEX tasks_ready_by_workflow_priority ON tasks (workflow_id, priority DESC, seq, requires) WHERE state = 'pending' AND due_at_ms = 0`,
		// 0017 keys at their cap:
		`DROP INDEX concurrency_keys_at_cap`, `ALTER TABLE concurrency_keys DROP COLUMN at_cap`,
		// 0016 events once (event_links, always empty on SQLite):
		`DROP TABLE event_links`,
		// 0015 drops tasks_by_state:
		`CREATE INDEX tasks_by_state ON tasks (state, seq)`,
		// 0014 key rate index:
		`DROP INDEX concurrency_keys_rate_open`,
		// 0013 gates:
		`DROP INDEX tasks_gate_due`, `ALTER TABLE tasks DROP COLUMN kind`, `ALTER TABLE tasks DROP COLUMN gate_timeout_ms`,
		`ALTER TABLE tasks DROP COLUMN gate_on_timeout`,
		// 0012 concurrency keys:
		`DROP TRIGGER tasks_key_release`, `DROP INDEX tasks_ready_by_key`, `DROP TABLE concurrency_keys`,
		`ALTER TABLE tasks DROP COLUMN concurrency_key`,
		// 0010 flow control (0011 only drops an index of the journal):
		`DROP TABLE claim_pauses`, `ALTER TABLE tasks DROP COLUMN lease_losses`,
		// 0009 reports:
		`ALTER TABLE tasks DROP COLUMN report`, `ALTER TABLE tasks DROP COLUMN usage_input_tokens`, `ALTER TABLE tasks DROP COLUMN usage_output_tokens`,
		`ALTER TABLE tasks DROP COLUMN usage_cost_usd`, `ALTER TABLE tasks DROP COLUMN prior_input_tokens`, `ALTER TABLE tasks DROP COLUMN prior_output_tokens`,
		`ALTER TABLE tasks DROP COLUMN prior_cost_usd`,
		`DROP TABLE requests`, `DROP TABLE event_journal`, `ALTER TABLE tasks DROP COLUMN dependents`,
		`CREATE INDEX tasks_ready ON tasks (seq) WHERE state = 'pending'`,
		`CREATE INDEX tasks_ready_by_workflow ON tasks (workflow_id, seq) WHERE state = 'pending'`,
		`DROP INDEX tasks_ready_plain`, `DROP INDEX tasks_due`,
		`DROP INDEX tasks_ready_by_priority`, `DROP INDEX tasks_ready_by_workflow_priority`,
		`ALTER TABLE tasks DROP COLUMN requires`, `ALTER TABLE tasks DROP COLUMN due_at_ms`, `ALTER TABLE tasks DROP COLUMN retry_delay_ms`,
		`ALTER TABLE tasks DROP COLUMN created_by`, `ALTER TABLE tasks DROP COLUMN priority`,
		`DROP TABLE audit_chain`, `DROP TABLE audit_head`,
		`ALTER TABLE events DROP COLUMN hash_version`, `ALTER TABLE events DROP COLUMN actor_kind`, `ALTER TABLE events DROP COLUMN actor_name`,
		`ALTER TABLE events DROP COLUMN actor_principal`, `ALTER TABLE events DROP COLUMN task_state`, `ALTER TABLE events DROP COLUMN content`,
		`UPDATE schema_version SET version = 2`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// A database of schema version 2 migrates to the audit trail: its events
// keep format 1 and verify, the switch and its workflows are recorded in the
// audit chain, new events are format 2, and deleting a workflow that
// existed before the migration is detected.
func TestMigrationToAuditTrail(t *testing.T) {
	ctx := context.Background()
	b := setup(t)
	b.create(t, "old1", "a")
	c := b.claim(t, "w", b.create(t, "old2", "x").TaskID, 0)
	if _, err := b.s.Complete(ctx, holder(c), []byte(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	if err := b.s.Close(); err != nil {
		t.Fatal(err)
	}
	downgradeToV2(t, b.path)
	s, err := openSQLite(ctx, b.path, Options{Clock: b.clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b.s = s
	rep := b.verify(t)
	if rep.V1Events != 4 || rep.V2Events != 0 || rep.AuditEntries != 3 || rep.Tasks != 2 {
		t.Fatalf("after the migration: %+v", rep)
	}
	var kinds []string
	rawScanAll(t, b.path, `SELECT kind || ':' || workflow_id || ':' || detail FROM audit_chain ORDER BY seq`, &kinds)
	if got := strings.Join(kinds, " "); !strings.HasPrefix(got, `hash_v2::{"events":4,"hash_version":2,"workflows":2} adopt:old1:{"event_count":1,"head_hash":"`) {
		t.Fatalf("audit chain: %s", got)
	}
	// The chain of old1 goes on in format 2.
	b.create(t, "old1", "b")
	b.create(t, "new", "n")
	if rep := b.verify(t); rep.V1Events != 4 || rep.V2Events != 2 || rep.AuditEntries != 4 {
		t.Fatalf("after new work: %+v", rep)
	}
	// Deleting a workflow adopted at the switch is detected.
	db, err := sql.Open("sqlite3", "file:"+b.path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`DELETE FROM events WHERE workflow_id = 'old2'`, `DELETE FROM tasks WHERE workflow_id = 'old2'`, `DELETE FROM workflows WHERE workflow_id = 'old2'`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	rep, err = b.s.VerifyHistory(ctx)
	if !errors.Is(err, ErrBrokenChain) || rep.Broken == nil || rep.Broken.WorkflowID != "old2" || rep.Broken.AuditSeq != 3 {
		t.Fatalf("old2 deleted: %v %+v", err, rep.Broken)
	}
}

func timeMS(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// rawScanAll reads one string column of every row of query.
func rawScanAll(t *testing.T, path, query string, out *[]string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		*out = append(*out, s)
	}
}
