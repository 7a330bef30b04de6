package taskgraph

// Benchmarks of the "Speed" section. Run them with modest settings on
// a shared machine and compare medians of repeated runs, e.g.
//
//	go test -run '^$' -bench 'ClaimComplete|BaselineTxPerOp' -benchtime 2000x -count 5 ./taskgraph
//	go test -run '^$' -bench ClaimNextScale -benchtime 2000x -count 5 ./taskgraph
//
// scripts/bench-store.md records the commands and figures. Nothing here
// asserts a speed: the figures are reported (cycles/s, claims/s) for a human
// or a script to compare.

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

var benchWorkers = []int{1, 8}
var benchSyncs = []tgsqlite.SyncMode{tgsqlite.SyncFull, tgsqlite.SyncNormal}

// seedPending creates n pending tasks without dependencies, in workflows of
// at most 1,000 tasks ("bench-0000", ...), through the store.
func seedPending(tb testing.TB, s *Store, n int) {
	tb.Helper()
	const perWorkflow = 1000
	ctx := context.Background()
	nodes := make([]NodeSpec, 0, perWorkflow)
	for i := 0; i < n; i += perWorkflow {
		nodes = nodes[:0]
		for j := i; j < n && j < i+perWorkflow; j++ {
			nodes = append(nodes, NodeSpec{NodeID: fmt.Sprintf("n%07d", j), Payload: json.RawMessage(`{"job":"bench"}`)})
		}
		if _, err := s.CreateWorkflow(ctx, fmt.Sprintf("bench-%04d", i/perWorkflow), nodes); err != nil {
			tb.Fatal(err)
		}
	}
}

// runWorkers runs cycle b.N times in total across workers goroutines and
// reports cycles per second of wall time.
func runWorkers(b *testing.B, workers int, cycle func(owner string) error) {
	b.Helper()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(owner string) {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				if err := cycle(owner); err != nil {
					errs <- err
					return
				}
			}
		}(fmt.Sprintf("worker-%02d", w))
	}
	wg.Wait()
	took := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/took.Seconds(), "cycles/s")
}

