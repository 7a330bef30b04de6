package tgpostgres

import (
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// ANALYZE (autovacuum's, under load) skips the body columns of tasks,
// events and event packs, which no statement filters, joins or orders by
// (migrations 0026 and 0029),
// and keeps the statistics of the columns statements do reach rows by:
// the planner's estimates of those must not fall back to defaults.
func TestAnalyzeSkipsOnlyBodies(t *testing.T) {
	ctx := testCtx(t)
	d := open(t, pgtest.URL(t), Options{})
	skipped := func(table string) []string {
		rows, err := d.pool.Query(ctx, `SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0
			AND NOT attisdropped AND attstattarget = 0 ORDER BY attname`, table)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for table, keep := range map[string][]string{
		"tasks": {"seq", "task_id", "workflow_id", "node_id", "state", "due_at_ms", "concurrency_key", "requires", "key_parked",
			"priority", "lease_expires_at_ms", "kind", "cancel_cause", "generation", "unmet", "owner"},
		"events":      {"event_id", "workflow_id", "wseq", "task_id", "task_seq", "generation"},
		"event_packs": {"pack_id", "workflow_id", "task_seqs"},
	} {
		got := skipped(table)
		if len(got) == 0 {
			t.Errorf("ANALYZE of %s skips no column; want the bodies skipped (migration 0026)", table)
		}
		for _, c := range keep {
			if slices.Contains(got, c) {
				t.Errorf("ANALYZE of %s skips %s, which statements filter or join on", table, c)
			}
		}
	}
	if got, want := skipped("events"), []string{"actor_kind", "actor_name", "actor_principal", "at_ms", "content", "detail",
		"hash", "hash_version", "kind", "owner", "prev_hash", "task_state"}; !slices.Equal(got, want) {
		t.Errorf("ANALYZE of events skips %v, want %v", got, want)
	}
	if got, want := skipped("event_packs"), []string{"actor_kinds", "actor_names", "actor_principals", "ats", "contents", "details",
		"event_ids", "generations", "hash_versions", "kinds", "owners", "task_ids", "task_states"}; !slices.Equal(got, want) {
		t.Errorf("ANALYZE of event_packs skips %v, want %v (migration 0029)", got, want)
	}
}
