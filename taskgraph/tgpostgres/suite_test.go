package tgpostgres_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver for the harness's own connection

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest/sqldb"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// pgDatabase is a fresh PostgreSQL database per subtest: stores open it
// through tgpostgres under taskgraph.OpenDriver, and the suite's raw SQL goes
// through a database/sql connection of its own.
type pgDatabase struct {
	sqldb.DB
	url string
}

func newPGDatabase(t testing.TB) storetest.Database {
	t.Helper()
	// A linguistic collation, as many servers' default locales give: the
	// store must behave the same whatever the database's text order.
	url := pgtest.CollatedURL(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(2)
	t.Cleanup(func() { db.Close() })
	return &pgDatabase{url: url, DB: sqldb.DB{DB: db, Rebind: sqldb.DollarPlaceholders,
		TablesQuery: `SELECT tablename FROM pg_tables WHERE schemaname = current_schema()`}}
}

// inlineLinks writes the bodies of event_packs into rows of events and the
// links of event_links' runs into their events' own rows
// (the form of the events linked before migration 0016, which the driver
// reads the same) and deletes them from event_links. The suite's raw SQL
// addresses an event by its position in events, as on SQLite: so that it
// reads and tampers with what it means to, every raw statement and
// snapshot runs after it. The driver's own tests (events_test.go) tamper
// with links in event_links.
func (d *pgDatabase) inlineLinks(t testing.TB) {
	t.Helper()
	if _, err := d.DB.DB.Exec(tgpostgres.UnpackBodiesSQL); err != nil {
		t.Fatalf("write the bodies of event_packs into events: %v", err)
	}
	if _, err := d.DB.DB.Exec(`WITH r AS (DELETE FROM event_links RETURNING *),
		l AS (SELECT u.id AS event_id, r.wseq + u.o - 1 AS wseq, u.h AS hash,
			COALESCE(lag(u.h) OVER (PARTITION BY r.workflow_id, r.wseq ORDER BY u.o), r.prev_hash) AS prev_hash
			FROM r, unnest(r.event_ids, r.hashes) WITH ORDINALITY AS u(id, h, o))
		UPDATE events e SET wseq = l.wseq, prev_hash = l.prev_hash, hash = l.hash FROM l WHERE e.event_id = l.event_id`); err != nil {
		t.Fatalf("write the links of event_links into events: %v", err)
	}
}

// Exec runs query after inlineLinks.
func (d *pgDatabase) Exec(t testing.TB, query string, args ...any) {
	t.Helper()
	d.inlineLinks(t)
	d.DB.Exec(t, query, args...)
}

// Query runs query after inlineLinks.
func (d *pgDatabase) Query(t testing.TB, query string, args ...any) [][]string {
	t.Helper()
	d.inlineLinks(t)
	return d.DB.Query(t, query, args...)
}

// Snapshot renders the database after inlineLinks.
func (d *pgDatabase) Snapshot(t testing.TB) string {
	t.Helper()
	d.inlineLinks(t)
	return d.DB.Snapshot(t)
}

// Open opens a store on the database and closes it when t ends.
func (d *pgDatabase) Open(t testing.TB, opts tg.Options) *tg.Store {
	t.Helper()
	ctx := context.Background()
	// The suite's tests never test the pool's acquire timeout (the driver's
	// own tests do): a write waits for a connection as long as it takes, so
	// that a loaded machine makes the suite slower, never red.
	drv, err := tgpostgres.Open(ctx, d.url, tgpostgres.Options{MaxConns: storeConns, AcquireTimeout: time.Hour, Logger: opts.Logger})
	if err != nil {
		t.Fatalf("open PostgreSQL: %v", err)
	}
	s, err := tg.OpenDriver(ctx, drv, opts)
	if err != nil {
		t.Fatalf("OpenDriver: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// storeConns bounds the pool of each store the suite opens.
const storeConns = 8

// suiteParallel is how many of the suite's subtests run at once. A subtest
// holds at most about 20 connections (the harness's own 2, and up to two
// stores at once of storeConns plus a listener each), so 8 subtests hold at
// most 160 of the test cluster's max_connections of 300 (scripts/postgres),
// leaving room for the other packages' PostgreSQL tests that go test runs
// at the same time.
const suiteParallel = 8

// TestPostgres runs the behaviour suite, unchanged, on PostgreSQL.
func TestPostgres(t *testing.T) {
	storetest.Run(t, storetest.Harness{Name: "postgres", NewDatabase: newPGDatabase, Parallel: suiteParallel})
}
