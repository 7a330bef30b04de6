package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// benchConfig is what one bench run does.
type benchConfig struct {
	Tasks     int
	Workers   int
	Mode      string // store or http
	Sync      tgsqlite.SyncMode
	Layers    int // 0: independent tasks; L > 1: each workflow is L layers deep
	Heartbeat bool
	Database  string
	// WorkflowSize is how many tasks go into one workflow.
	WorkflowSize int
	// Replicas is how many stores (server processes) share the database.
	Replicas int
	// PGMaxConns bounds each PostgreSQL store's pool.
	PGMaxConns int
	// CPUProfile, when set, is the file the measured run's CPU profile goes to.
	CPUProfile string
	// MemProfile, when set, is the file the heap profile taken at the end
	// of the measured run goes to; MemProfile+".base" is the one taken at
	// its start, so that -diff_base shows the run's own allocations.
	MemProfile string
	// HTTPClient is the MCP client of --mode http: "sdk" (the Go SDK's)
	// or "wire" (plain JSON-RPC requests over net/http).
	HTTPClient string
	// Loop is the workers' loop: "combined" (each completion claims the
	// next task in the same call: Store.CompleteAndClaim, or over MCP
	// graph_task_complete with claim_next) or "separate" (a claim, then a
	// completion: two calls per task).
	Loop string
	// Keys, when positive, spreads the tasks round-robin over that many
	// concurrency keys (task i has key k<i mod Keys>), so that every claim
	// and completion takes and gives back a key's slot.
	Keys int
	// KeyLimit, with Keys, caps each key's tasks claimed at once (0: no
	// cap; the keys still count their claims).
	KeyLimit int
	// RequestIDs gives every claim, heartbeat and completion a fresh
	// request id (taskgraph.WithRequestID), as the README tells workers
	// to: the store keeps each answer in the write's transaction.
	RequestIDs bool
}

// latencyMS are percentiles of one operation, in milliseconds.
type latencyMS struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// benchResult is printed by bench --json.
type benchResult struct {
	Mode         string  `json:"mode"`
	Tasks        int     `json:"tasks"`
	Workers      int     `json:"workers"`
	Sync         string  `json:"sync"`
	Layers       int     `json:"layers"`
	WorkflowSize int     `json:"workflow_size"`
	Heartbeat    bool    `json:"heartbeat"`
	Loop         string  `json:"loop"`
	HTTPClient   string  `json:"http_client,omitempty"`
	Keys         int     `json:"keys,omitempty"`
	KeyLimit     int     `json:"key_limit,omitempty"`
	RequestIDs   bool    `json:"request_ids,omitempty"`
	Seconds      float64 `json:"seconds"`
	CyclesPerSec float64 `json:"cycles_per_sec"`
	// ClaimMS are the latencies of the claims that were granted a task
	// and Claims their number; with the combined loop only the workers'
	// first claims (and any after a completion that claimed nothing), the
	// rest being part of CompleteMS. EmptyClaims counts the claims that
	// found no task: each lasted its Wait (100 ms) and is in neither.
	ClaimMS               latencyMS  `json:"claim_ms"`
	Claims                int        `json:"claims"`
	EmptyClaims           int        `json:"empty_claims"`
	CompleteMS            latencyMS  `json:"complete_ms"`
	HeartbeatMS           *latencyMS `json:"heartbeat_ms,omitempty"`
	VerifiedCompletedOnce int        `json:"verified_completed_once"`
	HistoryVerified       bool       `json:"history_verified"`
	Database              string     `json:"database"`
	Driver                string     `json:"driver"`
	Replicas              int        `json:"replicas"`
	// CPUMicrosPerCycle is this process's CPU time (user + system, every
	// thread: the workers, the store, its drivers and, in --mode http, the
	// server) over the measured phase, per cycle: it depends less than cycles/s
	// on how busy the machine is.
	CPUMicrosPerCycle float64 `json:"cpu_us_per_cycle"`
	// AllocsPerCycle and AllocBytesPerCycle are the heap allocations of
	// this process over the measured phase, per cycle.
	AllocsPerCycle     float64 `json:"allocs_per_cycle"`
	AllocBytesPerCycle float64 `json:"alloc_bytes_per_cycle"`
	// WriteBytesPerCycle is what this process wrote to storage over the
	// measured phase (/proc/self/io write_bytes), per cycle: on SQLite the
	// WAL and the checkpoints' copies into the database file; on
	// PostgreSQL the server writes, so about 0. 0 where the kernel does
	// not count it (a tmpfs, no /proc/self/io).
	WriteBytesPerCycle float64 `json:"write_bytes_per_cycle"`
	// CommitsPerCycle is the store's commit attempts over the measured
	// run (taskgraph.Options.OnBatch), per cycle, and CommitMS their mean
	// time: on PostgreSQL a write transaction's, from taking a connection
	// to its COMMIT's answer (a hot batch, which runs the waiting
	// completions and claims together: about 0.25 commits a cycle at
	// W=8), on SQLite the writer's batch. A cycle's latency well above
	// CommitMS is time spent waiting for a batch, not in one.
	CommitsPerCycle float64 `json:"commits_per_cycle"`
	CommitMS        float64 `json:"commit_ms"`
	// TailMS is how long the last percent of the tasks took (benchTally):
	// about a hundredth of Seconds at an even pace.
	TailMS float64 `json:"tail_ms"`
}

