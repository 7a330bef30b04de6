package tgpostgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// openStore opens a store on url and closes it when t ends (or by the
// returned function, which is idempotent).
func openStore(t testing.TB, url string) (*tg.Store, func()) {
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

// execAll is the package's own (tgpostgres.ExecAll).
var execAll = tgpostgres.ExecAll

// count is the package's own (tgpostgres.Count).
var count = tgpostgres.Count

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
	return url, connect(t, url)
}

// connect opens a raw connection to url, closed when t ends.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// createBig opens a store on a new database, creates workflow "big" of n
// tasks without edges (one creation, so one writer statement) and checks
// that its n events verify. It returns the database's URL, the store and
// the store's close.
func createBig(t *testing.T, n int) (string, *tg.Store, func()) {
	t.Helper()
	ctx := context.Background()
	url := pgtest.URL(t)
	s, closeStore := openStore(t, url)
	nodes := make([]tg.NodeSpec, n)
	for i := range nodes {
		nodes[i] = tg.NodeSpec{NodeID: fmt.Sprintf("n%d", i)}
	}
	if _, err := s.CreateWorkflow(ctx, "big", nodes); err != nil {
		t.Fatal(err)
	}
	if rep, err := s.VerifyHistory(ctx); err != nil || rep.Events != int64(n) {
		t.Fatalf("VerifyHistory: %v %+v, want %d events verified", err, rep, n)
	}
	return url, s, closeStore
}

// createBigClosed is createBig with the store closed, and a connection
// to its database.
func createBigClosed(t *testing.T, n int) (string, *pgx.Conn) {
	t.Helper()
	url, _, closeStore := createBig(t, n)
	closeStore()
	return url, connect(t, url)
}

// wantVerifiesReopened checks that a store opened anew on url verifies a
// history of n events.
func wantVerifiesReopened(t *testing.T, url string, n int64) {
	t.Helper()
	v, _ := openStore(t, url)
	if rep, err := v.VerifyHistory(context.Background()); err != nil || rep.Events != n {
		t.Fatalf("VerifyHistory after reopening: %v %+v, want %d events verified", err, rep, n)
	}
}

// splitRuns rewrites every run of event_links as runs of one event each
// (the links' positions and hashes unchanged), and mergeRuns every
// workflow's runs as one run: the two extremes of how the linker's passes
// may group a chain's links. Both assume each workflow's runs tile its
// positions, as the linker writes them.
const (
	splitRuns = `WITH old AS (DELETE FROM event_links RETURNING *)
		INSERT INTO event_links (workflow_id, wseq, prev_hash, event_ids, hashes, min_event_id, max_event_id)
		SELECT r.workflow_id, r.wseq + u.o - 1, COALESCE(lag(u.h) OVER (PARTITION BY r.workflow_id, r.wseq ORDER BY u.o), r.prev_hash),
			ARRAY[u.id], ARRAY[u.h], u.id, u.id
		FROM old r, unnest(r.event_ids, r.hashes) WITH ORDINALITY AS u(id, h, o)`
	mergeRuns = `WITH old AS (DELETE FROM event_links RETURNING *),
		ev AS (SELECT r.workflow_id, r.wseq + u.o - 1 AS pos, u.id, u.h, r.prev_hash, r.wseq AS first
			FROM old r, unnest(r.event_ids, r.hashes) WITH ORDINALITY AS u(id, h, o))
		INSERT INTO event_links (workflow_id, wseq, prev_hash, event_ids, hashes, min_event_id, max_event_id)
		SELECT workflow_id, MIN(pos), (array_agg(prev_hash ORDER BY first))[1], array_agg(id ORDER BY pos), array_agg(h ORDER BY pos),
			MIN(id), MAX(id)
		FROM ev GROUP BY workflow_id`
)

