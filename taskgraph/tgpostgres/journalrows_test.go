package tgpostgres

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// journalRow is one row of event_journal.
type journalRow struct {
	id     int64
	wf     string
	events []int64
}

func journalRows(t *testing.T, d *Driver) []journalRow {
	t.Helper()
	ctx := testCtx(t)
	rows, err := d.pool.Query(ctx, `SELECT journal_id, workflow_id, event_ids FROM event_journal ORDER BY journal_id, workflow_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []journalRow
	for rows.Next() {
		var r journalRow
		if err := rows.Scan(&r.id, &r.wf, &r.events); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// journalEnv is a driver with workflows w1, w2, w3 and, journaled by one
// JournalEvents call, a1 (w1), b1 (w2), a2 (w1), c1 (w3), b2 (w2).
func journalEnv(t *testing.T) (*Driver, map[string]int64) {
	t.Helper()
	ctx := testCtx(t)
	url := pgtest.URL(t)
	d := open(t, url, Options{})
	if _, err := d.pool.Exec(ctx, `INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms)
		VALUES ('w1', 1, 1), ('w2', 1, 1), ('w3', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	ev := func(wf, kind string) tgdriver.EventRow {
		return tgdriver.EventRow{WorkflowID: wf, TaskID: wf + ".t", Kind: kind, AtMS: 1, Detail: "{}", HashVersion: 2}
	}
	evs := []tgdriver.EventRow{ev("w1", "a1"), ev("w2", "b1"), ev("w1", "a2"), ev("w3", "c1"), ev("w2", "b2")}
	if err := d.Write(ctx, func(tx tgdriver.Tx) error { return tx.JournalEvents(ctx, evs) }); err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	rows, err := d.pool.Query(ctx, `SELECT kind, event_id FROM (`+BodiesSQL+`) b`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var id int64
		if err := rows.Scan(&k, &id); err != nil {
			t.Fatal(err)
		}
		ids[k] = id
	}
	return d, ids
}

// journaledByKind reads every journaled event of the workflows wfs
// (JournaledEvents) and keys them by kind.
func journaledByKind(t *testing.T, d *Driver, wfs ...string) map[string]tgdriver.EventRow {
	t.Helper()
	ctx := testCtx(t)
	byKind := map[string]tgdriver.EventRow{}
	if err := d.Write(ctx, func(tx tgdriver.Tx) error {
		evs, err := tx.JournaledEvents(ctx, wfs, 100)
		for _, e := range evs {
			byKind[e.Kind] = e
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return byKind
}

// kinds names evs by kind.
func kinds(evs []tgdriver.EventRow) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

// chained links evs onto their workflows' empty chains as a linker would.
func chained(evs []tgdriver.EventRow) []tgdriver.EventRow {
	out := slices.Clone(evs)
	n := map[string]int64{}
	head := map[string]string{}
	for i := range out {
		wf := out[i].WorkflowID
		n[wf]++
		out[i].Seq, out[i].PrevHash, out[i].Hash = n[wf], head[wf], fmt.Sprintf("%s-%d", wf, n[wf])
		head[wf] = out[i].Hash
	}
	return out
}

// TestJournalOneRowPerWorkflow: one JournalEvents call (a writer's
// statement) journals one row per workflow, its journal_id the first
// event's id and its array the events' ids in order; JournaledEvents reads
// whole rows, their events in id order.
func TestJournalOneRowPerWorkflow(t *testing.T) {
	ctx := testCtx(t)
	d, id := journalEnv(t)
	want := []journalRow{
		{id["a1"], "w1", []int64{id["a1"], id["a2"]}},
		{id["b1"], "w2", []int64{id["b1"], id["b2"]}},
		{id["c1"], "w3", []int64{id["c1"]}},
	}
	got := journalRows(t, d)
	if !slices.EqualFunc(got, want, func(a, b journalRow) bool { return a.id == b.id && a.wf == b.wf && slices.Equal(a.events, b.events) }) {
		t.Fatalf("journal rows %+v, want one per workflow %+v", got, want)
	}
	journalOf := map[int64]int64{}
	for _, r := range want {
		for _, e := range r.events {
			journalOf[e] = r.id
		}
	}
	for _, c := range []struct {
		wfs   []string
		limit int
		want  []string
	}{
		{[]string{"w1", "w2", "w3"}, 100, []string{"a1", "b1", "a2", "c1", "b2"}},
		// The limit falls within w1's row: the row whole, nothing more.
		{[]string{"w1", "w2", "w3"}, 1, []string{"a1", "a2"}},
		{[]string{"w1", "w2", "w3"}, 2, []string{"a1", "a2"}},
		{[]string{"w1", "w2", "w3"}, 3, []string{"a1", "b1", "a2", "b2"}},
		{[]string{"w3", "w2"}, 1, []string{"b1", "b2"}},
		{[]string{"w3"}, 1, []string{"c1"}},
	} {
		err := d.Write(ctx, func(tx tgdriver.Tx) error {
			evs, err := tx.JournaledEvents(ctx, c.wfs, c.limit)
			if err != nil {
				return err
			}
			if !slices.Equal(kinds(evs), c.want) {
				t.Errorf("JournaledEvents(%v, %d) = %v, want %v", c.wfs, c.limit, kinds(evs), c.want)
			}
			// JournaledEventIDs names the same events in the same order,
			// and JournaledBodies reads them back as JournaledEvents did.
			r := tx.(tgdriver.JournalIDReader)
			refs, err := r.JournaledEventIDs(ctx, c.wfs, c.limit)
			if err != nil {
				return err
			}
			wantRefs := []tgdriver.EventRef{}
			for _, e := range evs {
				wantRefs = append(wantRefs, tgdriver.EventRef{EventID: e.EventID, WorkflowID: e.WorkflowID, JournalID: journalOf[e.EventID]})
			}
			if !slices.Equal(append([]tgdriver.EventRef{}, refs...), wantRefs) {
				t.Errorf("JournaledEventIDs(%v, %d) = %v, want %v (each with its journal row's id)", c.wfs, c.limit, refs, wantRefs)
			}
			// Refs given in reverse, and ones of no journaled event (an
			// unknown id in a known row, an unknown row), are read in id
			// order, the others left out.
			ask := append(slices.Clone(wantRefs), tgdriver.EventRef{EventID: 1 << 40, WorkflowID: "w1", JournalID: id["a1"]},
				tgdriver.EventRef{EventID: 1 << 41, WorkflowID: "w1", JournalID: 1 << 41})
			slices.Reverse(ask)
			bodies, err := r.JournaledBodies(ctx, ask)
			if err != nil {
				return err
			}
			if !slices.Equal(bodies, evs) {
				t.Errorf("JournaledBodies(%v) = %+v, want %+v (a ref without a journaled event left out)", ask, bodies, evs)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestJournalRowLinkedOnceWhole: LinkJournaled links a journal row's
// events all together or not at all, and a duplicated journal row (two
// rows holding the same events) links none of them twice: the link fails
// with ErrNoRows and leaves the journal and the chains as they were.
func TestJournalRowLinkedOnceWhole(t *testing.T) {
	ctx := testCtx(t)
	d, id := journalEnv(t)
	byKind := journaledByKind(t, d, "w1", "w2", "w3")
	pick := func(ks ...string) []tgdriver.EventRow {
		var out []tgdriver.EventRow
		for _, k := range ks {
			out = append(out, byKind[k])
		}
		return chained(out)
	}
	link := func(evs []tgdriver.EventRow) error {
		return d.Write(ctx, func(tx tgdriver.Tx) error {
			if _, err := tx.LockChains(ctx, []string{"w1", "w2", "w3"}); err != nil {
				return err
			}
			return tx.LinkJournaled(ctx, evs)
		})
	}
	before := journalRows(t, d)
	for _, c := range []struct {
		name string
		evs  []tgdriver.EventRow
	}{
		{"part of w1's row", pick("a1")},
		{"the rest of w1's row", pick("a2")},
		{"w2's row and part of w1's", pick("a1", "b1", "b2")},
		{"w1's row twice", pick("a1", "a2", "a1", "a2")},
	} {
		if err := link(c.evs); !errors.Is(err, tgdriver.ErrNoRows) {
			t.Errorf("linking %s: %v, want ErrNoRows", c.name, err)
		}
	}
	// A forged copy of w1's row, then an attempt to link through both.
	if _, err := d.pool.Exec(ctx, `INSERT INTO event_journal (journal_id, workflow_id, event_ids)
		SELECT journal_id, workflow_id, event_ids FROM event_journal WHERE workflow_id = 'w1'`); err != nil {
		t.Fatal(err)
	}
	var dup []tgdriver.EventRow
	if err := d.Write(ctx, func(tx tgdriver.Tx) error {
		var err error
		dup, err = tx.JournaledEvents(ctx, []string{"w1"}, 100)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(dup) != 4 {
		t.Errorf("JournaledEvents(w1) with a duplicated row = %v, want each event of both rows", kinds(dup))
	}
	for _, evs := range [][]tgdriver.EventRow{chained(dup), pick("a1", "a2")} {
		if err := link(evs); !errors.Is(err, tgdriver.ErrNoRows) {
			t.Errorf("linking %v through a duplicated row: %v, want ErrNoRows", kinds(evs), err)
		}
	}
	if _, err := d.pool.Exec(ctx, `DELETE FROM event_journal WHERE ctid = (SELECT max(ctid) FROM event_journal WHERE workflow_id = 'w1')`); err != nil {
		t.Fatal(err)
	}
	if got := journalRows(t, d); len(got) != len(before) {
		t.Fatalf("journal rows %+v after failed links, want %+v", got, before)
	}
	var links int64
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM event_links`).Scan(&links); err != nil || links != 0 {
		t.Fatalf("%d runs of links after failed links (%v), want none", links, err)
	}
	// Whole rows link, and once.
	if err := link(pick("a1", "b1", "a2", "b2")); err != nil {
		t.Fatalf("linking w1's and w2's rows: %v", err)
	}
	if got := journalRows(t, d); len(got) != 1 || got[0].id != id["c1"] {
		t.Errorf("journal rows %+v after linking w1 and w2, want w3's", got)
	}
	again := pick("a1", "a2")
	for i := range again {
		again[i].Seq += 2
	}
	again[0].PrevHash = "w1-2"
	if err := link(again); err == nil {
		t.Errorf("linking w1's row again succeeded")
	}
}

// TestApplySetsJournaledEventIDs: an Apply that journals events sets, in
// place, each event's EventID to the id of the row it was written to,
// whatever the order of their workflows (tgdriver.JournalIDReader), so
// that the linker can take their bodies from the events it is kicked with.
func TestApplySetsJournaledEventIDs(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	d := open(t, pgtest.URL(t), Options{})
	if _, err := d.pool.Exec(ctx, `INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms)
		VALUES ('w1', 1, 1), ('w2', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	ev := func(wf, kind string) tgdriver.EventRow {
		return tgdriver.EventRow{WorkflowID: wf, TaskID: wf + ".t", Kind: kind, AtMS: 1, Detail: `{"k":"` + kind + `"}`, HashVersion: 2}
	}
	evs := []tgdriver.EventRow{ev("w2", "b1"), ev("w1", "a1"), ev("w2", "b2"), ev("w1", "a2"), ev("w2", "b3")}
	if err := d.Write(ctx, func(tx tgdriver.Tx) error {
		err := tx.Apply(ctx, tgdriver.Apply{Events: evs, Journal: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	byKind := journaledByKind(t, d, "w1", "w2")
	for _, e := range evs {
		if s, ok := byKind[e.Kind]; !ok || e.EventID == 0 || e != s {
			t.Errorf("event %s after Apply: %+v; the row it was written to: %+v", e.Kind, e, s)
		}
	}
}
