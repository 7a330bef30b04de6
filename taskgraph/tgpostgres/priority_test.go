package tgpostgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// TestClaimNextPlanIsIndexServed: with many pending tasks (analyzed), the
// claim-next statements read the first entry of their (priority DESC, seq)
// partial index, without a sort of the pending tasks, and keep FOR UPDATE
// SKIP LOCKED (LockRows); NextPending takes the highest priority first,
// the oldest first within one.
func TestClaimNextPlanIsIndexServed(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	d := open(t, url, Options{})
	c := raw(t, url)
	// Many workflows, as a real database has (the planner's estimates of
	// workflow_id <> ALL($1) depend on it); "big" holds every seventh task.
	if _, err := c.Exec(ctx, `INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms)
		SELECT 'w' || i, 1, 1 FROM generate_series(0, 39) AS i UNION ALL SELECT 'big', 1, 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet,
		created_at_ms, updated_at_ms, priority, requires, due_at_ms)
		SELECT 'big-' || i, CASE WHEN i % 7 = 0 THEN 'big' ELSE 'w' || (i % 40) END, 'n' || i, '{}', '[]', CASE WHEN i % 10 = 0 THEN 'pending' ELSE 'completed' END, 3, 0, 1, 1, (i % 201) - 100,
			CASE WHEN i % 30 = 0 THEN 'gpu' ELSE '' END, CASE WHEN i % 110 = 0 THEN 5000 ELSE 0 END
		FROM generate_series(1, 20000) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `ANALYZE tasks`); err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]struct {
		sql   string
		args  []any
		index string
		lock  bool // under LockRows
	}{
		// Without capabilities: tasks that require nothing (tasks_ready_plain);
		// with: every claimable task, filtered (tasks_ready_by_priority).
		// Both hold only due tasks; tasks_due the others.
		// The last argument of each scan is its server time (concurrency
		// keys closed by their rate then are passed over).
		"any workflow":               {claimScanSQL, []any{16, int64(1000)}, "tasks_ready_plain", true},
		"any workflow, capabilities": {claimScanCapsSQL, []any{16, []string{"gpu"}, int64(1000)}, "tasks_ready_by_priority", true},
		"one workflow":               {claimScanInWorkflowSQL, []any{16, "big", int64(1000)}, "tasks_ready_by_workflow_priority", true},
		"one workflow, capabilities": {claimScanInWorkflowCapsSQL, []any{16, "big", []string{"gpu"}, int64(1000)}, "tasks_ready_by_workflow_priority", true},
		"due tasks":                  {dueTasksSQL, []any{int64(10000), 64}, "tasks_due", false},
	} {
		p := explain(t, c, `EXPLAIN `+q.sql, q.args...)
		if !strings.Contains(p, "Index") || !strings.Contains(p, q.index) || strings.Contains(p, "Sort") || strings.Contains(p, "LockRows") != q.lock {
			t.Errorf("%s: plan\n%s\nwant an index scan of %s, no sort, LockRows %v", name, p, q.index, q.lock)
		}
	}
	// pgx prepares its statements, and after five runs PostgreSQL may plan
	// them once for any arguments: the generic plans must read the same
	// indexes.
	if _, err := c.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	for i, q := range []struct {
		sql, args, index string
	}{
		{claimScanSQL, `16, 1000`, "tasks_ready_plain"},
		{claimScanCapsSQL, `16, '{gpu}'::text[], 1000`, "tasks_ready_by_priority"},
		{claimScanInWorkflowSQL, `16, 'big', 1000`, "tasks_ready_by_workflow_priority"},
		{claimScanInWorkflowCapsSQL, `16, 'big', '{gpu}'::text[], 1000`, "tasks_ready_by_workflow_priority"},
	} {
		name := fmt.Sprintf("generic_%d", i)
		if _, err := c.Exec(ctx, `PREPARE `+name+` AS `+q.sql); err != nil {
			t.Fatalf("prepare %s: %v", q.sql, err)
		}
		if p := explain(t, c, `EXPLAIN EXECUTE `+name+`(`+q.args+`)`); !strings.Contains(p, q.index) || strings.Contains(p, "Sort") {
			t.Errorf("generic plan of %s:\n%s\nwant an index scan of %s and no sort", q.sql, p, q.index)
		}
	}
	// The order itself: two new pending tasks beat every task of lower
	// priority, and the older of the two comes first.
	for _, n := range []string{"x", "y"} {
		if _, err := c.Exec(ctx, fmt.Sprintf(`INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state,
			max_attempts, unmet, created_at_ms, updated_at_ms, priority) VALUES ('big-%s', 'big', '%s', '{}', '[]', 'pending', 3, 0, 1, 1, 100)`, n, n)); err != nil {
			t.Fatal(err)
		}
	}
	err := d.Write(ctx, func(tx tgdriver.Tx) error {
		r, ok, err := tx.NextPending(ctx, "", nil)
		if err != nil || !ok {
			return fmt.Errorf("NextPending: %v %v", ok, err)
		}
		// Priority 100 among the generated tasks: i % 201 = 200, pending (i % 10 = 0), the lowest such i.
		if r.Priority != 100 || r.NodeID != "n200" {
			return fmt.Errorf("NextPending = %s at priority %d, want n200 at 100 (older than x and y)", r.NodeID, r.Priority)
		}
		// Down the first 100 of big in order, the claim without
		// capabilities never takes a routed task (i % 30 = 0) or one not
		// due (i % 110 = 0).
		for range 100 {
			if _, ok, err := tx.UpdateTask(ctx, r.Seq, tgdriver.TaskSet{State: tgdriver.Val("completed"), UpdatedAtMS: 1}, tgdriver.TaskGuard{}); err != nil || !ok {
				return fmt.Errorf("complete %s: %v %v", r.NodeID, ok, err)
			}
			if r, ok, err = tx.NextPending(ctx, "big", nil); err != nil || !ok {
				return fmt.Errorf("NextPending: %v %v", ok, err)
			}
			if r.Requires != "" || r.DueAtMS != 0 {
				return fmt.Errorf("NextPending without capabilities took %s requiring %q due at %d", r.NodeID, r.Requires, r.DueAtMS)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// explain runs an EXPLAIN statement on c and returns its plan, one trimmed
// line per row.
func explain(t *testing.T, c *pgx.Conn, query string, args ...any) string {
	t.Helper()
	rows, err := c.Query(testCtx(t), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, strings.TrimSpace(line))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return strings.Join(plan, "\n")
}