// benchCommits counts the store's commit attempts while on.
type benchCommits struct {
	on   atomic.Bool
	n    atomic.Int64
	took atomic.Int64 // nanoseconds
}

func (c *benchCommits) observe(_ int, took time.Duration, _ error) {
	if c.on.Load() {
		c.n.Add(1)
		c.took.Add(int64(took))
	}
}

// maxBenchKeys bounds --keys.
const maxBenchKeys = 10000

// benchWorkflowSize is how many tasks go into one workflow by default
// (--workflow-size).
const benchWorkflowSize = 1000

// benchClient is one worker's connection: the store itself, or an MCP client.
type benchClient interface {
	claim(ctx context.Context, owner string) (h lease.Holder, ok bool, err error)
	heartbeat(ctx context.Context, h lease.Holder) error
	complete(ctx context.Context, h lease.Holder, result json.RawMessage) error
	close() error
}

// benchCombiner is a benchClient that completes a task and claims the next
// in one call.
type benchCombiner interface {
	completeAndClaim(ctx context.Context, h lease.Holder, result json.RawMessage) (next lease.Holder, ok bool, err error)
}

// storeClient calls the store itself; with ids, each call carries a fresh
// request id.
type storeClient struct {
	s   *taskgraph.Store
	ids bool
}

// call is ctx, with a fresh request id when c gives them.
func (c storeClient) call(ctx context.Context) context.Context {
	if !c.ids {
		return ctx
	}
	return taskgraph.WithRequestID(ctx, rand.Text())
}

func (c storeClient) claim(ctx context.Context, owner string) (lease.Holder, bool, error) {
	cl, ok, err := c.s.Claim(c.call(ctx), taskgraph.ClaimRequest{Owner: owner, Lease: time.Minute, Wait: 100 * time.Millisecond})
	if err != nil || !ok {
		return lease.Holder{}, ok, err
	}
	return lease.Holder{TaskID: cl.Task.TaskID, Owner: owner, Generation: cl.Lease.Generation, Token: cl.Lease.Token}, true, nil
}

func (c storeClient) heartbeat(ctx context.Context, h lease.Holder) error {
	_, err := c.s.Heartbeat(c.call(ctx), h, time.Minute)
	return err
}

func (c storeClient) complete(ctx context.Context, h lease.Holder, result json.RawMessage) error {
	_, err := c.s.Complete(c.call(ctx), h, result)
	return err
}

func (c storeClient) completeAndClaim(ctx context.Context, h lease.Holder, result json.RawMessage) (lease.Holder, bool, error) {
	_, cl, ok, err := c.s.CompleteAndClaim(ctx, h, result, taskgraph.ClaimRequest{Lease: time.Minute})
	if err != nil || !ok {
		return lease.Holder{}, ok, err
	}
	return lease.Holder{TaskID: cl.Task.TaskID, Owner: h.Owner, Generation: cl.Lease.Generation, Token: cl.Lease.Token}, true, nil
}

func (storeClient) close() error { return nil }

// benchClientFactory makes the clients of a non-store mode; set by the file
// that implements that mode.
var benchClientFactory = map[string]func(ctx context.Context, s *taskgraph.Store, workers int, httpClient string, stderr io.Writer) (func(i int) (benchClient, error), func() error, error){}

