package httpfront

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// newReadyFixture serves a store opened with a short busy timeout over real
// HTTP, with a bearer token (which /readyz must not need).
func newReadyFixture(t *testing.T) *httpFixture {
	t.Helper()
	return newReadyFixtureIn(t, t.TempDir())
}

// newReadyFixtureIn is newReadyFixture with the database in dir.
func newReadyFixtureIn(t *testing.T, dir string) *httpFixture {
	t.Helper()
	return newReadyFixtureBusy(t, dir, 50*time.Millisecond)
}

// newReadyFixtureBusy is newReadyFixtureIn with the store's busy timeout.
func newReadyFixtureBusy(t *testing.T, dir string, busy time.Duration) *httpFixture {
	t.Helper()
	logs := &testwait.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	path := filepath.Join(dir, "tasks.db")
	metrics := NewMetrics(logger)
	st, err := sqlitestore.Open(context.Background(), path, taskgraph.Options{Logger: logger, OnBatch: metrics.ObserveBatch}, tgsqlite.Options{BusyTimeout: busy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv, err := mcpadapter.New(mcpadapter.Config{Store: st, Version: "test", Surface: manifest.NewSurface(manifest.Options{}), Logger: logger,
		ExtraLimits: map[string]int64{"maxStdioLineBytes": mcpadapter.MaxStdioLineBytes}, OnToolCall: metrics.ObserveToolCall})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(srv, Options{AuthToken: readyToken, Metrics: metrics, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.AbortCalls(); h.CloseSessions() })
	return &httpFixture{t: t, ctx: context.Background(), path: path, store: st, srv: srv, h: h, ts: ts,
		url: ts.URL + MCPPath, metrics: metrics, logs: logs, logger: logger}
}

const readyToken = "a-token-long-enough-1234"

// lockDatabase takes the database's write lock on a connection of its own
// and returns the function that releases it.
func lockDatabase(t *testing.T, path string) func() {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			conn.ExecContext(context.Background(), `ROLLBACK`)
			conn.Close()
			db.Close()
		}
	}
	t.Cleanup(release)
	return release
}

func wantReady(t *testing.T, f *httpFixture, status int, body string) *rawResponse {
	t.Helper()
	r := f.do(http.MethodGet, f.ts.URL+ReadyPath, nil, nil)
	if r.status != status || !strings.HasPrefix(string(r.body), body) {
		t.Fatalf("GET /readyz: HTTP %d %q, want %d %q…", r.status, r.body, status, body)
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("GET /readyz: Cache-Control %q, want no-store", r.header.Get("Cache-Control"))
	}
	return r
}

// wantUnavailableResult checks that a tool call the store could not commit
// is a tool error with the unavailable detail and advice, not -32603.
func wantUnavailableResult(t *testing.T, res *mcp.CallToolResult, reason string, retryable bool, advice string) {
	t.Helper()
	if !res.IsError {
		t.Fatalf("got a success %s, want an unavailable tool error", toolText(res))
	}
	b, _ := json.Marshal(res.Meta[tools.ErrorMetaKey])
	want := fmt.Sprintf(`{"kind":"unavailable","reason":%q,"retryable":%v}`, reason, retryable)
	if string(b) != want {
		t.Fatalf("error detail %s, want %s", b, want)
	}
	if text := toolText(res); !strings.Contains(text, advice) || strings.Contains(text, "tasks.db") {
		t.Fatalf("error text %q: want it to contain %q and to name no file", text, advice)
	}
}

