package tgsqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// undoEventsByTaskSeq turns a database back to schema 19: a task's events
// indexed by its id, no task_seq (migration 0020 undone).
var undoEventsByTaskSeq = []string{
	`DROP INDEX events_by_task_seq`,
	`ALTER TABLE events DROP COLUMN task_seq`,
	`CREATE INDEX events_by_task ON events (task_id, event_id)`,
	`UPDATE schema_version SET version = 19`,
}

// A task's events are found through its seq (events_by_task_seq), those
// of a task id without a row through seq 0, before and after a database of
// schema 19 (events indexed by task id) migrates: its events take their
// tasks' seqs.
func TestTaskEventsBySeq(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openTest(t, Options{}, tgdriver.Hooks{})
	path := d.path
	seqs := map[string]int64{}
	write(t, d, func(tx tgdriver.Tx) error {
		for _, n := range []string{"a", "b"} {
			seqs["wf-"+n] = addTask(t, tx, newTask("wf", n))
		}
		var evs []tgdriver.EventRow
		for i, id := range []string{"wf-a", "wf-b", "wf-a", "wf-ghost", "wf-b", "wf-a"} {
			evs = append(evs, tgdriver.EventRow{WorkflowID: "wf", Seq: int64(i + 1), TaskID: id, Kind: fmt.Sprint("k", i+1),
				Generation: 1, AtMS: int64(100 + i), Detail: `{}`, PrevHash: fmt.Sprint("h", i), Hash: fmt.Sprint("h", i+1), HashVersion: 2})
		}
		evs[0].PrevHash = ""
		return tx.AppendEvents(ctx, evs)
	})
	want := map[string]string{"wf-a": "k1 k3 k6", "wf-b": "k2 k5", "wf-ghost": "k4", "none": ""}
	check := func(when string) {
		t.Helper()
		for id, kinds := range want {
			evs, err := d.Reads().TaskEvents(ctx, id)
			var got []string
			for _, e := range evs {
				got = append(got, e.Kind)
			}
			if err != nil || strings.Join(got, " ") != kinds {
				t.Errorf("%s: TaskEvents(%s) = %q %v, want %q", when, id, got, err, kinds)
			}
			last := kinds[strings.LastIndex(kinds, " ")+1:]
			if kind, _, ok, err := d.Reads().LastEventOfGeneration(ctx, id, 1); err != nil || kind != last || ok != (last != "") {
				t.Errorf("%s: LastEventOfGeneration(%s) = %q %v %v, want %q", when, id, kind, ok, err, last)
			}
		}
	}
	check("new database")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range undoEventsByTaskSeq {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	d, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("Open of schema 19: %v", err)
	}
	defer d.Close()
	if err := d.Start(tgdriver.Hooks{}); err != nil {
		t.Fatal(err)
	}
	check("migrated from schema 19")
	rows, err := db.Query(`SELECT task_id, task_seq FROM events`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			t.Fatal(err)
		}
		if seq != seqs[id] {
			t.Errorf("migrated event of %s has task_seq %d, want %d", id, seq, seqs[id])
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// Both readers of a task's events search the index by seq.
	for _, q := range []string{sqlTaskEvents, sqlLastEventOfGen} {
		if plan := strings.Join(queryPlan(t, db, q), "; "); !strings.Contains(plan, "SEARCH events USING INDEX events_by_task_seq (task_seq=?)") {
			t.Errorf("plan of %s: %s, want a search of events_by_task_seq", q, plan)
		}
	}
}