// Each event's body is written once, into events, and its link (position
// and hashes) into a run of event_links: no body is in the journal, every
// event of the store's work has exactly one link, each workflow's runs
// tile its chain, and tampering with a link or with the body of an event
// linked there is detected, whether a run holds one event or the whole
// chain.
func TestEventBodiesWrittenOnceAndLinksVerified(t *testing.T) {
	t.Parallel()
	_, conn := chains(t)
	if n := count(t, conn, `SELECT COUNT(*) FROM event_journal`); n != 0 {
		t.Fatalf("%d journal entries after close", n)
	}
	// 4 creations, claims and completions, and 2 of each, their bodies in
	// packs (migration 0029), none in events.
	if n := count(t, conn, `SELECT COUNT(*) FROM event_packs p, unnest(p.event_ids) AS b(event_id)
		JOIN (SELECT unnest(event_ids) AS event_id FROM event_links) l USING (event_id)`); n != 18 {
		t.Fatalf("%d packed bodies linked in event_links, want 18", n)
	}
	if n := count(t, conn, `SELECT COUNT(*) FROM (`+tgpostgres.BodiesSQL+`) b`); n != 18 {
		t.Fatalf("%d event bodies, want 18 (each written once)", n)
	}
	// Each run starts where the one before it ended, its ids ascending
	// between its least and greatest.
	if n := count(t, conn, `SELECT COUNT(*) FROM (SELECT workflow_id, wseq, event_ids, cardinality(event_ids) AS n, min_event_id, max_event_id,
			lag(wseq + cardinality(event_ids), 1, 1::bigint) OVER (PARTITION BY workflow_id ORDER BY wseq) AS want,
			event_ids = (SELECT array_agg(x ORDER BY x) FROM unnest(event_ids) x) AS sorted,
			cardinality(hashes) AS nh FROM event_links) r
		WHERE wseq <> want OR NOT sorted OR nh <> n OR min_event_id <> event_ids[1] OR max_event_id <> event_ids[n]`); n != 0 {
		t.Fatalf("%d runs of event_links that do not tile their chain", n)
	}
	// Positions as the tamperings address them: the event at position p of
	// wf is element p - wseq + 1 of the run that holds p.
	const holds = `workflow_id = 'wf' AND wseq <= %[1]d AND %[1]d < wseq + cardinality(event_ids)`
	for _, layout := range []struct{ name, sql string }{{"one run per event", splitRuns}, {"one run per chain", mergeRuns}} {
		for _, tc := range []struct {
			name   string
			tamper []string
			seq    int64
		}{
			{"a link's hash", []string{fmt.Sprintf(`UPDATE event_links SET hashes[5 - wseq + 1] = repeat('0', 64) WHERE `+holds, 5)}, 5},
			{"a body linked in event_links", []string{fmt.Sprintf(`UPDATE event_packs p SET owners[array_position(p.event_ids, l.id)] = 'mallory'
				FROM (SELECT event_ids[3 - wseq + 1] AS id FROM event_links WHERE `+holds+`) l WHERE l.id = ANY(p.event_ids)`, 3)}, 3},
			{"a body of events linked in event_links", []string{tgpostgres.UnpackBodiesSQL, fmt.Sprintf(`UPDATE events SET owner = 'mallory'
				WHERE event_id = (SELECT event_ids[4 - wseq + 1] FROM event_links WHERE `+holds+`)`, 4)}, 4},
			{"a run's prev_hash", []string{fmt.Sprintf(`UPDATE event_links SET prev_hash = repeat('0', 64)
				WHERE workflow_id = 'wf' AND wseq = (SELECT MAX(wseq) FROM event_links WHERE `+holds+`)`, 7)}, 0},
		} {
			t.Run(layout.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				url, conn := chains(t)
				execAll(t, conn, layout.sql)
				if v, _ := openStore(t, url); true {
					if _, err := v.VerifyHistory(context.Background()); err != nil {
						t.Fatalf("%s, untampered: %v", layout.name, err)
					}
				}
				execAll(t, conn, tc.tamper...)
				v, _ := openStore(t, url)
				rep, err := v.VerifyHistory(context.Background())
				want := tc.seq
				if want == 0 { // the first event of the run that holds 7
					var first int64
					if err := conn.QueryRow(context.Background(), fmt.Sprintf(`SELECT wseq FROM event_links WHERE `+holds, 7)).Scan(&first); err != nil {
						t.Fatal(err)
					}
					want = first
				}
				if !errors.Is(err, tg.ErrBrokenChain) || rep.Broken == nil || rep.Broken.WorkflowID != "wf" || rep.Broken.Seq != want {
					t.Fatalf("after tampering with %s: %v %+v, want broken at wf %d", tc.name, err, rep.Broken, want)
				}
			})
		}
	}
	// A link deleted: a gap in the chain. One run per event: the run of
	// position 2 deleted, broken at 3; one run per chain: its element 2
	// removed, so that event 3 stands at 2, broken at 2. Two links swapped
	// (positions 6 and 7): broken at 6.
	for _, tc := range []struct {
		layout string
		tamper []string
		seq    int64
	}{
		{splitRuns, []string{`DELETE FROM event_links WHERE workflow_id = 'wf' AND wseq = 2`}, 3},
		{mergeRuns, []string{`UPDATE event_links SET event_ids = event_ids[:1] || event_ids[3:], hashes = hashes[:1] || hashes[3:]
			WHERE workflow_id = 'wf'`}, 2},
		{splitRuns, []string{
			`UPDATE event_links SET wseq = -1 WHERE workflow_id = 'wf' AND wseq = 6`,
			`UPDATE event_links SET wseq = 6 WHERE workflow_id = 'wf' AND wseq = 7`,
			`UPDATE event_links SET wseq = 7 WHERE workflow_id = 'wf' AND wseq = -1`}, 6},
		{mergeRuns, []string{`UPDATE event_links SET event_ids = event_ids[:5] || ARRAY[event_ids[7], event_ids[6]] || event_ids[8:],
			hashes = hashes[:5] || ARRAY[hashes[7], hashes[6]] || hashes[8:] WHERE workflow_id = 'wf'`}, 6},
	} {
		url, conn := chains(t)
		execAll(t, conn, tc.layout)
		execAll(t, conn, tc.tamper...)
		v, _ := openStore(t, url)
		rep, err := v.VerifyHistory(context.Background())
		if !errors.Is(err, tg.ErrBrokenChain) || rep.Broken == nil || rep.Broken.WorkflowID != "wf" || rep.Broken.Seq != tc.seq {
			t.Fatalf("after %s: %v %+v, want broken at wf %d", tc.tamper, err, rep.Broken, tc.seq)
		}
	}
}

