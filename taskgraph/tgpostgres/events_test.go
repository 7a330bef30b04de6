package tgpostgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// openStore opens a store on url and closes it when t ends (or by the
// returned function, which is idempotent).
func openStore(t *testing.T, url string) (*tg.Store, func()) {
	t.Helper()
	ctx := context.Background()
	drv, err := tgpostgres.Open(ctx, url, tgpostgres.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	s, err := tg.OpenDriver(ctx, drv, tg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	closeFn := func() {
		if !closed {
			closed = true
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
	}
	t.Cleanup(closeFn)
	return s, closeFn
}

// runWorkflow creates workflow wf of n independent tasks and claims and
// completes each.
func runWorkflow(t *testing.T, s *tg.Store, wf string, n int) {
	t.Helper()
	ctx := context.Background()
	nodes := make([]tg.NodeSpec, n)
	for i := range nodes {
		nodes[i] = tg.NodeSpec{NodeID: fmt.Sprintf("n%d", i)}
	}
	if _, err := s.CreateWorkflow(ctx, wf, nodes); err != nil {
		t.Fatal(err)
	}
	for range n {
		c, ok, err := s.Claim(ctx, tg.ClaimRequest{Owner: "w", WorkflowID: wf})
		if err != nil || !ok {
			t.Fatalf("claim in %s: %v %v", wf, ok, err)
		}
		h := lease.Holder{TaskID: c.Task.TaskID, Owner: c.Lease.Owner, Generation: c.Lease.Generation, Token: c.Lease.Token}
		if _, err := s.Complete(ctx, h, []byte(`{"ok":true}`)); err != nil {
			t.Fatal(err)
		}
	}
}

func execAll(t *testing.T, conn *pgx.Conn, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := conn.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func count(t *testing.T, conn *pgx.Conn, q string) int64 {
	t.Helper()
	var n int64
	if err := conn.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// chains builds workflows wf (4 tasks) and other (2) on a fresh database,
// each task created, claimed and completed, and returns its URL and a
// connection to it, once the store has closed (and so linked every event).
func chains(t *testing.T) (string, *pgx.Conn) {
	t.Helper()
	url := pgtest.URL(t)
	s, closeStore := openStore(t, url)
	runWorkflow(t, s, "wf", 4)
	runWorkflow(t, s, "other", 2)
	closeStore()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return url, conn
}

// Each event's body is written once, into events, and its link (position
// and hashes) into event_links: no body is in the journal, every event of
// the store's work has exactly one link, and tampering with a link or with
// the body of an event linked there is detected.
func TestEventBodiesWrittenOnceAndLinksVerified(t *testing.T) {
	t.Parallel()
	_, conn := chains(t)
	if n := count(t, conn, `SELECT COUNT(*) FROM event_journal`); n != 0 {
		t.Fatalf("%d journal entries after close", n)
	}
	// 4 creations, claims and completions, and 2 of each.
	if n := count(t, conn, `SELECT COUNT(*) FROM events e JOIN event_links l USING (event_id) WHERE e.wseq IS NULL AND e.hash = ''`); n != 18 {
		t.Fatalf("%d events linked in event_links (bodies without links), want 18", n)
	}
	if n := count(t, conn, `SELECT COUNT(*) FROM events`); n != 18 {
		t.Fatalf("%d event bodies, want 18 (each written once)", n)
	}
	for _, tc := range []struct {
		name   string
		tamper []string
		seq    int64
	}{
		{"a link's hash", []string{`UPDATE event_links SET hash = repeat('0', 64) WHERE workflow_id = 'wf' AND wseq = 5`}, 5},
		{"a body linked in event_links", []string{`UPDATE events SET owner = 'mallory' WHERE event_id = (SELECT event_id FROM event_links WHERE workflow_id = 'wf' AND wseq = 3)`}, 3},
		{"a link deleted", []string{`DELETE FROM event_links WHERE workflow_id = 'wf' AND wseq = 2`}, 3},
		{"two links swapped", []string{
			`UPDATE event_links SET wseq = -1 WHERE workflow_id = 'wf' AND wseq = 6`,
			`UPDATE event_links SET wseq = 6 WHERE workflow_id = 'wf' AND wseq = 7`,
			`UPDATE event_links SET wseq = 7 WHERE workflow_id = 'wf' AND wseq = -1`}, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url, conn := chains(t)
			execAll(t, conn, tc.tamper...)
			v, _ := openStore(t, url)
			rep, err := v.VerifyHistory(context.Background())
			if !errors.Is(err, tg.ErrBrokenChain) || rep.Broken == nil || rep.Broken.WorkflowID != "wf" || rep.Broken.Seq != tc.seq {
				t.Fatalf("after tampering with %s: %v %+v, want broken at wf %d", tc.name, err, rep.Broken, tc.seq)
			}
		})
	}
}

// A database of schema version 15 migrates to 0016 and verifies: its
// events linked in their own rows stay there and verify, and the entries
// still journaled with their bodies become bodies in events and pointers,
// which the next store links onto the same chains.
func TestMigrationKeepsOldEventsVerifying(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	s, closeStore := openStore(t, url)
	runWorkflow(t, s, "wf", 3)
	runWorkflow(t, s, "other", 1)
	closeStore()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Back to schema 15 (0018 and 0017 undone first): links in the
	// events' own rows; the last three events of wf journaled with their
	// bodies, its head before them.
	execAll(t, conn,
		`DROP TRIGGER tasks_key_park_insert ON tasks`, `DROP TRIGGER tasks_key_park_ready ON tasks`,
		`DROP TRIGGER tasks_key_unpark ON tasks`, `DROP TRIGGER tasks_key_leave ON tasks`,
		`DROP TRIGGER concurrency_keys_park ON concurrency_keys`, `DROP TRIGGER concurrency_keys_unpark ON concurrency_keys`,
		`DROP FUNCTION tasks_key_park_entry()`, `DROP FUNCTION tasks_key_unpark()`, `DROP FUNCTION tasks_key_leave()`,
		`DROP FUNCTION concurrency_keys_park()`, `DROP FUNCTION concurrency_keys_unpark()`,
		`DROP INDEX tasks_ready_by_key_group`, `DROP INDEX tasks_ready_plain`, `DROP INDEX tasks_ready_by_priority`,
		`DROP INDEX tasks_ready_by_workflow_priority`, `ALTER TABLE tasks DROP COLUMN key_parked`,
		`CREATE INDEX tasks_ready_plain ON tasks (priority DESC, seq) WHERE state = 'pending' AND due_at_ms = 0 AND requires = ''`,
		`CREATE INDEX tasks_ready_by_priority ON tasks (priority DESC, seq, requires) WHERE state = 'pending' AND due_at_ms = 0`,
		`CREATE INDEX tasks_ready_by_workflow_priority ON tasks (workflow_id, priority DESC, seq, requires) WHERE state = 'pending' AND due_at_ms = 0`,
		`DROP INDEX concurrency_keys_at_cap`, `ALTER TABLE concurrency_keys DROP COLUMN at_cap`,
		`UPDATE events e SET wseq = l.wseq, prev_hash = l.prev_hash, hash = l.hash FROM event_links l WHERE l.event_id = e.event_id`,
		`UPDATE workflows w SET event_count = w.event_count - 3,
			head_hash = (SELECT hash FROM events e WHERE e.workflow_id = 'wf' AND e.wseq = w.event_count - 3) WHERE workflow_id = 'wf'`,
		`DROP TABLE event_links`,
		`DROP INDEX events_inline_chain`,
		`ALTER TABLE events ADD CONSTRAINT events_workflow_id_wseq_key UNIQUE (workflow_id, wseq)`,
		`ALTER TABLE events ALTER COLUMN wseq SET NOT NULL`,
		`ALTER TABLE event_journal ADD PRIMARY KEY (journal_id)`,
		`ALTER TABLE event_journal ALTER COLUMN task_id SET NOT NULL, ALTER COLUMN kind SET NOT NULL,
			ALTER COLUMN owner SET NOT NULL, ALTER COLUMN owner SET DEFAULT '', ALTER COLUMN generation SET NOT NULL,
			ALTER COLUMN at_ms SET NOT NULL, ALTER COLUMN detail SET NOT NULL, ALTER COLUMN hash_version SET NOT NULL,
			ALTER COLUMN actor_kind SET NOT NULL, ALTER COLUMN actor_kind SET DEFAULT '',
			ALTER COLUMN actor_name SET NOT NULL, ALTER COLUMN actor_name SET DEFAULT '',
			ALTER COLUMN actor_principal SET NOT NULL, ALTER COLUMN actor_principal SET DEFAULT '',
			ALTER COLUMN task_state SET NOT NULL, ALTER COLUMN task_state SET DEFAULT '',
			ALTER COLUMN content SET NOT NULL, ALTER COLUMN content SET DEFAULT ''`,
		`INSERT INTO event_journal (workflow_id, task_id, kind, owner, generation, at_ms, detail, hash_version,
			actor_kind, actor_name, actor_principal, task_state, content)
			SELECT workflow_id, task_id, kind, owner, generation, at_ms, detail, hash_version,
			actor_kind, actor_name, actor_principal, task_state, content
			FROM events WHERE workflow_id = 'wf' AND wseq > (SELECT event_count FROM workflows WHERE workflow_id = 'wf') ORDER BY wseq`,
		`DELETE FROM events WHERE workflow_id = 'wf' AND wseq > (SELECT event_count FROM workflows WHERE workflow_id = 'wf')`,
		`UPDATE schema_version SET version = 15`,
	)
	old := count(t, conn, `SELECT COUNT(*) FROM events`)
	v, closeV := openStore(t, url) // migrates; its reads link first
	rep, err := v.VerifyHistory(ctx)
	if err != nil || rep.Events != 12 || rep.Workflows != 2 {
		t.Fatalf("after the migration: %v %+v, want 12 events of 2 workflows verified", err, rep)
	}
	runWorkflow(t, v, "new", 1)
	closeV()
	if n := count(t, conn, `SELECT COUNT(*) FROM events WHERE wseq IS NOT NULL`); n != old {
		t.Errorf("%d events linked in their own rows after the migration, want the %d of before", n, old)
	}
	if n := count(t, conn, `SELECT COUNT(*) FROM event_links`); n != 3+3 {
		t.Errorf("%d links in event_links, want 6 (the 3 journaled before the migration, the 3 of new)", n)
	}
	if n := count(t, conn, `SELECT COUNT(*) FROM event_journal`); n != 0 {
		t.Errorf("%d journal entries left", n)
	}
	v, _ = openStore(t, url)
	if rep, err := v.VerifyHistory(ctx); err != nil || rep.Events != 15 {
		t.Fatalf("after new work: %v %+v, want 15 events", err, rep)
	}
}
