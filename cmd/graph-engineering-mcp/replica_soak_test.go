package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// replicaSoakDuration is how long TestReplicaSoak runs its fault load:
// GE_REPLICA_SOAK_DURATION (a Go duration) or 20s.
func replicaSoakDuration(t *testing.T) time.Duration {
	d := 20 * time.Second
	envDuration(t, "GE_REPLICA_SOAK_DURATION", &d)
	return d
}

// newReplica starts the built binary over HTTP on a free loopback port,
// serving database url (PostgreSQL) with token.
func newReplica(t *testing.T, url, token string) *soakServer {
	t.Helper()
	srv := &soakServer{t: t, bin: builtBinary(t), db: url, addr: freeLoopbackAddr(t), token: token}
	srv.start()
	return srv
}

// TestReplicaSoak runs two stateless replicas (serve --http) on one
// PostgreSQL database, with workers spread over both that move to the other
// replica when theirs is gone and retry the same call there, while one
// replica at a time is SIGKILLed and restarted every few seconds. Workers
// pause past their lease, crash without releasing and fail retryably, and a
// producer keeps creating tasks. At the end the history and the final state
// must show: no task completed twice, every acknowledged create and
// completion present, no write accepted from a superseded generation or
// after its lease, and a verifying hash chain.
func TestReplicaSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: skipped with -short")
	}
	t.Parallel()
	url := pgtest.URL(t)
	dur := replicaSoakDuration(t)
	token := fmt.Sprintf("replica-token-%d", time.Now().UnixNano())
	replicas := []*soakServer{newReplica(t, url, token), newReplica(t, url, token)}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	httpClient := &http.Client{Transport: bearer{token, http.DefaultTransport}, Timeout: 40 * time.Second}
	connect := func(i int) (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "replica-soak", Version: "1"}, nil)
		return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + replicas[i].addr + "/mcp", HTTPClient: httpClient, MaxRetries: -1}, nil)
	}
	// client is one worker's view of the load balancer: a session on one
	// replica, moved to the other when a call fails for transport reasons.
	type client struct {
		at int
		cs *mcp.ClientSession
	}
	// do calls tool on the worker's replica; on a transport error it moves
	// to the other replica and tries the same call once more there.
	do := func(c *client, tool string, args map[string]any) (map[string]any, bool, error) {
		var lastErr error
		for try := 0; try < 2; try++ {
			if c.cs == nil {
				cs, err := connect(c.at)
				if err != nil {
					lastErr = err
					c.at = 1 - c.at
					continue
				}
				c.cs = cs
			}
			out, isErr, err := soakCall(ctx, c.cs, tool, args)
			if err == nil {
				return out, isErr, nil
			}
			lastErr = err
			c.cs.Close()
			c.cs = nil
			c.at = 1 - c.at
		}
		return nil, false, lastErr
	}

	seed := &client{}
	const tasks = 600
	for i := 0; i < tasks; i++ {
		args := map[string]any{"workflow_id": fmt.Sprintf("rsoak-%d", i/100), "node_id": fmt.Sprintf("n%04d", i), "max_attempts": 100}
		if i%100 >= 50 && i%5 != 0 {
			args["depends_on"] = []string{fmt.Sprintf("n%04d", i-1)}
		}
		if _, isErr, err := do(seed, manifest.ToolCreate, args); err != nil || isErr {
			t.Fatalf("seed %d: %v %v", i, err, isErr)
		}
	}

	var (
		mu       sync.Mutex
		acked    = map[string]ack{}
		kills    atomic.Int64
		failover atomic.Int64
		stopLoad atomic.Bool
		errs     = make(chan error, 64)
	)
	var wg sync.WaitGroup
	var createdMu sync.Mutex
	created := map[string]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := &client{at: 1}
		for i := 0; !stopLoad.Load(); {
			args := map[string]any{"workflow_id": fmt.Sprintf("rlive-%d", i/200), "node_id": fmt.Sprintf("n%04d", i%200), "max_attempts": 100}
			if i%200 > 0 && i%3 == 0 {
				args["depends_on"] = []string{fmt.Sprintf("n%04d", i%200-1)}
			}
			out, isErr, err := do(c, manifest.ToolCreate, args)
			if err != nil || isErr {
				time.Sleep(50 * time.Millisecond)
				continue // retried with the same node: idempotent create
			}
			createdMu.Lock()
			created[out["task"].(map[string]any)["task_id"].(string)] = true
			createdMu.Unlock()
			i++
			time.Sleep(20 * time.Millisecond)
		}
		if c.cs != nil {
			c.cs.Close()
		}
	}()
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(owner string, rng *rand.Rand, c *client) {
			defer wg.Done()
			for !stopLoad.Load() {
				at := c.at
				out, isErr, err := do(c, manifest.ToolClaim, map[string]any{"owner": owner, "lease_ms": 1500, "wait_ms": 300})
				if c.at != at {
					failover.Add(1)
				}
				if err != nil || isErr || out["claimed"] != true {
					if err != nil {
						time.Sleep(50 * time.Millisecond)
					}
					continue
				}
				l := out["lease"].(map[string]any)
				task := out["task"].(map[string]any)
				h := map[string]any{"task_id": task["task_id"], "owner": owner, "generation": l["generation"], "claim_token": l["claim_token"]}
				switch r := rng.IntN(100); {
				case r < 8: // crash without releasing
					continue
				case r < 14: // pause past the lease, then try to finish
					time.Sleep(1700 * time.Millisecond)
				case r < 24: // fail retryably
					h["error"], h["retryable"] = "transient", true
					do(c, manifest.ToolFail, h)
					continue
				}
				h["result"] = map[string]any{"by": owner}
				// The claim lives in the database, not in a replica: a
				// complete that meets a dead replica is retried on the other.
				_, isErr, err = do(c, manifest.ToolComplete, h)
				if err != nil || isErr {
					continue // rejected (stale, or the first try committed) or both replicas away: not acknowledged
				}
				id := task["task_id"].(string)
				gen := int64(l["generation"].(float64))
				mu.Lock()
				if prev, dup := acked[id]; dup {
					errs <- fmt.Errorf("task %s acknowledged twice: %v and %s/%d", id, prev, owner, gen)
				}
				acked[id] = ack{owner, gen}
				mu.Unlock()
			}
			if c.cs != nil {
				c.cs.Close()
			}
		}(fmt.Sprintf("rsoak-w%d", w), rand.New(rand.NewPCG(uint64(w), 11)), &client{at: w % 2})
	}
	end := time.Now().Add(dur)
	for k := 0; time.Now().Before(end); k++ {
		time.Sleep(time.Duration(2000+rand.IntN(2000)) * time.Millisecond)
		r := replicas[k%2]
		r.kill()
		kills.Add(1)
		r.start()
	}
	stopLoad.Store(true)
	wg.Wait()
	for i, r := range replicas {
		if err := r.stop(); err != nil {
			t.Errorf("graceful stop of replica %d after the soak: %v\n%s", i, err, r.logs.String())
		}
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	st, err := openPostgres(context.Background(), url, taskgraph.Options{}, openOperator, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.VerifyHistory(context.Background()); err != nil {
		t.Fatalf("hash chain: %v", err)
	}
	for id := range created {
		if _, err := st.Task(context.Background(), id); err != nil {
			t.Errorf("acknowledged create of %s lost: %v", id, err)
		}
	}
	v := soakVerify(t, st)
	for id, a := range acked {
		c, ok := v.completedBy[id]
		if !ok || c != a {
			t.Errorf("acknowledged completion of %s by %s at generation %d is not in the history (have %v, %v)", id, a.owner, a.generation, c, ok)
		}
	}
	if len(acked) == 0 {
		t.Error("no completion was acknowledged: the soak did no work")
	}
	t.Logf("replica soak: %s, 2 replicas, %d SIGKILLs survived, %d failovers, %d tasks (%d seeded, %d created under load, all acknowledged creates present), %d acknowledged completions, %d completed in the history, %d claims, violations: %d",
		dur, kills.Load(), failover.Load(), tasks+len(created), tasks, len(created), len(acked), len(v.completedBy), v.claims, len(v.violations))
	for _, msg := range v.violations {
		t.Error(msg)
	}
}
