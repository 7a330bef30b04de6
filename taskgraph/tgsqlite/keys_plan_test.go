package tgsqlite

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// TestKeyParkingPlans: with 10,000 tasks queued on a full concurrency key
// ahead of one claimable task, and 10,000 on a key held back by its rate
// of 3 (after it: NextPending passes over full keys only), all but the
// first of the full key's are parked (0018) and all but
// the first 3 of the rate-held key's (0025), so the ready indexes the
// claim scans read hold five entries, not 20,001: a claim scan walks past
// one task of the full key and three of the held one. The parking triggers'
// statements (the same statements outside a trigger, since SQLite refuses
// INDEXED BY in one) read a key's group of tasks through
// tasks_ready_by_key_group, never every task nor every task of the key,
// and never sort.
func TestKeyParkingPlans(t *testing.T) {
	d := openTest(t, Options{}, tgdriver.Hooks{})
	db, err := sql.Open("sqlite3", "file:"+d.path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms) VALUES ('wf', 1, 1)`,
		`INSERT INTO concurrency_keys (key, max_claimed, claimed, updated_at_ms) VALUES ('full', 2, 2, 1)`,
		`WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 10000)
			INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet, created_at_ms, updated_at_ms, concurrency_key, priority)
			SELECT 't' || n, 'wf', 'n' || n, '{}', '[]', 'pending', 3, 0, 1, 1, 'full', 5 FROM i`,
		`INSERT INTO concurrency_keys (key, rate_count, rate_interval_ms, recent_ms, rate_open_at_ms, updated_at_ms) VALUES ('rated', 3, 60000, '4000000000000 4000000000001 4000000000002', 4000000060000, 1)`,
		`WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 10000)
			INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet, created_at_ms, updated_at_ms, concurrency_key, priority)
			SELECT 'r' || n, 'wf', 'r' || n, '{}', '[]', 'pending', 3, 0, 1, 1, 'rated', -1 FROM i`,
		`INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet, created_at_ms, updated_at_ms, concurrency_key, priority)
			VALUES ('free', 'wf', 'free', '{}', '[]', 'pending', 3, 0, 1, 1, '', 0)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	count := func(q string) int {
		t.Helper()
		var n int
		if err := db.QueryRow(q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	if n := count(`SELECT COUNT(*) FROM tasks WHERE key_parked AND concurrency_key = 'full'`); n != 9999 {
		t.Fatalf("%d of the full key's 10,000 queued tasks parked, want all but the first", n)
	}
	if n := count(`SELECT COUNT(*) FROM tasks WHERE key_parked AND concurrency_key = 'rated'`); n != 9997 {
		t.Fatalf("%d of the rate-held key's 10,000 queued tasks parked, want all but the first 3 (its rate)", n)
	}
	for _, ix := range []string{"tasks_ready_plain", "tasks_ready_by_priority", "tasks_ready_by_workflow_priority"} {
		q := `SELECT COUNT(*) FROM tasks INDEXED BY ` + ix + ` WHERE state = 'pending' AND due_at_ms = 0 AND key_parked = 0`
		if ix == "tasks_ready_plain" {
			q += ` AND requires = ''`
		}
		if n := count(q); n != 5 {
			t.Errorf("%s holds %d entries, want 5: the full key's first task, the rate-held key's first 3 and the claimable one", ix, n)
		}
	}
	write(t, d, func(tx tgdriver.Tx) error {
		for _, caps := range [][]string{nil, {"gpu"}} {
			if r, ok, err := tx.NextPending(t.Context(), "", caps); err != nil || !ok || r.TaskID != "free" {
				t.Errorf("claim-next with capabilities %v took %q (%v %v), want the claimable task past the full key", caps, r.TaskID, ok, err)
			}
		}
		return nil
	})

	const group = `concurrency_key = ? AND concurrency_key <> '' AND workflow_id = ? AND requires = ? AND state = 'pending' AND due_at_ms = 0`
	for name, q := range map[string]string{
		"a task becoming ready (tasks_key_park_*)": `SELECT count(*) FROM tasks WHERE key_parked = 0 AND ` + group +
			` AND seq <> ? AND (priority > ? OR (priority = ? AND seq < ?))`,
		"a task leaving the ready set (tasks_key_leave)": `SELECT seq FROM tasks WHERE key_parked = 1 AND ` + group +
			` ORDER BY priority DESC, seq LIMIT 1`,
		"a key closing (concurrency_keys_park)": `SELECT seq FROM (SELECT seq, row_number() OVER (PARTITION BY workflow_id, requires
			ORDER BY priority DESC, seq) AS n FROM tasks WHERE concurrency_key = ? AND concurrency_key <> '' AND key_parked = 0 AND state = 'pending' AND due_at_ms = 0) WHERE n > ?`,
		"a limit raised (concurrency_keys_unpark_all)": `SELECT seq FROM tasks WHERE concurrency_key = ? AND concurrency_key <> '' AND key_parked = 1 AND state = 'pending' AND due_at_ms = 0`,
		"a slot freed (concurrency_keys_unpark_heads)": `SELECT (SELECT p.seq FROM tasks p WHERE p.concurrency_key = ? AND p.concurrency_key <> '' AND p.key_parked = 1
				AND p.workflow_id = g.workflow_id AND p.requires = g.requires AND p.state = 'pending' AND p.due_at_ms = 0
				ORDER BY p.priority DESC, p.seq LIMIT 1)
			FROM (SELECT DISTINCT workflow_id, requires FROM tasks
				WHERE concurrency_key = ? AND concurrency_key <> '' AND key_parked = 0 AND state = 'pending' AND due_at_ms = 0) g`,
	} {
		plan := queryPlan(t, db, q)
		p := strings.Join(plan, "; ")
		if !strings.Contains(p, "INDEX tasks_ready_by_key_group") || strings.Contains(p, "SCAN tasks;") ||
			strings.HasSuffix(p, "SCAN tasks") || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("plan of %s: %s; want tasks_ready_by_key_group, no scan of tasks, no sort", name, p)
		}
	}
}
