package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// soakDuration is how long TestSoakKillRestart runs its fault load:
// GE_SOAK_DURATION (a Go duration) or 45s. scripts/soak sets it longer.
func soakDuration(t *testing.T) time.Duration {
	d := 45 * time.Second
	envDuration(t, "GE_SOAK_DURATION", &d)
	return d
}

// soakServer runs the built binary over HTTP on one port across restarts.
type soakServer struct {
	t     *testing.T
	bin   string
	db    string
	addr  string
	token string
	// workToken is the token of the work principal (name-workers, owners
	// name-w*) when authFile is set; token is then the submit+observe one.
	workToken string
	authFile  string
	mu        sync.Mutex
	cmd       *exec.Cmd
	logs      testwait.Buffer
}

// newSoakServer starts the built binary over HTTP on a free loopback port,
// on a new database in a temporary folder, with a fresh bearer token.
func newSoakServer(t *testing.T, name string) *soakServer {
	t.Helper()
	srv := &soakServer{t: t, bin: builtBinary(t), db: filepath.Join(t.TempDir(), name+".db"), addr: freeLoopbackAddr(t),
		token:     name + "-token-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		workToken: name + "-work-token-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	// Workers run on a work token scoped to their owner names; the seeding
	// client submits and observes (/metrics).
	srv.authFile = filepath.Join(t.TempDir(), "auth.json")
	doc := fmt.Sprintf(`{"principals": [
		{"name": %q, "token_sha256": %q, "roles": ["submit", "observe"]},
		{"name": %q, "token_sha256": %q, "roles": ["work"], "owners": [%q]}]}`,
		name, principal.TokenDigest(srv.token), name+"-workers", principal.TokenDigest(srv.workToken), name+"-w*")
	if err := os.WriteFile(srv.authFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	srv.start()
	return srv
}

// freeLoopbackAddr returns a loopback address with a port free just now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// soakCall calls tool on cs and returns its structured result and whether
// it is a tool error.
func soakCall(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, bool, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, false, err
	}
	var out map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
	}
	return out, res.IsError, nil
}