// wantCompleted fails the benchmark unless exactly n tasks are completed:
// the figures are only worth reporting if the work was really done.
func wantCompleted(b *testing.B, path string, n int) {
	b.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_query_only=on&_busy_timeout=10000")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var done, events int
	if err := db.QueryRow(`SELECT COUNT(*) FROM tasks WHERE state = 'completed'`).Scan(&done); err != nil {
		b.Fatal(err)
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM events WHERE kind IN ('claim', 'complete')`).Scan(&events); err != nil {
		b.Fatal(err)
	}
	if done != n || events != 2*n {
		b.Fatalf("%d tasks completed and %d claim/complete events, want %d and %d", done, events, n, 2*n)
	}
}

// BenchmarkClaimComplete measures the store: each b.N op is one claim-next
// plus one complete, through the Store API (group commit), by 1 or 8
// concurrent workers, with synchronous=FULL or NORMAL. Every acknowledged
// write is committed before the call returns.
func BenchmarkClaimComplete(b *testing.B) {
	for _, workers := range benchWorkers {
		for _, syn := range benchSyncs {
			b.Run(fmt.Sprintf("workers=%d/sync=%s", workers, syn), func(b *testing.B) {
				path := filepath.Join(b.TempDir(), "bench.db")
				var ops, commits atomic.Int64
				s, err := openSQLite(context.Background(), path, Options{OnBatch: func(n int, _ time.Duration, err error) {
					if err == nil {
						ops.Add(int64(n))
						commits.Add(1)
					}
				}}, tgsqlite.Options{Sync: syn})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				seedPending(b, s, b.N)
				ops.Store(0)
				commits.Store(0)
				ctx := context.Background()
				result := json.RawMessage(`{"ok":true}`)
				runWorkers(b, workers, func(owner string) error {
					c, ok, err := s.Claim(ctx, ClaimRequest{Owner: owner, Lease: time.Minute})
					if err != nil || !ok {
						return fmt.Errorf("claim-next: ok=%v err=%v", ok, err)
					}
					_, err = s.Complete(ctx, holder(c), result)
					return err
				})
				if n := commits.Load(); n > 0 {
					b.ReportMetric(float64(ops.Load())/float64(n), "ops/commit")
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				wantCompleted(b, path, b.N)
			})
		}
	}
}

// BenchmarkBaselineTxPerOp is the comparison point for BenchmarkClaimComplete:
// the same cycle written as naive code would, with database/sql on the same
// SQLite settings (WAL, the same synchronous, busy_timeout, foreign keys,
// BEGIN IMMEDIATE), each claim and each complete its own transaction, the
// workers sharing one *sql.DB pool. The work per cycle is the store's: the
// claim selects the oldest pending task, marks it claimed with a fresh token
// digest and appends a hash-chained event (read the workflow's chain head,
// insert the event, advance the head); the complete re-reads the claim,
// checks the token, marks the task completed with the fencing predicate,
// appends an event and releases dependents.
func BenchmarkBaselineTxPerOp(b *testing.B) {
	for _, workers := range benchWorkers {
		for _, syn := range benchSyncs {
			b.Run(fmt.Sprintf("workers=%d/sync=%s", workers, syn), func(b *testing.B) {
				path := filepath.Join(b.TempDir(), "bench.db")
				s, err := openSQLite(context.Background(), path, Options{}, tgsqlite.Options{Sync: syn})
				if err != nil {
					b.Fatal(err)
				}
				seedPending(b, s, b.N)
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				q := url.Values{}
				q.Set("_journal_mode", "WAL")
				q.Set("_busy_timeout", "10000")
				q.Set("_foreign_keys", "on")
				q.Set("_synchronous", string(syn))
				q.Set("_txlock", "immediate")
				db, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				ctx := context.Background()
				runWorkers(b, workers, func(owner string) error {
					seq, gen, token, err := baselineClaim(ctx, db, owner)
					if err != nil {
						return fmt.Errorf("claim: %w", err)
					}
					if err := baselineComplete(ctx, db, seq, owner, gen, token, `{"ok":true}`); err != nil {
						return fmt.Errorf("complete: %w", err)
					}
					return nil
				})
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				wantCompleted(b, path, b.N)
			})
		}
	}
}

// baselineEvent appends an event to the workflow's hash chain inside tx.
func baselineEvent(ctx context.Context, tx *sql.Tx, wf, taskID, kind, owner string, gen, nowMS int64, detail map[string]any) error {
	d, err := json.Marshal(detail)
	if err != nil {
		return err
	}
	var head string
	var count int64
	if err := tx.QueryRowContext(ctx, `SELECT head_hash, event_count FROM workflows WHERE workflow_id = ?`, wf).Scan(&head, &count); err != nil {
		return err
	}
	e := Event{WorkflowID: wf, Seq: count + 1, TaskID: taskID, Kind: kind, Owner: owner, Generation: gen, At: time.UnixMilli(nowMS), Detail: d, PrevHash: head}
	if e.Hash, err = EventHash(e); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO events (workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, wf, e.Seq, taskID, kind, owner, gen, nowMS, string(d), head, e.Hash); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE workflows SET head_hash = ?, event_count = ?, updated_at_ms = ? WHERE workflow_id = ?`, e.Hash, e.Seq, nowMS, wf)
	return err
}

func baselineClaim(ctx context.Context, db *sql.DB, owner string) (seq, gen int64, token string, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, "", err
	}
	defer tx.Rollback()
	var taskID, wf string
	if err := tx.QueryRowContext(ctx, `SELECT seq, task_id, workflow_id, generation FROM tasks WHERE state = 'pending' ORDER BY seq LIMIT 1`).
		Scan(&seq, &taskID, &wf, &gen); err != nil {
		return 0, 0, "", err
	}
	if token, err = lease.NewToken(); err != nil {
		return 0, 0, "", err
	}
	now := time.Now().UnixMilli()
	gen++
	exp := now + time.Minute.Milliseconds()
	if _, err := tx.ExecContext(ctx, `UPDATE tasks SET state = 'claimed', owner = ?, generation = ?, token_hash = ?, lease_expires_at_ms = ?,
		attempts = attempts + 1, status_message = ?, updated_at_ms = ? WHERE seq = ?`,
		owner, gen, lease.HashToken(token), exp, fmt.Sprintf("claimed by %s (generation %d)", owner, gen), now, seq); err != nil {
		return 0, 0, "", err
	}
	if err := baselineEvent(ctx, tx, wf, taskID, EventClaim, owner, gen, now, map[string]any{"attempt": 1, "lease_expires_at_ms": exp}); err != nil {
		return 0, 0, "", err
	}
	return seq, gen, token, tx.Commit()
}

