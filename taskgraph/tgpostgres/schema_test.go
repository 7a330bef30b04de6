package tgpostgres

import (
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	"github.com/graph-engineering/graph-engineering-mcp/schema"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// sqliteOnly lists what the SQLite series has and the PostgreSQL series
// lacks by design, and why; each entry must still be so (the test fails
// on a stale one).
var sqliteOnly = map[string]string{
	// Empty since PostgreSQL's 0021 took SQLite 0020's events.task_seq and
	// events_by_task_seq.
}

// postgresOnly lists what the PostgreSQL series has and the SQLite series
// lacks by design (a column as table.column, or a table), and why; each
// entry must still be so.
var postgresOnly = map[string]string{
	// PostgreSQL's writers journal one row per statement and workflow
	// (0023); SQLite's writers link at once, and its journal, always empty,
	// keeps one body per row.
	"event_journal.event_ids": "journal rows hold their events' ids",
	// PostgreSQL's writers journal bodies in packs (0029): one row per
	// run of up to 16 events of a workflow, not three index entries per
	// event. SQLite's writer has no such cost to save (it links at once).
	"event_packs": "journaled bodies are written in packs",
	// PostgreSQL keeps a task's workflow and node unique in a table of
	// their own (0031), so that a claim's and a completion's new versions
	// of the task (never HOT) enter one index fewer. SQLite updates rows in
	// place and keeps the unique index on tasks.
	"task_nodes": "a task's workflow and node, unique, outside tasks",
}

// TestSchemaMatchesSQLite: the PostgreSQL series has the same tables with
// the same columns and the same indexes as the SQLite series, so the two
// drivers store the same data, but for sqliteOnly and postgresOnly.
func TestSchemaMatchesSQLite(t *testing.T) {
	ctx := testCtx(t)
	lite, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "s.db")+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	tx, err := lite.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	liteSchema, err := tgsqlite.Schema()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := liteSchema.Apply(ctx, schema.SQL(tx)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	rows, err := lite.QueryContext(ctx, `SELECT m.name, p.name FROM sqlite_schema m JOIN pragma_table_xinfo(m.name) p
		WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\_%' ESCAPE '\'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tbl, col string
		if err := rows.Scan(&tbl, &col); err != nil {
			t.Fatal(err)
		}
		want[tbl] = append(want[tbl], col)
	}
	rows.Close()
	var wantIdx []string
	irows, err := lite.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'index' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'`)
	if err != nil {
		t.Fatal(err)
	}
	for irows.Next() {
		var n string
		_ = irows.Scan(&n)
		wantIdx = append(wantIdx, n)
	}
	irows.Close()

	d := open(t, pgtest.URL(t), Options{})
	got := map[string][]string{}
	prow, err := d.pool.Query(ctx, `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()`)
	if err != nil {
		t.Fatal(err)
	}
	for prow.Next() {
		var tbl, col string
		if err := prow.Scan(&tbl, &col); err != nil {
			t.Fatal(err)
		}
		got[tbl] = append(got[tbl], col)
	}
	prow.Close()
	for item := range sqliteOnly {
		tbl, col, isCol := strings.Cut(item, ".")
		switch {
		case isCol && (!slices.Contains(want[tbl], col) || slices.Contains(got[tbl], col)):
			t.Errorf("sqliteOnly lists column %s, but it is not only in the SQLite schema: remove it from the list", item)
		case isCol:
			want[tbl] = slices.DeleteFunc(want[tbl], func(c string) bool { return c == col })
		}
	}
	for item := range postgresOnly {
		tbl, col, isCol := strings.Cut(item, ".")
		if !isCol { // a table
			if _, ok := want[tbl]; ok || got[tbl] == nil {
				t.Errorf("postgresOnly lists table %s, but it is not only in the PostgreSQL schema: remove it from the list", item)
			}
			delete(got, tbl)
			continue
		}
		if !slices.Contains(got[tbl], col) || slices.Contains(want[tbl], col) {
			t.Errorf("postgresOnly lists column %s, but it is not only in the PostgreSQL schema: remove it from the list", item)
		}
		got[tbl] = slices.DeleteFunc(got[tbl], func(c string) bool { return c == col })
	}
	for tbl := range want {
		slices.Sort(want[tbl])
		slices.Sort(got[tbl])
		if !slices.Equal(want[tbl], got[tbl]) {
			t.Errorf("table %s: SQLite columns %v, PostgreSQL %v", tbl, want[tbl], got[tbl])
		}
	}
	for tbl := range got {
		if _, ok := want[tbl]; !ok {
			t.Errorf("table %s is only in the PostgreSQL schema", tbl)
		}
	}
	var gotIdx []string
	xrows, err := d.pool.Query(ctx, `SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()`)
	if err != nil {
		t.Fatal(err)
	}
	for xrows.Next() {
		var n string
		_ = xrows.Scan(&n)
		gotIdx = append(gotIdx, n)
	}
	xrows.Close()
	for item := range sqliteOnly {
		if _, _, isCol := strings.Cut(item, "."); !isCol && (!slices.Contains(wantIdx, item) || slices.Contains(gotIdx, item)) {
			t.Errorf("sqliteOnly lists index %s, but it is not only in the SQLite schema: remove it from the list", item)
		}
	}
	for _, n := range wantIdx {
		if _, ok := sqliteOnly[n]; ok {
			continue
		}
		if !slices.Contains(gotIdx, n) {
			t.Errorf("index %s of the SQLite schema is missing in PostgreSQL (has %v)", n, gotIdx)
		}
	}
}
