package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// fleetKeysConfig sizes TestFleetKeyLimits: the defaults are the short run
// of the normal suite; scripts/fleet --keys sets GE_FLEET_KEYS_* for the
// full run of issue 27 (1,000 tasks).
type fleetKeysConfig struct {
	tasks   int           // tasks of the one key
	workers int           // MCP clients claiming them
	max     int           // the key's cap on tasks claimed at once
	rate    int           // the key's claims per interval
	every   time.Duration // the rate's interval
	work    time.Duration // how long a worker works on one task
}

func fleetKeysConfigFromEnv(t *testing.T) fleetKeysConfig {
	c := fleetKeysConfig{tasks: 40, workers: 6, max: 2, rate: 10, every: time.Second, work: 30 * time.Millisecond}
	envInt(t, "GE_FLEET_KEYS_TASKS", &c.tasks)
	envInt(t, "GE_FLEET_KEYS_WORKERS", &c.workers)
	envDuration(t, "GE_FLEET_KEYS_WORK", &c.work)
	if c.tasks < 3 || c.tasks > taskgraph.MaxCreateNodes || c.workers < 1 {
		t.Fatalf("GE_FLEET_KEYS_TASKS must be 3..%d and GE_FLEET_KEYS_WORKERS at least 1 (got %d, %d)", taskgraph.MaxCreateNodes, c.tasks, c.workers)
	}
	return c
}

