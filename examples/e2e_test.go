package examples_test

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/examples/internal/e2e"
)

func TestMain(m *testing.M) {
	code := m.Run()
	e2e.Cleanup()
	os.Exit(code)
}

// report is submit's --json output.
type report struct {
	WorkflowID string `json:"workflow_id"`
	Via        string `json:"followed_with"`
	OK         bool   `json:"ok"`
	Nodes      []struct {
		NodeID string          `json:"node_id"`
		TaskID string          `json:"task_id"`
		State  string          `json:"state"`
		Status string          `json:"status_message"`
		Result json.RawMessage `json:"result"`
		Error  string          `json:"error"`
	} `json:"nodes"`
}

func decodeReport(t *testing.T, out string) report {
	t.Helper()
	var r report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("submit --json printed %q: %v", out, err)
	}
	return r
}

// echoResult is what the example worker's default handler returns.
type echoResult struct {
	Echo   map[string]any `json:"echo"`
	Worker string         `json:"worker"`
	// Upstream is each dependency's result by node id (nodes with dependencies).
	Upstream map[string]json.RawMessage `json:"upstream"`
}

// wantUpstream asserts that node n's echo result carries the results of
// exactly its dependencies in the diamond, each the echo of that node: the
// downstream node's result is built from its upstream results.
func wantUpstream(t *testing.T, node string, res echoResult) {
	t.Helper()
	deps := map[string][]string{"a": nil, "b": {"a"}, "c": {"a"}, "d": {"b", "c"}}[node]
	if len(res.Upstream) != len(deps) {
		t.Errorf("node %s: upstream results of %d nodes, want %v", node, len(res.Upstream), deps)
	}
	for _, d := range deps {
		var up echoResult
		if err := json.Unmarshal(res.Upstream[d], &up); err != nil || up.Echo["node"] != d {
			t.Errorf("node %s: upstream result of %s is %s, want its echo", node, d, res.Upstream[d])
		}
	}
}

// startWorkers starts n example workers, each with its own stdio server on db.
func startWorkers(t *testing.T, bins e2e.Bins, db string, owners ...string) []*e2e.Proc {
	t.Helper()
	var ws []*e2e.Proc
	for _, owner := range owners {
		w := e2e.Start(t, owner, bins.Worker, "--owner", owner, "--wait-ms", "500", "--server-cmd", bins.ServerCmd(db))
		w.WaitLog("worker started")
		ws = append(ws, w)
	}
	return ws
}

// stopWorkers sends SIGINT to every worker and asserts each exits 0.
func stopWorkers(t *testing.T, ws []*e2e.Proc) {
	t.Helper()
	for _, w := range ws {
		w.Interrupt()
	}
	for _, w := range ws {
		if code := w.Wait(); code != 0 {
			t.Errorf("%s exited %d after SIGINT\n%s", w.Name, code, w.Stderr())
		}
		if strings.Contains(w.Stderr(), "level=ERROR") {
			t.Errorf("%s logged an error:\n%s", w.Name, w.Stderr())
		}
	}
}

// checkHistories asserts that no write reached a task from anyone but its
// live holder.
func checkHistories(t *testing.T, bins e2e.Bins, db, workflow string) {
	t.Helper()
	for node, id := range bins.WorkflowTasks(t, db, workflow) {
		s := bins.TasksShow(t, db, id)
		if s.Task.State == "claimed" || s.Lease.Status != "none" {
			t.Errorf("node %s is left %s with lease %s", node, s.Task.State, s.Lease.Status)
		}
		e2e.CheckHolderWrites(t, s)
	}
}

