package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// config sizes a run: the short one of the normal suite by default,
// GE_FAULTS_* for scripts/faults.
type config struct {
	duration time.Duration // how long workers run while faults are injected
	workers  int
	lease    time.Duration // each claim's and heartbeat's lease_ms
	interval time.Duration // mean time between two faults
	kinds    map[string]bool
	keep     string // where failing histories are kept ("": the temporary folder)
	slackPG  int64  // ms of clock disagreement allowed between replicas
}

func configFromEnv(t *testing.T) config {
	c := config{duration: 12 * time.Second, workers: 6, lease: 1500 * time.Millisecond, interval: 2500 * time.Millisecond,
		keep: os.Getenv("GE_FAULTS_KEEP"), slackPG: 250}
	dur := func(name string, p *time.Duration) {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("%s=%q: %v", name, v, err)
			}
			*p = d
		}
	}
	dur("GE_FAULTS_DURATION", &c.duration)
	dur("GE_FAULTS_LEASE", &c.lease)
	dur("GE_FAULTS_INTERVAL", &c.interval)
	if v := os.Getenv("GE_FAULTS_WORKERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("GE_FAULTS_WORKERS=%q: want a positive number", v)
		}
		c.workers = n
	}
	if v := os.Getenv("GE_FAULTS_KINDS"); v != "" {
		c.kinds = map[string]bool{}
		for _, k := range strings.Split(v, ",") {
			c.kinds[strings.TrimSpace(k)] = true
		}
	}
	return c
}

// faultKinds are the runs: a driver and the one kind of fault injected.
var faultKinds = []string{"sqlite/kill", "sqlite/stop", "postgres/kill", "postgres/stop", "postgres/crash"}

// TestFaults records the histories of concurrent workers over HTTP while
// one kind of fault at a time is injected, and checks every task's history
// against the model of the lease rules (see the package documentation). A
// failure names the folder that keeps the history and porcupine's
// visualization of each task that is not linearizable.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("faults: skipped with -short")
	}
	t.Parallel()
	cfg := configFromEnv(t)
	for _, kind := range faultKinds {
		if cfg.kinds != nil && !cfg.kinds[kind] && !cfg.kinds[strings.Split(kind, "/")[0]] {
			continue
		}
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			runFaults(t, cfg, kind)
		})
	}
}

// run is one recorded run.
type run struct {
	t       *testing.T
	cfg     config
	kind    string
	servers []*server
	pg      *pgCluster
	db      string
	client  *Client
	rec     *Recorder
	// tasks created so far and not known to be finished, for claims by id.
	mu      sync.Mutex
	open    []string
	created atomic.Int64
	faults  atomic.Int64
	applied [6]atomic.Int64 // by Kind index
}

