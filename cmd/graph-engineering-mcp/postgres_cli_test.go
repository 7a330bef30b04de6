package main

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// newPGEnv is newEnv on a fresh PostgreSQL database: the env's path is the
// database URL, which every command takes as --database.
func newPGEnv(t *testing.T) *env {
	t.Helper()
	u := pgtest.URL(t)
	clock := lease.NewManualClock(t0)
	s, err := openPostgres(context.Background(), u, taskgraph.Options{Clock: clock}, openServe, 4, 0)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return &env{t: t, path: u, clock: clock, s: s, ctx: contextWithClock(context.Background(), clock)}
}

// The operator commands take a postgres:// URL as --database (or in
// GRAPH_ENGINEERING_DATABASE) and mean on it what they mean on SQLite; the
// SQLite-only ones say what to use instead; no output or error shows the
// URL's password.
func TestOperatorCommandsOnPostgres(t *testing.T) {
	e := newPGEnv(t)
	f := e.fixture()
	// A password in the URL (the test server may not need one: a wrong one
	// would still show up if anything printed it).
	u, err := url.Parse(e.path)
	if err != nil {
		t.Fatal(err)
	}
	password, has := u.User.Password()
	if !has {
		password = "not-to-be-seen-3f9a"
		u.User = url.UserPassword(u.User.Username(), password)
		e.path = u.String()
	}
	noSecret := func(r result) result {
		t.Helper()
		if password != "" && (strings.Contains(r.stdout, password) || strings.Contains(r.stderr, password)) {
			t.Fatalf("the database password appears in the output:\n%s\n%s", r.stdout, r.stderr)
		}
		return r
	}

	var list struct {
		Tasks []map[string]any `json:"tasks"`
	}
	decodeJSON(t, noSecret(e.cli("", "tasks", "list", "--json")).want(t, 0).stdout, &list)
	if len(list.Tasks) != 8 {
		t.Fatalf("tasks list on PostgreSQL found %d tasks, want the fixture's 8", len(list.Tasks))
	}
	build := f.tasks["build"].TaskID
	noSecret(e.cli("", "tasks", "show", build)).want(t, 0)
	noSecret(e.cli("", "workflow", "show", "wf")).want(t, 0)
	noSecret(e.cli("", "audit", "verify")).want(t, 0)
	// The outside verifier agrees on a PostgreSQL database's export (events
	// linked in event_links and journaled ones).
	t.Log(pythonAgreesWithVerify(t, e.path))
	r := noSecret(e.cli("", "admin", "requeue", build, "--reason", "worker w2 is gone", "--yes")).want(t, 0)
	if got := e.task(build); got.State != taskgraph.StatePending || got.Generation != f.build.Lease.Generation {
		t.Fatalf("after admin requeue on PostgreSQL build is %s at generation %d:\n%s", got.State, got.Generation, r.stdout)
	}
	var check map[string]any
	decodeJSON(t, noSecret(e.cli("", "db", "check", "--json")).want(t, 0).stdout, &check)
	if check["ok"] != true || !strings.Contains(check["integrity"].([]any)[0].(string), "pg_amcheck") {
		t.Fatalf("db check on PostgreSQL: %v", check)
	}
	if r := noSecret(e.cli("", "db", "backup", t.TempDir()+"/b.db")).want(t, 2); !strings.Contains(r.stderr, "pg_dump") {
		t.Fatalf("db backup on PostgreSQL does not point to pg_dump:\n%s", r.stderr)
	}
	if r := noSecret(e.cli("", "db", "checkpoint")).want(t, 2); !strings.Contains(r.stderr, "PostgreSQL") {
		t.Fatalf("db checkpoint on PostgreSQL:\n%s", r.stderr)
	}
	// The same through the environment variable, and a scheme no driver
	// serves is a usage error.
	t.Setenv(databaseEnv, e.path)
	noSecret(e.cliCtx(e.ctx, "", "tasks", "list")).want(t, 0)
	if r := e.cliCtx(e.ctx, "", "tasks", "list", "--database", "mysql://u:pw@h/db"); r.code != 2 || strings.Contains(r.stderr, "pw@") {
		t.Fatalf("an unsupported scheme: exit %d\n%s", r.code, r.stderr)
	}
}

// serve on stdio takes a postgres:// URL: a modern-era create answered over
// stdio lands in the PostgreSQL database, and the start line names the
// database without its password.
func TestServeStdioOnPostgres(t *testing.T) {
	e := newPGEnv(t)
	in := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"stdio-pg","node_id":"n"},` + modernMetaJSON + "}}\n"
	r := e.cliCtx(context.Background(), in, "serve", "--database", e.path, "--log-level", "info")
	if r.code != 0 {
		t.Fatalf("serve stdio on PostgreSQL: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, `"result"`) || strings.Contains(r.stdout, `"isError":true`) {
		t.Fatalf("create over stdio on PostgreSQL: %s", r.stdout)
	}
	if u, err := url.Parse(e.path); err == nil {
		if pw, ok := u.User.Password(); ok && strings.Contains(r.stderr, pw) {
			t.Fatalf("the start line shows the password:\n%s", r.stderr)
		}
	}
	v, err := e.s.Workflow(context.Background(), "stdio-pg")
	if err != nil || len(v.Tasks) != 1 {
		t.Fatalf("the task created over stdio is not in the database: %v %v", v, err)
	}
}

// bench on a PostgreSQL database that already holds tasks (a second run on
// the same URL) refuses with a usage error that says why, and writes
// nothing: before, its workers found the first run's workflows, completed,
// and waited for tasks that never came.
func TestBenchRefusesAPostgresDatabaseWithTasks(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	bench := func() (int, string) {
		var stdout, stderr strings.Builder
		code := run(context.Background(), []string{"graph-engineering-mcp", "bench", "--database", u, "--tasks", "20", "--workers", "2", "--json"}, strings.NewReader(""), &stdout, &stderr)
		return code, stderr.String()
	}
	if code, stderr := bench(); code != 0 {
		t.Fatalf("bench on an empty database: exit %d: %s", code, stderr)
	}
	code, stderr := bench()
	if code != exitUsage || !strings.Contains(stderr, "holds 20 tasks already; bench needs an empty database") {
		t.Fatalf("bench on a database holding tasks: exit %d (want %d): %s", code, exitUsage, stderr)
	}
	s, err := openPostgres(context.Background(), u, taskgraph.Options{}, openServe, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids, err := s.WorkflowIDs(context.Background())
	if err != nil || len(ids) != 1 {
		t.Fatalf("workflows after the refused run: %v, %v; want the first run's one", ids, err)
	}
}
