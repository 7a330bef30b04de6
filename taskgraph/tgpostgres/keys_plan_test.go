package tgpostgres

import (
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// TestPruneIdleKeysPlan: with many keys and keyed tasks (analyzed), the
// key sweeper's statements read a range of the keys' primary key and
// probe each key's claimable tasks through tasks_ready_by_key, never a
// scan of either table; so a walk over every key costs one pass over the
// keys and one index probe per key.
func TestPruneIdleKeysPlan(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	open(t, url, Options{})
	c := raw(t, url)
	for _, q := range []string{
		`INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms) VALUES ('wf', 1, 1)`,
		`INSERT INTO concurrency_keys (key, max_claimed, updated_at_ms) SELECT 'k' || i, i % 3, 1 FROM generate_series(1, 5000) AS i`,
		`INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet, created_at_ms, updated_at_ms, concurrency_key)
			SELECT 't' || i, 'wf', 'n' || i, '{}', '[]', CASE WHEN i % 4 = 0 THEN 'pending' ELSE 'completed' END, 3, 0, 1, 1, 'k' || (i % 5000)
			FROM generate_series(1, 40000) AS i`,
		`ANALYZE concurrency_keys`, `ANALYZE tasks`,
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for name, q := range map[string]struct {
		sql     string
		args    []any
		indexes []string
	}{
		"last key of the batch": {pruneIdleKeysLastSQL, []any{"k2", 500}, []string{"concurrency_keys_pkey"}},
		"delete of the idle":    {pruneIdleKeysSQL, []any{"k2", "k3"}, []string{"concurrency_keys_pkey", "tasks_ready_by_key"}},
	} {
		p := explain(t, c, `EXPLAIN `+q.sql, q.args...)
		for _, ix := range q.indexes {
			if !strings.Contains(p, ix) {
				t.Errorf("%s: plan\n%s\nwant it to read %s", name, p, ix)
			}
		}
		if strings.Contains(p, "Seq Scan") || strings.Contains(p, "Sort") {
			t.Errorf("%s: plan\n%s\nwant no sequential scan and no sort", name, p)
		}
	}
}