func runFaults(t *testing.T, cfg config, kind string) {
	began := time.Now()
	r := &run{t: t, cfg: cfg, kind: kind, rec: NewRecorder()}
	driver, fault, _ := strings.Cut(kind, "/")
	slack := int64(2)
	switch {
	case driver == "sqlite":
		r.db = t.TempDir() + "/faults.db"
		r.servers = []*server{newServer(t, "server", r.db)}
	case fault == "crash":
		r.pg = newPGCluster(t)
		r.db = r.pg.url
		slack = cfg.slackPG
	default:
		r.db = pgtest.URL(t)
		slack = cfg.slackPG
	}
	if driver == "postgres" {
		r.servers = []*server{newServer(t, "replica-0", r.db), newServer(t, "replica-1", r.db)}
	}
	transport := &http.Transport{MaxIdleConnsPerHost: cfg.workers + 4}
	defer transport.CloseIdleConnections()
	r.client = &Client{HTTP: &http.Client{Transport: transport, Timeout: 20 * time.Second}, Rec: r.rec, Endpoints: r.endpoints}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.produce(ctx, &stop) }()
	for w := range cfg.workers {
		wg.Add(1)
		go func() { defer wg.Done(); r.work(ctx, w, &stop) }()
	}
	loadAt := time.Now()
	faultErr := r.inject(fault, time.Now().Add(cfg.duration))
	stop.Store(true)
	wg.Wait()
	stoppedAt := time.Now()
	if faultErr != nil {
		t.Fatalf("%s: injecting faults: %v", kind, faultErr)
	}
	for _, s := range r.servers {
		if err := s.stop(); err != nil {
			t.Errorf("%s: %s did not stop cleanly: %v\n%s", kind, s.name, err, s.logs.String())
		}
	}

	rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer rcancel()
	st, err := openRecord(rctx, r.db)
	if err != nil {
		t.Fatalf("open the database to read its history: %v", err)
	}
	record, err := readRecord(rctx, st)
	st.Close()
	if err != nil {
		t.Fatalf("read the server's history: %v", err)
	}
	readAt := time.Now()
	ops := r.rec.Ops()
	history := BuildRecorded(ops, record.tasks, Recorded{ClaimedBy: record.claimedBy, Writes: record.writes}, slack)
	rep, err := Check(ops, history, time.Minute, cfg.keep, kind)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	t.Logf("faults: %s: %d faults, %d lease shifts recorded, %s; applied: %d claims, %d heartbeats, %d completes, %d fails, %d releases; took %s to start, %s of load, %s to stop and read, %s to check",
		kind, r.faults.Load(), record.shifts, rep, r.applied[0].Load()+r.applied[1].Load(), r.applied[2].Load(), r.applied[3].Load(), r.applied[4].Load(), r.applied[5].Load(),
		loadAt.Sub(began).Round(time.Millisecond), stoppedAt.Sub(loadAt).Round(time.Millisecond), readAt.Sub(stoppedAt).Round(time.Millisecond), time.Since(readAt).Round(time.Millisecond))
	if len(rep.Illegal) > 0 || len(rep.TimedOut) > 0 {
		t.Errorf("%s: %d tasks not linearizable (%v), %d undecided (%v): the history, a summary and each task's visualization are in %s",
			kind, len(rep.Illegal), rep.Illegal, len(rep.TimedOut), rep.TimedOut, rep.Dir)
	}
	// The run did what it is for: faults, and work through them.
	if r.faults.Load() == 0 || r.applied[3].Load() == 0 || rep.Ops == 0 {
		t.Errorf("%s: the run did no work through faults: %d faults, %d completes, %d operations", kind, r.faults.Load(), r.applied[3].Load(), rep.Ops)
	}
}

func (r *run) endpoints() []string {
	out := make([]string, len(r.servers))
	for i, s := range r.servers {
		out[i] = s.endpoint()
	}
	return out
}

// produce keeps a few pending tasks per worker: it creates tasks (claimable
// at once after a retryable failure, many attempts) whenever fewer are open.
// A create whose answer is lost is repeated: the same node is created once.
func (r *run) produce(ctx context.Context, stop *atomic.Bool) {
	for n := 0; !stop.Load(); {
		r.mu.Lock()
		open := len(r.open)
		r.mu.Unlock()
		if open >= 4*r.cfg.workers {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		args := map[string]any{"workflow_id": fmt.Sprintf("faults-%d", n/50), "node_id": fmt.Sprintf("n%04d", n),
			"max_attempts": 100, "retry_delay_ms": 0}
		id, err := r.create(ctx, args)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		r.mu.Lock()
		r.open = append(r.open, id)
		r.mu.Unlock()
		r.created.Add(1)
		n++
	}
}

func (r *run) create(ctx context.Context, args map[string]any) (string, error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": "graph_task_create", "arguments": args, "_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion": protocolVersion, "io.modelcontextprotocol/clientCapabilities": map[string]any{}}}})
	eps := r.endpoints()
	status, resp, err := r.client.post(ctx, eps[rand.IntN(len(eps))], "graph_task_create", body)
	if err != nil {
		return "", err
	}
	var a rpcAnswer
	if err := json.Unmarshal(resp, &a); err != nil || status != http.StatusOK || a.Result == nil || a.Result.IsError {
		return "", fmt.Errorf("create: HTTP %d %s", status, resp)
	}
	var out toolOut
	if err := json.Unmarshal(a.Result.StructuredContent, &out); err != nil || out.Task == nil {
		return "", fmt.Errorf("create: %s", resp)
	}
	return out.Task.TaskID, nil
}

// pickOpen returns a random task not known to be finished.
func (r *run) pickOpen(rng *rand.Rand) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.open) == 0 {
		return ""
	}
	return r.open[rng.IntN(len(r.open))]
}

func (r *run) finished(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, o := range r.open {
		if o == id {
			r.open = append(r.open[:i], r.open[i+1:]...)
			return
		}
	}
}

var kindIndex = map[Kind]int{Claim: 0, ClaimNext: 1, Heartbeat: 2, Complete: 3, Fail: 4, Release: 5}

