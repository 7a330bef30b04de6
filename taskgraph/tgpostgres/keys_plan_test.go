package tgpostgres

import (
	"fmt"
	"regexp"
	"strconv"
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
	url := pgtest.URL(t)
	open(t, url, Options{})
	c := raw(t, url)
	execAll(t, c,
		`INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms) VALUES ('wf', 1, 1)`,
		`INSERT INTO concurrency_keys (key, max_claimed, updated_at_ms) SELECT 'k' || i, i % 3, 1 FROM generate_series(1, 5000) AS i`,
		`INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet, created_at_ms, updated_at_ms, concurrency_key)
			SELECT 't' || i, 'wf', 'n' || i, '{}', '[]', CASE WHEN i % 4 = 0 THEN 'pending' ELSE 'completed' END, 3, 0, 1, 1, 'k' || (i % 5000)
			FROM generate_series(1, 40000) AS i`,
		`ANALYZE concurrency_keys`, `ANALYZE tasks`,
	)
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
		if strings.Contains(q.sql, "DELETE") && strings.Contains(p, "Anti Join") {
			t.Errorf("%s: plan\n%s\nwant the idle test a subplan per key (idleKey's scalar subquery), not an anti-join", name, p)
		}
	}
	// FreeKeys' statement reads the keys' rows and their ready tasks
	// through their indexes (the paused workflows, a small table, are read
	// whole once, as every claim scan reads them).
	p := explain(t, c, `EXPLAIN `+freeKeysSQL, []string{"k2", "k3"})
	if !strings.Contains(p, "concurrency_keys_pkey") || !strings.Contains(p, "tasks_ready_by_key") ||
		strings.Contains(p, "Seq Scan on tasks") || strings.Contains(p, "Seq Scan on concurrency_keys") || strings.Contains(p, "Sort") {
		t.Errorf("FreeKeys: plan\n%s\nwant concurrency_keys_pkey and tasks_ready_by_key, no sequential scan of tasks or keys, no sort", p)
	}
	if strings.Contains(p, "Anti Join") {
		t.Errorf("FreeKeys: plan\n%s\nwant the idle test a subplan per key (idleKey's scalar subquery), not an anti-join", p)
	}
}

