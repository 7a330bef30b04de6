package faults

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// TestFrozenReplicaCostsNoLease freezes a replica (SIGSTOP) in the middle
// of a transaction that holds a workflow's lock, for longer than the
// leases, while workers on a healthy replica heartbeat tasks of that
// workflow. The database ends the frozen session (idle in transaction), so
// the healthy workers' heartbeats go through while the replica is still
// frozen, and none of them loses its lease: every holder write succeeds or
// fails retryably (busy) and then succeeds. GE_FREEZE_DURATION sets how
// long the replica stays frozen (default 12 s; scripts/faults -freeze 60s);
// GE_FREEZE_UNBOUNDED=1 lifts the bound from the frozen replica's sessions,
// and the test then fails.
func TestFrozenReplicaCostsNoLease(t *testing.T) {
	if testing.Short() {
		t.Skip("faults: skipped with -short")
	}
	t.Parallel()
	freeze := 12 * time.Second
	if v := os.Getenv("GE_FREEZE_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("GE_FREEZE_DURATION=%q: %v", v, err)
		}
		freeze = d
	}
	const lease = 8 * time.Second // well above the 3 s a stalled session may hold a lock
	url := pgtest.URL(t)
	withApp := func(name string) string {
		if strings.Contains(url, "?") {
			return url + "&application_name=" + name
		}
		return url + "?application_name=" + name
	}
	frozenURL := withApp("frozen-replica")
	if os.Getenv("GE_FREEZE_UNBOUNDED") != "" {
		// The control: without the bound the frozen session keeps its locks,
		// and this test fails.
		frozenURL += "&idle_in_transaction_session_timeout=0"
	}
	frozen := newServer(t, "frozen", frozenURL)
	healthy := newServer(t, "healthy", withApp("healthy-replica"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport, Timeout: 2 * time.Minute}
	on := func(s *server) *Client {
		return &Client{HTTP: hc, Rec: NewRecorder(), Endpoints: func() []string { return []string{s.endpoint()} }}
	}
	fc, hcl := on(frozen), on(healthy)
	r := &run{t: t, client: hcl, servers: []*server{healthy}}
	const wf = "freeze"
	var ids []string
	for i := range 5 {
		id, err := r.create(ctx, map[string]any{"workflow_id": wf, "node_id": fmt.Sprintf("n%d", i), "max_attempts": 100})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	claim := func(c *Client, id, owner string, leaseMS int64) Op {
		got, _ := c.Do(ctx, Op{Kind: Claim, Task: id, Owner: owner, LeaseMS: leaseMS},
			map[string]any{"task_id": id, "owner": owner, "lease_ms": leaseMS})
		if got.Out.Outcome != Applied {
			t.Fatalf("claim %s: %s %s", id, got.Out.Outcome, got.Out.Detail)
		}
		return got
	}
	heartbeat := func(c *Client, cl Op, leaseMS int64) Op {
		got, _ := c.Do(ctx, Op{Kind: Heartbeat, Task: cl.Task, Owner: cl.Owner, Gen: cl.Out.Gen, Token: cl.Out.Token, LeaseMS: leaseMS},
			map[string]any{"task_id": cl.Task, "owner": cl.Owner, "generation": cl.Out.Gen, "claim_token": cl.Out.Token, "lease_ms": leaseMS})
		return got
	}

	// The frozen replica's load: heartbeats of its own task of the workflow,
	// back to back; each locks the workflow's row.
	load := claim(fc, ids[0], "frozen-w", 900_000)
	var loadStop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !loadStop.Load() {
			heartbeat(fc, load, 900_000)
		}
	}()

	// Healthy workers: one task each, a heartbeat every lease/4.
	type result struct {
		ok, busy, other atomic.Int64
		okFrozen        atomic.Int64 // succeeded while the replica was frozen
		refusals        []string
		mu              sync.Mutex
	}
	var res result
	var isFrozen atomic.Bool
	var workStop atomic.Bool
	for i, id := range ids[1:] {
		cl := claim(hcl, id, fmt.Sprintf("healthy-w%d", i), lease.Milliseconds())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !workStop.Load() {
				time.Sleep(lease / 4)
				for {
					got := heartbeat(hcl, cl, lease.Milliseconds())
					if got.Out.Outcome == Applied {
						res.ok.Add(1)
						if isFrozen.Load() {
							res.okFrozen.Add(1)
						}
						break
					}
					if got.Out.Refusal == "unavailable/busy" {
						res.busy.Add(1)
						time.Sleep(100 * time.Millisecond)
						continue // retryable: try again
					}
					res.other.Add(1)
					res.mu.Lock()
					res.refusals = append(res.refusals, fmt.Sprintf("%s %s: %s %s", got.Kind, got.Task, got.Out.Refusal, got.Out.Detail))
					res.mu.Unlock()
					return
				}
			}
		}()
	}

	// Freeze the replica until it is caught inside a transaction holding
	// the workflow's lock: its session idles in a transaction that wrote,
	// and the workflow's row stays locked.
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	heldByFrozen := func() bool {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'frozen-replica'
			AND state = 'idle in transaction' AND backend_xid IS NOT NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return false
		}
		for range 3 {
			tx, err := db.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tx.Exec(ctx, `SELECT 1 FROM workflows WHERE workflow_id = $1 FOR UPDATE NOWAIT`, wf)
			_ = tx.Rollback(ctx)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "55P03" {
				return false
			}
			time.Sleep(100 * time.Millisecond)
		}
		return true
	}
	caught := false
	for try := 0; try < 200 && !caught; try++ {
		frozen.signal(syscall.SIGSTOP)
		time.Sleep(20 * time.Millisecond)
		if caught = heldByFrozen(); !caught {
			frozen.signal(syscall.SIGCONT)
			time.Sleep(time.Duration(try%7) * 3 * time.Millisecond)
		}
	}
	if !caught {
		t.Fatal("the frozen replica was never caught inside a transaction holding the workflow's lock in 200 tries")
	}
	isFrozen.Store(true)
	frozeAt := time.Now()
	time.Sleep(freeze)
	isFrozen.Store(false)
	frozen.signal(syscall.SIGCONT)
	// The frozen replica serves again once its pool replaced the session the
	// database ended.
	var after Op
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		if after = heartbeat(fc, load, 900_000); after.Out.Outcome == Applied || after.Out.Refusal == "stale_claim" {
			break
		}
		time.Sleep(wait)
	}
	loadStop.Store(true)
	time.Sleep(lease / 2) // a last heartbeat round after the thaw
	workStop.Store(true)
	wg.Wait()
	t.Logf("frozen for %s (from %s): healthy heartbeats: %d succeeded (%d while frozen), %d busy then retried, %d refused; the frozen replica's next write after SIGCONT: %s",
		freeze, frozeAt.Format(time.TimeOnly), res.ok.Load(), res.okFrozen.Load(), res.busy.Load(), res.other.Load(), after.Out.Outcome)
	for _, r := range res.refusals {
		t.Errorf("a healthy worker's heartbeat was refused (its lease was lost): %s", r)
	}
	if res.okFrozen.Load() == 0 {
		t.Errorf("no healthy heartbeat went through while the replica was frozen: the frozen transaction kept the workflow's lock")
	}
	if after.Out.Outcome != Applied {
		t.Errorf("the frozen replica's own lease was lost (it is far from lapsing): %s %s", after.Out.Refusal, after.Out.Detail)
	}
	if err := frozen.stop(); err != nil {
		t.Errorf("frozen replica: %v\n%s", err, frozen.logs.String())
	}
	if err := healthy.stop(); err != nil {
		t.Errorf("healthy replica: %v\n%s", err, healthy.logs.String())
	}
}
