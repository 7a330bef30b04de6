package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// benchJSON runs bench with args (--json among them), which must exit 0,
// and returns the object it printed.
func benchJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), append([]string{"graph-engineering-mcp", "bench"}, args...), strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("not JSON: %s", stdout.String())
	}
	return res
}

func TestBenchStoreModeVerifiesItself(t *testing.T) {
	res := benchJSON(t, "--tasks", "300", "--workers", "4", "--layers", "3", "--heartbeat", "--sync", "normal", "--json")
	for _, k := range []string{"mode", "tasks", "workers", "sync", "seconds", "cycles_per_sec", "claim_ms", "complete_ms", "verified_completed_once"} {
		if _, ok := res[k]; !ok {
			t.Errorf("bench --json lacks %q", k)
		}
	}
	if res["mode"] != "store" || res["tasks"] != float64(300) || res["verified_completed_once"] != float64(300) || res["history_verified"] != true {
		t.Fatalf("bench result: %v", res)
	}
	for _, k := range []string{"claim_ms", "complete_ms"} {
		p := res[k].(map[string]any)
		if !(p["p50"].(float64) <= p["p95"].(float64) && p["p95"].(float64) <= p["p99"].(float64)) {
			t.Errorf("%s percentiles out of order: %v", k, p)
		}
	}
	// A cycle takes some CPU and allocates: the costs of the measured run
	// are counted.
	for _, k := range []string{"cpu_us_per_cycle", "allocs_per_cycle", "alloc_bytes_per_cycle", "commits_per_cycle", "commit_ms"} {
		if v, ok := res[k].(float64); !ok || v <= 0 {
			t.Errorf("bench --json %s = %v, want a positive number", k, res[k])
		}
	}
	// Bytes written are counted where the kernel accounts them (none on a
	// tmpfs, so only present and not negative).
	if v, ok := res["write_bytes_per_cycle"].(float64); !ok || v < 0 {
		t.Errorf("bench --json write_bytes_per_cycle = %v, want a number, not negative", res["write_bytes_per_cycle"])
	}
}

// --memprofile writes the heap profiles of the measured run's start and
// end, so that their difference is the run's own allocations.
func TestBenchMemProfile(t *testing.T) {
	t.Parallel()
	prof := filepath.Join(t.TempDir(), "mem.prof")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"graph-engineering-mcp", "bench", "--tasks", "50", "--workers", "2", "--sync", "normal", "--memprofile", prof}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, f := range []string{prof + ".base", prof} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("--memprofile did not write %s: %v", f, err)
		}
	}
	if !strings.Contains(stdout.String(), "µs/cycle") {
		t.Errorf("bench output lacks the CPU per cycle:\n%s", stdout.String())
	}
}

// The default loop of --mode store completes and claims the next task in
// one call; each task is still completed exactly once.
func TestBenchCombinedLoopVerifiesItself(t *testing.T) {
	res := benchJSON(t, "--tasks", "300", "--workers", "4", "--layers", "3", "--sync", "normal", "--json")
	if res["loop"] != "combined" || res["verified_completed_once"] != float64(300) || res["history_verified"] != true {
		t.Fatalf("bench result: %v", res)
	}
	// claim_ms times only granted claims: at least each worker's first
	// (every task is ready or becomes so, and there are more tasks than
	// workers), at most one per task; those that found nothing are
	// counted apart.
	claims, ok := res["claims"].(float64)
	if !ok || claims < 1 || claims > 300 {
		t.Errorf("bench --json claims = %v, want 1..300", res["claims"])
	}
	if v, ok := res["empty_claims"].(float64); !ok || v < 0 {
		t.Errorf("bench --json empty_claims = %v, want a count", res["empty_claims"])
	}
	if v, ok := res["tail_ms"].(float64); !ok || v <= 0 || v > res["seconds"].(float64)*1000 {
		t.Errorf("bench --json tail_ms = %v, want a time within the run's %v s", res["tail_ms"], res["seconds"])
	}
}

// The measured run ends when the last task's completion returns, not when
// the workers that found nothing left to claim have waited out their
// claims' Wait; a claim that found nothing is no claim latency.
func TestBenchTallyEndsAtLastCompletion(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newBenchTally(3, t0)
	b.completed(t0.Add(1 * time.Second))
	b.completed(t0.Add(2 * time.Second))
	// Not every task done: the run is measured until now.
	if got := b.elapsed(t0.Add(2500 * time.Millisecond)); got != 2500*time.Millisecond {
		t.Errorf("elapsed with a task left = %v, want 2.5s", got)
	}
	b.completed(t0.Add(3 * time.Second))
	// The idle workers' empty claims return 100 ms later: not measured.
	if got := b.elapsed(t0.Add(3100 * time.Millisecond)); got != 3*time.Second {
		t.Errorf("elapsed = %v, want 3s (the last completion)", got)
	}
	if got := b.done.Load(); got != 3 {
		t.Errorf("done = %d, want 3", got)
	}
	// Three tasks: the tail is the last one, from 2s to 3s.
	if got := b.tail(); got != time.Second {
		t.Errorf("tail = %v, want 1s", got)
	}
}

