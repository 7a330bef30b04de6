package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/examples/internal/e2e"
	"github.com/graph-engineering/graph-engineering-mcp/examples/internal/mcpclient"
	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

func TestMain(m *testing.M) {
	code := m.Run()
	e2e.Cleanup()
	os.Exit(code)
}

var taskIDPattern = regexp.MustCompile(`^[0-9A-Z]{26}$`)

// Why capture.go exists, pinned: with the extension declared,
// graph_task_create answers with a task handle the SDK's CallToolResult
// cannot hold, and the recording transport hands over its raw JSON.
func TestTaskHandleIsReadRaw(t *testing.T) {
	bins := e2e.Build(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	client := mcp.NewClient(&mcp.Implementation{Name: "submit-test", Version: "1"}, &mcp.ClientOptions{Capabilities: tasksCapabilities()})
	if err := registerTasksGet(client); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cs, err := client.Connect(ctx, recordingTransport{inner: &mcp.CommandTransport{Command: exec.Command(bins.Server, "serve", "--database", db)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if !offersTasks(cs) {
		t.Fatal("the server does not advertise the Tasks extension")
	}

	cctx, raw := withRawResult(ctx)
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: mcpclient.ToolCreate, Arguments: map[string]any{"workflow_id": "w", "node_id": "n"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.StructuredContent != nil || len(res.Content) != 0 {
		t.Fatalf("the SDK result now carries the handle (%+v); capture.go may be unnecessary", res)
	}
	var h taskResult
	if err := json.Unmarshal(raw.Bytes(), &h); err != nil || h.ResultType != "task" || !taskIDPattern.MatchString(h.TaskID) || h.Status != "working" || h.PollIntervalMs != 1000 {
		t.Fatalf("raw result %s: %v", raw.Bytes(), err)
	}
	// A call without withRawResult records nothing; one with it records only
	// its own answer.
	other, raw2 := withRawResult(ctx)
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if raw2.Bytes() != nil {
		t.Fatalf("recorded an unrelated call: %s", raw2.Bytes())
	}
	// The handle's taskId is the tasks/get id and the graph task id.
	g, err := mcp.CallCustomMethod[*taskIDParams, *taskResult](other, cs, methodTasksGet, &taskIDParams{TaskID: h.TaskID})
	if err != nil || g.ResultType != "complete" || g.TaskID != h.TaskID || !strings.HasPrefix(g.StatusMessage, "pending") {
		t.Fatalf("tasks/get: %v %+v", err, g)
	}
	if !bytes.Contains(raw2.Bytes(), []byte(`"resultType":"complete"`)) {
		t.Fatalf("tasks/get raw: %s", raw2.Bytes())
	}
	if s := bins.TasksShow(t, db, h.TaskID); s.Task.NodeID != "n" {
		t.Fatalf("the handle's id is not the graph task's: %+v", s.Task)
	}
}

// runSubmit runs submit in-process and returns its exit code and output.
func runSubmit(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// Re-running submit with the same workflow id and flags creates nothing new
// and reports the finished workflow at once, in both modes, without workers.
func TestRerunReportsTheExistingWorkflow(t *testing.T) {
	bins := e2e.Build(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	w := e2e.Start(t, "w1", bins.Worker, "--owner", "w1", "--wait-ms", "500", "--server-cmd", bins.ServerCmd(db))
	code, first, stderr := runSubmit(t, "--workflow", "again", "--poll", "100ms", "--json", "--server-cmd", bins.ServerCmd(db))
	if code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	w.Interrupt()
	if code := w.Wait(); code != 0 {
		t.Fatalf("worker exit %d", code)
	}
	for _, mode := range [][]string{nil, {"--no-tasks"}} {
		args := append([]string{"--workflow", "again", "--json", "--timeout", "30s", "--server-cmd", bins.ServerCmd(db)}, mode...)
		code, again, stderr := runSubmit(t, args...)
		if code != 0 {
			t.Fatalf("re-run %v: exit %d\n%s", mode, code, stderr)
		}
		var a, b Report
		json.Unmarshal([]byte(first), &a)
		json.Unmarshal([]byte(again), &b)
		for i := range a.Nodes {
			if a.Nodes[i].TaskID != b.Nodes[i].TaskID || b.Nodes[i].State != "completed" || !bytes.Equal(compact(a.Nodes[i].Result), compact(b.Nodes[i].Result)) {
				t.Errorf("re-run %v node %d: %+v, first run %+v", mode, i, b.Nodes[i], a.Nodes[i])
			}
		}
	}
}

func compact(b []byte) []byte {
	var buf bytes.Buffer
	json.Compact(&buf, b)
	return buf.Bytes()
}

// The same workflow id with different nodes is refused with advice.
func TestConflictingWorkflowIsRefused(t *testing.T) {
	bins := e2e.Build(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	if code, _, stderr := runSubmit(t, "--workflow", "taken", "--timeout", "200ms", "--server-cmd", bins.ServerCmd(db)); code != 1 || !strings.Contains(stderr, "--timeout 200ms elapsed") || !strings.Contains(stderr, "graph-engineering-mcp workflow watch taken") {
		t.Fatalf("timeout run: exit %d\n%s", code, stderr)
	}
	code, _, stderr := runSubmit(t, "--workflow", "taken", "--fail", "a", "--server-cmd", bins.ServerCmd(db))
	if code != 1 || !strings.Contains(stderr, "create node a: the server refused it") || !strings.Contains(stderr, "needs a new --workflow") {
		t.Fatalf("conflicting run: exit %d\n%s", code, stderr)
	}
	// Without the Tasks extension the whole graph is one call, refused
	// whole, naming the node.
	code, _, stderr = runSubmit(t, "--workflow", "taken", "--fail", "d", "--no-tasks", "--server-cmd", bins.ServerCmd(db))
	if code != 1 || !strings.Contains(stderr, "created none of its nodes") || !strings.Contains(stderr, `node \"d\" already exists`) {
		t.Fatalf("conflicting whole-graph run: exit %d\n%s", code, stderr)
	}
}

// SIGINT stops following (exit 1) and says the workflow goes on.
func TestSIGINTStopsFollowing(t *testing.T) {
	bins := e2e.Build(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	p := e2e.Start(t, "submit", bins.Submit, "--workflow", "left", "--json", "--server-cmd", bins.ServerCmd(db))
	p.WaitLog("created d after b,c")
	p.Interrupt()
	if code := p.Wait(); code != 1 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(p.Stderr(), "stopped following with 4 of 4 nodes unfinished (they keep running") {
		t.Errorf("stderr:\n%s", p.Stderr())
	}
	if p.Stdout() != "" {
		t.Errorf("stdout: %q", p.Stdout())
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--workflow", "has space"}, "--workflow must match"},
		{[]string{"--fail", "e"}, "--fail must name a node of the diamond"},
		{[]string{"--fail-retryable"}, "--fail-retryable needs --fail NODE"},
		{[]string{"--max-attempts", "0"}, "--max-attempts must be between 1 and 100"},
		{[]string{"--sleep-ms", "-5"}, "--sleep-ms must be between 0"},
		{[]string{"--poll", "-1s"}, "--poll and --timeout must not be negative"},
		{[]string{"--log-level", "x"}, "--log-level"},
		{[]string{"--token", "t"}, "--token applies only with --url"},
		{[]string{"--url", "http://h/mcp", "--server-cmd", "x"}, "give only one of"},
	} {
		code, stdout, stderr := runSubmit(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", tc.args, code, stderr, tc.want)
		}
	}
}

// The default workflow id is valid and unique per run.
func TestDefaultWorkflowID(t *testing.T) {
	bins := e2e.Build(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	// The timeout also covers the server's start-up (a few hundred ms on a
	// loaded machine): short, but long enough that the id is printed.
	_, _, stderr := runSubmit(t, "--timeout", "3s", "--server-cmd", bins.ServerCmd(db))
	m := regexp.MustCompile(`workflow=(diamond-\d{8}T\d{6}\.\d{3}Z)`).FindStringSubmatch(stderr)
	if m == nil || !idPattern.MatchString(m[1]) {
		t.Fatalf("no default workflow id in:\n%s", stderr)
	}
}

// The recording transport also works over Streamable HTTP: the server's
// own MCP code, served in-process by the SDK's stateless HTTP handler (the
// real serve --http is tested end to end in examples/e2e_test.go once it
// exists).
func TestTaskHandleOverStreamableHTTP(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "tasks.db"), taskgraph.Options{}, tgsqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := mcpadapter.New(mcpadapter.Config{Store: st, Version: "test", Surface: manifest.NewSurface(manifest.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	hs := httptest.NewServer(h)
	defer hs.Close()

	e := mcpclient.Endpoint{URL: hs.URL}
	client := mcp.NewClient(&mcp.Implementation{Name: "submit-test", Version: "1"}, &mcp.ClientOptions{Capabilities: tasksCapabilities()})
	if err := registerTasksGet(client); err != nil {
		t.Fatal(err)
	}
	cs, err := mcpclient.Connect(ctx, client, e, recordingTransport{inner: e.Transport()}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var progress testwait.Buffer
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// No worker: following stops when the test cancels it, once the
	// progress shows every node created and a handle read (not after a
	// fixed time, which a loaded machine may spend creating the nodes).
	go func() {
		for {
			changed := progress.Changed()
			if s := progress.String(); strings.Contains(s, "created d after b,c: task ") && strings.Contains(s, ", working: pending: ready to be claimed by a worker") {
				cancel()
				return
			}
			select {
			case <-changed:
			case <-sctx.Done():
				return
			}
		}
	}()
	_, err = Submit(sctx, cs, Options{Workflow: "http", MaxAttempts: 3, UseTasks: offersTasks(cs), Poll: 50 * time.Millisecond, Progress: &progress})
	if err == nil || !strings.Contains(err.Error(), "stopped following with 4 of 4 nodes unfinished") {
		t.Fatalf("Submit: %v", err)
	}
	for _, want := range []string{"following them with tasks/get", "created a: task ", ", working: pending: ready to be claimed by a worker", "created d after b,c: task "} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
	// The SDK's handler is a server whose subscriptions/listen opens no
	// stream (go-sdk#1146): the listener says it was refused, which makes
	// Submit poll tasks/get instead.
	err = httpListener(e)(ctx, []string{"01KQHC8AM00HTG84GH61V6YSZQ"}, func(taskResult) { t.Error("a notification from a server without the stream") })
	if !errors.Is(err, errListenRefused) {
		t.Fatalf("listening to the SDK's handler: %v, want errListenRefused", err)
	}
}