// TestFleetKeyLimits is the fleet proof of issue 27 for concurrency keys,
// rate limits and pause, over HTTP with the SDK's client: workers run the
// README loop (claim-next with wait_ms, complete) on tasks that all share
// one concurrency key limited to max claimed at once and rate claims per
// interval, and an operator pauses the workflow (admin pause, another
// process) a third of the way through and resumes it once every live lease
// has ended and every worker was turned away. Judged from the server's
// history (its events, in commit order, at server time), not from the
// workers' clocks: never more than max tasks claimed at once, never more
// than rate claims in any interval, no claim recorded while paused, no
// lease lost (every task completed on its first attempt, no completion
// refused), every task done.
func TestFleetKeyLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("fleet: skipped with -short")
	}
	t.Parallel()
	cfg := fleetKeysConfigFromEnv(t)
	const wf = "fleetkeys"
	srv := newSoakServer(t, wf)
	t0 := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	transport := &http.Transport{MaxIdleConnsPerHost: cfg.workers + 4}
	defer transport.CloseIdleConnections()
	seed, err := fleetConnect(ctx, srv.addr, &http.Client{Transport: bearer{srv.token, transport}})
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]any, cfg.tasks)
	for i := range nodes {
		nodes[i] = map[string]any{"node_id": fmt.Sprintf("k%04d", i), "payload": map[string]any{"i": i},
			"concurrency_key": "provider", "concurrency_max_claimed": cfg.max,
			"concurrency_rate": cfg.rate, "concurrency_rate_interval_ms": cfg.every.Milliseconds()}
	}
	if r, err := fleetCall(ctx, seed, manifest.ToolCreate, map[string]any{"workflow_id": wf, "nodes": nodes}); err != nil || r.isErr {
		t.Fatalf("create the graph: %v %s", err, r.text)
	}
	seed.Close()

	var (
		wg                   sync.WaitGroup
		stop                 atomic.Bool
		claims, completes    atomic.Int64
		inFlight             atomic.Int64
		pausedAnswers        atomic.Int64
		refused              atomic.Int64
		doneMu               sync.Mutex
		completed            = map[string]bool{}
		refusals             []string
		workClient           = &http.Client{Transport: bearer{srv.workToken, transport}}
		allDone              = make(chan struct{})
		pausedAnswersByOwner sync.Map // owner -> *atomic.Int64
	)
	refuse := func(format string, args ...any) {
		refused.Add(1)
		doneMu.Lock()
		defer doneMu.Unlock()
		if len(refusals) < 20 {
			refusals = append(refusals, fmt.Sprintf(format, args...))
		}
	}
	for w := 0; w < cfg.workers; w++ {
		owner := fmt.Sprintf("%s-w%02d", wf, w)
		mine := &atomic.Int64{}
		pausedAnswersByOwner.Store(owner, mine)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cs *mcp.ClientSession
			defer func() {
				if cs != nil {
					cs.Close()
				}
			}()
			backoff := testwait.Backoff{Max: 200 * time.Millisecond}
			for !stop.Load() {
				if cs == nil {
					s, err := fleetConnect(ctx, srv.addr, workClient)
					if err != nil {
						backoff.Wait(ctx)
						continue
					}
					cs = s
				}
				// A long lease: a lease lost here is the server's fault,
				// not a slow machine's (the work takes milliseconds).
				r, err := fleetCall(ctx, cs, manifest.ToolClaim, map[string]any{"owner": owner, "workflow_id": wf, "lease_ms": 600000, "wait_ms": 1000})
				if err != nil || r.isErr {
					if err == nil {
						refuse("claim refused: %s", r.text)
					}
					cs.Close()
					cs = nil
					backoff.Wait(ctx)
					continue
				}
				if r.out["claimed"] != true {
					if h, _ := r.out["hint"].(string); strings.Contains(h, "is paused") {
						pausedAnswers.Add(1)
						mine.Add(1)
						backoff.Wait(ctx)
					}
					continue
				}
				backoff.Reset()
				claims.Add(1)
				inFlight.Add(1)
				l := r.out["lease"].(map[string]any)
				id := r.out["task"].(map[string]any)["task_id"].(string)
				time.Sleep(cfg.work)
				done, err := fleetCall(ctx, cs, manifest.ToolComplete, map[string]any{"task_id": id, "owner": owner,
					"generation": l["generation"], "claim_token": l["claim_token"], "result": map[string]any{"by": owner}})
				completes.Add(1)
				inFlight.Add(-1)
				if err != nil || done.isErr {
					// Not retried: the server is up the whole run, so a
					// completion it did not accept is a failure.
					refuse("complete %s: %v %s", id, err, done.text)
					continue
				}
				doneMu.Lock()
				if !completed[id] {
					completed[id] = true
					if len(completed) == cfg.tasks {
						close(allDone)
					}
				}
				doneMu.Unlock()
			}
		}()
	}

	db, err := sql.Open("sqlite3", "file:"+srv.db+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// claimsRecorded is the number of claims in the server's history.
	claimsRecorded := func() int64 {
		t.Helper()
		var n int64
		if err := db.QueryRow(`SELECT COUNT(*) FROM events WHERE workflow_id = ? AND kind = ?`, wf, taskgraph.EventClaim).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	admin := func(args ...string) {
		t.Helper()
		cmd := exec.Command(srv.bin, append(append([]string{"admin"}, args...), "--operator", "fleet", "--yes", "--database", srv.db)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("admin %v: %v\n%s", args, err, out.String())
		}
	}
	progress := func() int64 { return claims.Load() + completes.Load() + pausedAnswers.Load() }

	// Pause a third of the way through, while workers hold leases and wait.
	testwait.Progress(t, "a third of the tasks to be completed", func() (bool, int64) {
		return completes.Load() >= int64(cfg.tasks/3), progress()
	})
	admin("pause", wf, "--reason", "fleet: pause mid-run")
	pausedAt := time.Since(t0)
	atPause := claimsRecorded()
	// Every lease live at the pause runs to its end, and every worker is
	// turned away (twice, to see it wait and come back) before the resume.
	testwait.Progress(t, "the live leases to end and every worker to be turned away", func() (bool, int64) {
		if inFlight.Load() > 0 {
			return false, progress()
		}
		all := true
		pausedAnswersByOwner.Range(func(_, v any) bool {
			all = v.(*atomic.Int64).Load() >= 2
			return all
		})
		return all, progress()
	})
	beforeResume := claimsRecorded()
	admin("resume", wf, "--reason", "fleet: resume")
	resumedAt := time.Since(t0)
	if beforeResume != atPause {
		t.Errorf("the server recorded %d claims while %s was paused", beforeResume-atPause, wf)
	}
	testwait.Progress(t, "every task to be completed", func() (bool, int64) {
		select {
		case <-allDone:
			return true, 0
		default:
			return false, progress()
		}
	})
	stop.Store(true)
	cancel()
	wg.Wait()
	if err := srv.stop(); err != nil {
		t.Errorf("graceful stop after the run: %v\n%s", err, srv.logs.String())
	}
	elapsed := time.Since(t0)

	st, err := sqlitestore.Open(context.Background(), srv.db, taskgraph.Options{}, tgsqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	view, err := st.Workflow(context.Background(), wf)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range view.Tasks {
		if tk.State != taskgraph.StateCompleted || tk.Attempts != 1 {
			t.Errorf("task %s ended %s after %d attempts: every task must complete on its first (no lease lost)", tk.NodeID, tk.State, tk.Attempts)
		}
	}
	events, err := st.WorkflowEvents(context.Background(), wf)
	if err != nil {
		t.Fatal(err)
	}
	v := judgeKeyHistory(events, cfg.every)
	if v.maxAtOnce > cfg.max {
		t.Errorf("the history has %d tasks claimed at once (at %s); the key allows %d", v.maxAtOnce, v.maxAtOnceAt.Format(time.RFC3339Nano), cfg.max)
	}
	if v.maxInInterval > cfg.rate {
		t.Errorf("the history has %d claims in the %s ending at %s; the key allows %d", v.maxInInterval, cfg.every, v.maxInIntervalAt.Format(time.RFC3339Nano), cfg.rate)
	}
	if v.claims != cfg.tasks || v.lost != 0 {
		t.Errorf("the history has %d claims and %d claims ended otherwise than by completion for %d tasks", v.claims, v.lost, cfg.tasks)
	}
	if _, err := st.VerifyHistory(context.Background()); err != nil {
		t.Errorf("hash chain: %v", err)
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("%d claims or completions were refused", n)
	}
	doneMu.Lock()
	for _, msg := range refusals {
		t.Log(msg)
	}
	doneMu.Unlock()
	t.Logf("fleet keys: %d tasks of one key (at most %d at once, %d claims per %s), %d workers, %s of work each: done in %s (paused at +%s, resumed at +%s; %d claims turned away by the pause, none granted)",
		cfg.tasks, cfg.max, cfg.rate, cfg.every, cfg.workers, cfg.work, elapsed.Round(time.Millisecond), pausedAt.Round(time.Millisecond), resumedAt.Round(time.Millisecond), pausedAnswers.Load())
	t.Logf("fleet keys: from the server's history: at most %d claimed at once, at most %d claims in any %s (%d by the events' own times, which may be a millisecond behind the claim time the key counted), %d claims, %d completions",
		v.maxAtOnce, v.maxInInterval, cfg.every, v.rawInInterval, v.claims, v.completes)
	if t.Failed() {
		t.Logf("server log:\n%s", tail(srv.logs.String(), 8000))
	}
}

// keyVerdict is what the history of a fleet run on one key shows.
type keyVerdict struct {
	claims, completes, lost int
	maxAtOnce               int
	maxAtOnceAt             time.Time
	maxInInterval           int // claims in any interval, at claim time
	maxInIntervalAt         time.Time
	rawInInterval           int // the same by the events' recorded times
}

// judgeKeyHistory replays the events of one workflow, all of one key, in
// commit order (their sequence): a claim takes a slot, any later event of
// the task but a heartbeat or a lease shift ends the claim. The rate is
// judged at claim time as the key counts it: an event records the time its
// request arrived, and a claim that committed after a later-arriving one
// is counted by the key at that one's time (claim times never go back;
// package keyrate), so the claim time is the running maximum of the
// claims' recorded times in commit order. Both are reported.
func judgeKeyHistory(events []taskgraph.Event, every time.Duration) keyVerdict {
	var v keyVerdict
	held := map[string]bool{}
	var at, raw []time.Time
	for _, e := range events {
		switch e.Kind {
		case taskgraph.EventClaim:
			v.claims++
			held[e.TaskID] = true
			if len(held) > v.maxAtOnce {
				v.maxAtOnce, v.maxAtOnceAt = len(held), e.At
			}
			t := e.At
			if n := len(at); n > 0 && t.Before(at[n-1]) {
				t = at[n-1]
			}
			at, raw = append(at, t), append(raw, e.At)
		case taskgraph.EventHeartbeat, taskgraph.EventLeaseShift:
		default:
			if held[e.TaskID] {
				delete(held, e.TaskID)
				if e.Kind == taskgraph.EventComplete {
					v.completes++
				} else {
					v.lost++
				}
			}
		}
	}
	v.maxInInterval, v.maxInIntervalAt = maxInWindow(at, every)
	slices.SortFunc(raw, func(a, b time.Time) int { return a.Compare(b) })
	v.rawInInterval, _ = maxInWindow(raw, every)
	return v
}

// maxInWindow returns the most times of sorted that lie in one interval
// (end-every, end] and that interval's end.
func maxInWindow(sorted []time.Time, every time.Duration) (int, time.Time) {
	best, bestAt, lo := 0, time.Time{}, 0
	for hi, t := range sorted {
		for !sorted[lo].After(t.Add(-every)) {
			lo++
		}
		if n := hi - lo + 1; n > best {
			best, bestAt = n, t
		}
	}
	return best, bestAt
}

// The fleet's judge of a key's history sees a third claim at once, an
// eleventh claim in a second, a claim that ended otherwise than by its
// completion, and judges the rate at claim time (never back in commit
// order).
func TestJudgeKeyHistory(t *testing.T) {
	t.Parallel()
	base := time.UnixMilli(1_000_000).UTC()
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	ev := func(kind, task string, ms int) taskgraph.Event {
		return taskgraph.Event{Kind: kind, TaskID: task, At: at(ms)}
	}
	v := judgeKeyHistory([]taskgraph.Event{
		ev(taskgraph.EventClaim, "a", 0), ev(taskgraph.EventClaim, "b", 10), ev(taskgraph.EventHeartbeat, "a", 20),
		ev(taskgraph.EventComplete, "a", 30), ev(taskgraph.EventClaim, "c", 40), ev(taskgraph.EventClaim, "d", 50),
		ev(taskgraph.EventExpire, "b", 60),
	}, time.Second)
	if v.maxAtOnce != 3 || !v.maxAtOnceAt.Equal(at(50)) || v.claims != 4 || v.completes != 1 || v.lost != 1 {
		t.Fatalf("verdict %+v: want 3 at once at +50ms, 4 claims, 1 completion, 1 lost", v)
	}
	// Eleven claims within one second, the last 1 ms before the first
	// leaves the window; then one that arrived earlier but committed
	// later counts at the time of the claim before it.
	var evs []taskgraph.Event
	for i := range 11 {
		evs = append(evs, ev(taskgraph.EventClaim, fmt.Sprint(i), i*99))
	}
	if v := judgeKeyHistory(evs, time.Second); v.maxInInterval != 11 || v.rawInInterval != 11 {
		t.Fatalf("eleven claims in 990 ms: verdict %+v, want 11 in an interval", v)
	}
	evs = []taskgraph.Event{ev(taskgraph.EventClaim, "x", 1000), ev(taskgraph.EventClaim, "y", 0), ev(taskgraph.EventClaim, "z", 1999)}
	if v := judgeKeyHistory(evs, time.Second); v.maxInInterval != 3 || v.rawInInterval != 2 {
		t.Fatalf("a claim recorded before the one committed ahead of it: verdict %+v, want 3 at claim time, 2 by recorded times", v)
	}
}
