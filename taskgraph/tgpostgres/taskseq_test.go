package tgpostgres

import (
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"slices"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// UndoJournalRows turns a database of this package back to schema 22
// (0027 undone by UndoTaskRules, then 0023; 0024 to 0026 and 0028 apply
// again as they are): a pointer row per journaled event, its journal_id
// the event's id. Exported for the tests of package tgpostgres_test.
var UndoJournalRows = append(slices.Clone(UndoTaskRules),
	`INSERT INTO event_journal (journal_id, workflow_id, event_ids)
		SELECT u.id, j.workflow_id, ARRAY[u.id] FROM event_journal j, unnest(j.event_ids) AS u(id) WHERE cardinality(j.event_ids) > 1`,
	`DELETE FROM event_journal WHERE cardinality(event_ids) > 1`,
	`ALTER TABLE event_journal DROP COLUMN event_ids`,
	`UPDATE schema_version SET version = 22`,
)

// UndoEventsByTaskSeq turns a database of this package back to schema 20:
// no apply_guard (migration 0022 undone), a task's events indexed by its
// id, no task_seq (0021 undone), after UndoJournalRows (0023). Exported
// for the tests of package tgpostgres_test.
var UndoEventsByTaskSeq = append(slices.Clone(UndoJournalRows),
	`DROP FUNCTION apply_guard(bigint, bigint)`,
	`DROP INDEX events_by_task_seq`,
	`ALTER TABLE events DROP COLUMN task_seq`,
	`CREATE INDEX events_by_task ON events (task_id, event_id)`,
	`UPDATE schema_version SET version = 20`,
)

// TestTaskEventsBySeq: every event takes its task's seq in its own INSERT
// (linked by AppendEvents or journaled by the hot path's statement), 0 for
// a task id with no task row, and the readers of a task's events
// (TaskEvents, LastEventOfGeneration) find them by it, before and after a
// database of schema 20 (events indexed by task id) migrates: its events
// take their tasks' seqs.
func TestTaskEventsBySeq(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	d := open(t, url, Options{})
	seqs := map[string]int64{"wf-ghost": 0}
	for _, n := range []string{"a", "b"} {
		seqs["wf-"+n] = addTask(t, d, "wf", n, "pending")
	}
	var evs []tgdriver.EventRow
	for i, id := range []string{"wf-a", "wf-b", "wf-ghost", "wf-a", "wf-b", "wf-a"} {
		evs = append(evs, tgdriver.EventRow{WorkflowID: "wf", Seq: int64(i + 1), TaskID: id, Kind: fmt.Sprint("k", i+1),
			Generation: 1, AtMS: int64(100 + i), Detail: `{}`, PrevHash: fmt.Sprint("h", i), Hash: fmt.Sprint("h", i+1), HashVersion: 2})
	}
	evs[0].PrevHash = ""
	err := d.Write(ctx, func(tx tgdriver.Tx) error {
		if err := tx.AppendEvents(ctx, evs[:3]); err != nil {
			return err
		}
		return tx.JournalEvents(ctx, evs[3:])
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"wf-a": "k1 k4 k6", "wf-b": "k2 k5", "wf-ghost": "k3", "none": ""}
	c := raw(t, url)
	check := func(when string, r tgdriver.Reads) {
		t.Helper()
		for id, kinds := range want {
			evs, err := r.TaskEvents(ctx, id)
			var got []string
			for _, e := range evs {
				got = append(got, e.Kind)
			}
			if err != nil || strings.Join(got, " ") != kinds {
				t.Errorf("%s: TaskEvents(%s) = %q %v, want %q", when, id, got, err, kinds)
			}
			last := kinds[strings.LastIndex(kinds, " ")+1:]
			if kind, _, ok, err := r.LastEventOfGeneration(ctx, id, 1); err != nil || kind != last || ok != (last != "") {
				t.Errorf("%s: LastEventOfGeneration(%s) = %q %v %v, want %q", when, id, kind, ok, err, last)
			}
		}
		rows, err := c.Query(ctx, `SELECT task_id, task_seq FROM (`+BodiesSQL+`) b`)
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
				t.Errorf("%s: event of %s has task_seq %d, want %d", when, id, seq, seqs[id])
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	check("new database", d.Reads())
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	execAll(t, c, UndoEventsByTaskSeq...)
	d = open(t, url, Options{})
	check("migrated from schema 20", d.Reads())
}

// TestTaskEventsPlanBySeq: with many tasks and events (analyzed), both
// readers of a task's events find the task's seq through tasks_task_id_key
// and its events through events_by_task_seq and, in packs (migration
// 0029), through event_packs_by_task_seq, on custom and generic plans,
// never by reading the events or the packs; so reading a task's history
// costs a few index probes however long the store's history is. A
// workflow's bodies and the linker's read-back find their packs through
// event_packs_by_workflow and event_packs_pkey. The hot
// path's INSERT of packs (journalSQLs, on the generic plan the hot rounds
// use), when it is to find the events' seqs, takes each by one probe of
// tasks_task_id_key.
func TestTaskEventsPlanBySeq(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	open(t, url, Options{})
	c := raw(t, url)
	// Half the tasks' events in rows of events, half in packs of five
	// tasks' events (15).
	execAll(t, c,
		`INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms) VALUES ('w', 1, 1)`,
		`INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet, created_at_ms, updated_at_ms)
			SELECT 't-' || i, 'w', 'n' || i, '{}', '[]', 'completed', 3, 0, 1, 1 FROM generate_series(1, 20000) AS i`,
		`INSERT INTO events (workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash, hash_version, task_seq)
			SELECT 'w', NULL, t.task_id, k, '', 1, 1, '{}', '', '', 2, t.seq
			FROM tasks t, unnest(ARRAY['created', 'claimed', 'completed']) AS k WHERE t.seq <= 10000`,
		`WITH b AS (SELECT nextval('events_event_id_seq') AS id, t.seq / 5 AS pack, t.seq, t.task_id, k
				FROM tasks t, unnest(ARRAY['created', 'claimed', 'completed']) WITH ORDINALITY AS u(k, o) WHERE t.seq > 10000 ORDER BY t.seq, o)
		INSERT INTO event_packs (pack_id, workflow_id, event_ids, task_seqs, task_ids, kinds, owners, generations, ats, details,
			hash_versions, actor_kinds, actor_names, actor_principals, task_states, contents)
		SELECT min(id), 'w' || pack % 100, array_agg(id ORDER BY id), array_agg(seq ORDER BY id), array_agg(task_id ORDER BY id),
			array_agg(k ORDER BY id), array_agg(''::text ORDER BY id), array_agg(1::bigint ORDER BY id), array_agg(1::bigint ORDER BY id),
			array_agg('{}'::text ORDER BY id), array_agg(2::bigint ORDER BY id), array_agg(''::text ORDER BY id), array_agg(''::text ORDER BY id),
			array_agg(''::text ORDER BY id), array_agg(''::text ORDER BY id), array_agg(''::text ORDER BY id)
		FROM b GROUP BY pack`,
		`ANALYZE tasks`, `ANALYZE events`, `ANALYZE event_packs`,
	)
	for _, q := range []struct {
		name, sql string
		args      []any
		want      string
	}{
		{"TaskEvents", sqlTaskEvents, []any{"t-77"}, "created claimed completed"},
		{"TaskEvents", sqlTaskEvents, []any{"t-15077"}, "created claimed completed"},
		{"LastEventOfGeneration", sqlLastEventOfGen, []any{"t-77", 1}, "completed"},
		{"LastEventOfGeneration", sqlLastEventOfGen, []any{"t-15077", 1}, "completed"},
	} {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			if _, err := c.Exec(ctx, `SET plan_cache_mode = `+mode); err != nil {
				t.Fatal(err)
			}
			p := explain(t, c, `EXPLAIN `+q.sql, q.args...)
			if !strings.Contains(p, "Index Scan on events_by_task_seq") && !strings.Contains(p, "events_by_task_seq on events") ||
				!strings.Contains(p, "tasks_task_id_key on tasks") || !strings.Contains(p, "Bitmap Index Scan on event_packs_by_task_seq") ||
				strings.Contains(p, "Seq Scan on events") || strings.Contains(p, "Seq Scan on event_packs") {
				t.Errorf("%s, %s: plan\n%s\nwant events_by_task_seq and event_packs_by_task_seq probed at the seq read from tasks_task_id_key, "+
					"no scan of events or packs", q.name, mode, p)
			}
		}
		// The readers find the events, in order, wherever they are.
		rows, err := c.Query(ctx, q.sql, q.args...)
		if err != nil {
			t.Fatal(err)
		}
		kinds, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
			vals, err := row.Values()
			if err != nil {
				return "", err
			}
			return fmt.Sprint(vals[slices.IndexFunc(row.FieldDescriptions(), func(f pgconn.FieldDescription) bool { return f.Name == "kind" })]), nil
		})
		if err != nil || strings.Join(kinds, " ") != q.want {
			t.Errorf("%s(%v) = %q %v, want %q", q.name, q.args, kinds, err, q.want)
		}
	}
	// A workflow's bodies are read through its packs' index, and a
	// linker's read-back of bodies through the packs' primary key: neither
	// reads the packs of the other workflows.
	for _, q := range []struct {
		name, sql, want string
		args            []any
	}{
		{"WorkflowEvents", sqlWorkflowEvents, "event_packs_by_workflow", []any{"w7"}},
		{"JournaledBodies", journaledBodiesSQL, "event_packs_pkey", []any{[]int64{20001, 20002}, []int64{20001}}},
	} {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			if _, err := c.Exec(ctx, `SET plan_cache_mode = `+mode); err != nil {
				t.Fatal(err)
			}
			if p := explain(t, c, `EXPLAIN `+q.sql, q.args...); !strings.Contains(p, q.want) || strings.Contains(p, "Seq Scan on event_packs") {
				t.Errorf("%s, %s: plan\n%s\nwant event_packs read through %s, not scanned", q.name, mode, p, q.want)
			}
		}
	}
	if _, err := c.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `PREPARE journal AS `+journalSQLs[1][0]); err != nil {
		t.Fatal(err)
	}
	args := strings.TrimSuffix(strings.Repeat("NULL, ", 16), ", ")
	if p := explain(t, c, `EXPLAIN EXECUTE journal(`+args+`)`); !strings.Contains(p, "Index Scan using tasks_task_id_key on tasks") ||
		strings.Contains(p, "Seq Scan on tasks") {
		t.Errorf("generic plan of the packs' INSERT:\n%s\nwant each event's task seq read by a probe of tasks_task_id_key", p)
	}
}
