package tgpostgres

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// TestWorkflowReadsUseTaskNodes: every statement that reads one workflow's
// tasks or nodes finds them through task_nodes' primary key and tasks by
// seq, never by reading tasks, task_nodes or edges whole, with custom and
// with generic plans, on a database of many workflows (400 of 100 tasks,
// analyzed), where one workflow is a small part of the tasks: since 0031
// tasks has no index that leads with workflow_id but the ready ones.
func TestWorkflowReadsUseTaskNodes(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url := pgtest.URL(t)
	open(t, url, Options{})
	c := raw(t, url)
	execAll(t, c,
		`INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms) SELECT 'w' || i, 1, 1 FROM generate_series(1, 400) AS i`,
		`INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet, created_at_ms, updated_at_ms)
			SELECT 't-' || i, 'w' || (1 + i % 400), 'n' || i, '{}', '[]', (ARRAY['pending', 'claimed', 'completed'])[1 + i % 3], 3, 0, 1, 1
			FROM generate_series(1, 40000) AS i`,
		`INSERT INTO edges (dep_seq, task_seq) SELECT s, s + 400 FROM generate_series(1, 39600) AS s`,
		// workflows is left unanalyzed, as autovacuum may leave it: the
		// prune must still probe each workflow for an unfinished task,
		// not hash every unfinished task of the database.
		`ANALYZE tasks`, `ANALYZE task_nodes`, `ANALYZE edges`,
	)
	nodes := `'{n400,n800,n1200}'::text[]`
	listTasks, _ := listTasksQuery(tgdriver.ListFilter{WorkflowID: "w1"})
	listOfState, _ := listTasksQuery(tgdriver.ListFilter{WorkflowID: "w1", State: "pending", NoBodies: true})
	for _, q := range []struct {
		name, sql, args string
		// whole is a table the statement reads whole by design: the
		// prune's candidates are every workflow unchanged since a time,
		// each then probed for an unfinished task.
		whole string
	}{
		{"TaskByNode", taskByNodeSQL, `'w1', 'n400'`, ""},
		{"TasksByNodes", tasksByNodesSQL, `'w1', ` + nodes, ""},
		{"LockDependencies", lockDependenciesSQL, `'w1', ` + nodes, ""},
		{"UnfinishedInWorkflow", unfinishedInWorkflowSQL, `'w1'`, ""},
		{"WorkflowTaskStates", workflowTaskStatesSQL, `'w1'`, ""},
		{"WorkflowCounts", workflowCountsSQL, `5, 'w1'`, ""},
		{"WorkflowEdges", workflowEdgesSQL, `'w1'`, ""},
		{"ListTasks", listTasks, `'w1'`, ""},
		{"ListTasksOfState", listOfState, `'w1', 'pending'`, ""},
		{"WorkflowUsage", workflowUsageSQL, `'w1'`, ""},
		{"PruneCandidates", pruneCandidatesSQL, `5, 10`, "workflows"},
		{"PruneWorkflow", pruneWorkflowSQL, `'w1', 5`, ""},
		{"workflows_delete_tasks", `SELECT 1 FROM tasks WHERE seq IN (SELECT n.seq FROM task_nodes n WHERE n.workflow_id = $1)`, `'w1'`, ""},
	} {
		name := "wf_" + strings.ToLower(q.name)
		if _, err := c.Exec(ctx, `PREPARE `+name+` AS `+q.sql); err != nil {
			t.Fatalf("prepare %s: %v", q.name, err)
		}
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			if _, err := c.Exec(ctx, `SET plan_cache_mode = `+mode); err != nil {
				t.Fatal(err)
			}
			p := explain(t, c, `EXPLAIN EXECUTE `+name+`(`+q.args+`)`)
			scans := p
			if q.whole != "" {
				scans = strings.ReplaceAll(scans, "Seq Scan on "+q.whole+" ", "")
			}
			if !strings.Contains(p, "task_nodes_pkey") || strings.Contains(scans, "Seq Scan") {
				t.Errorf("%s, %s:\n%s\nwant task_nodes_pkey read, and no table read whole", q.name, mode, p)
			}
		}
	}
}

// TestTaskNodesFollowTasks: a task's row of task_nodes is written with it,
// by any insert, and keeps a workflow's node ids unique (a second task of
// a node is refused with a unique violation, which Write runs again); a
// workflow deleted takes its tasks, their rows of task_nodes and their
// edges with it, and leaves the other workflows' alone; a task for a
// workflow that does not exist is refused.
func TestTaskNodesFollowTasks(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url := pgtest.URL(t)
	d := open(t, url, Options{})
	c := raw(t, url)
	a1, a2 := addTask(t, d, "a", "n1", "pending"), addTask(t, d, "a", "n2", "pending")
	b1 := addTask(t, d, "b", "n1", "completed")
	execAll(t, c, fmt.Sprintf(`INSERT INTO edges (dep_seq, task_seq) VALUES (%d, %d)`, a1, a2))
	if n := count(t, c, `SELECT COUNT(*) FROM task_nodes n JOIN tasks t ON t.seq = n.seq AND t.workflow_id = n.workflow_id AND t.node_id = n.node_id`); n != 3 {
		t.Fatalf("%d tasks with their row of task_nodes, want 3", n)
	}

	// The same node again, by another task: refused, nothing written.
	_, err := c.Exec(ctx, `INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet, created_at_ms, updated_at_ms)
		VALUES ('a-n1-again', 'a', 'n1', '{}', '[]', 'pending', 1, 0, 1, 1)`)
	if sqlState(err) != codeUniqueViolation {
		t.Fatalf("a second task of node a/n1: %v, want a unique violation", err)
	}
	if n := count(t, c, `SELECT COUNT(*) FROM tasks WHERE task_id = 'a-n1-again'`); n != 0 {
		t.Fatalf("the refused task was written")
	}
	if got, err := d.Reads().TaskByNode(ctx, "a", "n1"); err != nil || got.Seq != a1 {
		t.Fatalf("TaskByNode(a, n1): %d %v, want seq %d", got.Seq, err, a1)
	}

	// A workflow that does not exist takes no task.
	if _, err := c.Exec(ctx, `INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet, created_at_ms, updated_at_ms)
		VALUES ('ghost-1', 'ghost', 'n1', '{}', '[]', 'pending', 1, 0, 1, 1)`); err == nil {
		t.Fatal("a task of a workflow that does not exist was inserted")
	}

	execAll(t, c, `DELETE FROM workflows WHERE workflow_id = 'a'`)
	for q, want := range map[string]int64{
		`SELECT COUNT(*) FROM tasks WHERE workflow_id = 'a'`:         0,
		`SELECT COUNT(*) FROM task_nodes WHERE workflow_id = 'a'`:    0,
		`SELECT COUNT(*) FROM edges`:                                 0,
		fmt.Sprintf(`SELECT COUNT(*) FROM tasks WHERE seq = %d`, b1): 1,
		`SELECT COUNT(*) FROM task_nodes WHERE workflow_id = 'b'`:    1,
	} {
		if n := count(t, c, q); n != want {
			t.Errorf("after deleting workflow a: %s = %d, want %d", q, n, want)
		}
	}
	if _, err := d.Reads().TaskByNode(ctx, "a", "n1"); !errors.Is(err, tgdriver.ErrNoRows) {
		t.Errorf("TaskByNode(a, n1) after its workflow was deleted: %v, want no rows", err)
	}
}
