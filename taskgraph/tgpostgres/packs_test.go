package tgpostgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
)

// TestEventPacksBounded: a creation of 1,000 tasks (one writer statement)
// writes its bodies in packs of at most 16 events (migration 0029), each
// pack of one workflow, its arrays of one length, its ids ascending from
// its pack_id, stored MAIN, and the task seqs' GIN index has no pending
// list; the chain verifies and a task's history is read from its pack.
func TestEventPacksBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, s, closeStore := createBig(t, 1000)
	task, err := s.TaskByNode(ctx, "big", "n500")
	if err != nil {
		t.Fatal(err)
	}
	if evs, err := s.TaskEvents(ctx, task.TaskID); err != nil || len(evs) != 1 || evs[0].TaskID != task.TaskID {
		t.Fatalf("TaskEvents(n500) = %+v %v, want its creation", evs, err)
	}
	closeStore()
	conn := connect(t, url)
	if n := count(t, conn, `SELECT COUNT(*) FROM events`); n != 0 {
		t.Errorf("%d bodies in rows of events, want every one in a pack", n)
	}
	if n := count(t, conn, `SELECT SUM(cardinality(event_ids)) FROM event_packs WHERE workflow_id = 'big'`); n != 1000 {
		t.Errorf("%d events in big's packs, want 1000", n)
	}
	if n := count(t, conn, `SELECT MAX(cardinality(event_ids)) FROM event_packs`); n != 16 {
		t.Errorf("the largest pack holds %d events, want 16 (packMax)", n)
	}
	if n := count(t, conn, `SELECT COUNT(*) FROM event_packs p WHERE p.pack_id <> p.event_ids[1]
		OR p.event_ids <> (SELECT array_agg(x ORDER BY x) FROM (SELECT DISTINCT x FROM unnest(p.event_ids) x) d)
		OR cardinality(p.task_seqs) <> cardinality(p.event_ids) OR cardinality(p.contents) <> cardinality(p.event_ids)
		OR cardinality(p.task_ids) <> cardinality(p.event_ids) OR cardinality(p.ats) <> cardinality(p.event_ids)`); n != 0 {
		t.Errorf("%d packs whose id is not their first event's, whose ids do not ascend, or whose arrays differ in length", n)
	}
	if n := count(t, conn, `SELECT COUNT(*) FROM pg_attribute WHERE attrelid = 'event_packs'::regclass AND attnum > 0
		AND NOT attisdropped AND attndims > 0 AND attstorage <> 'm'`); n != 0 {
		t.Errorf("%d array columns of event_packs not stored MAIN", n)
	}
	var opts []string
	if err := conn.QueryRow(ctx, `SELECT COALESCE(reloptions, '{}') FROM pg_class WHERE relname = 'event_packs_by_task_seq'`).Scan(&opts); err != nil {
		t.Fatal(err)
	}
	if len(opts) != 1 || opts[0] != "fastupdate=off" {
		t.Errorf("event_packs_by_task_seq options %v, want [fastupdate=off]", opts)
	}
}

// A database of schema 28 (before packs) with events still journaled in
// rows of events migrates: the journal rows that name them are linked by
// the next linker onto the same chains, new events go to packs, and
// every event verifies, old and new.
func TestMigrationLinksJournalOfSchema28(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, conn := chains(t)
	execAll(t, conn, tgpostgres.UndoEventPacks...)
	// wf's last three events back in the journal, in one row (as a
	// writer's statement of schema 28 wrote them), its head before them.
	execAll(t, conn, splitRuns)
	execAll(t, conn, rejournalLastThree(
		`INSERT INTO event_journal (journal_id, workflow_id, event_ids) SELECT MIN(id), 'wf', array_agg(id ORDER BY id) FROM d`)...)
	if n := count(t, conn, `SELECT SUM(cardinality(event_ids)) FROM event_journal`); n != 3 {
		t.Fatalf("%d events journaled in schema 28, want 3", n)
	}
	linkMigrated(t, url, conn)
	if n := count(t, conn, `SELECT COUNT(*) FROM events`); n != 18 {
		t.Errorf("%d bodies in rows of events, want the 18 of schema 28", n)
	}
	if n := count(t, conn, `SELECT SUM(cardinality(event_ids)) FROM event_packs`); n != 6 {
		t.Errorf("%d bodies in packs, want the 6 of new", n)
	}
	v, _ := openStore(t, url)
	if rep, err := v.VerifyHistory(ctx); err != nil || rep.Events != 24 {
		t.Fatalf("after new work: %v %+v, want 24 events", err, rep)
	}
	// A task's history reads both: wf's tasks in rows, new's in packs.
	for _, c := range []struct{ wf, node string }{{"wf", "n3"}, {"new", "n1"}} {
		task, err := v.TaskByNode(ctx, c.wf, c.node)
		if err != nil {
			t.Fatal(err)
		}
		if evs, err := v.TaskEvents(ctx, task.TaskID); err != nil || len(evs) != 3 || evs[2].Seq == 0 {
			t.Errorf("TaskEvents(%s/%s) = %+v %v, want its 3 events, linked", c.wf, c.node, evs, err)
		}
	}
	// Pruning removes a workflow's bodies wherever they are: every
	// workflow is finished, and the rest of the history still verifies.
	if res, err := v.Prune(ctx, time.Now().Add(time.Hour)); err != nil || len(res.Workflows) != 3 {
		t.Fatalf("Prune: %+v %v, want the 3 workflows pruned", res, err)
	}
	if n := count(t, conn, `SELECT (SELECT COUNT(*) FROM events) + (SELECT COUNT(*) FROM event_packs) + (SELECT COUNT(*) FROM event_links)`); n != 0 {
		t.Errorf("%d bodies and runs left after pruning every workflow, want none", n)
	}
	if _, err := v.VerifyHistory(ctx); err != nil {
		t.Fatalf("VerifyHistory after pruning: %v", err)
	}
}
