package tgpostgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// TestHotUpdatesPlanGenerically: the hot path's rounds run their update
// shapes on generic plans (SendRound), so those plans must find each
// element's task by an index probe (tasks_pkey by seq, tasks_task_id_key
// by task id), never by reading the table, with many tasks of every state
// (analyzed). The shapes are the claim's (by seq, due guard) and the
// completion's (by task id, fenced by generation, owner, token and a live
// lease).
func TestHotUpdatesPlanGenerically(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	open(t, url, Options{})
	c := raw(t, url)
	if _, err := c.Exec(ctx, `INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms) VALUES ('w', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet,
		created_at_ms, updated_at_ms)
		SELECT 't-' || i, 'w', 'n' || i, '{}', '[]', (ARRAY['pending', 'claimed', 'completed'])[1 + i % 3], 3, 0, 1, 1
		FROM generate_series(1, 20000) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `ANALYZE tasks`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	var claim, complete tgdriver.UpdateShape
	for _, i := range []int{tgdriver.SetState, tgdriver.SetOwner, tgdriver.SetGeneration, tgdriver.SetTokenHash,
		tgdriver.SetLeaseExpiresAtMS, tgdriver.SetLeaseMS, tgdriver.SetStatusMessage} {
		claim.Set[i] = tgdriver.FormValue
	}
	claim.AddAttempt = true
	claim.Guard[tgdriver.GuardGeneration] = tgdriver.FormValue
	claim.Guard[tgdriver.GuardDueBy] = tgdriver.FormValue
	claim.States = "pending"
	complete.ByTaskID = true
	for _, i := range []int{tgdriver.SetState, tgdriver.SetResult, tgdriver.SetStatusMessage} {
		complete.Set[i] = tgdriver.FormValue
	}
	complete.Set[tgdriver.SetTokenHash] = tgdriver.FormNull
	complete.Set[tgdriver.SetLeaseExpiresAtMS] = tgdriver.FormNull
	for _, i := range []int{tgdriver.GuardGeneration, tgdriver.GuardOwner, tgdriver.GuardTokenHash, tgdriver.GuardLeaseLiveAt} {
		complete.Guard[i] = tgdriver.FormValue
	}
	complete.States = "claimed"
	for i, q := range []struct {
		name  string
		sh    tgdriver.UpdateShape
		rows  bool // as sent: a claim by Apply, a completion by Fetch
		index string
	}{
		{"claim", claim, false, "tasks_pkey"},
		{"complete", complete, true, "tasks_task_id_key"},
	} {
		sql := updateText(q.sh, q.rows)
		name := fmt.Sprintf("hot_%d", i)
		if _, err := c.Exec(ctx, `PREPARE `+name+` AS `+sql); err != nil {
			t.Fatalf("prepare %s: %v", sql, err)
		}
		// The arrays' values do not matter to a generic plan: NULLs.
		args := strings.TrimSuffix(strings.Repeat("NULL, ", strings.Count(sql, "[]")), ", ")
		p := explain(t, c, `EXPLAIN EXECUTE `+name+`(`+args+`)`)
		if !strings.Contains(p, "Index Scan using "+q.index+" on tasks") || !strings.Contains(p, "Nested Loop") ||
			strings.Contains(p, "Seq Scan on tasks") || strings.Contains(p, "Bitmap") {
			t.Errorf("generic plan of the %s update:\n%s\nwant a nested loop over the arrays probing %s", q.name, p, q.index)
		}
	}
}

// TestHotRoundsPlanGenerically: a transaction whose round (Fetch) went to
// the server plans generically from then on, and only until it ends (SET
// LOCAL): the next transaction, and one that sends no round, plan as the
// server is configured.
func TestHotRoundsPlanGenerically(t *testing.T) {
	ctx := testCtx(t)
	d := open(t, pgtest.URL(t), Options{})
	mode := func(tx tgdriver.Tx) (string, error) {
		var m string
		err := tx.(*wtx).c.QueryRow(ctx, `SHOW plan_cache_mode`).Scan(&m)
		return m, err
	}
	for i, round := range []bool{true, false, true} {
		err := d.Write(ctx, func(tx tgdriver.Tx) error {
			if round {
				if _, err := tx.Fetch(ctx, tgdriver.Fetch{Claims: []tgdriver.ClaimScan{{N: 1, AtMS: 1}}}); err != nil {
					return err
				}
			}
			m, err := mode(tx)
			if err != nil {
				return err
			}
			if want := map[bool]string{true: "force_generic_plan", false: "auto"}[round]; m != want {
				return fmt.Errorf("transaction %d (a round sent: %v): plan_cache_mode %s, want %s", i, round, m, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