func baselineComplete(ctx context.Context, db *sql.DB, seq int64, owner string, gen int64, token, result string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var taskID, wf, state, curOwner string
	var curGen, expMS int64
	var hash []byte
	if err := tx.QueryRowContext(ctx, `SELECT task_id, workflow_id, state, owner, generation, token_hash, lease_expires_at_ms FROM tasks WHERE seq = ?`, seq).
		Scan(&taskID, &wf, &state, &curOwner, &curGen, &hash, &expMS); err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	digest := sha256.Sum256([]byte(token))
	if state != "claimed" || curOwner != owner || curGen != gen || subtle.ConstantTimeCompare(digest[:], hash) != 1 || now >= expMS {
		return errors.New("stale claim")
	}
	res, err := tx.ExecContext(ctx, `UPDATE tasks SET state = 'completed', result = ?, token_hash = NULL, lease_expires_at_ms = NULL, status_message = ?,
		updated_at_ms = ? WHERE seq = ? AND state = 'claimed' AND generation = ? AND owner = ? AND lease_expires_at_ms > ?`,
		result, fmt.Sprintf("completed by %s (generation %d)", owner, gen), now, seq, gen, owner, now)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return errors.New("fenced update changed no row")
	}
	if err := baselineEvent(ctx, tx, wf, taskID, EventComplete, owner, gen, now, map[string]any{"result_sha256": sha256Hex([]byte(result))}); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE tasks SET unmet = unmet - 1 WHERE seq IN (SELECT task_seq FROM edges WHERE dep_seq = ?)
		AND state IN ('blocked', 'pending', 'claimed')`, seq); err != nil {
		return err
	}
	return tx.Commit()
}

// Fixtures for BenchmarkClaimNextScale are built once per test process and
// reused by every -count run; TestMain removes them.
var (
	fixtureMu   sync.Mutex
	fixtureDir  string
	fixturePath = map[int]string{}
)

// scaleFixture returns a database holding n tasks in workflows of at most
// 10,000, of which 1,000 are pending, spread evenly in creation order, and
// the rest completed. It is written with direct bulk SQL.
func scaleFixture(b *testing.B, n int) string {
	b.Helper()
	fixtureMu.Lock()
	defer fixtureMu.Unlock()
	if p, ok := fixturePath[n]; ok {
		return p
	}
	if fixtureDir == "" {
		d, err := os.MkdirTemp("", "taskgraph-bench-")
		if err != nil {
			b.Fatal(err)
		}
		fixtureDir = d
	}
	path := filepath.Join(fixtureDir, fmt.Sprintf("scale-%d.db", n))
	start := time.Now()
	s, err := openSQLite(context.Background(), path, Options{}, tgsqlite.Options{Sync: tgsqlite.SyncNormal})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_synchronous=off&_busy_timeout=10000")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	const pending, perWorkflow = 1000, MaxTasksPerWorkflow
	every := n / pending
	now := time.Now().UnixMilli()
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{
		`WITH RECURSIVE w(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM w WHERE i < (?1 - 1) / ?2)
		INSERT INTO workflows (workflow_id, task_count, created_at_ms, updated_at_ms)
		SELECT printf('wf%05d', i), min(?2, ?1 - i * ?2), ?3, ?3 FROM w`,
		`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?1)
		INSERT INTO tasks (seq, task_id, workflow_id, node_id, payload, depends_on, state, owner, generation,
			attempts, max_attempts, unmet, result, status_message, created_at_ms, updated_at_ms)
		SELECT x, printf('%026d', x), printf('wf%05d', (x - 1) / ?2), printf('n%07d', x), '{"job":"bench"}', '[]',
			'completed', 'seed', 1, 1, 3, 0, '1', 'completed by seed (generation 1)', ?3, ?3 FROM c`,
		// The pending tasks spread over every priority, so claim-next reads
		// the (priority DESC, seq) index rather than the first pending seq.
		`UPDATE tasks SET state = 'pending', owner = NULL, generation = 0, attempts = 0, result = NULL,
			status_message = 'ready to claim', priority = (seq / ?4) % 201 - 100 WHERE seq % ?4 = 0`,
		// A third of them require nothing, a third gpu, a third cuda and
		// gpu (capability routing): a claim without capabilities takes only
		// the first third, one with gpu the first two.
		`UPDATE tasks SET requires = CASE (seq / ?4) % 3 WHEN 1 THEN 'gpu' WHEN 2 THEN 'cuda gpu' ELSE '' END WHERE seq % ?4 = 0`,
	} {
		if _, err := tx.Exec(q, n, perWorkflow, now, every); err != nil {
			b.Fatal(err)
		}
	}
	if every >= 2 {
		// Due times present: as many pending tasks again that are not due
		// for a day (a retry's backoff, not_before), outside the ready
		// indexes.
		if _, err := tx.Exec(`UPDATE tasks SET state = 'pending', owner = NULL, generation = 0, attempts = 0, result = NULL,
			status_message = 'waiting until tomorrow', due_at_ms = ?1 + 86400000, priority = 100 WHERE seq % ?2 = ?2 / 2`, now, every); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	var got int
	if err := db.QueryRow(`SELECT COUNT(*) FROM tasks WHERE state = 'pending' AND due_at_ms = 0`).Scan(&got); err != nil || got != pending {
		b.Fatalf("fixture has %d pending tasks (%v), want %d", got, err, pending)
	}
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}
	b.Logf("built the %d-task fixture in %v", n, time.Since(start).Round(time.Millisecond))
	fixturePath[n] = path
	return path
}

// resetClaims puts every claimed task of the fixture back to pending.
func resetClaims(b *testing.B, path string) {
	b.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE tasks SET state = 'pending', owner = NULL, token_hash = NULL, lease_expires_at_ms = NULL
		WHERE state = 'claimed'`); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkClaimNextScale measures one claim-next through the store with N