func (s *soakServer) start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := exec.Command(s.bin, "serve", "--database", s.db, "--http", s.addr, "--log-level", "warn")
	cmd.Env = append(os.Environ(), "GRAPH_ENGINEERING_AUTH_TOKEN="+s.token)
	if s.authFile != "" {
		cmd = exec.Command(s.bin, "serve", "--database", s.db, "--http", s.addr, "--log-level", "warn", "--auth-file", s.authFile)
		cmd.Env = os.Environ()
	}
	cmd.Stdout, cmd.Stderr = &s.logs, &s.logs
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd = cmd
	testwait.For(s.t, "the server to become healthy", func() bool {
		resp, err := http.Get("http://" + s.addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

func (s *soakServer) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cmd.Process.Signal(syscall.SIGKILL)
	s.cmd.Wait()
}

func (s *soakServer) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cmd.Process.Signal(syscall.SIGTERM)
	return s.cmd.Wait()
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// ack is a completion the server acknowledged.
type ack struct {
	owner      string
	generation int64
}

// TestSoakKillRestart runs workers with short leases that pause past their
// lease, crash without releasing, or fail retryably, while the server is
// killed with SIGKILL and restarted on the same database every few seconds.
// At the end the history and final state must show: every task terminal or
// still claimable, no task completed twice, every acknowledged completion
// present, no write accepted from a superseded generation or after its lease,
// a verifying hash chain and a clean integrity check.
func TestSoakKillRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: skipped with -short")
	}
	t.Parallel()
	dur := soakDuration(t)
	srv := newSoakServer(t, "soak")
	addr := srv.addr

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	httpClient := &http.Client{Transport: bearer{srv.token, http.DefaultTransport}, Timeout: 40 * time.Second}
	workClient := &http.Client{Transport: bearer{srv.workToken, http.DefaultTransport}, Timeout: 40 * time.Second}
	connectWith := func(hc *http.Client) (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "soak", Version: "1"}, nil)
		return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
	}
	connect := func() (*mcp.ClientSession, error) { return connectWith(workClient) }
	call := func(cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, bool, error) {
		return soakCall(ctx, cs, tool, args)
	}

	// Seed: independent tasks and small chains.
	seed, err := connectWith(httpClient)
	if err != nil {
		t.Fatal(err)
	}
	const tasks = 1500
	for i := 0; i < tasks; i++ {
		args := map[string]any{"workflow_id": fmt.Sprintf("soak-%d", i/100), "node_id": fmt.Sprintf("n%04d", i), "max_attempts": 100}
		if i%100 >= 50 && i%5 != 0 {
			args["depends_on"] = []string{fmt.Sprintf("n%04d", i-1)}
		}
		if _, isErr, err := call(seed, manifest.ToolCreate, args); err != nil || isErr {
			t.Fatalf("seed %d: %v %v", i, err, isErr)
		}
	}
	seed.Close()

	var (
		mu       sync.Mutex
		acked    = map[string]ack{}
		kills    atomic.Int64
		stopLoad atomic.Bool
		errs     = make(chan error, 64)
	)
	var wg sync.WaitGroup
	// A producer keeps work coming through the kills, so a long run stays
	// loaded; every create the server acknowledged must survive too.
	var createdMu sync.Mutex
	created := map[string]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		var cs *mcp.ClientSession
		for i := 0; !stopLoad.Load(); {
			if cs == nil {
				var err error
				// Creating takes the submit role: the seeding token's.
				if cs, err = connectWith(httpClient); err != nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
			}
			args := map[string]any{"workflow_id": fmt.Sprintf("live-%d", i/200), "node_id": fmt.Sprintf("n%04d", i%200), "max_attempts": 100}
			if i%200 > 0 && i%3 == 0 {
				args["depends_on"] = []string{fmt.Sprintf("n%04d", i%200-1)}
			}
			out, isErr, err := call(cs, manifest.ToolCreate, args)
			if err != nil || isErr {
				cs.Close()
				cs = nil
				time.Sleep(50 * time.Millisecond)
				continue // retried with the same node: idempotent create
			}
			createdMu.Lock()
			created[out["task"].(map[string]any)["task_id"].(string)] = true
			createdMu.Unlock()
			i++
			time.Sleep(20 * time.Millisecond)
		}
		if cs != nil {
			cs.Close()
		}
	}()
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func(owner string, rng *rand.Rand) {
			defer wg.Done()
			var cs *mcp.ClientSession
			for !stopLoad.Load() {
				if cs == nil {
					var err error
					if cs, err = connect(); err != nil {
						time.Sleep(100 * time.Millisecond)
						continue
					}
				}
				out, isErr, err := call(cs, manifest.ToolClaim, map[string]any{"owner": owner, "lease_ms": 1000, "wait_ms": 300})
				if err != nil || isErr {
					cs.Close()
					cs = nil
					time.Sleep(50 * time.Millisecond)
					continue
				}
				if out["claimed"] != true {
					continue
				}
				l := out["lease"].(map[string]any)
				task := out["task"].(map[string]any)
				h := map[string]any{"task_id": task["task_id"], "owner": owner, "generation": l["generation"], "claim_token": l["claim_token"]}
				switch r := rng.IntN(100); {
				case r < 8: // crash without releasing
					continue
				case r < 16: // pause past the lease, like a GC pause, then try to finish
					time.Sleep(1200 * time.Millisecond)
				case r < 26: // fail retryably
					h["error"], h["retryable"] = "transient", true
					call(cs, manifest.ToolFail, h)
					continue
				}
				h["result"] = map[string]any{"by": owner}
				_, isErr, err = call(cs, manifest.ToolComplete, h)
				if err != nil || isErr {
					continue // rejected (stale) or the server went away: not acknowledged
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
			if cs != nil {
				cs.Close()
			}
		}(fmt.Sprintf("soak-w%d", w), rand.New(rand.NewPCG(uint64(w), 7)))
	}
	end := time.Now().Add(dur)
	for time.Now().Before(end) {
		time.Sleep(time.Duration(2000+rand.IntN(2000)) * time.Millisecond)
		srv.kill()
		kills.Add(1)
		srv.start()
	}
	stopLoad.Store(true)
	wg.Wait()
	if err := srv.stop(); err != nil {
		t.Errorf("graceful stop after the soak: %v\n%s", err, srv.logs.String())
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Check from the history and final state.
	st, drv, err := sqlitestore.OpenDriver(context.Background(), srv.db, taskgraph.Options{}, tgsqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.VerifyHistory(context.Background()); err != nil {
		t.Fatalf("hash chain: %v", err)
	}
	if res, err := drv.Check(context.Background()); err != nil || !res.OK() {
		t.Fatalf("integrity: %v %v", res.Integrity, err)
	}
	t.Log(pythonAgreesWithVerify(t, srv.db))
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
	t.Logf("soak: %s, %d SIGKILLs survived, %d tasks (%d seeded, %d created under load, all acknowledged creates present), %d acknowledged completions, %d completed in the history, %d claims, violations: %d",
		dur, kills.Load(), tasks+len(created), tasks, len(created), len(acked), len(v.completedBy), v.claims, len(v.violations))
	for _, msg := range v.violations {
		t.Error(msg)
	}
}

type soakReport struct {
	completedBy map[string]ack
	claims      int
	violations  []string
}

// soakVerify replays every task's history: generations only grow through
// claims, every holder write names the current generation and comes before
// its lease expiry, a task completes at most once, and each task ends
// terminal or claimable.
func soakVerify(t *testing.T, st *taskgraph.Store) soakReport {
	t.Helper()
	rep := soakReport{completedBy: map[string]ack{}}
	bad := func(format string, args ...any) {
		rep.violations = append(rep.violations, fmt.Sprintf(format, args...))
	}
	wfs, err := st.WorkflowIDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, wf := range wfs {
		view, err := st.Workflow(context.Background(), wf)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := st.WorkflowEvents(context.Background(), wf)
		if err != nil {
			t.Fatal(err)
		}
		type live struct {
			gen    int64
			owner  string
			expiry int64
			done   bool
		}
		state := map[string]*live{}
		for _, e := range evs {
			l := state[e.TaskID]
			if l == nil {
				l = &live{}
				state[e.TaskID] = l
			}
			var d map[string]any
			json.Unmarshal(e.Detail, &d)
			at := e.At.UnixMilli()
			switch e.Kind {
			case taskgraph.EventClaim:
				rep.claims++
				if e.Generation != l.gen+1 {
					bad("task %s: claim at generation %d after %d", e.TaskID, e.Generation, l.gen)
				}
				l.gen, l.owner = e.Generation, e.Owner
				l.expiry = int64(d["lease_expires_at_ms"].(float64))
			case taskgraph.EventLeaseShift: // the server was away: the lease got the time back
				l.expiry = int64(d["lease_expires_at_ms"].(float64))
			case taskgraph.EventHeartbeat, taskgraph.EventComplete, taskgraph.EventFail, taskgraph.EventRetry:
				if e.Generation != l.gen || e.Owner != l.owner {
					bad("task %s: %s accepted from %s at generation %d while %s held generation %d", e.TaskID, e.Kind, e.Owner, e.Generation, l.owner, l.gen)
				}
				if a, ok := d["arrived_at_ms"].(float64); ok {
					at = int64(a) // judged when it arrived, not when it committed
				}
				if at >= l.expiry {
					bad("task %s: %s accepted at %d after the lease expired at %d", e.TaskID, e.Kind, at, l.expiry)
				}
				if e.Kind == taskgraph.EventHeartbeat {
					l.expiry = int64(d["lease_expires_at_ms"].(float64))
				}
				if e.Kind == taskgraph.EventComplete {
					if l.done {
						bad("task %s completed twice", e.TaskID)
					}
					l.done = true
					rep.completedBy[e.TaskID] = ack{e.Owner, e.Generation}
				}
			}
		}
		for _, tk := range view.Tasks {
			switch tk.State {
			case taskgraph.StateCompleted, taskgraph.StateFailed, taskgraph.StateCancelled, taskgraph.StatePending, taskgraph.StateBlocked, taskgraph.StateClaimed:
			default:
				bad("task %s in unknown state %s", tk.TaskID, tk.State)
			}
			if tk.State == taskgraph.StateBlocked {
				// Still claimable in time: every dependency unfinished is not terminal-failed.
				for _, dep := range tk.DependsOn {
					for _, other := range view.Tasks {
						if other.NodeID == dep && (other.State == taskgraph.StateFailed || other.State == taskgraph.StateCancelled) {
							bad("task %s waits forever on %s (%s)", tk.TaskID, dep, other.State)
						}
					}
				}
			}
			if (tk.State == taskgraph.StateCompleted) != state[tk.TaskID].done && !strings.HasPrefix(tk.StatusMessage, "skipped") {
				bad("task %s is %s but its history says completed=%v", tk.TaskID, tk.State, state[tk.TaskID].done)
			}
		}
	}
	return rep
}

// The soak's verifier must catch what it claims to: a write from a superseded
// generation, a second completion, and a write after the lease expired. The
// history is doctored behind the store's back to show each.
func TestSoakVerifierCatchesViolations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v.db")
	clock := lease.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, err := sqlitestore.Open(ctx, path, taskgraph.Options{Clock: clock}, tgsqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if v := soakVerify(t, st); len(v.violations) != 0 {
		t.Fatalf("empty store: %v", v.violations)
	}
	var ids []string
	for _, n := range []string{"a", "b", "c"} {
		c, err := st.CreateTask(ctx, "wf", taskgraph.NodeSpec{NodeID: n})
		if err != nil {
			t.Fatal(err)
		}
		cl, _, err := st.Claim(ctx, taskgraph.ClaimRequest{Owner: "w", TaskID: c.Task.TaskID, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		h := lease.Holder{TaskID: cl.Task.TaskID, Owner: "w", Generation: cl.Lease.Generation, Token: cl.Lease.Token}
		if _, err := st.Complete(ctx, h, json.RawMessage(`1`)); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.Task.TaskID)
	}
	if v := soakVerify(t, st); len(v.violations) != 0 {
		t.Fatalf("a clean history: %v", v.violations)
	}
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []struct{ sql, id string }{
		{`UPDATE events SET generation = 0 WHERE task_id = ? AND kind = 'complete'`, ids[0]}, // superseded generation
		{`INSERT INTO events (workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash)
			SELECT workflow_id, 1000, task_id, kind, owner, generation, at_ms, detail, '', '' FROM events WHERE task_id = ? AND kind = 'complete'`, ids[1]}, // completed twice
		{`UPDATE events SET at_ms = at_ms + 3600000 WHERE task_id = ? AND kind = 'complete'`, ids[2]}, // after the lease
	} {
		if _, err := db.Exec(q.sql, q.id); err != nil {
			t.Fatal(err)
		}
	}
	v := soakVerify(t, st)
	joined := strings.Join(v.violations, "\n")
	for _, want := range []string{"accepted from w at generation 0", "completed twice", "after the lease expired"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the verifier missed %q; it reported:\n%s", want, joined)
		}
	}
}