// seedBench creates the tasks: workflows of cfg.WorkflowSize tasks, either
// independent or in layers where each node depends on two nodes of the
// layer above.
func seedBench(ctx context.Context, s *taskgraph.Store, cfg benchConfig) error {
	for start, wf := 0, 0; start < cfg.Tasks; start, wf = start+cfg.WorkflowSize, wf+1 {
		n := min(cfg.WorkflowSize, cfg.Tasks-start)
		nodes := make([]taskgraph.NodeSpec, n)
		perLayer := n
		if cfg.Layers > 1 {
			perLayer = (n + cfg.Layers - 1) / cfg.Layers
		}
		for i := range nodes {
			nodes[i] = taskgraph.NodeSpec{NodeID: fmt.Sprintf("n%05d", i), Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, start+i))}
			if cfg.Keys > 0 {
				nodes[i].ConcurrencyKey = benchKey(start+i, cfg.Keys)
				if cfg.KeyLimit > 0 {
					nodes[i].KeyLimit = &taskgraph.KeyLimit{MaxClaimed: cfg.KeyLimit}
				}
			}
			if layer := i / perLayer; layer > 0 {
				above := (layer - 1) * perLayer
				a, b := above+(i%perLayer), above+((i+1)%perLayer)
				nodes[i].DependsOn = []string{fmt.Sprintf("n%05d", a)}
				if b != a {
					nodes[i].DependsOn = append(nodes[i].DependsOn, fmt.Sprintf("n%05d", b))
				}
			}
		}
		if _, err := s.CreateWorkflow(ctx, fmt.Sprintf("bench-%04d", wf), nodes); err != nil {
			return fmt.Errorf("seed workflow %d: %w", wf, err)
		}
	}
	return nil
}

// benchKey is the concurrency key of the bench's task i of keys keys.
func benchKey(i, keys int) string { return fmt.Sprintf("k%04d", i%keys) }

