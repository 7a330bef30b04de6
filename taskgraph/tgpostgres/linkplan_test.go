package tgpostgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// TestTryLockJournaledPlanByIndex: a linker's pass probes the journal by
// workflow (event_journal_by_workflow) and locks the workflows by their key,
// never reading a whole table, with many workflows and a long journal, on
// the generic plan as on a custom one (plan_cache_mode auto may take either).
func TestTryLockJournaledPlanByIndex(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	d := open(t, url, Options{})
	c := raw(t, url)
	if _, err := c.Exec(ctx, `INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms)
		SELECT 'w' || i, 1, 1 FROM generate_series(1, 3000) AS i`); err != nil {
		t.Fatal(err)
	}
	evs := make([]tgdriver.EventRow, 0, 30000)
	for i := range 30000 {
		wf := fmt.Sprintf("w%d", 1+i%3000)
		evs = append(evs, tgdriver.EventRow{WorkflowID: wf, TaskID: fmt.Sprintf("t%d", i), Kind: "created", AtMS: 1, Detail: "{}", HashVersion: 2})
	}
	if err := d.Write(ctx, func(tx tgdriver.Tx) error { return tx.JournalEvents(ctx, evs) }); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `PREPARE try_lock AS `+tryLockJournaledSQL); err != nil {
		t.Fatal(err)
	}
	// The generic plan, and the custom plan of a pass's few workflows.
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		if _, err := c.Exec(ctx, `SET plan_cache_mode = `+mode); err != nil {
			t.Fatal(err)
		}
		p := explain(t, c, `EXPLAIN EXECUTE try_lock('{w1,w2,w3,w4,w5}')`)
		if strings.Contains(p, "Seq Scan") || !strings.Contains(p, "event_journal_by_workflow") ||
			!strings.Contains(p, "Index Cond: (workflow_id = ANY") {
			t.Errorf("%s plan of TryLockJournaled reads a whole table, or not the journal's and the workflows' indexes:\n%s", mode, p)
		}
	}
}