// The main scenario: a diamond submitted while two workers, each
// with its own server process on the same database, do the work. Submit
// follows it with tasks/get, with graph_task_inspect when the server does
// not offer the Tasks extension, and with graph_task_inspect on request.
func TestDiamondWithTwoWorkers(t *testing.T) {
	bins := e2e.Build(t)
	for _, tc := range []struct {
		name       string
		serverArgs []string
		submitArgs []string
		via        string
	}{
		{name: "tasks-get", via: "tasks/get"},
		{name: "extension-disabled", serverArgs: []string{"--disable-tasks-extension"}, via: "graph_task_inspect"},
		{name: "no-tasks-flag", submitArgs: []string{"--no-tasks"}, via: "graph_task_inspect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "tasks.db")
			workers := startWorkers(t, bins, db, "w1", "w2")
			args := append([]string{"--workflow", "diamond-" + tc.name, "--sleep-ms", "200", "--poll", "100ms", "--json",
				"--server-cmd", bins.ServerCmd(db, tc.serverArgs...)}, tc.submitArgs...)
			submit := e2e.Start(t, "submit", bins.Submit, args...)
			if code := submit.Wait(); code != 0 {
				t.Fatalf("submit exited %d\nstdout:\n%s\nstderr:\n%s", code, submit.Stdout(), submit.Stderr())
			}
			rep := decodeReport(t, submit.Stdout())
			if !rep.OK || rep.Via != tc.via || len(rep.Nodes) != 4 {
				t.Fatalf("report: %+v", rep)
			}
			for i, n := range rep.Nodes {
				if want := string(rune('a' + i)); n.NodeID != want || n.State != "completed" {
					t.Errorf("node %d: %+v, want %s completed", i, n, want)
				}
				var res echoResult
				if err := json.Unmarshal(n.Result, &res); err != nil || res.Echo["node"] != n.NodeID || (res.Worker != "w1" && res.Worker != "w2") {
					t.Errorf("node %s result %s is not the example worker's echo", n.NodeID, n.Result)
				}
				wantUpstream(t, n.NodeID, res)
			}
			// Progress went to stderr (stdout holds only the report).
			if !strings.Contains(submit.Stderr(), "created d after b,c") || !strings.Contains(submit.Stderr(), "d: completed") {
				t.Errorf("no progress lines:\n%s", submit.Stderr())
			}
			stopWorkers(t, workers)
			checkHistories(t, bins, db, rep.WorkflowID)
		})
	}
}

// The human-readable output: progress, then one line per node.
func TestSubmitPrintsFinalStates(t *testing.T) {
	bins := e2e.Build(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	workers := startWorkers(t, bins, db, "w1")
	submit := e2e.Start(t, "submit", bins.Submit, "--workflow", "readable", "--poll", "100ms", "--server-cmd", bins.ServerCmd(db))
	if code := submit.Wait(); code != 0 {
		t.Fatalf("submit exited %d\n%s\n%s", code, submit.Stdout(), submit.Stderr())
	}
	out := submit.Stdout()
	for _, want := range []string{
		"workflow readable: creating 4 nodes, following them with tasks/get\n",
		"created a: task ",
		"created d after b,c: task ",
		"workflow readable finished: 4 of 4 nodes completed\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for _, node := range []string{"a", "b", "c", "d"} {
		upstream := ""
		if node != "a" {
			upstream = `"upstream":\{.*\},`
		}
		line := regexp.MustCompile(`(?m)^  ` + node + `  [0-9A-Z]{26}  completed  result \{"echo":\{"node":"` + node + `"\},` + upstream + `"worker":"w1"\}$`)
		if !line.MatchString(out) {
			t.Errorf("no final line for %s:\n%s", node, out)
		}
	}
	stopWorkers(t, workers)
}

// A node whose payload asks the worker to fail: submit exits 1, the node is
// failed with the worker's error, and its dependent is cancelled while the
// independent branch completes.
func TestFailingNodeCancelsDependents(t *testing.T) {
	bins := e2e.Build(t)
	for _, tc := range []struct {
		name string
		args []string
		via  string
	}{
		{name: "tasks-get", via: "tasks/get"},
		{name: "inspect", args: []string{"--no-tasks"}, via: "graph_task_inspect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "tasks.db")
			workers := startWorkers(t, bins, db, "w1", "w2")
			args := append([]string{"--workflow", "failing", "--fail", "b", "--poll", "100ms", "--json", "--server-cmd", bins.ServerCmd(db)}, tc.args...)
			submit := e2e.Start(t, "submit", bins.Submit, args...)
			if code := submit.Wait(); code != 1 {
				t.Fatalf("submit exited %d, want 1\n%s\n%s", code, submit.Stdout(), submit.Stderr())
			}
			rep := decodeReport(t, submit.Stdout())
			if rep.OK || rep.Via != tc.via {
				t.Fatalf("report: %+v", rep)
			}
			want := map[string]string{"a": "completed", "b": "failed", "c": "completed", "d": "cancelled"}
			for _, n := range rep.Nodes {
				if n.State != want[n.NodeID] {
					t.Errorf("node %s is %s, want %s", n.NodeID, n.State, want[n.NodeID])
				}
			}
			if b := rep.Nodes[1]; b.Error != "node b failed on purpose (submit --fail b)" {
				t.Errorf("b's error: %q", b.Error)
			}
			if d := rep.Nodes[3]; !strings.Contains(d.Status, "upstream node b") {
				t.Errorf("d's status does not name b: %q", d.Status)
			}
			stopWorkers(t, workers)
			checkHistories(t, bins, db, "failing")
		})
	}
}