// The tail is the last percent of the tasks, from the completion before
// them to the last one; 0 until every task is done.
func TestBenchTallyTimesTheLastPercent(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newBenchTally(500, t0)
	for i := 1; i <= 495; i++ {
		b.completed(t0.Add(time.Duration(i) * time.Millisecond))
	}
	if got := b.tail(); got != 0 {
		t.Errorf("tail before the end = %v, want 0", got)
	}
	// The last five (1% of 500) straggle over 400 ms.
	for i := 1; i <= 5; i++ {
		b.completed(t0.Add(495*time.Millisecond + time.Duration(i)*80*time.Millisecond))
	}
	if got := b.tail(); got != 400*time.Millisecond {
		t.Errorf("tail = %v, want 400ms (the last 5 of 500 tasks)", got)
	}
	// A run of one task is all tail.
	one := newBenchTally(1, t0)
	one.completed(t0.Add(7 * time.Millisecond))
	if got := one.tail(); got != 7*time.Millisecond {
		t.Errorf("tail of a one-task run = %v, want 7ms", got)
	}
}

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--tasks", "0"}, {"--workers", "0"}, {"--mode", "carrier-pigeon"}, {"--sync", "off"}, {"--layers", "-1"},
		{"--loop", "sideways"}, {"--loop", "combined", "--heartbeat"}, {"--mode", "http", "--http-client", "grpc"}, {"--http-client", "wire"},
		{"--keys", "-1"}, {"--keys", "10001"}, {"--key-limit", "1"}, {"--keys", "2", "--key-limit", "-1"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), append([]string{"graph-engineering-mcp", "bench"}, args...), strings.NewReader(""), &stdout, &stderr); code != exitUsage {
			t.Errorf("bench %v: exit %d (%s), want 2", args, code, stderr.String())
		}
	}
}

// --keys spreads the tasks over concurrency keys with --key-limit's cap:
// the run still completes every task once, the result says so, and the
// kept database holds the keys with their caps, every claim given back.
func TestBenchKeysVerifiesItself(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "keys.db")
	res := benchJSON(t, "--tasks", "200", "--workers", "4", "--keys", "3", "--key-limit", "1",
		"--sync", "normal", "--database", db, "--json")
	if res["keys"] != float64(3) || res["key_limit"] != float64(1) || res["verified_completed_once"] != float64(200) || res["history_verified"] != true {
		t.Fatalf("bench result: %v", res)
	}
	s, err := sqlitestore.Open(context.Background(), db, taskgraph.Options{}, tgsqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 3 {
		k, ok, err := s.KeyInfo(context.Background(), benchKey(i, 3))
		if err != nil || !ok || k.Limit.MaxClaimed != 1 || k.Claimed != 0 {
			t.Errorf("key %s after the run: %+v, found %v, %v; want a cap of 1 and no claim held", benchKey(i, 3), k, ok, err)
		}
	}
}

// bench --request-ids gives every claim and completion a request id of its
// own, so the store keeps an answer for each: two a task.
func TestBenchRequestIDsKeepsEveryAnswer(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "rq.db")
	res := benchJSON(t, "--tasks", "100", "--workers", "4", "--request-ids",
		"--sync", "normal", "--database", db, "--json")
	if res["request_ids"] != true || res["loop"] != "separate" || res["verified_completed_once"] != float64(100) {
		t.Fatalf("bench result: %v", res)
	}
	conn, err := sql.Open("sqlite3", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var claims, completes int
	if err := conn.QueryRow(`SELECT COUNT(*) FILTER (WHERE op = 'claim'), COUNT(*) FILTER (WHERE op = 'complete') FROM requests`).Scan(&claims, &completes); err != nil {
		t.Fatal(err)
	}
	if claims != 100 || completes != 100 {
		t.Errorf("kept answers: %d claims and %d completions, want 100 of each", claims, completes)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"graph-engineering-mcp", "bench", "--tasks", "10", "--request-ids", "--loop", "combined",
		"--database", filepath.Join(t.TempDir(), "x.db")}, strings.NewReader(""), &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "--request-ids needs --loop separate") {
		t.Errorf("--request-ids with --loop combined: exit %d, %s", code, stderr.String())
	}
}