func runBench(ctx context.Context, cfg benchConfig, stderr io.Writer) (*benchResult, error) {
	path := cfg.Database
	if path == "" {
		dir, err := os.MkdirTemp("", "graph-engineering-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "bench.db")
	}
	var commits benchCommits
	opts := taskgraph.Options{Sweep: true, Logger: newLogger(stderr, 8), OnBatch: commits.observe}
	openOne := func() (*taskgraph.Store, error) {
		if kind, loc := databaseKind(path); kind == databasePostgres {
			return openPostgres(ctx, loc, opts, openServe, cfg.PGMaxConns, 0)
		}
		return sqlitestore.Open(ctx, path, opts, tgsqlite.Options{Sync: cfg.Sync})
	}
	store, err := openOne()
	if err != nil {
		return nil, err
	}
	defer store.Close()
	// More replicas: more stores on the same database, as more server
	// processes would be; workers are spread over them.
	stores := []*taskgraph.Store{store}
	for len(stores) < cfg.Replicas {
		s, err := openOne()
		if err != nil {
			return nil, err
		}
		defer s.Close()
		stores = append(stores, s)
	}
	// bench counts the tasks it creates until all are done: on a database
	// that already holds its workflows, CreateWorkflow finds them there
	// and the workers would wait for tasks that never come. A new SQLite
	// file is checked before opening (benchAction); a PostgreSQL database
	// is checked here.
	held, err := store.CountByState(ctx)
	if err != nil {
		return nil, fmt.Errorf("count the tasks the database holds: %w", err)
	}
	n := 0
	for _, c := range held {
		n += c
	}
	if n > 0 {
		return nil, usagef("--database %s holds %d tasks already; bench needs an empty database (it creates %d tasks and runs until all of them are done): create a new one", redactDatabase(cfg.Database), n, cfg.Tasks)
	}
	if err := seedBench(ctx, store, cfg); err != nil {
		return nil, err
	}
	newClient := func(i int) (benchClient, error) { return storeClient{stores[i%len(stores)], cfg.RequestIDs}, nil }
	stop := func() error { return nil }
	if cfg.Mode != "store" {
		f := benchClientFactory[cfg.Mode]
		if f == nil {
			return nil, usagef("--mode must be store or http (got %q)", cfg.Mode)
		}
		if newClient, stop, err = f(ctx, store, cfg.Workers, cfg.HTTPClient, stderr); err != nil {
			return nil, err
		}
	}
	// The workers' goroutines, and those they and their clients start (in
	// --mode http, the SDK clients' sessions and HTTP transport), carry the
	// profile label bench=worker; the server's and the store's were started
	// before and carry none. So go tool pprof -tags splits a --cpuprofile
	// between the bench's own clients and what they measure.
	defer pprof.SetGoroutineLabels(ctx)
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("bench", "worker")))
	// The workers' clients are made before the measured run: in --mode
	// http each is an MCP session whose connection handshake is setup, as
	// opening the store is in --mode store. Closing them comes after it.
	clients := make([]benchClient, 0, cfg.Workers)
	closeClients := func() {
		for _, cl := range clients {
			cl.close()
		}
	}
	for w := 0; w < cfg.Workers; w++ {
		cl, err := newClient(w)
		if err != nil {
			closeClients()
			stop()
			return nil, err
		}
		clients = append(clients, cl)
	}
	// stopProfile ends the CPU profile of the measured run, as soon as the
	// workers are done: not the seeding, not the verification.
	stopProfile := func() {}
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			closeClients()
			stop()
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			closeClients()
			stop()
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		stopProfile = pprof.StopCPUProfile
		defer stopProfile()
	}
	if cfg.MemProfile != "" {
		if err := writeHeapProfile(cfg.MemProfile + ".base"); err != nil {
			stopProfile()
			closeClients()
			stop()
			return nil, err
		}
	}
	cost := startCost()
	var mu sync.Mutex
	var claims, completes, heartbeats []time.Duration
	emptyClaims := 0
	errs := make(chan error, cfg.Workers)
	commits.on.Store(true)
	start := time.Now()
	tally := newBenchTally(cfg.Tasks, start)
	done := &tally.done
	var wg sync.WaitGroup
	for w, cl := range clients {
		wg.Add(1)
		go func(owner string, cl benchClient) {
			defer wg.Done()
			var myClaims, myCompletes, myHBs []time.Duration
			myEmpty := 0
			defer func() {
				mu.Lock()
				claims, completes, heartbeats = append(claims, myClaims...), append(completes, myCompletes...), append(heartbeats, myHBs...)
				emptyClaims += myEmpty
				mu.Unlock()
			}()
			combiner, combined := cl.(benchCombiner)
			combined = combined && cfg.Loop == "combined"
			var next lease.Holder // claimed with the last completion
			for done.Load() < int64(cfg.Tasks) && ctx.Err() == nil {
				h := next
				if h.TaskID == "" {
					t0 := time.Now()
					var ok bool
					var err error
					h, ok, err = cl.claim(ctx, owner)
					if err != nil {
						errs <- fmt.Errorf("%s claim: %w", owner, err)
						return
					}
					if !ok {
						// Nothing to claim: the call lasted its
						// Wait, not a claim's work (see benchTally).
						myEmpty++
						continue
					}
					myClaims = append(myClaims, time.Since(t0))
				}
				next = lease.Holder{}
				if cfg.Heartbeat {
					t1 := time.Now()
					if err := cl.heartbeat(ctx, h); err != nil {
						errs <- fmt.Errorf("%s heartbeat: %w", owner, err)
						return
					}
					myHBs = append(myHBs, time.Since(t1))
				}
				t2 := time.Now()
				if combined {
					var err error
					if next, _, err = combiner.completeAndClaim(ctx, h, json.RawMessage(`{"ok":true}`)); err != nil {
						errs <- fmt.Errorf("%s complete and claim: %w", owner, err)
						return
					}
				} else if err := cl.complete(ctx, h, json.RawMessage(`{"ok":true}`)); err != nil {
					errs <- fmt.Errorf("%s complete: %w", owner, err)
					return
				}
				end := time.Now()
				myCompletes = append(myCompletes, end.Sub(t2))
				tally.completed(end)
			}
		}(fmt.Sprintf("bench-worker-%02d", w), cl)
	}
	pprof.SetGoroutineLabels(ctx)
	wg.Wait()
	elapsed := tally.elapsed(time.Now())
	commits.on.Store(false)
	stopProfile()
	spent := cost.since()
	if cfg.MemProfile != "" {
		if err := writeHeapProfile(cfg.MemProfile); err != nil {
			closeClients()
			stop()
			return nil, err
		}
	}
	closeClients()
	stopErr := stop()
	close(errs)
	if err := errors.Join(append(collect(errs), stopErr)...); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := &benchResult{
		Mode: cfg.Mode, HTTPClient: httpClientOf(cfg), Tasks: cfg.Tasks, Workers: cfg.Workers, WorkflowSize: cfg.WorkflowSize, Sync: string(cfg.Sync), Layers: cfg.Layers, Heartbeat: cfg.Heartbeat, Loop: cfg.Loop,
		Keys: cfg.Keys, KeyLimit: cfg.KeyLimit, RequestIDs: cfg.RequestIDs,
		Seconds: elapsed.Seconds(), CyclesPerSec: float64(done.Load()) / elapsed.Seconds(),
		ClaimMS: percentiles(claims), Claims: len(claims), EmptyClaims: emptyClaims, CompleteMS: percentiles(completes), Database: redactDatabase(cfg.Database),
		Driver: store.Driver(), Replicas: len(stores), TailMS: float64(tally.tail().Microseconds()) / 1000,
	}
	if n := float64(done.Load()); n > 0 {
		res.CPUMicrosPerCycle = float64(spent.cpu.Microseconds()) / n
		res.AllocsPerCycle, res.AllocBytesPerCycle = float64(spent.allocs)/n, float64(spent.bytes)/n
		res.WriteBytesPerCycle = float64(spent.written) / n
		if c := commits.n.Load(); c > 0 {
			res.CommitsPerCycle = float64(c) / n
			res.CommitMS = float64(commits.took.Load()) / float64(c) / 1e6
		}
	}
	if cfg.Heartbeat {
		p := percentiles(heartbeats)
		res.HeartbeatMS = &p
	}
	if res.VerifiedCompletedOnce, err = verifyBench(ctx, store, cfg); err != nil {
		return res, err
	}
	if _, err := store.VerifyHistory(ctx); err != nil {
		return res, fmt.Errorf("verify history: %w", err)
	}
	res.HistoryVerified = true
	return res, nil
}

