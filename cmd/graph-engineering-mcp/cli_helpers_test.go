package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// t0 is the server time the fixtures start at.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// env is a database in t.TempDir() held open by a Store, as a running server
// would hold it, with a manual clock shared with the commands under test.
type env struct {
	t     *testing.T
	path  string
	clock *lease.ManualClock
	s     *taskgraph.Store
	ctx   context.Context // carries clock for the commands
}

func newEnv(t *testing.T) *env {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.db")
	clock := lease.NewManualClock(t0)
	s, err := sqlitestore.Open(context.Background(), path, taskgraph.Options{Clock: clock}, tgsqlite.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return &env{t: t, path: path, clock: clock, s: s, ctx: contextWithClock(context.Background(), clock)}
}

// result is what a command run produced.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the command line args (without the program name) in-process
// against the env's database, with stdin as standard input. --database is
// appended after the arguments, as an operator would type it.
func (e *env) cli(stdin string, args ...string) result {
	e.t.Helper()
	return e.cliCtx(e.ctx, stdin, append(args, "--database", e.path)...)
}

// cliCtx runs args exactly as given (no --database added) under ctx.
func (e *env) cliCtx(ctx context.Context, stdin string, args ...string) result {
	e.t.Helper()
	var out, errb bytes.Buffer
	code := run(ctx, append([]string{"graph-engineering-mcp"}, args...), strings.NewReader(stdin), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// want fails the test unless the run exited with code.
func (r result) want(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// fixture is the workflow the tests share:
//
//	fetch ✓ ── build ▶ (w2, live until 12:10:03) ── test … ──┐
//	       ├── package ○                                         ├── deploy ⊘
//	       └── lint ✗ ── docs ⊘ ─────────────────────────────────┘
//
// plus workflow "other" with one pending task.
type fixture struct {
	tasks map[string]taskgraph.Task // by node id, as created
	build taskgraph.Claimed         // the live claim on build
}

func (e *env) fixture() fixture {
	e.t.Helper()
	ctx := context.Background()
	nodes := []taskgraph.NodeSpec{
		{NodeID: "fetch", Payload: json.RawMessage(`{"url":"https://example.com/src.tar"}`)},
		{NodeID: "build", DependsOn: []string{"fetch"}},
		{NodeID: "package", DependsOn: []string{"fetch"}},
		{NodeID: "lint", DependsOn: []string{"fetch"}, MaxAttempts: 1},
		{NodeID: "test", DependsOn: []string{"build"}},
		{NodeID: "docs", DependsOn: []string{"lint"}},
		{NodeID: "deploy", DependsOn: []string{"test", "docs"}},
	}
	created, err := e.s.CreateWorkflow(ctx, "wf", nodes)
	if err != nil {
		e.t.Fatalf("create workflow: %v", err)
	}
	f := fixture{tasks: map[string]taskgraph.Task{}}
	for _, c := range created {
		f.tasks[c.Task.NodeID] = c.Task
	}
	if _, err := e.s.CreateTask(ctx, "other", taskgraph.NodeSpec{NodeID: "solo"}); err != nil {
		e.t.Fatalf("create other: %v", err)
	}
	e.clock.Advance(time.Second)
	fetch := e.claim("w1", f.tasks["fetch"].TaskID)
	if _, err := e.s.Complete(ctx, holderOfClaim(fetch), json.RawMessage(`{"ok":true}`)); err != nil {
		e.t.Fatalf("complete fetch: %v", err)
	}
	e.clock.Advance(time.Second)
	lint := e.claim("w3", f.tasks["lint"].TaskID)
	if _, err := e.s.Fail(ctx, holderOfClaim(lint), "lint: 3 problems\nsecond line", false); err != nil {
		e.t.Fatalf("fail lint: %v", err)
	}
	e.clock.Advance(time.Second)
	f.build = e.claim("w2", f.tasks["build"].TaskID)
	return f
}

// claimLease is the lease the fixtures' claims take.
const claimLease = 10 * time.Minute

// claim claims a task by id with a claimLease lease.
func (e *env) claim(owner, taskID string) taskgraph.Claimed {
	e.t.Helper()
	c, ok, err := e.s.Claim(context.Background(), taskgraph.ClaimRequest{Owner: owner, TaskID: taskID, Lease: claimLease})
	if err != nil || !ok {
		e.t.Fatalf("claim %s by %s: ok=%v err=%v", taskID, owner, ok, err)
	}
	return c
}

func holderOfClaim(c taskgraph.Claimed) lease.Holder {
	return lease.Holder{TaskID: c.Task.TaskID, Owner: c.Lease.Owner, Generation: c.Lease.Generation, Token: c.Lease.Token}
}

// task reads a task through the test's store.
func (e *env) task(id string) taskgraph.Task {
	e.t.Helper()
	t, err := e.s.Task(context.Background(), id)
	if err != nil {
		e.t.Fatalf("read task %s: %v", id, err)
	}
	return t
}

// fingerprint summarises every row the database holds, to show that a
// command left it unchanged. It reads the file with database/sql, not the
// store.
func (e *env) fingerprint() string {
	e.t.Helper()
	db, err := sql.Open("sqlite3", "file:"+e.path+"?_query_only=on")
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	var out strings.Builder
	for _, q := range []string{
		`SELECT COUNT(*) || ':' || COALESCE(GROUP_CONCAT(task_id || state || generation || attempts || updated_at_ms || COALESCE(owner, '') || status_message, ','), '') FROM tasks`,
		`SELECT COUNT(*) || ':' || COALESCE(GROUP_CONCAT(hash, ','), '') FROM events`,
		`SELECT COUNT(*) || ':' || COALESCE(GROUP_CONCAT(workflow_id || head_hash || event_count, ','), '') FROM workflows`,
	} {
		var s string
		if err := db.QueryRow(q).Scan(&s); err != nil {
			e.t.Fatalf("fingerprint %q: %v", q, err)
		}
		out.WriteString(s + "|")
	}
	return out.String()
}

// lastEvent is the newest event of a task.
func (e *env) lastEvent(taskID string) taskgraph.Event {
	e.t.Helper()
	evs, err := e.s.TaskEvents(context.Background(), taskID)
	if err != nil || len(evs) == 0 {
		e.t.Fatalf("events of %s: %v (%d)", taskID, err, len(evs))
	}
	return evs[len(evs)-1]
}

// detail decodes an event's detail.
func detail(t *testing.T, ev taskgraph.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(ev.Detail, &m); err != nil {
		t.Fatalf("event detail %s: %v", ev.Detail, err)
	}
	return m
}

// decodeJSON parses a command's JSON output into v.
func decodeJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("output is not the expected JSON: %v\n%s", err, out)
	}
}

// lineWith returns the first line of out containing all of subs.
func lineWith(t *testing.T, out string, subs ...string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		ok := true
		for _, s := range subs {
			if !strings.Contains(l, s) {
				ok = false
				break
			}
		}
		if ok {
			return l
		}
	}
	t.Fatalf("no line contains %q in:\n%s", subs, out)
	return ""
}
