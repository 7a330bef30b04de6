package sqldb

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/internal/sqlrows"
)

// DB implements Exec, Query and Snapshot of a storetest.Database on a
// database/sql handle, for harnesses whose database has a database/sql
// driver.
type DB struct {
	// DB is the handle; the harness closes it.
	DB *sql.DB
	// Rebind rewrites the suite's ? placeholders for the database's dialect
	// (sqlrows.Dollar, as DollarPlaceholders, for PostgreSQL); nil keeps
	// them.
	Rebind func(query string) string
	// TablesQuery lists the tables Snapshot covers, one name per row.
	TablesQuery string
}

func (d DB) rebind(q string) string {
	if d.Rebind == nil {
		return q
	}
	return d.Rebind(q)
}

// Exec runs query with args and fails t on an error.
func (d DB) Exec(t testing.TB, query string, args ...any) {
	t.Helper()
	if _, err := d.DB.Exec(d.rebind(query), args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// Query runs query with args and returns its rows rendered as text.
func (d DB) Query(t testing.TB, query string, args ...any) [][]string {
	t.Helper()
	rows, err := d.query(query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return rows
}

func (d DB) query(query string, args ...any) ([][]string, error) {
	return sqlrows.Query(d.DB, d.rebind(query), render, args...)
}

// render writes a scanned value as text.
func render(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case []byte:
		return string(v)
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	default:
		return fmt.Sprint(v)
	}
}

// Snapshot renders every row of every table TablesQuery lists, tables by
// name and rows sorted, with a digest line per table.
func (d DB) Snapshot(t testing.TB) string {
	t.Helper()
	names, err := d.query(d.TablesQuery)
	if err != nil {
		t.Fatalf("list tables: %v", err)
	}
	tables := make([]string, 0, len(names))
	for _, n := range names {
		tables = append(tables, n[0])
	}
	slices.Sort(tables)
	var b strings.Builder
	for _, table := range tables {
		rows, err := d.query(`SELECT * FROM ` + table)
		if err != nil {
			t.Fatalf("snapshot %s: %v", table, err)
		}
		lines := make([]string, len(rows))
		for i, r := range rows {
			lines[i] = strings.Join(quoteAll(r), "|")
		}
		slices.Sort(lines)
		sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
		fmt.Fprintf(&b, "== %s: %d rows, sha256 %s\n", table, len(rows), hex.EncodeToString(sum[:8]))
		for _, l := range lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func quoteAll(r []string) []string {
	out := make([]string, len(r))
	for i, v := range r {
		out[i] = strconv.Quote(v)
	}
	return out
}

// DollarPlaceholders rewrites the ? placeholders of query to $1, $2, ...
// (PostgreSQL), leaving question marks inside quoted strings and
// identifiers alone.
func DollarPlaceholders(query string) string { return sqlrows.Dollar(query) }
