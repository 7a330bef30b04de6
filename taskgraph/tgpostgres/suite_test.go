package tgpostgres_test

import (
	"context"
	"database/sql"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver for the harness's own connection

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// pgDatabase is a fresh PostgreSQL database per subtest: stores open it
// through tgpostgres under taskgraph.OpenDriver, and the suite's raw SQL goes
// through a database/sql connection of its own.
type pgDatabase struct {
	storetest.SQLDB
	url string
}

func newPGDatabase(t testing.TB) storetest.Database {
	t.Helper()
	url := pgtest.URL(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(2)
	t.Cleanup(func() { db.Close() })
	return &pgDatabase{url: url, SQLDB: storetest.SQLDB{DB: db, Rebind: storetest.DollarPlaceholders,
		TablesQuery: `SELECT tablename FROM pg_tables WHERE schemaname = current_schema()`}}
}

// Open opens a store on the database and closes it when t ends.
func (d *pgDatabase) Open(t testing.TB, opts tg.Options) *tg.Store {
	t.Helper()
	ctx := context.Background()
	drv, err := tgpostgres.Open(ctx, d.url, tgpostgres.Options{MaxConns: 8, Logger: opts.Logger})
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

// TestPostgres runs the behaviour suite, unchanged, on PostgreSQL.
func TestPostgres(t *testing.T) {
	storetest.Run(t, storetest.Harness{Name: "postgres", NewDatabase: newPGDatabase})
}