// httpClientOf is the client a result names: only --mode http has one.
func httpClientOf(cfg benchConfig) string {
	if cfg.Mode != "http" {
		return ""
	}
	return cfg.HTTPClient
}

func collect(ch <-chan error) []error {
	var out []error
	for err := range ch {
		out = append(out, err)
	}
	return out
}

// verifyBench checks its own result: every task completed, by exactly one
// complete event.
func verifyBench(ctx context.Context, s *taskgraph.Store, cfg benchConfig) (int, error) {
	ok := 0
	for start, wf := 0, 0; start < cfg.Tasks; start, wf = start+cfg.WorkflowSize, wf+1 {
		v, err := s.Workflow(ctx, fmt.Sprintf("bench-%04d", wf))
		if err != nil {
			return ok, err
		}
		evs, err := s.WorkflowEvents(ctx, v.WorkflowID)
		if err != nil {
			return ok, err
		}
		completes := map[string]int{}
		for _, e := range evs {
			if e.Kind == taskgraph.EventComplete {
				completes[e.TaskID]++
			}
		}
		for _, t := range v.Tasks {
			if t.State == taskgraph.StateCompleted && completes[t.TaskID] == 1 {
				ok++
			}
		}
	}
	if ok != cfg.Tasks {
		return ok, fmt.Errorf("verification failed: %d of %d tasks were completed exactly once", ok, cfg.Tasks)
	}
	return ok, nil
}

// benchTally ends the measured run at the completion of its last task.
// Workers that find nothing left to claim while others still hold tasks
// wait out their claim's Wait (100 ms): that tail is no work of the store,
// and counted in the run it took 5-7% of a 5,000-task run on PostgreSQL
// (1.46 s of cycles, 1.57 s measured); nor are those claims' waits claim
// latencies, which with the combined loop were half of claim_ms's samples
// (8 first claims of 7-15 ms, 7 empty ones of 103 ms: p50 15 ms, p95 103
// ms), read as claims queueing for 100 ms.
//
// It also times the run's last percent of tasks (tail): at an even pace
// that is about a hundredth of the run, and a tail many times that is
// time lost at the end of the run, not in its cycles. Such a tail was 35%
// of a 5,000-task run at W=32 on PostgreSQL: completions whose answers
// waited behind a burst of reads by the workers that had run dry.
type benchTally struct {
	tasks int64
	start time.Time
	done  atomic.Int64
	// tailFrom is the count of completions after which the tail starts:
	// tasks less one percent of them (at least one task).
	tailFrom int64
	// tailAt is when the completion that made done reach tailFrom
	// returned, in nanoseconds after start; 0 until then (and for a run
	// of a single task, whose tail is all of it).
	tailAt atomic.Int64
	// end is when the completion that made done reach tasks returned, in
	// nanoseconds after start; 0 until then.
	end atomic.Int64
}