// An event body inserted behind the store's back (a copy of a completion,
// owner changed, neither linked nor journaled) would show in its task's
// events; verification names it, on both layouts of the runs, whether it
// is a row of events or a pack of its own (migration 0029).
func TestForgedEventBodyBreaksVerification(t *testing.T) {
	t.Parallel()
	forgeRow := []string{tgpostgres.UnpackBodiesSQL, `INSERT INTO events (workflow_id, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash,
			hash_version, actor_kind, actor_name, actor_principal, task_state, content, task_seq)
		SELECT workflow_id, task_id, kind, 'mallory', generation, at_ms + 1, detail, '', '', hash_version, actor_kind, actor_name,
			actor_principal, task_state, content, task_seq FROM events WHERE workflow_id = 'wf' ORDER BY event_id DESC LIMIT 1`}
	forgePack := []string{`INSERT INTO event_packs (pack_id, workflow_id, event_ids, task_seqs, task_ids, kinds, owners, generations, ats, details,
			hash_versions, actor_kinds, actor_names, actor_principals, task_states, contents)
		SELECT n.id, p.workflow_id, ARRAY[n.id], p.task_seqs[k:k], p.task_ids[k:k], p.kinds[k:k], ARRAY['mallory'], p.generations[k:k],
			ARRAY[p.ats[k] + 1], p.details[k:k], p.hash_versions[k:k], p.actor_kinds[k:k], p.actor_names[k:k], p.actor_principals[k:k],
			p.task_states[k:k], p.contents[k:k]
		FROM (SELECT * FROM event_packs WHERE workflow_id = 'wf' ORDER BY pack_id DESC LIMIT 1) p,
			LATERAL (SELECT cardinality(p.event_ids) AS k) c, (SELECT nextval('events_event_id_seq') AS id) n`}
	for _, tc := range []struct {
		layout string
		forge  []string
	}{{splitRuns, forgeRow}, {mergeRuns, forgeRow}, {splitRuns, forgePack}, {mergeRuns, forgePack}} {
		url, conn := chains(t)
		execAll(t, conn, tc.layout)
		execAll(t, conn, tc.forge...)
		forged := count(t, conn, `SELECT last_value FROM events_event_id_seq`)
		v, _ := openStore(t, url)
		rep, err := v.VerifyHistory(context.Background())
		if !errors.Is(err, tg.ErrBrokenChain) || rep.Broken == nil || rep.Broken.WorkflowID != "wf" ||
			rep.Broken.EventID != forged || !strings.Contains(err.Error(), fmt.Sprintf("event id %d", forged)) {
			t.Fatalf("after inserting a body no chain holds (event %d): %v %+v, want it named broken in wf", forged, err, rep.Broken)
		}
	}
}