// A retryable failure is retried by the workers up to max_attempts.
func TestRetryableFailureUsesEveryAttempt(t *testing.T) {
	bins := e2e.Build(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	workers := startWorkers(t, bins, db, "w1", "w2")
	submit := e2e.Start(t, "submit", bins.Submit, "--workflow", "retrying", "--fail", "c", "--fail-retryable", "--max-attempts", "2",
		"--poll", "100ms", "--json", "--server-cmd", bins.ServerCmd(db))
	if code := submit.Wait(); code != 1 {
		t.Fatalf("submit exited %d, want 1\n%s", code, submit.Stderr())
	}
	rep := decodeReport(t, submit.Stdout())
	if c := rep.Nodes[2]; c.State != "failed" || !strings.Contains(c.Status, "failed after 2 of 2 attempts") {
		t.Fatalf("c: %+v", c)
	}
	stopWorkers(t, workers)
	s := bins.TasksShow(t, db, rep.Nodes[2].TaskID)
	var kinds []string
	for _, e := range s.Events {
		if e.Kind != "heartbeat" {
			kinds = append(kinds, e.Kind)
		}
	}
	if got := strings.Join(kinds, ","); !strings.Contains(got, "claim,retry,claim,fail") {
		t.Errorf("c's history %s lacks a retry then a final failure", got)
	}
	e2e.CheckHolderWrites(t, s)
}

// The same diamond over Streamable HTTP with a bearer token: one server
// process, workers and submit as HTTP clients.
func TestDiamondOverHTTP(t *testing.T) {
	bins := e2e.Build(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	const token = "examples-test-token"
	db := filepath.Join(t.TempDir(), "tasks.db")
	e2e.StartEnv(t, "server", []string{"GRAPH_ENGINEERING_AUTH_TOKEN=" + token}, bins.Server, "serve", "--http", addr, "--database", db)
	url := "http://" + addr + "/mcp"
	var workers []*e2e.Proc
	for _, owner := range []string{"w1", "w2"} {
		// Started at once: the worker retries until the server listens.
		w := e2e.StartEnv(t, owner, []string{"GRAPH_ENGINEERING_AUTH_TOKEN=" + token}, bins.Worker, "--owner", owner, "--wait-ms", "500", "--url", url)
		w.WaitLog("worker started")
		workers = append(workers, w)
	}
	submit := e2e.Start(t, "submit", bins.Submit, "--workflow", "over-http", "--poll", "100ms", "--json", "--url", url, "--token", token)
	if code := submit.Wait(); code != 0 {
		t.Fatalf("submit exited %d\n%s\n%s", code, submit.Stdout(), submit.Stderr())
	}
	// Over HTTP the submitter waits on notifications (subscriptions/listen)
	// rather than polling.
	if rep := decodeReport(t, submit.Stdout()); !rep.OK || rep.Via != "subscriptions/listen" {
		t.Fatalf("report %+v\n%s", rep, submit.Stderr())
	}
	stopWorkers(t, workers)
	checkHistories(t, bins, db, "over-http")

	// A wrong token is refused: exit 1, naming the likely cause.
	bad := e2e.Start(t, "bad-token", bins.Submit, "--workflow", "refused", "--url", url, "--token", "wrong")
	if code := bad.Wait(); code != 1 || !strings.Contains(bad.Stderr(), "is the token right?") {
		t.Fatalf("wrong token: exit %d\n%s", code, bad.Stderr())
	}
}