// tasks of which 1,000 are claimable (a third require nothing, a third gpu,
// a third cuda and gpu), with 1M also 1,000 pending tasks not due for a
// day, and the rest completed: the cost must not grow with the finished or
// not-yet-due tasks (the issue asks for 1M under 2x the 1k figure; the
// benchmark reports, it does not assert), for a claim without capabilities
// and one with gpu. synchronous=NORMAL, so that the figure is the lookup and
// the write rather than an fsync. When the claimable tasks are all claimed,
// the timer stops while they are reset.
func BenchmarkClaimNextScale(b *testing.B) {
	for _, bc := range []struct {
		n    int
		caps []string
	}{{1000, nil}, {1_000_000, nil}, {1000, []string{"gpu"}}, {1_000_000, []string{"gpu"}}} {
		name := fmt.Sprintf("tasks=%d/caps=none", bc.n)
		if bc.caps != nil {
			name = fmt.Sprintf("tasks=%d/caps=%s", bc.n, bc.caps[0])
		}
		n := bc.n
		b.Run(name, func(b *testing.B) {
			path := scaleFixture(b, n)
			resetClaims(b, path)
			s, err := openSQLite(context.Background(), path, Options{}, tgsqlite.Options{Sync: tgsqlite.SyncNormal})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			b.ResetTimer()
			start := time.Now()
			var paused time.Duration
			for i := 0; i < b.N; i++ {
				_, ok, err := s.Claim(ctx, ClaimRequest{Owner: "w", Lease: lease.MaxDuration, Capabilities: bc.caps})
				if err != nil {
					b.Fatal(err)
				}
				if !ok {
					b.StopTimer()
					p := time.Now()
					resetClaims(b, path)
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
