package tgpostgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/mattn/go-sqlite3" // the "sqlite3" driver, to read the figure's SQLite database

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// TestVerifyFigurePostgres measures VerifyHistory on PostgreSQL, on a copy
// of the SQLite database that taskgraph's TestVerifyFigure builds, when
// GRAPH_ENGINEERING_VERIFY_FIGURE_SQLITE names that file. The copy goes into
// a fresh test database, or into GRAPH_ENGINEERING_VERIFY_FIGURE_POSTGRES (a
// URL) when set, where it is kept and reused. It asserts nothing about time;
// it logs the seconds of five runs and their median.
func TestVerifyFigurePostgres(t *testing.T) {
	src := os.Getenv("GRAPH_ENGINEERING_VERIFY_FIGURE_SQLITE")
	if src == "" {
		t.Skip("set GRAPH_ENGINEERING_VERIFY_FIGURE_SQLITE=FILE (built by taskgraph's TestVerifyFigure) to measure audit verify on PostgreSQL")
	}
	ctx := context.Background()
	url := os.Getenv("GRAPH_ENGINEERING_VERIFY_FIGURE_POSTGRES")
	if url == "" {
		url = pgtest.URL(t)
	}
	s, closeS := openStore(t, url)
	defer closeS()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tasks int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM tasks`).Scan(&tasks); err != nil {
		t.Fatal(err)
	}
	if tasks == 0 {
		start := time.Now()
		copySQLite(t, ctx, src, conn)
		t.Logf("copied %s in %.1f s", src, time.Since(start).Seconds())
	}
	var secs []float64
	for i := 0; i < 5; i++ {
		start := time.Now()
		rep, err := s.VerifyHistory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		secs = append(secs, time.Since(start).Seconds())
		t.Logf("VerifyHistory (postgres): %d workflows, %d tasks, %d events, %d audit entries in %.2f s", rep.Workflows, rep.Tasks, rep.Events, rep.AuditEntries, secs[i])
	}
	sort.Float64s(secs)
	t.Logf("VerifyHistory (postgres): median %.2f s of %d runs", secs[len(secs)/2], len(secs))
}

// copySQLite copies every row of the store's tables from the SQLite file
// src into the PostgreSQL database of conn, replacing the audit chain the
// open started.
func copySQLite(t *testing.T, ctx context.Context, src string, conn *pgx.Conn) {
	t.Helper()
	lite, err := sql.Open("sqlite3", "file:"+src+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	if _, err := conn.Exec(ctx, `DELETE FROM audit_chain; DELETE FROM audit_head`); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"workflows", "tasks", "edges", "events", "audit_chain", "audit_head", "pruned_workflows"} {
		rows, err := lite.Query(`SELECT * FROM ` + table)
		if err != nil {
			t.Fatal(err)
		}
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		var all [][]any
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			all = append(all, vals)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		n, err := conn.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(all))
		if err != nil {
			t.Fatalf("copy %s (%s): %v", table, strings.Join(cols, ", "), err)
		}
		if n != int64(len(all)) {
			t.Fatal(fmt.Errorf("copy %s: %d of %d rows", table, n, len(all)))
		}
	}
	if _, err := conn.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
}
