package schema_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	_ "github.com/mattn/go-sqlite3"

	"github.com/graph-engineering/graph-engineering-mcp/schema"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// sqliteSeries is the SQLite driver's series: the runner is tested on a real
// dialect and real migrations.
func sqliteSeries(t *testing.T) schema.Series {
	t.Helper()
	s, err := tgsqlite.Schema()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// with is s with the migrations ms instead of its own.
func with(s schema.Series, ms []schema.Migration) schema.Series {
	return schema.Series{Dialect: s.Dialect, Migrations: ms}
}

// The SQLite driver's embedded migrations are numbered from 1 without
// gaps, and Latest is the last of them.
func TestEmbeddedMigrationsNumbered(t *testing.T) {
	s := sqliteSeries(t)
	ms := s.Migrations
	for i, m := range ms {
		if m.Version != i+1 {
			t.Errorf("migration %d is %s with version %d", i, m.Name, m.Version)
		}
		if want := fmt.Sprintf("%04d_", m.Version); !strings.HasPrefix(m.Name, want) || !strings.HasSuffix(m.Name, ".sql") {
			t.Errorf("migration %s is not named %sdescription.sql", m.Name, want)
		}
		if strings.TrimSpace(m.SQL) == "" {
			t.Errorf("migration %s is empty", m.Name)
		}
	}
	if s.Latest() != len(ms) {
		t.Fatalf("Latest() = %d, want %d", s.Latest(), len(ms))
	}
}

func TestMigrationNumberingRules(t *testing.T) {
	sql := &fstest.MapFile{Data: []byte("SELECT 1;")}
	for name, tc := range map[string]struct {
		files []string
		want  string
	}{
		"gap":          {[]string{"0001_a.sql", "0003_c.sql"}, "expected version 2"},
		"duplicate":    {[]string{"0001_a.sql", "0001_b.sql", "0002_c.sql"}, "expected version 2"},
		"not from 1":   {[]string{"0002_b.sql"}, "expected version 1"},
		"no number":    {[]string{"0001_a.sql", "init.sql"}, "NNNN_description.sql"},
		"zero":         {[]string{"0000_a.sql"}, "NNNN_description.sql"},
		"bad number":   {[]string{"00x1_a.sql"}, "NNNN_description.sql"},
		"in sequence":  {[]string{"0002_b.sql", "0001_a.sql", "0003_c.sql"}, ""},
		"wide numbers": {[]string{"1_a.sql", "02_b.sql"}, ""},
	} {
		fsys := fstest.MapFS{}
		for _, f := range tc.files {
			fsys[f] = sql
		}
		fsys["README.md"] = &fstest.MapFile{Data: []byte("not a migration")}
		series, err := schema.Load(fsys, schema.Dialect{})
		ms := series.Migrations
		if tc.want == "" {
			if err != nil || len(ms) != len(tc.files) {
				t.Errorf("%s: %v", name, err)
				continue
			}
			for i, m := range ms {
				if m.Version != i+1 {
					t.Errorf("%s: out of order: %+v", name, ms)
				}
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one saying %q", name, err, tc.want)
		}
	}
}

func openFile(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "s.db")+"?_txlock=immediate&_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func applyIn(t *testing.T, db *sql.DB, s schema.Series) (int, int, error) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	from, to, err := s.Apply(ctx, schema.SQL(tx))
	if err != nil {
		return from, to, err
	}
	return from, to, tx.Commit()
}

type versionRow struct{ version, appliedAt int64 }

func readVersion(t *testing.T, db *sql.DB) versionRow {
	t.Helper()
	var v versionRow
	if err := db.QueryRow(`SELECT version, applied_at_ms FROM schema_version`).Scan(&v.version, &v.appliedAt); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestApplyFreshThenIdempotent(t *testing.T) {
	db := openFile(t)
	ms := sqliteSeries(t)
	Latest := ms.Latest
	from, to, err := applyIn(t, db, ms)
	if err != nil || from != 0 || to != Latest() {
		t.Fatalf("fresh apply: %d -> %d, %v", from, to, err)
	}
	first := readVersion(t, db)
	var tables int
	if err := db.QueryRow(`SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('workflows', 'tasks', 'edges', 'events', 'pruned_workflows')`).Scan(&tables); err != nil || tables != 5 {
		t.Fatalf("%d of 5 tables created (%v)", tables, err)
	}
	for i := 0; i < 2; i++ {
		from, to, err = applyIn(t, db, ms)
		if err != nil || from != Latest() || to != Latest() {
			t.Fatalf("repeat apply: %d -> %d, %v", from, to, err)
		}
	}
	if again := readVersion(t, db); again != first {
		t.Fatalf("a repeat apply rewrote the version row: %+v then %+v", first, again)
	}
}

// A later migration is applied on top of an earlier version; a failing one
// leaves the database at the version it had, with none of its statements.
func TestApplyUpgradesAndFailsWhole(t *testing.T) {
	db := openFile(t)
	s := sqliteSeries(t)
	v1 := []schema.Migration{{Version: 1, Name: "0001_a.sql", SQL: `CREATE TABLE a (x INTEGER);`}}
	if _, to, err := applyIn(t, db, with(s, v1)); err != nil || to != 1 {
		t.Fatalf("v1: %d %v", to, err)
	}
	bad := append(v1,
		schema.Migration{Version: 2, Name: "0002_b.sql", SQL: `CREATE TABLE b (x INTEGER); INSERT INTO a VALUES (1);`},
		schema.Migration{Version: 3, Name: "0003_c.sql", SQL: `CREATE TABLE c (x INTEGER); THIS IS NOT SQL;`})
	if _, _, err := applyIn(t, db, with(s, bad)); err == nil || !strings.Contains(err.Error(), "0003_c.sql") {
		t.Fatalf("failing migration: %v", err)
	}
	if v := readVersion(t, db); v.version != 1 {
		t.Fatalf("version %d after a failed upgrade, want 1", v.version)
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM sqlite_schema WHERE name IN ('b', 'c')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("a failed upgrade left %d tables behind (%v)", n, err)
	}
	good := append(v1, schema.Migration{Version: 2, Name: "0002_b.sql", SQL: `CREATE TABLE b (x INTEGER); INSERT INTO a VALUES (1);`})
	if from, to, err := applyIn(t, db, with(s, good)); err != nil || from != 1 || to != 2 {
		t.Fatalf("upgrade: %d -> %d, %v", from, to, err)
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM a`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("migration 2 ran %d times (%v)", n, err)
	}
}

func TestApplyRefusesNewerDatabase(t *testing.T) {
	db := openFile(t)
	ms := sqliteSeries(t)
	Latest := ms.Latest
	if _, _, err := applyIn(t, db, ms); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE schema_version SET version = ?`, Latest()+1); err != nil {
		t.Fatal(err)
	}
	before := readVersion(t, db)
	from, to, err := applyIn(t, db, ms)
	if !errors.Is(err, schema.ErrTooNew) || from != Latest()+1 || to != Latest()+1 {
		t.Fatalf("newer database: %d -> %d, %v", from, to, err)
	}
	if want := fmt.Sprintf("version %d, this binary knows versions up to %d", Latest()+1, Latest()); !strings.Contains(err.Error(), want) {
		t.Errorf("message %q does not say %q", err, want)
	}
	if after := readVersion(t, db); after != before {
		t.Fatalf("the version row changed: %+v -> %+v", before, after)
	}
}

func TestInspect(t *testing.T) {
	ctx := context.Background()
	db := openFile(t)
	ms := sqliteSeries(t)
	Latest := ms.Latest
	Inspect := func(ctx context.Context, db *sql.DB) (int, error) { return ms.Inspect(ctx, schema.SQL(db)) }
	if v, err := Inspect(ctx, db); err != nil || v != 0 {
		t.Fatalf("empty database: %d %v", v, err)
	}
	if _, _, err := applyIn(t, db, ms); err != nil {
		t.Fatal(err)
	}
	if v, err := Inspect(ctx, db); err != nil || v != Latest() {
		t.Fatalf("current database: %d %v", v, err)
	}
	if _, err := db.Exec(`UPDATE schema_version SET version = ?`, Latest()+1); err != nil {
		t.Fatal(err)
	}
	if v, err := Inspect(ctx, db); !errors.Is(err, schema.ErrTooNew) || v != Latest()+1 {
		t.Fatalf("newer database: %d %v", v, err)
	}

	foreign := openFile(t)
	if _, err := foreign.Exec(`CREATE TABLE notes (x TEXT)`); err != nil {
		t.Fatal(err)
	}
	if _, err := Inspect(ctx, foreign); !errors.Is(err, schema.ErrForeign) {
		t.Fatalf("foreign database: %v", err)
	}
	// Apply refuses it too, and adds nothing.
	if _, _, err := applyIn(t, foreign, ms); !errors.Is(err, schema.ErrForeign) {
		t.Fatalf("Apply on a foreign database: %v", err)
	}
	var n int
	if err := foreign.QueryRow(`SELECT COUNT(*) FROM sqlite_schema`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the foreign database has %d objects after a refused Apply (%v)", n, err)
	}
}