func newBenchTally(tasks int, start time.Time) *benchTally {
	return &benchTally{tasks: int64(tasks), start: start, tailFrom: int64(tasks) - max(int64(tasks)/100, 1)}
}

// completed counts a completion that returned at t.
func (b *benchTally) completed(t time.Time) {
	switch b.done.Add(1) {
	case b.tailFrom:
		b.tailAt.Store(int64(max(t.Sub(b.start), 1)))
	case b.tasks:
		b.end.Store(int64(max(t.Sub(b.start), 1)))
	}
}

// tail is how long the last percent of the tasks took: from the
// completion before them to the last one (0 until every task is done).
func (b *benchTally) tail() time.Duration {
	end := b.end.Load()
	if end == 0 {
		return 0
	}
	return time.Duration(end - b.tailAt.Load())
}

// elapsed is the measured run's time: until the last task's completion,
// or until now when the run did not complete every task.
func (b *benchTally) elapsed(now time.Time) time.Duration {
	if e := b.end.Load(); e > 0 {
		return time.Duration(e)
	}
	return now.Sub(b.start)
}

func percentiles(d []time.Duration) latencyMS {
	if len(d) == 0 {
		return latencyMS{}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(q float64) float64 {
		i := int(q*float64(len(d))+0.5) - 1
		i = max(0, min(i, len(d)-1))
		return float64(d[i].Microseconds()) / 1000
	}
	return latencyMS{P50: at(0.50), P95: at(0.95), P99: at(0.99)}
}

func benchAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("bench takes no arguments (got %q)", c.Args().First())
	}
	cfg := benchConfig{
		Tasks: c.Int("tasks"), Workers: c.Int("workers"), Mode: strings.ToLower(c.String("mode")),
		Sync: tgsqlite.SyncMode(strings.ToLower(c.String("sync"))), Layers: c.Int("layers"),
		Heartbeat: c.Bool("heartbeat"), Database: c.String("database"), CPUProfile: c.String("cpuprofile"), MemProfile: c.String("memprofile"),
		Replicas: c.Int("replicas"), PGMaxConns: c.Int("pg-max-conns"), WorkflowSize: c.Int("workflow-size"),
		Loop: strings.ToLower(c.String("loop")), HTTPClient: strings.ToLower(c.String("http-client")),
		Keys: c.Int("keys"), KeyLimit: c.Int("key-limit"), RequestIDs: c.Bool("request-ids"),
	}
	if cfg.Loop == "" {
		cfg.Loop = "combined"
		if cfg.Heartbeat || cfg.RequestIDs {
			cfg.Loop = "separate"
		}
	}
	switch {
	case cfg.HTTPClient != "sdk" && cfg.HTTPClient != "wire":
		return usagef("--http-client must be sdk or wire (got %q)", cfg.HTTPClient)
	case cfg.HTTPClient == "wire" && cfg.Mode != "http":
		return usagef("--http-client applies to --mode http only")
	case cfg.Loop != "combined" && cfg.Loop != "separate":
		return usagef("--loop must be combined or separate (got %q)", cfg.Loop)
	case cfg.RequestIDs && cfg.Mode != "store":
		return usagef("--request-ids applies to --mode store only")
	case cfg.RequestIDs && cfg.Loop == "combined":
		return usagef("--request-ids needs --loop separate: a completion that claims the next task takes no request id (MCP.md §3)")
	case cfg.Loop == "combined" && cfg.Heartbeat:
		return usagef("--loop combined is for workers that do not --heartbeat: a heartbeat comes between a claim and its completion")
	case cfg.Tasks < 1 || cfg.Tasks > 10_000_000:
		return usagef("--tasks must be between 1 and 10000000 (got %d)", cfg.Tasks)
	case cfg.Workers < 1 || cfg.Workers > 256:
		return usagef("--workers must be between 1 and 256 (got %d)", cfg.Workers)
	case cfg.Sync != tgsqlite.SyncFull && cfg.Sync != tgsqlite.SyncNormal:
		return usagef("--sync must be full or normal (got %q)", cfg.Sync)
	case cfg.Layers < 0 || cfg.Layers > 100:
		return usagef("--layers must be between 0 and 100 (got %d)", cfg.Layers)
	case cfg.Mode != "store" && benchClientFactory[cfg.Mode] == nil:
		return usagef("--mode must be store or http (got %q)", cfg.Mode)
	case cfg.WorkflowSize < 1 || cfg.WorkflowSize > taskgraph.MaxTasksPerWorkflow:
		return usagef("--workflow-size must be between 1 and %d (got %d)", taskgraph.MaxTasksPerWorkflow, cfg.WorkflowSize)
	case cfg.Replicas < 1 || cfg.Replicas > 8:
		return usagef("--replicas must be between 1 and 8 (got %d)", cfg.Replicas)
	case cfg.Replicas > 1 && cfg.Mode != "store":
		return usagef("--replicas applies to --mode store only")
	case cfg.PGMaxConns < 1 || cfg.PGMaxConns > 1000:
		return usagef("--pg-max-conns must be between 1 and 1000 (got %d)", cfg.PGMaxConns)
	case cfg.Keys < 0 || cfg.Keys > maxBenchKeys:
		return usagef("--keys must be between 0 and %d (got %d)", maxBenchKeys, cfg.Keys)
	case cfg.KeyLimit < 0 || cfg.KeyLimit > taskgraph.MaxKeyClaimed:
		return usagef("--key-limit must be between 0 and %d (got %d)", taskgraph.MaxKeyClaimed, cfg.KeyLimit)
	case cfg.KeyLimit > 0 && cfg.Keys == 0:
		return usagef("--key-limit caps the tasks of each of --keys K keys: give --keys too")
	}
	kind, loc := databaseKind(cfg.Database)
	switch kind {
	case databaseUnsupported:
		return usagef("--database %s://...: give a new SQLite file path or a postgres:// URL", loc)
	case databasePostgres:
		cfg.Database = loc
	}
	if cfg.Database != "" && kind == databaseSQLite {
		if _, err := os.Stat(cfg.Database); err == nil {
			return usagef("--database %s exists; bench needs a new database file (it creates %d tasks)", cfg.Database, cfg.Tasks)
		}
	}
	tuneGC() // the same collector setting as serve: bench measures a server
	res, err := runBench(c.Context, cfg, c.App.ErrWriter)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, res)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "mode=%s driver=%s replicas=%d tasks=%d workers=%d sync=%s layers=%d heartbeat=%v loop=%s", res.Mode, res.Driver, res.Replicas, res.Tasks, res.Workers, res.Sync, res.Layers, res.Heartbeat, res.Loop)
	if res.HTTPClient != "" {
		fmt.Fprintf(w, " http-client=%s", res.HTTPClient)
	}
	if res.Keys > 0 {
		fmt.Fprintf(w, " keys=%d key-limit=%d", res.Keys, res.KeyLimit)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  %.2fs, %.0f claim+complete cycles/s; the last 1%% of the tasks took %.1fms\n", res.Seconds, res.CyclesPerSec, res.TailMS)
	fmt.Fprintf(w, "  claim     p50 %.2fms  p95 %.2fms  p99 %.2fms  (%d granted; %d found no task)\n", res.ClaimMS.P50, res.ClaimMS.P95, res.ClaimMS.P99, res.Claims, res.EmptyClaims)
	if res.HeartbeatMS != nil {
		fmt.Fprintf(w, "  heartbeat p50 %.2fms  p95 %.2fms  p99 %.2fms\n", res.HeartbeatMS.P50, res.HeartbeatMS.P95, res.HeartbeatMS.P99)
	}
	fmt.Fprintf(w, "  complete  p50 %.2fms  p95 %.2fms  p99 %.2fms\n", res.CompleteMS.P50, res.CompleteMS.P95, res.CompleteMS.P99)
	fmt.Fprintf(w, "  cpu %.0fµs/cycle (this process, user+system)  allocs %.0f/cycle  %.0f B/cycle\n", res.CPUMicrosPerCycle, res.AllocsPerCycle, res.AllocBytesPerCycle)
	fmt.Fprintf(w, "  commits %.3f/cycle, %.2fms each on average\n", res.CommitsPerCycle, res.CommitMS)
	fmt.Fprintf(w, "  verified: %d tasks completed exactly once; history chain verifies\n", res.VerifiedCompletedOnce)
	return nil
}

