package tgpostgres

import (
	"fmt"
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

// TestClaimScanReadsOnlyClosedKeys: with 5,000 concurrency keys, one
// full and one held back by its rate, every claim scan (custom and
// generic plans) finds the closed keys through concurrency_keys_at_cap and
// concurrency_keys_rate_open, never by reading every key; so a claim's
// cost does not grow with the number of keys. It also measures what is
// left of issue 27's item 1: the scan still walks the full key's 10,000
// queued tasks ahead of the one claimable task (logged, Rows Removed by
// Filter), since they stay in the ready index.
func TestClaimScanReadsOnlyClosedKeys(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	open(t, url, Options{})
	c := raw(t, url)
	for _, q := range []string{
		`INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms) VALUES ('wf', 1, 1)`,
		`INSERT INTO concurrency_keys (key, max_claimed, claimed, updated_at_ms) VALUES ('full', 2, 2, 1)`,
		`INSERT INTO concurrency_keys (key, rate_count, rate_interval_ms, recent_ms, rate_open_at_ms, updated_at_ms) VALUES ('rated', 1, 1000, '500', 1500, 1)`,
		`INSERT INTO concurrency_keys (key, max_claimed, claimed, updated_at_ms) SELECT 'k' || i, 2, i % 2, 1 FROM generate_series(1, 5000) AS i`,
		`INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet, created_at_ms, updated_at_ms, concurrency_key, priority)
			SELECT 't' || i, 'wf', 'n' || i, '{}', '[]', 'pending', 3, 0, 1, 1, 'full', 5 FROM generate_series(1, 10000) AS i`,
		`INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet, created_at_ms, updated_at_ms, concurrency_key, priority)
			VALUES ('free', 'wf', 'free', '{}', '[]', 'pending', 3, 0, 1, 1, '', 0)`,
		`ANALYZE concurrency_keys`, `ANALYZE tasks`,
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	type scan struct {
		name, sql string
		args      []any
		generic   string
		rate      bool
	}
	scans := []scan{
		{"any workflow", claimScanSQL, []any{1, int64(1000)}, `1, 1000`, true},
		{"any workflow, capabilities", claimScanCapsSQL, []any{1, []string{"gpu"}, int64(1000)}, `1, '{gpu}'::text[], 1000`, true},
		{"one workflow", claimScanInWorkflowSQL, []any{1, "wf", int64(1000)}, `1, 'wf', 1000`, true},
		{"one workflow, capabilities", claimScanInWorkflowCapsSQL, []any{1, "wf", []string{"gpu"}, int64(1000)}, `1, 'wf', '{gpu}'::text[], 1000`, true},
	}
	check := func(name, p string, rate bool) {
		t.Helper()
		if strings.Contains(p, "Seq Scan on concurrency_keys") || !strings.Contains(p, "concurrency_keys_at_cap") ||
			rate && !strings.Contains(p, "concurrency_keys_rate_open") {
			t.Errorf("%s: plan\n%s\nwant the closed keys read from concurrency_keys_at_cap and concurrency_keys_rate_open, no scan of every key", name, p)
		}
	}
	for _, q := range scans {
		p := explain(t, c, `EXPLAIN (ANALYZE, BUFFERS) `+q.sql, q.args...)
		check(q.name, p, q.rate)
		if !strings.Contains(p, "rows=1 loops=1") {
			t.Errorf("%s: plan\n%s\nwant the one claimable task", q.name, p)
		}
		t.Logf("%s:\n%s", q.name, p)
	}
	if _, err := c.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	for i, q := range scans {
		name := fmt.Sprintf("generic_keys_%d", i)
		if _, err := c.Exec(ctx, `PREPARE `+name+` AS `+q.sql); err != nil {
			t.Fatalf("prepare %s: %v", q.sql, err)
		}
		check("generic plan of "+q.name, explain(t, c, `EXPLAIN EXECUTE `+name+`(`+q.generic+`)`), q.rate)
	}
}
