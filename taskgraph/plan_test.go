package taskgraph

import (
	"fmt"
	"strings"
	"testing"
)

// queryPlan returns SQLite's plan for query, one line per step.
func queryPlan(t *testing.T, b *bundle, query string, args ...any) []string {
	t.Helper()
	rows, err := b.s.rdb.QueryContext(b.ctx, `EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// Claim-next and the lease lookups read one partial index and stop at its
// first entries: one plan step, no sort, never the tasks table itself. For
// claim-next that step is an in-order walk of tasks_ready (pending tasks
// only) cut off by LIMIT 1, which SQLite words "SCAN tasks USING INDEX
// tasks_ready" (then one row read by seq); a table scan would read "SCAN
// tasks" alone. The plans must
// hold without statistics (as shipped; this is where SQLite preferred
// tasks_by_state and sorted every claimed task) and with statistics of a
// table of mostly finished tasks.
func TestClaimNextQueryPlans(t *testing.T) {
	b := setup(t)
	nodes := make([]NodeSpec, 300)
	for i := range nodes {
		nodes[i] = NodeSpec{NodeID: fmt.Sprintf("n%d", i)}
	}
	if _, err := b.s.CreateWorkflow(b.ctx, "wf", nodes); err != nil {
		t.Fatal(err)
	}
	check := func(stage string) {
		t.Helper()
		for _, tc := range []struct {
			name, query, want string
			args              []any
		}{
			{"claim-next", claimNextSQL, "SCAN tasks USING INDEX tasks_ready", nil},
			{"claim-next in a workflow", claimNextInWorkflowSQL, "SEARCH tasks USING INDEX tasks_ready_by_workflow (workflow_id=?)", []any{"wf"}},
			{"expired leases", expiredLeasesSQL, "SEARCH tasks USING COVERING INDEX tasks_leases (lease_expires_at_ms<?)", []any{int64(0), 64}},
			{"next lease expiry", nextLeaseExpirySQL, "SEARCH tasks USING COVERING INDEX tasks_leases", nil},
		} {
			plan := queryPlan(t, b, tc.query, tc.args...)
			if got := strings.Join(plan, " | "); got != tc.want {
				t.Errorf("%s: %s plan is %q, want %q", stage, tc.name, got, tc.want)
			}
		}
	}
	check("without statistics")
	if err := b.s.Close(); err != nil {
		t.Fatal(err)
	}
	raw := rawDB(t, b.path)
	mustExec(t, raw, `UPDATE tasks SET state = 'completed' WHERE seq % 100 <> 0`)
	mustExec(t, raw, `UPDATE tasks SET state = 'claimed', lease_expires_at_ms = seq WHERE seq % 100 = 1`)
	mustExec(t, raw, `ANALYZE`)
	b.s = openAt(t, b.path, b.clock) // new connections read the statistics
	t.Cleanup(func() { b.s.Close() })
	check("with statistics")
}