// TestClaimScanReadsOnlyClosedKeys: with 5,000 concurrency keys, one
// full and one held back by its rate, every claim scan (custom and
// generic plans) finds the closed keys through concurrency_keys_at_cap and
// concurrency_keys_rate_open, never by reading every key; so a claim's
// cost does not grow with the number of keys. The full key's 10,000
// queued tasks and the rate-held key's 10,000 stand ahead of the one
// claimable task: parked (0018, 0025), all but the first of each (the
// rate is 1) leave the ready indexes, so each scan walks past at most
// two of them (Rows Removed by Filter) and reads a few buffers; with
// every task unparked again (the ready indexes as before 0018) the same
// scans walk all 20,000, which the test measures too, so that it fails
// if parking stops working.
func TestClaimScanReadsOnlyClosedKeys(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	open(t, url, Options{})
	c := raw(t, url)
	execAll(t, c,
		`INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms) VALUES ('wf', 1, 1)`,
		`INSERT INTO concurrency_keys (key, max_claimed, claimed, updated_at_ms) VALUES ('full', 2, 2, 1)`,
		`INSERT INTO concurrency_keys (key, rate_count, rate_interval_ms, recent_ms, rate_open_at_ms, updated_at_ms) VALUES ('rated', 1, 1000, '500', 1500, 1)`,
		`INSERT INTO concurrency_keys (key, max_claimed, claimed, updated_at_ms) SELECT 'k' || i, 2, i % 2, 1 FROM generate_series(1, 5000) AS i`,
		`INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet, created_at_ms, updated_at_ms, concurrency_key, priority)
			SELECT 't' || i, 'wf', 'n' || i, '{}', '[]', 'pending', 3, 0, 1, 1, 'full', 5 FROM generate_series(1, 10000) AS i`,
		`INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet, created_at_ms, updated_at_ms, concurrency_key, priority)
			SELECT 'r' || i, 'wf', 'r' || i, '{}', '[]', 'pending', 3, 0, 1, 1, 'rated', 5 FROM generate_series(1, 10000) AS i`,
		`INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet, created_at_ms, updated_at_ms, concurrency_key, priority)
			VALUES ('free', 'wf', 'free', '{}', '[]', 'pending', 3, 0, 1, 1, '', 0)`,
		`ANALYZE concurrency_keys`, `ANALYZE tasks`,
	)
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
	var n int
	if err := c.QueryRow(ctx, `SELECT COUNT(*) FROM tasks WHERE key_parked`).Scan(&n); err != nil || n != 19998 {
		t.Fatalf("%d of the closed keys' 20,000 queued tasks parked (%v), want all but the first of each", n, err)
	}
	// measure runs every scan, checks it found the one claimable task,
	// and returns the entries it passed over and the buffers it read.
	measure := func(when string) (walked, buffers []int) {
		for _, q := range scans {
			p := explain(t, c, `EXPLAIN (ANALYZE, BUFFERS) `+q.sql, q.args...)
			check(q.name, p, q.rate)
			if !strings.Contains(p, "rows=1 loops=1") {
				t.Errorf("%s: plan\n%s\nwant the one claimable task", q.name, p)
			}
			w, b := planFigures(t, p)
			walked, buffers = append(walked, w), append(buffers, b)
			t.Logf("%s, %s: passed over %d entries, read %d buffers\n%s", when, q.name, w, b, p)
		}
		return walked, buffers
	}
	// A change of a limit counts the key's claimed tasks (LockKeyForLimit)
	// from the live leases, not from its 10,000 queued tasks.
	if p := explain(t, c, `EXPLAIN `+countClaimedOfKeySQL, "full"); !strings.Contains(p, "tasks_leases") || strings.Contains(p, "Seq Scan on tasks") {
		t.Errorf("the count of a key's claimed tasks: plan\n%s\nwant it read through tasks_leases", p)
	}
	walked, buffers := measure("parked")
	if _, err := c.Exec(ctx, `UPDATE tasks SET key_parked = false`); err != nil {
		t.Fatal(err)
	}
	walkedBefore, buffersBefore := measure("unparked, as before 0018")
	for i, q := range scans {
		if walked[i] > 2 || walkedBefore[i] < 20000 || buffers[i]*10 > buffersBefore[i] {
			t.Errorf("%s: passed over %d queued tasks of the closed keys parked, %d unparked; read %d buffers parked, %d unparked: want at most 2 passed over and a tenth of the buffers parked, and 20,000 unparked",
				q.name, walked[i], walkedBefore[i], buffers[i], buffersBefore[i])
		}
		t.Logf("%s: buffers per claim scan with 10,000 queued on a full key and 10,000 on a rate-held one: %d unparked (before 0018), %d parked",
			q.name, buffersBefore[i], buffers[i])
	}
	// The parking triggers' statements (0018) read a key's group of tasks
	// through tasks_ready_by_key_group, never every task of the key.
	const group = `concurrency_key = $1 AND concurrency_key <> '' AND workflow_id = $2 AND requires = $3 AND state = 'pending' AND due_at_ms = 0`
	parking := map[string]struct {
		sql  string
		args []any
	}{
		"a task becoming ready": {`SELECT count(*) FROM tasks WHERE NOT key_parked AND ` + group +
			` AND seq <> $4 AND (priority > $5 OR (priority = $5 AND seq < $4))`, []any{"full", "wf", "", int64(10001), 5}},
		"a task leaving the ready set": {`SELECT seq FROM tasks WHERE key_parked AND ` + group +
			` ORDER BY priority DESC, seq LIMIT 1`, []any{"full", "wf", ""}},
		"a key filling": {`SELECT g.seq FROM (SELECT seq, row_number() OVER (PARTITION BY workflow_id, requires ORDER BY priority DESC, seq) AS n
			FROM tasks WHERE concurrency_key = $1 AND concurrency_key <> '' AND NOT key_parked AND state = 'pending' AND due_at_ms = 0) g
			WHERE g.n > 1`, []any{"full"}},
		"a slot freed": {`SELECT (SELECT p.seq FROM tasks p WHERE p.concurrency_key = $1 AND p.concurrency_key <> '' AND p.key_parked
				AND p.workflow_id = g.workflow_id AND p.requires = g.requires AND p.state = 'pending' AND p.due_at_ms = 0
				ORDER BY p.priority DESC, p.seq LIMIT 1)
			FROM (SELECT DISTINCT workflow_id, requires FROM tasks
				WHERE concurrency_key = $1 AND concurrency_key <> '' AND NOT key_parked AND state = 'pending' AND due_at_ms = 0) g`, []any{"full"}},
	}
	if _, err := c.Exec(ctx, `UPDATE tasks SET key_parked = (seq > (SELECT MIN(seq) FROM tasks WHERE concurrency_key = 'full')) WHERE concurrency_key = 'full'`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `VACUUM ANALYZE tasks`); err != nil {
		t.Fatal(err)
	}
	for name, q := range parking {
		p := explain(t, c, `EXPLAIN (ANALYZE, BUFFERS) `+q.sql, q.args...)
		_, b := planFigures(t, p)
		if !strings.Contains(p, "tasks_ready_by_key_group") || strings.Contains(p, "Seq Scan on tasks") || b > 20 {
			t.Errorf("parking, %s: plan\n%s\nwant tasks_ready_by_key_group, no scan of tasks, a few buffers", name, p)
		}
		t.Logf("parking, %s: %d buffers\n%s", name, b, p)
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
	// PL/pgSQL may run the triggers' statements with generic plans too.
	i := 0
	for name, q := range parking {
		i++
		stmt, args := fmt.Sprintf("generic_parking_%d", i), make([]string, len(q.args))
		for j, a := range q.args {
			args[j] = fmt.Sprintf("'%v'", a)
		}
		if _, err := c.Exec(ctx, `PREPARE `+stmt+` AS `+q.sql); err != nil {
			t.Fatalf("prepare %s: %v", q.sql, err)
		}
		if p := explain(t, c, `EXPLAIN EXECUTE `+stmt+`(`+strings.Join(args, ", ")+`)`); !strings.Contains(p, "tasks_ready_by_key_group") ||
			strings.Contains(p, "Seq Scan on tasks") {
			t.Errorf("generic plan of parking, %s:\n%s\nwant tasks_ready_by_key_group, no scan of tasks", name, p)
		}
	}
}

// planFigures reads an EXPLAIN (ANALYZE, BUFFERS) plan: the rows its
// nodes removed by filter, and the shared buffers (hit and read) of its
// top node, which counts its children's.
func planFigures(t *testing.T, plan string) (removed, buffers int) {
	t.Helper()
	for _, m := range regexp.MustCompile(`Rows Removed by Filter: (\d+)`).FindAllStringSubmatch(plan, -1) {
		n, _ := strconv.Atoi(m[1])
		removed += n
	}
	m := regexp.MustCompile(`Buffers: shared(?: hit=(\d+))?(?: read=(\d+))?`).FindStringSubmatch(plan)
	if m == nil {
		t.Fatalf("no buffers in plan\n%s", plan)
	}
	hit, _ := strconv.Atoi(m[1])
	read, _ := strconv.Atoi(m[2])
	return removed, hit + read
}
