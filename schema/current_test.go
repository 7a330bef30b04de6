package schema_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/schema"
)

// RequireLatest accepts only the newest version and refuses, without
// writing, an empty database, an older one and a newer one.
func TestRequireLatest(t *testing.T) {
	ctx := context.Background()
	ms := sqliteSeries(t)
	Latest := ms.Latest
	db := openFile(t)
	if _, err := ms.RequireLatest(ctx, schema.SQL(db)); !errors.Is(err, schema.ErrTooOld) || !strings.Contains(err.Error(), "serve") {
		t.Fatalf("empty database: %v, want schema.ErrTooOld saying to start serve", err)
	}
	if _, _, err := applyIn(t, db, ms); err != nil {
		t.Fatal(err)
	}
	if v, err := ms.RequireLatest(ctx, schema.SQL(db)); err != nil || v != Latest() {
		t.Fatalf("current database: %d, %v", v, err)
	}
	// Against a binary that knows one more version, this database is old.
	more := with(ms, append(ms.Migrations[:len(ms.Migrations):len(ms.Migrations)], schema.Migration{Version: Latest() + 1, Name: "next.sql", SQL: "SELECT 1"}))
	if v, err := more.RequireLatest(ctx, schema.SQL(db)); !errors.Is(err, schema.ErrTooOld) || v != Latest() {
		t.Fatalf("older database: %d, %v, want ErrTooOld", v, err)
	}
	fewer := with(ms, ms.Migrations[:len(ms.Migrations)-1])
	if _, err := fewer.RequireLatest(ctx, schema.SQL(db)); !errors.Is(err, schema.ErrTooNew) {
		t.Fatalf("newer database: %v, want ErrTooNew", err)
	}
	if got := readVersion(t, db); got.version != int64(Latest()) {
		t.Fatalf("version changed to %d", got.version)
	}
}