// /readyz needs no token, allows only GET and HEAD, and says "ready" while
// a write commits; it answers 503 busy, with Retry-After, while another
// connection holds the write lock beyond the busy timeout, and the tool
// calls meanwhile get the retryable unavailable error over the real SDK
// client. After the lock is gone both recover; a closed store is 503.
func TestReadyzAndBusyToolErrors(t *testing.T) {
	f := newReadyFixture(t)
	wantReady(t, f, http.StatusOK, "ready\n")
	if r := f.do(http.MethodHead, f.ts.URL+ReadyPath, nil, nil); r.status != http.StatusOK {
		t.Fatalf("HEAD /readyz: HTTP %d", r.status)
	}
	if r := f.do(http.MethodPost, f.ts.URL+ReadyPath, nil, nil); r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST /readyz: HTTP %d Allow %q, want 405 GET, HEAD", r.status, r.header.Get("Allow"))
	}
	cs := f.client("", readyToken, nil)
	_, out := callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": "a"})
	taskID := out["task"].(map[string]any)["task_id"].(string)
	_, out = callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w1", "task_id": taskID})
	l := out["lease"].(map[string]any)
	hb := map[string]any{"task_id": taskID, "owner": "w1", "generation": l["generation"], "claim_token": l["claim_token"]}

	release := lockDatabase(t, f.path)
	r := wantReady(t, f, http.StatusServiceUnavailable, "not ready: busy: database busy: locked by another process")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("503 busy without Retry-After")
	}
	res, _ := callTool(t, cs, manifest.ToolHeartbeat, hb)
	wantUnavailableResult(t, res, "busy", true, "database busy: locked by another process")
	res, _ = callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": "b"})
	wantUnavailableResult(t, res, "busy", true, "Retry the same call")
	// tasks/cancel is not a tool call: -32603, but naming the cause, with
	// the same detail in data.
	ext := map[string]any{"extensions": map[string]any{manifest.TasksExtension: map[string]any{}}}
	cr := f.post(modernBody(21, tools.MethodTasksCancel, map[string]any{"taskId": taskID}, ext),
		modernHeaders(tools.MethodTasksCancel, wire.HeaderName, taskID, "Authorization", "Bearer "+readyToken))
	if cr.rpc.Error == nil || cr.rpc.Error.Code != -32603 || !strings.Contains(cr.rpc.Error.Message, "database busy: locked by another process") ||
		string(cr.rpc.Error.Data) != `{"kind":"unavailable","reason":"busy","retryable":true}` {
		t.Fatalf("tasks/cancel while locked: HTTP %d %s", cr.status, cr.body)
	}
	if !strings.Contains(f.logs.String(), "reason=busy") {
		t.Fatalf("no log line of the refused call:\n%s", f.logs)
	}

	if got := testutil.ToFloat64(f.metrics.unavail.WithLabelValues("busy")); got < 1 {
		t.Fatalf("store_unavailable_total{reason=busy} = %v, want at least 1", got)
	}
	release()
	wantReady(t, f, http.StatusOK, "ready\n")
	if res, _ := callTool(t, cs, manifest.ToolHeartbeat, hb); res.IsError {
		t.Fatalf("heartbeat after the lock was released: %s", toolText(res))
	}
	f.store.Close()
	wantReady(t, f, http.StatusServiceUnavailable, "not ready: shutting_down")
}

// A removed -shm makes /readyz answer 503 files_replaced and every write
// tool the non-retryable unavailable error; reads still answer.
func TestReadyzFilesReplaced(t *testing.T) {
	// Runs after the fixture's cleanups, which close the store.
	running := testwait.Goroutines()
	t.Cleanup(func() {
		testwait.Abandon(running, "the store leaves the connections of replaced database files open on purpose (tgsqlite: a checkpoint would write into files that are no longer the database's)")
	})
	f := newReadyFixture(t)
	cs := f.client("", readyToken, nil)
	_, out := callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": "a"})
	taskID := out["task"].(map[string]any)["task_id"].(string)
	if err := os.Remove(f.path + "-shm"); err != nil {
		t.Fatal(err)
	}
	r := wantReady(t, f, http.StatusServiceUnavailable, "not ready: files_replaced: database files replaced")
	if r.header.Get("Retry-After") != "" {
		t.Fatal("503 files_replaced with Retry-After: a retry cannot help before a restart")
	}
	res, _ := callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w1", "task_id": taskID})
	wantUnavailableResult(t, res, "files_replaced", false, "refuses every write until it is restarted")
	if res, _ := callTool(t, cs, manifest.ToolInspect, map[string]any{"task_id": taskID}); res.IsError {
		t.Fatalf("inspect after the -shm was removed: %s", toolText(res))
	}
}

// A database file and -wal that cannot be written make /readyz answer 503
// read_only (root ignores file modes, so the files are made immutable).
func TestReadyzReadOnly(t *testing.T) {
	f := newReadyFixture(t)
	files := []string{f.path, f.path + "-wal"}
	if out, err := exec.Command("chattr", append([]string{"+i"}, files...)...).CombinedOutput(); err != nil {
		t.Skipf("cannot make a file immutable here (chattr +i: %v %s)", err, out)
	}
	cleared := false
	clear := func() {
		if !cleared {
			cleared = true
			if out, err := exec.Command("chattr", append([]string{"-i"}, files...)...).CombinedOutput(); err != nil {
				t.Errorf("chattr -i: %v %s", err, out)
			}
		}
	}
	t.Cleanup(clear)
	wantReady(t, f, http.StatusServiceUnavailable, "not ready: read_only: database read-only")
	cs := f.client("", readyToken, nil)
	res, _ := callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": "a"})
	wantUnavailableResult(t, res, "read_only", false, "until an operator makes the database writable")
	clear()
	wantReady(t, f, http.StatusOK, "ready\n")
}

