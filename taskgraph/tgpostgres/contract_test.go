package tgpostgres_test

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver/drivertest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// pgHarness opens drivers (replicas) on a fresh database of the test
// server each; the contract's raw SQL goes through a database/sql
// connection of its own.
type pgHarness struct{}

func (pgHarness) Name() string { return "postgres" }

// Parallel bounds the contract's databases at once: a subtest opens at most
// three drivers (contractConns plus a listener each) and the harness's own
// 2 connections, about 25, so 6 databases hold at most 150 of the test
// cluster's max_connections of 300 (scripts/postgres), beside the other
// packages' PostgreSQL tests that go test runs at the same time.
func (pgHarness) Parallel() int { return 6 }

// contractConns bounds the pool of each read-write driver the contract
// opens: its concurrent writers need a few connections.
const contractConns = 6

func (pgHarness) NewDatabase(t testing.TB) drivertest.Database {
	t.Helper()
	// A database of a linguistic collation, as many servers' default
	// locales give: orders by id must still be the ids' byte order.
	url := pgtest.CollatedURL(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(2)
	t.Cleanup(func() { db.Close() })
	return &pgContractDatabase{SQLDB: drivertest.SQLDB{DB: db, Dollar: true}, url: url}
}

type pgContractDatabase struct {
	drivertest.SQLDB
	url string
}

// Open opens a replica with a small pool (contractConns): subtests run in
// parallel.
func (d *pgContractDatabase) Open(t testing.TB) tgdriver.Driver {
	t.Helper()
	drv, err := tgpostgres.Open(context.Background(), d.url, tgpostgres.Options{MaxConns: contractConns})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { drv.Close() })
	return drv
}

func (d *pgContractDatabase) OpenReadOnly(t testing.TB) tgdriver.Driver {
	t.Helper()
	drv, err := tgpostgres.Open(context.Background(), d.url, tgpostgres.Options{MaxConns: 2, ReadOnly: true})
	if err != nil {
		t.Fatalf("Open read-only: %v", err)
	}
	t.Cleanup(func() { drv.Close() })
	return drv
}

// DriverTables are the tables this driver writes beyond the common ones
// (drivertest.TableLister).
func (d *pgContractDatabase) DriverTables() []string { return []string{"event_packs"} }

// LockWaits counts the backends of the database waiting for a lock.
func (d *pgContractDatabase) LockWaits(t testing.TB) int {
	t.Helper()
	rows := d.Query(t, `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
	n, err := strconv.Atoi(rows[0][0])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDriverContract runs the drivers' common contract on PostgreSQL.
func TestDriverContract(t *testing.T) {
	pgtest.Server(t) // skips (GRAPH_ENGINEERING_TEST_POSTGRES=skip) or fails before any subtest
	drivertest.Run(t, pgHarness{})
}

// ServerNow reads the database server's clock (drivertest.ServerClock).
func (d *pgContractDatabase) ServerNow(t testing.TB) time.Time {
	t.Helper()
	rows := d.Query(t, `SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`)
	us, err := strconv.ParseInt(rows[0][0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.UnixMicro(us)
}
