package pgtest

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// TestURLIsFreshAndDropped: each URL names its own empty database, which is
// gone once its test ended.
func TestURLIsFreshAndDropped(t *testing.T) {
	ctx := testwait.Context(t)
	var name string
	t.Run("use", func(t *testing.T) {
		u1, u2 := URL(t), URL(t)
		if u1 == u2 {
			t.Fatalf("two calls gave the same database %s", u1)
		}
		c, err := pgx.Connect(ctx, u1)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		var tables int
		if err := c.QueryRow(ctx, `SELECT current_database(), (SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public')`).Scan(&name, &tables); err != nil {
			t.Fatal(err)
		}
		if tables != 0 || !strings.HasPrefix(name, "ge_test_") {
			t.Fatalf("database %s has %d tables", name, tables)
		}
	})
	c, err := pgx.Connect(ctx, Server(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, `SELECT COUNT(*) FROM pg_database WHERE datname = $1`, name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("database %s still exists after its test (%d, %v)", name, n, err)
	}
}

// TestCollatedURLSortsLinguistically: CollatedURL's database orders text
// as a person would ("a" before "B"), unlike bytes, when the server can
// create one (ICU, PostgreSQL 15 or later); else it is an ordinary one.
func TestCollatedURLSortsLinguistically(t *testing.T) {
	ctx := testwait.Context(t)
	c, err := pgx.Connect(ctx, CollatedURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var provider, first string
	if err := c.QueryRow(ctx, `SELECT datlocprovider::text, (SELECT min(x) FROM unnest(ARRAY['B', 'a']) AS x)
		FROM pg_database WHERE datname = current_database()`).Scan(&provider, &first); err != nil {
		t.Fatal(err)
	}
	switch {
	case provider != "i":
		t.Logf("the server gave a database of provider %q: no ICU collation to test", provider)
	case first != "a":
		t.Fatalf("min('B', 'a') = %q in a database of ICU en-US collation, want a", first)
	}
}