func init() {
	registerCommands(func() []*cli.Command {
		return []*cli.Command{{
			Name:  "bench",
			Usage: "measure claim+complete throughput and latency, and verify the result",
			UsageText: `graph-engineering-mcp bench [--tasks N] [--workers W] [--mode store|http] [--sync full|normal] [--layers L] [--heartbeat] [--request-ids] [--replicas R] [--database PATH|URL] [--json]

Creates N tasks in a new database (a temporary one unless --database names a
new file, or a postgres:// URL of an empty database), runs W workers that claim-next, optionally heartbeat, and complete
(each completion claims the next task in the same call, unless --heartbeat
or --loop separate), then prints throughput and claim/complete latency percentiles, and checks that
every task was completed exactly once and the history verifies. The run
ends at the last task's completion; claim latencies are those of claims
granted a task (with the combined loop, a completion's claim is part of
its complete latency), and claims that found none are only counted.

  --mode store  workers call the store in-process
  --mode http   workers are MCP clients over Streamable HTTP on loopback
                against a server the command starts

  --http-client sdk|wire
                the MCP client of --mode http: the Go SDK's (sdk, the
                default) or plain JSON-RPC requests (wire); the server
                does the same work for both

  --replicas R  R stores on the one database, as R server processes would
                be, with the workers spread over them (--mode store)

  --keys K [--key-limit M]
                task i carries concurrency key k<i mod K>, each key capped at
                M tasks claimed at once: the cost of flow control per cycle

Example:
   graph-engineering-mcp bench --tasks 20000 --workers 8 --sync full --json
   graph-engineering-mcp bench --database postgres://bench@127.0.0.1/bench --replicas 2 --workers 64`,
			Flags: []cli.Flag{
				&cli.IntFlag{Name: "tasks", Value: 20000, Usage: "how many tasks to create and run (`N`)"},
				&cli.IntFlag{Name: "workers", Value: 8, Usage: "concurrent workers (`W`)"},
				&cli.StringFlag{Name: "mode", Value: "store", Usage: "how workers reach the store, `MODE`: store (in-process) or http (MCP clients over Streamable HTTP)"},
				&cli.StringFlag{Name: "sync", Value: "full", Usage: "SQLite synchronous `MODE`: full or normal"},
				&cli.IntFlag{Name: "layers", Value: 0, Usage: "arrange each workflow of 1000 tasks as `L` dependent layers (0: independent tasks)"},
				&cli.BoolFlag{Name: "heartbeat", Usage: "heartbeat once per task between claim and complete"},
				&cli.StringFlag{Name: "database", Usage: "a new SQLite database file `PATH` to keep (default: a temporary one, removed afterwards), or a postgres:// URL of an empty database"},
				&cli.IntFlag{Name: "workflow-size", Value: benchWorkflowSize, Usage: "`N` tasks per workflow (a workflow's writes are one chain: fewer, larger workflows serialise more)"},
				&cli.IntFlag{Name: "replicas", Value: 1, Usage: "`R` stores on the one database, as R server processes (workers spread over them; --mode store)"},
				&cli.IntFlag{Name: "pg-max-conns", Value: defaultPGMaxConns, Usage: "PostgreSQL: at most `N` pooled connections per replica"},
				&cli.StringFlag{Name: "http-client", Value: "sdk", Usage: "the MCP `CLIENT` of --mode http: sdk (the Go SDK's client) or wire (plain 2026-07-28 JSON-RPC requests over net/http, decoding only what a worker needs)"},
				&cli.StringFlag{Name: "loop", Usage: "the workers' `LOOP`: combined (each completion claims the next task in the same call: Store.CompleteAndClaim, or graph_task_complete with claim_next over MCP; the default without --heartbeat) or separate (a claim, then a completion)"},
				&cli.IntFlag{Name: "keys", Usage: "spread the tasks round-robin over `K` concurrency keys (0: no keys)"},
				&cli.IntFlag{Name: "key-limit", Usage: "with --keys, at most `M` tasks of each key claimed at once (0: no cap)"},
				&cli.BoolFlag{Name: "request-ids", Usage: "give every claim, heartbeat and completion a fresh request id, as the README tells workers to (--mode store, --loop separate)"},
				&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the measured run to `FILE` (go tool pprof FILE; the workers' own goroutines, in --mode http the MCP clients, carry the label bench=worker: go tool pprof -tags FILE)"},
				&cli.StringFlag{Name: "memprofile", Usage: "write heap profiles to `FILE`.base and FILE at the start and the end of the measured run (go tool pprof -sample_index=alloc_space -diff_base FILE.base FILE)"},
				jsonFlag(),
			},
			Action: benchAction,
		}}
	})
}