// undoLinkRuns undoes migrations 0021 (tgpostgres.UndoEventsByTaskSeq) to 0019: each
// run of event_links becomes the per-event links of schema 18. (0020 is a
// no-op on PostgreSQL: the version set here undoes it.)
var undoLinkRuns = append(slices.Clone(tgpostgres.UndoEventsByTaskSeq), []string{
	`CREATE TABLE event_links_17 (event_id BIGINT NOT NULL, wseq BIGINT NOT NULL, workflow_id TEXT NOT NULL,
		prev_hash TEXT NOT NULL, hash TEXT NOT NULL)`,
	`INSERT INTO event_links_17 (event_id, wseq, workflow_id, prev_hash, hash)
		SELECT u.id, r.wseq + u.o - 1, r.workflow_id, COALESCE(lag(u.h) OVER (PARTITION BY r.workflow_id, r.wseq ORDER BY u.o), r.prev_hash), u.h
		FROM event_links r, unnest(r.event_ids, r.hashes) WITH ORDINALITY AS u(id, h, o)`,
	`DROP TABLE event_links`,
	`ALTER TABLE event_links_17 RENAME TO event_links`,
	`ALTER TABLE event_links ADD PRIMARY KEY (workflow_id, wseq)`,
	`CREATE UNIQUE INDEX event_links_by_event ON event_links (event_id)`,
	`UPDATE schema_version SET version = 18`,
}...)

