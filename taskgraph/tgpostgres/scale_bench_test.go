package tgpostgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest/keys"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// BenchmarkClaimNextScale is taskgraph's benchmark of the same name on
// PostgreSQL: one claim-next through the store (tgpostgres, one replica)
// with N tasks of which 1,000 are claimable (a third require nothing, a
// third gpu, a third cuda and gpu; priorities spread over -100..100), with
// 1M also 1,000 pending tasks not due for a day, and the rest completed,
// for a claim without capabilities and one with gpu. The fixtures are
// built with bulk SQL and ANALYZEd once per run of the benchmark. It
// reports; it asserts no speed.
//
//	go test -run '^$' -bench ClaimNextScale -benchtime 2000x -count 3 ./taskgraph/tgpostgres
func BenchmarkClaimNextScale(b *testing.B) {
	urls := map[int]string{}
	for _, n := range []int{1000, 1_000_000} {
		urls[n] = pgScaleFixture(b, n)
	}
	for _, bc := range []struct {
		n    int
		caps []string
	}{{1000, nil}, {1_000_000, nil}, {1000, []string{"gpu"}}, {1_000_000, []string{"gpu"}}} {
		name := fmt.Sprintf("tasks=%d/caps=none", bc.n)
		if bc.caps != nil {
			name = fmt.Sprintf("tasks=%d/caps=%s", bc.n, bc.caps[0])
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			url := urls[bc.n]
			pgResetClaims(b, url)
			s, closeS := openStore(b, url)
			defer closeS()
			b.ResetTimer()
			start := time.Now()
			var paused time.Duration
			for i := 0; i < b.N; i++ {
				_, ok, err := s.Claim(ctx, tg.ClaimRequest{Owner: "w", Lease: lease.MaxDuration, Capabilities: bc.caps})
				if err != nil {
					b.Fatal(err)
				}
				if !ok {
					b.StopTimer()
					p := time.Now()
					pgResetClaims(b, url)
					paused += time.Since(p)
					b.StartTimer()
					i--
				}
			}
			took := time.Since(start) - paused
			b.StopTimer()
			b.ReportMetric(float64(b.N)/took.Seconds(), "claims/s")
		})
	}
}

// pgScaleFixture returns a fresh database (dropped when b ends) holding
// the fixture of BenchmarkClaimNextScale with n tasks.
func pgScaleFixture(b *testing.B, n int) string {
	b.Helper()
	ctx := context.Background()
	url := pgtest.URL(b)
	start := time.Now()
	drv, err := tgpostgres.Open(ctx, url, tgpostgres.Options{}) // migrates
	if err != nil {
		b.Fatal(err)
	}
	if err := drv.Close(); err != nil {
		b.Fatal(err)
	}
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	const pending, perWorkflow = 1000, tg.MaxTasksPerWorkflow
	every := n / pending
	now := time.Now().UnixMilli()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO workflows (workflow_id, task_count, created_at_ms, updated_at_ms)
			SELECT 'wf' || lpad(w::text, 5, '0'), LEAST($2::int, $1::int - w * $2::int), $3::bigint, $3::bigint
			FROM generate_series(0, ($1::int - 1) / $2::int) AS w`, []any{n, perWorkflow, now}},
		{`INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, owner, generation,
			attempts, max_attempts, unmet, result, status_message, created_at_ms, updated_at_ms)
			SELECT lpad(x::text, 26, '0'), 'wf' || lpad(((x - 1) / $2::int)::text, 5, '0'), 'n' || x, '{"job":"bench"}', '[]',
			'completed', 'seed', 1, 1, 3, 0, '1', 'completed by seed (generation 1)', $3::bigint, $3::bigint
			FROM generate_series(1, $1::int) AS x`, []any{n, perWorkflow, now}},
		{`UPDATE tasks SET state = 'pending', owner = NULL, generation = 0, attempts = 0, result = NULL,
			status_message = 'ready to claim', priority = (seq / $1::int) % 201 - 100,
			requires = CASE (seq / $1::int) % 3 WHEN 1 THEN 'gpu' WHEN 2 THEN 'cuda gpu' ELSE '' END
			WHERE seq % $1::int = 0`, []any{every}},
	} {
		if _, err := c.Exec(ctx, q.sql, q.args...); err != nil {
			b.Fatalf("%s: %v", q.sql, err)
		}
	}
	if every >= 2 {
		if _, err := c.Exec(ctx, `UPDATE tasks SET state = 'pending', owner = NULL, generation = 0, attempts = 0, result = NULL,
			status_message = 'waiting until tomorrow', due_at_ms = $1::bigint + 86400000, priority = 100
			WHERE seq % $2::int = $2::int / 2`, now, every); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := c.Exec(ctx, `VACUUM ANALYZE tasks`); err != nil {
		b.Fatal(err)
	}
	var got int
	if err := c.QueryRow(ctx, `SELECT COUNT(*) FROM tasks WHERE state = 'pending' AND due_at_ms = 0`).Scan(&got); err != nil || got != pending {
		b.Fatalf("fixture has %d claimable tasks (%v), want %d", got, err, pending)
	}
	b.Logf("built the %d-task PostgreSQL fixture in %v", n, time.Since(start).Round(time.Millisecond))
	return url
}

// pgResetClaims puts every claimed task of the fixture back to pending.
func pgResetClaims(b *testing.B, url string) {
	b.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `UPDATE tasks SET state = 'pending', owner = NULL, token_hash = NULL, lease_expires_at_ms = NULL
		WHERE state = 'claimed'`); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkClaimPastRateHeldKey runs keys.BenchClaimPastRateHeldKey on a
// fresh PostgreSQL database (one replica).
func BenchmarkClaimPastRateHeldKey(b *testing.B) {
	s, closeS := openStore(b, pgtest.URL(b))
	defer closeS()
	keys.BenchClaimPastRateHeldKey(b, s)
}
