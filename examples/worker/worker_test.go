package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/examples/internal/e2e"
	"github.com/graph-engineering/graph-engineering-mcp/examples/internal/mcpclient"
)

func TestMain(m *testing.M) {
	code := m.Run()
	e2e.Cleanup()
	os.Exit(code)
}

// startWorker runs the worker binary against its own server on db.
func startWorker(t *testing.T, bins e2e.Bins, db, owner string, args ...string) *e2e.Proc {
	t.Helper()
	args = append([]string{"--owner", owner, "--wait-ms", "500"}, args...)
	// The "--" form: the server command follows the flags verbatim.
	args = append(args, "--", bins.Server, "serve", "--database", db)
	return e2e.Start(t, owner, bins.Worker, args...)
}

func kinds(s e2e.Show) string {
	var out []string
	for _, e := range s.Events {
		if e.Kind != "heartbeat" {
			out = append(out, e.Kind)
		}
	}
	return strings.Join(out, ",")
}

// SIGINT while the task in hand cannot finish within --grace: the worker
// releases it, so it is pending again for another worker with the attempt
// not counted, and exits 0.
func TestSIGINTReleasesTaskInHand(t *testing.T) {
	bins := e2e.Build(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	id := bins.CreateTask(t, db, "wf", "slow", map[string]any{"sleep_ms": 600000})
	w := startWorker(t, bins, db, "w1", "--grace", "500ms")
	w.WaitLog("claimed task", "task_id="+id)
	start := time.Now()
	w.Interrupt()
	if code := w.Wait(); code != 0 {
		t.Fatalf("exit %d\n%s", code, w.Stderr())
	}
	// A worker that ignored --grace would finish the 10-minute task: the
	// state and the history below tell, not the time it took to stop.
	t.Logf("stopped %v after SIGINT with a 500ms grace", time.Since(start).Round(time.Millisecond))
	s := bins.TasksShow(t, db, id)
	if s.Task.State != "pending" || s.Lease.Status != "none" || s.Task.Owner != "" {
		t.Fatalf("task after shutdown: state %s, lease %s, owner %q", s.Task.State, s.Lease.Status, s.Task.Owner)
	}
	if s.Task.Error != "" || s.Task.Attempts != 0 {
		t.Errorf("after a release: error %q, attempts %d; want none and 0", s.Task.Error, s.Task.Attempts)
	}
	if got := kinds(s); got != "create,claim,release" {
		t.Errorf("history %s, want create,claim,release", got)
	}
	e2e.CheckHolderWrites(t, s)
	for _, want := range []string{"signal: claiming no more tasks", "grace period over; releasing the task", "released task", "worker stopped"} {
		if !strings.Contains(w.Stderr(), want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

// SIGINT while the task in hand can finish within --grace: it completes,
// and the worker exits 0 without claiming anything else.
func TestSIGINTLetsTaskInHandFinish(t *testing.T) {
	bins := e2e.Build(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	id := bins.CreateTask(t, db, "wf", "short", map[string]any{"sleep_ms": 3000})
	next := bins.CreateTask(t, db, "wf", "next", nil)
	w := startWorker(t, bins, db, "w1", "--grace", "1m")
	w.WaitLog("claimed task", "task_id="+id)
	w.Interrupt()
	w.WaitLog("stop requested; letting the task in hand finish")
	if code := w.Wait(); code != 0 {
		t.Fatalf("exit %d\n%s", code, w.Stderr())
	}
	s := bins.TasksShow(t, db, id)
	if s.Task.State != "completed" || !bytes.Contains(s.Task.Result, []byte(`"worker":"w1"`)) {
		t.Fatalf("task: %s %s", s.Task.State, s.Task.Result)
	}
	e2e.CheckHolderWrites(t, s)
	if n := bins.TasksShow(t, db, next); n.Task.State != "pending" {
		t.Errorf("the worker claimed %s after the signal: %s", next, n.Task.State)
	}
}

// A second signal exits at once; the task stays claimed until its lease
// expires (documented), and the worker wrote nothing after the first claim.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	bins := e2e.Build(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	id := bins.CreateTask(t, db, "wf", "slow", map[string]any{"sleep_ms": 600000})
	w := startWorker(t, bins, db, "w1", "--grace", "10m")
	w.WaitLog("claimed task", "task_id="+id)
	w.Interrupt()
	w.WaitLog("stop requested")
	w.Interrupt()
	if code := w.Wait(); code != 1 {
		t.Fatalf("exit %d after a second signal, want 1\n%s", code, w.Stderr())
	}
	if !strings.Contains(w.Stderr(), "second signal: exiting now") {
		t.Errorf("log:\n%s", w.Stderr())
	}
	if s := bins.TasksShow(t, db, id); s.Task.State != "claimed" || s.Task.Owner != "w1" {
		t.Errorf("task: %s by %q", s.Task.State, s.Task.Owner)
	}
}

// An operator requeues the task while the worker holds it: the worker's next
// heartbeat is refused as a stale claim, it stops work at once, never writes
// to that claim again, and goes on to claim the task afresh.
func TestLostClaimStopsWork(t *testing.T) {
	bins := e2e.Build(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	id := bins.CreateTask(t, db, "wf", "requeued", map[string]any{"sleep_ms": 600000})
	w := startWorker(t, bins, db, "w1", "--lease-ms", "3000", "--grace", "0s")
	w.WaitLog("claimed task", "task_id="+id, "generation=1")
	bins.Run(t, "admin", "requeue", id, "--reason", "test: take the task away", "--operator", "tester", "--yes", "--database", db)
	lost := w.WaitLog("claim lost; stopped work")
	if !strings.Contains(lost, "generation=1") || !strings.Contains(lost, "stale claim") {
		t.Errorf("lost-claim log: %s", lost)
	}
	w.WaitLog("claimed task", "task_id="+id, "generation=2")
	w.Interrupt()
	if code := w.Wait(); code != 0 {
		t.Fatalf("exit %d\n%s", code, w.Stderr())
	}
	s := bins.TasksShow(t, db, id)
	if got := kinds(s); got != "create,claim,requeue,claim,release" {
		t.Errorf("history %s, want create,claim,requeue,claim,release", got)
	}
	e2e.CheckHolderWrites(t, s)
	requeued := false
	for _, e := range s.Events {
		if requeued && e.Generation == 1 {
			t.Errorf("the worker wrote to its lost claim after the requeue: %s by %s at generation 1", e.Kind, e.Owner)
		}
		requeued = requeued || e.Kind == "requeue"
	}
}

// Heartbeats every third of the lease keep a task that outlives its lease.
func TestHeartbeatsKeepTheLease(t *testing.T) {
	bins := e2e.Build(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	id := bins.CreateTask(t, db, "wf", "long", map[string]any{"sleep_ms": 5000})
	w := startWorker(t, bins, db, "w1", "--lease-ms", "3000", "--max-tasks", "1")
	if code := w.Wait(); code != 0 {
		t.Fatalf("exit %d\n%s", code, w.Stderr())
	}
	s := bins.TasksShow(t, db, id)
	if s.Task.State != "completed" || s.Task.Generation != 1 {
		t.Fatalf("task %s at generation %d; the lease lapsed", s.Task.State, s.Task.Generation)
	}
	beats, reported := 0, 0
	var final struct {
		Report struct {
			Progress      struct{ Done, Total float64 }
			StatusMessage string `json:"status_message"`
		}
	}
	for _, e := range s.Events {
		var d struct {
			Report *struct {
				Progress struct{ Done, Total float64 }
			}
		}
		if err := json.Unmarshal(e.Detail, &d); err != nil {
			t.Fatal(err)
		}
		switch e.Kind {
		case "heartbeat":
			beats++
			// The echo handler reports the milliseconds slept of 5000.
			if d.Report != nil {
				reported++
				if p := d.Report.Progress; p.Total != 5000 || p.Done < 0 || p.Done > 5000 {
					t.Errorf("a heartbeat reported progress %+v, want done of 5000", p)
				}
			}
		case "complete":
			if err := json.Unmarshal(e.Detail, &final); err != nil {
				t.Fatal(err)
			}
		}
	}
	if beats < 3 {
		t.Errorf("%d heartbeats in 5s with a 3s lease, want at least 3", beats)
	}
	if reported == 0 {
		t.Errorf("none of %d heartbeats carried the handler's progress", beats)
	}
	if p := final.Report.Progress; p.Done != 5000 || p.Total != 5000 || final.Report.StatusMessage != "done" {
		t.Errorf("the completion reported %+v, want 5000 of 5000, done", final.Report)
	}
	e2e.CheckHolderWrites(t, s)
	if !strings.Contains(w.Stderr(), "worked 1 tasks (--max-tasks)") {
		t.Errorf("log:\n%s", w.Stderr())
	}
}

// connect starts a server on db and connects an SDK client to it.
func connect(t *testing.T, bins e2e.Bins, db string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "worker-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(bins.Server, "serve", "--database", db)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Run takes any Handler: here one that fails retryably on its first attempt
// and succeeds on the second, and one that panics.
func TestRunWithCustomHandler(t *testing.T) {
	bins := e2e.Build(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	flaky := bins.CreateTask(t, db, "custom", "flaky", map[string]any{"n": 21})
	cs := connect(t, bins, db)
	var mu sync.Mutex
	var seen []Task
	handler := func(ctx context.Context, task Task) (any, error) {
		mu.Lock()
		seen = append(seen, task)
		mu.Unlock()
		if task.Attempt == 1 {
			return nil, Retryable(errors.New("transient: try again"))
		}
		var p struct{ N int }
		if err := json.Unmarshal(task.Payload, &p); err != nil {
			return nil, err
		}
		return map[string]int{"doubled": 2 * p.N}, nil
	}
	err := Run(context.Background(), cs, Config{Owner: "custom-1", Workflow: "custom", Lease: 5 * time.Second, Wait: 2 * time.Second, MaxTasks: 2, Handler: handler})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[0].Attempt != 1 || seen[1].Attempt != 2 || seen[1].Generation != 2 || seen[1].Owner != "custom-1" || seen[1].NodeID != "flaky" {
		t.Fatalf("handler saw %+v", seen)
	}
	s := bins.TasksShow(t, db, flaky)
	var got struct{ Doubled int }
	if json.Unmarshal(s.Task.Result, &got); s.Task.State != "completed" || got.Doubled != 42 {
		t.Fatalf("task %s %s", s.Task.State, s.Task.Result)
	}
	if got := kinds(s); got != "create,claim,retry,claim,complete" {
		t.Errorf("history %s", got)
	}

	// A panicking handler fails its task (not retryably) instead of
	// crashing the worker.
	boom := bins.CreateTask(t, db, "custom", "boom", nil)
	err = Run(context.Background(), cs, Config{Owner: "custom-1", Workflow: "custom", Lease: 5 * time.Second, Wait: 2 * time.Second, MaxTasks: 1,
		Handler: func(context.Context, Task) (any, error) { panic("bad handler") }})
	if err != nil {
		t.Fatal(err)
	}
	if s := bins.TasksShow(t, db, boom); s.Task.State != "failed" || !strings.Contains(s.Task.Error, "the handler panicked: bad handler") {
		t.Fatalf("task %s %q", s.Task.State, s.Task.Error)
	}
}

// Run refuses a configuration the server would refuse.
func TestRunValidatesConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Owner: "bad owner", Lease: time.Second},
		{Owner: "w", Lease: 500 * time.Millisecond},
		{Owner: "w", Lease: time.Second, Wait: time.Minute},
		{Owner: "w", Lease: time.Second, MaxTasks: -1},
	} {
		if err := Run(context.Background(), nil, cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

func TestEchoHandler(t *testing.T) {
	task := func(payload string) Task { return Task{Payload: json.RawMessage(payload), Owner: "w1"} }
	res, err := Echo(context.Background(), task(`{"x":[1,2],"big":12345678901234567890}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	if string(b) != `{"echo":{"x":[1,2],"big":12345678901234567890},"worker":"w1"}` {
		t.Errorf("echo %s", b)
	}
	for payload, want := range map[string]struct {
		msg       string
		retryable bool
	}{
		`{"fail":"boom"}`:                        {"boom", false},
		`{"fail":true}`:                          {"payload.fail requested a failure", false},
		`{"fail":"flaky","fail_retryable":true}`: {"flaky", true},
		`{"fail":3}`:                             {"payload.fail must be a non-empty string or a boolean", false},
		`{"fail":""}`:                            {"payload.fail must be", false},
		`{"sleep_ms":"soon"}`:                    {"payload:", false},
		`{"sleep_ms":-1}`:                        {"payload.sleep_ms must be between 0 and 3600000", false},
	} {
		_, err := Echo(context.Background(), task(payload))
		if err == nil || !strings.Contains(err.Error(), want.msg) || IsRetryable(err) != want.retryable {
			t.Errorf("%s: %v (retryable %v), want %q retryable %v", payload, err, IsRetryable(err), want.msg, want.retryable)
		}
	}
	if _, err := Echo(context.Background(), task(`{"fail":false}`)); err != nil {
		t.Errorf("fail:false failed: %v", err)
	}
	// Simulated work stops when the context does, with its cause.
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errLostClaim)
	if _, err := Echo(ctx, task(`{"sleep_ms":600000}`)); !errors.Is(err, errLostClaim) {
		t.Errorf("sleep after cancel: %v", err)
	}
}

func TestOwnerNames(t *testing.T) {
	for host, want := range map[string]string{
		"build-01.example.com":   "build-01.example.com-42",
		"my laptop":              "my-laptop-42",
		"_hidden":                "w_hidden-42",
		"":                       "w-42",
		"hôte":                   "h-te-42",
		strings.Repeat("h", 200): strings.Repeat("h", 125) + "-42",
	} {
		got := sanitizeOwner(host, 42)
		if got != want || checkOwner(got) != nil {
			t.Errorf("sanitizeOwner(%q) = %q (valid: %v), want %q", host, got, checkOwner(got), want)
		}
	}
	if err := checkOwner(defaultOwner()); err != nil {
		t.Errorf("default owner: %v", err)
	}
}

// Bad flags exit 2 with a message naming the flag, before starting anything.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--owner", "not valid"}, "--owner must match"},
		{[]string{"--lease-ms", "999"}, "--lease-ms must be between 1000 and 900000"},
		{[]string{"--wait-ms", "30001"}, "--wait-ms must be between 0 and 30000"},
		{[]string{"--max-tasks", "-1"}, "--max-tasks"},
		{[]string{"--grace", "-1s"}, "--grace"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--url", "http://127.0.0.1:1/mcp", "--server-cmd", "x"}, "give only one of"},
		{[]string{"--token", "t"}, "--token applies only with --url"},
		{[]string{"--url", "ftp://x/mcp"}, "--url must be an http:// or https:// URL"},
		{[]string{"--no-such-flag"}, "flag provided but not defined"},
	} {
		var stderr bytes.Buffer
		if code := run(tc.args, &stderr); code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// A server command that cannot start is exit 1 with advice.
func TestUnstartableServer(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"--owner", "w1", "--server-cmd", "/nonexistent/graph-engineering-mcp serve"}, &stderr); code != exitFailure || !strings.Contains(stderr.String(), "give its path in --server-cmd") {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
}

// --capabilities is read as the server reads tags, so a typo fails at start.
func TestParseCapabilities(t *testing.T) {
	for in, want := range map[string]string{"": "", "echo": "echo", " gpu, cuda-12 ,": "gpu cuda-12"} {
		got, err := parseCapabilities(in)
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("parseCapabilities(%q) = %v, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"GPU", "gpu,1x", strings.Repeat("a,", 65)} {
		if _, err := parseCapabilities(bad); err == nil || !strings.Contains(err.Error(), "--capabilities") {
			t.Errorf("parseCapabilities(%q) = %v, want an error naming --capabilities", bad, err)
		}
	}
}

// A report goes out once per change, within the server's bounds.
func TestReportSlot(t *testing.T) {
	var s reportSlot
	if p, _ := s.changed(); p != nil || s.latest() != nil {
		t.Fatal("an empty slot has a report")
	}
	s.set(Progress{Done: 12, Total: 10, Message: strings.Repeat("é", 300), Usage: &Usage{InputTokens: 5}})
	p, v := s.changed()
	if p == nil {
		t.Fatal("a new report is not sent")
	}
	args := map[string]any{}
	p.addTo(args)
	prog := args["progress"].(map[string]any)
	if prog["done"] != 10.0 || prog["total"] != 10.0 {
		t.Errorf("progress %v, want done clamped to the total", prog)
	}
	if msg := args["status_message"].(string); len(msg) > maxStatusBytes || !strings.HasPrefix(strings.Repeat("é", 300), msg) {
		t.Errorf("status_message of %d bytes", len(msg))
	}
	if args["usage"].(*Usage).InputTokens != 5 {
		t.Errorf("usage %v", args["usage"])
	}
	s.sent(v)
	if p, _ := s.changed(); p != nil {
		t.Error("a report a heartbeat carried is sent again")
	}
	if s.latest() == nil {
		t.Error("the completion does not get the latest report")
	}
	args = map[string]any{}
	(&Progress{Done: 3}).addTo(args)
	if _, ok := args["progress"].(map[string]any)["total"]; ok || args["status_message"] != nil {
		t.Errorf("an unknown total or empty message is sent: %v", args)
	}
}

// Run drains a workflow completing each task with claim_next: every task
// is worked once and completed, a completion claims the next ready task in
// the same call (no claim of its own), and when nothing is ready the worker
// falls back to a waiting claim (here the chain's dependent, which the
// completion of its dependency made ready).
func TestRunDrainsWithClaimNext(t *testing.T) {
	bins := e2e.Build(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	ids := map[string]string{}
	for _, n := range []string{"a", "b", "c"} {
		ids[n] = bins.CreateTask(t, db, "drain", n, map[string]any{"n": n})
	}
	cs := connect(t, bins, db)
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "graph_task_create",
		Arguments: map[string]any{"workflow_id": "drain", "node_id": "d", "depends_on": []string{"c"}}}); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	var worked []string
	handler := func(ctx context.Context, task Task) (any, error) {
		mu.Lock()
		worked = append(worked, task.NodeID)
		mu.Unlock()
		return map[string]string{"node": task.NodeID}, nil
	}
	log := slog.New(slog.NewTextHandler(mcpclient.LockedWriter(&logs), nil))
	err := Run(context.Background(), cs, Config{Owner: "drainer-1", Workflow: "drain", Lease: 5 * time.Second, Wait: 2 * time.Second, MaxTasks: 4, Handler: handler, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(worked, ","); got != "a,b,c,d" {
		t.Fatalf("worked %s, want a,b,c,d once each", got)
	}
	for n, id := range bins.WorkflowTasks(t, db, "drain") {
		if s := bins.TasksShow(t, db, id); s.Task.State != "completed" {
			t.Errorf("task %s is %s, want completed", n, s.Task.State)
		}
	}
	// a's completion claimed b, b's claimed c; c's found nothing ready (d
	// became ready by that very completion) and d was claimed with a wait;
	// d is the last task (MaxTasks), completed without claim_next.
	out := logs.String()
	if n := strings.Count(out, "claimed_next=true"); n != 2 {
		t.Errorf("%d completions claimed the next task, want 2 (a→b, b→c):\n%s", n, out)
	}
	if n := strings.Count(out, "claimed_next=false"); n != 1 {
		t.Errorf("%d completions with claim_next found nothing, want 1 (c):\n%s", n, out)
	}
	for _, n := range []string{"a", "b"} {
		if s := bins.TasksShow(t, db, ids[n]); kinds(s) != "create,claim,complete" {
			t.Errorf("%s's history %s, want create,claim,complete", n, kinds(s))
		}
	}
}