// worker is one client's loop: claim (by id or next, each with an owner of
// its own), then heartbeat, pause past the lease, abandon, fail retryably,
// release or complete; a write with an unknown outcome is sometimes
// repeated as it was.
func (r *run) work(ctx context.Context, w int, stop *atomic.Bool) {
	rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	stream := r.rec.Stream()
	leaseMS := r.cfg.lease.Milliseconds()
	do := func(op Op, args map[string]any) (Op, bool) {
		op.Stream = stream
		got, ok := r.client.Do(ctx, op, args)
		if ok && got.Out.Outcome == Unknown {
			stream = r.rec.Stream() // that operation never returns
		}
		if ok && got.Out.Outcome == Applied {
			r.applied[kindIndex[got.Kind]].Add(1)
		}
		return got, ok
	}
	for n := 0; !stop.Load(); n++ {
		owner := fmt.Sprintf("w%d-c%d", w, n)
		op := Op{Kind: ClaimNext, Owner: owner, LeaseMS: leaseMS}
		args := map[string]any{"owner": owner, "lease_ms": leaseMS}
		if id := r.pickOpen(rng); id != "" && rng.IntN(2) == 0 {
			op.Kind, op.Task, args["task_id"] = Claim, id, id
		} else {
			args["wait_ms"] = 300
		}
		got, ok := do(op, args)
		if !ok || got.Out.Outcome != Applied {
			if ok && got.Out.Refusal == "conflict" && strings.Contains(got.Out.Detail, "can no longer be claimed") {
				r.finished(got.Task)
			}
			if ok && got.Out.Outcome != Refused {
				time.Sleep(50 * time.Millisecond)
			}
			continue
		}
		h := Op{Owner: owner, Task: got.Task, Gen: got.Out.Gen, Token: got.Out.Token, LeaseMS: leaseMS}
		hargs := map[string]any{"task_id": got.Task, "owner": owner, "generation": got.Out.Gen, "claim_token": got.Out.Token}
		write := func(kind Kind, extra map[string]any) Op {
			a := map[string]any{}
			for k, v := range hargs {
				a[k] = v
			}
			for k, v := range extra {
				a[k] = v
			}
			op := h
			op.Kind = kind
			got, _ := do(op, a)
			if got.Out.Outcome == Unknown && rng.IntN(2) == 0 {
				got, _ = do(op, a) // repeated blindly, as a client might
			}
			return got
		}
		r1 := rng.IntN(100)
		if r1 < 8 {
			continue // abandoned: the lease lapses
		}
		for range rng.IntN(3) {
			time.Sleep(r.cfg.lease / 3)
			write(Heartbeat, map[string]any{"lease_ms": leaseMS})
		}
		if r1 < 20 {
			time.Sleep(r.cfg.lease + r.cfg.lease/3) // a pause past the lease
		}
		switch r2 := rng.IntN(100); {
		case r2 < 20:
			write(Fail, map[string]any{"error": "injected failure", "retryable": true, "retry_after_ms": 0})
		case r2 < 35:
			write(Release, map[string]any{"release": true})
		default:
			if got := write(Complete, map[string]any{"result": map[string]any{"by": owner}}); got.Out.Outcome == Applied {
				r.finished(got.Task)
			}
		}
	}
}

// inject injects faults of one kind, about every cfg.interval, until end;
// it leaves every process running.
func (r *run) inject(fault string, end time.Time) error {
	rng := rand.New(rand.NewPCG(uint64(len(fault)), uint64(time.Now().UnixNano())))
	jitter := func(d time.Duration) time.Duration { return d/2 + time.Duration(rng.Int64N(int64(d))) }
	for k := 0; time.Now().Before(end); k++ {
		time.Sleep(jitter(r.cfg.interval))
		s := r.servers[k%len(r.servers)]
		switch fault {
		case "kill":
			s.kill()
			r.faults.Add(1)
			time.Sleep(jitter(300 * time.Millisecond))
			if err := s.start(); err != nil {
				return err
			}
		case "stop":
			// SIGSTOP lands in the middle of whatever the server does (a
			// transaction, a half-written answer); it stays stopped for up to
			// about two leases.
			s.signal(syscall.SIGSTOP)
			r.faults.Add(1)
			time.Sleep(jitter(r.cfg.lease))
			s.signal(syscall.SIGCONT)
		case "crash":
			if err := r.pg.crash(); err != nil {
				return err
			}
			r.faults.Add(1)
			time.Sleep(jitter(500 * time.Millisecond))
			if err := r.pg.restart(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unknown fault %q", fault)
		}
	}
	return nil
}