// While another connection holds the write lock longer than the probe
// deadline (the store's busy timeout is longer still), /readyz answers at
// the deadline 503 "timeout" naming it, not a guess at the cause; /healthz,
// a read, still answers ok. Every concurrent probe gets that answer.
func TestReadyzAnswersTimeoutWhenTheDatabaseDoesNotAnswer(t *testing.T) {
	t.Parallel()
	f := newReadyFixtureBusy(t, t.TempDir(), time.Hour)
	release := lockDatabase(t, f.path)
	const n = 3
	answers := make(chan *rawResponse, n)
	for range n {
		go func() { answers <- f.do(http.MethodGet, f.ts.URL+ReadyPath, nil, nil) }()
	}
	want := "not ready: timeout: the database did not answer within 3s"
	for range n {
		r := testwait.Recv(t, "a /readyz answer while the write lock is held", answers)
		if r.status != http.StatusServiceUnavailable || !strings.HasPrefix(string(r.body), want) || strings.Contains(string(r.body), "another process") {
			t.Fatalf("GET /readyz with the write lock held: HTTP %d %q, want 503 %q…", r.status, r.body, want)
		}
		if r.header.Get("Retry-After") != retryAfterSeconds {
			t.Fatalf("GET /readyz timeout: Retry-After %q, want %q", r.header.Get("Retry-After"), retryAfterSeconds)
		}
	}
	if r := f.do(http.MethodGet, f.ts.URL+HealthPath, nil, nil); r.status != http.StatusOK {
		t.Fatalf("GET /healthz with the write lock held: HTTP %d %q, want 200 (a read still answers)", r.status, r.body)
	}
	release()
	testwait.For(t, "the timed-out probe to end", func() bool {
		f.h.ready.mu.Lock()
		defer f.h.ready.mu.Unlock()
		return f.h.ready.running == nil
	})
	wantReady(t, f, http.StatusOK, "ready")
}

// A probeGate runs one probe at once: requests that arrive meanwhile share
// its answer, or get the timeout at their deadline without starting
// another; once it ends, the next request starts a fresh probe.
func TestProbeGateRunsOneProbeAtOnce(t *testing.T) {
	t.Parallel()
	var g probeGate
	entered, release := make(chan struct{}, 1), make(chan struct{})
	stuck := func(ctx context.Context) probeResult {
		entered <- struct{}{}
		<-release
		return probeResult{body: "late"}
	}
	never := func(context.Context) probeResult {
		t.Error("a second probe started while one ran")
		return probeResult{}
	}
	shared := make(chan probeResult, 2)
	go func() { shared <- g.do(context.Background(), time.Hour, stuck) }()
	testwait.Recv(t, "the first probe to start", entered)
	go func() { shared <- g.do(context.Background(), time.Hour, never) }()
	testwait.For(t, "the second request to join the running probe", func() bool { return g.joins.Load() == 1 })
	// A request with a short deadline gets the timeout, not a new probe.
	if res := g.do(context.Background(), time.Millisecond, never); !errors.Is(res.err, errProbeTimeout) {
		t.Fatalf("a probe request past its deadline got %+v, want errProbeTimeout", res)
	}
	close(release)
	for range 2 {
		if res := testwait.Recv(t, "a shared probe answer", shared); res.err != nil || res.body != "late" {
			t.Fatalf("a request sharing the running probe got %+v, want its answer", res)
		}
	}
	if got := g.starts.Load(); got != 1 {
		t.Fatalf("%d probes started, want 1", got)
	}
	if res := g.do(context.Background(), time.Hour, func(context.Context) probeResult { return probeResult{body: "fresh"} }); res.body != "fresh" {
		t.Fatalf("the next request got %+v, want a fresh probe", res)
	}
	if got := g.starts.Load(); got != 2 {
		t.Fatalf("%d probes started, want 2", got)
	}
}