// A database of schema 18, its links one row per event, migrates to 0019
// and verifies: each link becomes a run of one event; new work is linked
// in runs after them.
func TestMigrationKeepsLinksOfSchema18Verifying(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, conn := chains(t)
	execAll(t, conn, undoLinkRuns...)
	if n := count(t, conn, `SELECT COUNT(*) FROM event_links`); n != 18 {
		t.Fatalf("%d links of schema 18, want 18", n)
	}
	v, closeV := openStore(t, url)
	if rep, err := v.VerifyHistory(ctx); err != nil || rep.Events != 18 {
		t.Fatalf("after the migration: %v %+v, want 18 events verified", err, rep)
	}
	if n := count(t, conn, `SELECT COUNT(*) FROM event_links WHERE cardinality(event_ids) = 1`); n != 18 {
		t.Errorf("%d runs of one event after the migration, want the 18 links of before", n)
	}
	runWorkflow(t, v, "more", 1)
	runWorkflow(t, v, "new", 2)
	closeV()
	v, _ = openStore(t, url)
	if rep, err := v.VerifyHistory(ctx); err != nil || rep.Events != 27 {
		t.Fatalf("after new work: %v %+v, want 27 events", err, rep)
	}
	if n := count(t, conn, `SELECT SUM(cardinality(event_ids)) FROM event_links`); n != 27 {
		t.Errorf("%d events in runs, want 27", n)
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
	// Back to schema 15 (0019, 0018 and 0017 undone first): links in the
	// events' own rows; the last three events of wf journaled with their
	// bodies, its head before them.
	execAll(t, conn, undoLinkRuns...)
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
	if n := count(t, conn, `SELECT SUM(cardinality(event_ids)) FROM event_links`); n != 3+3 {
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

// rejournalLastThree turns the last three events of chains' wf (its runs
// split, one event each) back into journaled ones, its head before them:
// their runs deleted (d: their ids), and insert, a statement over d,
// journals them in the form of the schema under test.
func rejournalLastThree(insert string) []string {
	return []string{`UPDATE workflows w SET event_count = w.event_count - 3,
			head_hash = (SELECT l.hashes[1] FROM event_links l WHERE l.workflow_id = 'wf' AND l.wseq = w.event_count - 3)
			WHERE workflow_id = 'wf'`,
		`WITH d AS (DELETE FROM event_links l WHERE l.workflow_id = 'wf'
				AND l.wseq > (SELECT event_count FROM workflows WHERE workflow_id = 'wf') RETURNING l.event_ids[1] AS id)
			` + insert}
}

// linkMigrated opens a store on a database of chains with wf's last three
// events journaled in an older schema's form (rejournalLastThree): the
// store migrates, its verification links them, and all 18 events of the
// 2 workflows verify with no journal row left; then it runs workflow
// "new" of 2 tasks and closes.
func linkMigrated(t *testing.T, url string, conn *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	v, closeV := openStore(t, url) // migrates; its reads link first
	rep, err := v.VerifyHistory(ctx)
	if err != nil || rep.Events != 18 || rep.Workflows != 2 {
		t.Fatalf("after the migration: %v %+v, want 18 events of 2 workflows verified", err, rep)
	}
	if n := count(t, conn, `SELECT COUNT(*) FROM event_journal`); n != 0 {
		t.Errorf("%d journal rows left after verifying", n)
	}
	runWorkflow(t, v, "new", 2)
	closeV()
}

// A database of schema 22 (before 0023) with events
// still journaled as pointers (one journal row per event, journal_id its
// id) migrates: each becomes a row of one event, which the next linker
// links onto the same chain, and every event verifies.
func TestMigrationLinksJournalOfSchema22(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, conn := chains(t)
	execAll(t, conn, splitRuns)
	execAll(t, conn, tgpostgres.UndoJournalRows...)
	execAll(t, conn, rejournalLastThree(`INSERT INTO event_journal (journal_id, workflow_id) SELECT id, 'wf' FROM d ORDER BY id`)...)
	if n := count(t, conn, `SELECT COUNT(*) FROM event_journal`); n != 3 {
		t.Fatalf("%d pointers journaled in schema 22, want 3", n)
	}
	linkMigrated(t, url, conn)
	v, _ := openStore(t, url)
	if rep, err := v.VerifyHistory(ctx); err != nil || rep.Events != 24 {
		t.Fatalf("after new work: %v %+v, want 24 events", err, rep)
	}
	if n := count(t, conn, `SELECT SUM(cardinality(event_ids)) FROM event_links`); n != 24 {
		t.Errorf("%d events in runs, want 24", n)
	}
}

// TestLinkRunHashesUncompressed: event_links.hashes is stored EXTERNAL
// (migration 0028): PostgreSQL never tries to compress a run's hashes,
// random hex that never compresses, and that the attempt cost every run a
// pglz pass over. What is stored cannot show the attempt (it fails and the
// value is stored as it was), so the column's storage is what is checked;
// and a run too large to stay in its row is stored out of line,
// uncompressed, and the history verifies through it.
func TestLinkRunHashesUncompressed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, conn := createBigClosed(t, 64)
	// The TOAST threshold is about 2 KB: 64 hashes of 64 hex digits are
	// past it, so the value was a candidate for compression.
	var size int64
	var method *string
	if err := conn.QueryRow(ctx, `SELECT pg_column_size(hashes), pg_column_compression(hashes) FROM event_links
		WHERE workflow_id = 'big' ORDER BY pg_column_size(hashes) DESC LIMIT 1`).Scan(&size, &method); err != nil {
		t.Fatal(err)
	}
	if size < 64*64 || method != nil {
		t.Errorf("the largest run's hashes take %d bytes, compressed by %v; want at least %d bytes, uncompressed", size, method, 64*64)
	}
	var storage string
	if err := conn.QueryRow(ctx, `SELECT attstorage::text FROM pg_attribute WHERE attrelid = 'event_links'::regclass AND attname = 'hashes'`).Scan(&storage); err != nil {
		t.Fatal(err)
	}
	if storage != "e" {
		t.Errorf("event_links.hashes has storage %q, want e (EXTERNAL: out of line, never compressed)", storage)
	}
	wantVerifiesReopened(t, url, 64)
}

// TestPacksCompressWithLZ4: the arrays of event_packs and the event ids of
// event_links are compressed with lz4 (migration 0030), which costs the
// writers' statement less server time than pglz, on a server built with
// lz4; on one without, the migration leaves them to pglz. Packs of a
// 64-task creation are past the TOAST threshold: each compressed value is
// lz4, none pglz, and the history verifies through them.
func TestPacksCompressWithLZ4(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, conn := createBigClosed(t, 64)
	want := "l"
	if _, err := conn.Exec(ctx, `CREATE TEMP TABLE lz4_probe (v text COMPRESSION lz4)`); err != nil {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "0A000" {
			t.Fatalf("probe for lz4: %v", err)
		}
		want = "" // a server without lz4: the columns keep the default, pglz
	}
	rows, err := conn.Query(ctx, `SELECT attrelid::regclass::text || '.' || attname, attcompression::text FROM pg_attribute
		WHERE (attrelid = 'event_packs'::regclass AND atttypid::regtype::text LIKE '%[]')
			OR (attrelid = 'event_links'::regclass AND attname = 'event_ids')`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Column, Method string }])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 15 {
		t.Errorf("%d array columns of event_packs and event_links.event_ids, want 15: %v", len(got), got)
	}
	for _, c := range got {
		if c.Method != want {
			t.Errorf("%s has compression %q, want %q", c.Column, c.Method, want)
		}
	}
	if want == "" {
		return
	}
	var lz4, pglz int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_column_compression(contents) = 'lz4'),
		count(*) FILTER (WHERE pg_column_compression(contents) = 'pglz') FROM event_packs WHERE workflow_id = 'big'`).Scan(&lz4, &pglz); err != nil {
		t.Fatal(err)
	}
	if lz4 == 0 || pglz != 0 {
		t.Errorf("the creation's packs: %d with contents compressed by lz4, %d by pglz; want some lz4 and no pglz", lz4, pglz)
	}
	wantVerifiesReopened(t, url, 64)
}
