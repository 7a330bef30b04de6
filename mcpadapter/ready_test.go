package mcpadapter

import (
	"context"
	"database/sql"
	"encoding/json"
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
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
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
	logs := &testwait.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	path := filepath.Join(dir, "tasks.db")
	metrics := NewMetrics(logger)
	st, err := taskgraph.Open(context.Background(), path, taskgraph.Options{Logger: logger, BusyTimeout: 50 * time.Millisecond, OnBatch: metrics.ObserveBatch})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv, err := New(Config{Store: st, Version: "test", Surface: manifest.NewSurface(manifest.Options{}), Logger: logger,
		ExtraLimits: map[string]int64{"maxStdioLineBytes": MaxStdioLineBytes}, OnToolCall: metrics.ObserveToolCall})
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHTTPHandler(srv, HTTPOptions{AuthToken: readyToken, Metrics: metrics, Logger: logger})
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
	b, _ := json.Marshal(res.Meta[ErrorMetaKey])
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
	cr := f.post(modernBody(21, MethodTasksCancel, map[string]any{"taskId": taskID}, ext),
		modernHeaders(MethodTasksCancel, headerName, taskID, "Authorization", "Bearer "+readyToken))
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

// Every cause the store reports has advice here and a row in MCP.md, with
// the retryable value the store gives it.
func TestUnavailableReasonsAreDocumented(t *testing.T) {
	b, err := os.ReadFile("../MCP.md")
	if err != nil {
		t.Fatal(err)
	}
	sentinels := taskgraph.UnavailableErrors()
	for _, sentinel := range sentinels {
		err := fmt.Errorf("wrapped: %w", sentinel)
		reason, retryable, ok := taskgraph.UnavailableReason(err)
		if !ok || unavailableAdvice[reason] == "" {
			t.Errorf("%v: reason %q has no advice", sentinel, reason)
		}
		// The advice says whether the call may have been applied, as the
		// store does, and MCP.md's row says whether a blind retry is safe.
		applied := taskgraph.MayHaveApplied(err)
		advice := unavailableAdvice[reason]
		if says := strings.Contains(advice, "may have been applied") || strings.Contains(advice, "may or may not have taken effect"); says != applied {
			t.Errorf("advice for %s: says the call may have been applied %v, the store %v: %q", reason, says, applied, advice)
		} else if !applied && !strings.Contains(advice, "nothing was written") {
			t.Errorf("advice for %s does not say nothing was written: %q", reason, advice)
		}
		blind := map[bool]string{true: "no: inspect first", false: "yes"}[applied]
		if row := fmt.Sprintf("| `%s` | `%v` | %s |", reason, retryable, blind); !strings.Contains(string(b), row) {
			t.Errorf("MCP.md lacks the row %s", row)
		}
	}
	if len(unavailableAdvice) != len(sentinels) {
		t.Errorf("advice for %d reasons, want the store's %d", len(unavailableAdvice), len(sentinels))
	}
}
