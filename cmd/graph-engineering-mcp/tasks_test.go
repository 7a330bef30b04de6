package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

func TestTasksListTable(t *testing.T) {
	e := newEnv(t)
	f := e.fixture()
	e.clock.Advance(5 * time.Minute) // within build's lease
	r := e.cli("", "tasks", "list").want(t, exitOK)
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != 9 {
		t.Fatalf("want a header and 8 rows, got %d lines:\n%s", len(lines), r.stdout)
	}
	header := lines[0]
	cols := []string{"ID", "WORKFLOW", "NODE", "STATE", "OWNER", "GEN", "ATTEMPTS", "AGE"}
	if got := strings.Fields(header); strings.Join(got, " ") != strings.Join(cols, " ") {
		t.Fatalf("header %q, want columns %v", header, cols)
	}
	// Columns are aligned: each row's STATE cell starts under the header's.
	stateCol := strings.Index(header, "STATE")
	want := map[string][]string{ // node -> id, workflow, state, owner, gen, attempts, age
		"fetch":   {f.tasks["fetch"].TaskID, "wf", "completed", "w1", "1", "1/3", "5m"},
		"build":   {f.tasks["build"].TaskID, "wf", "claimed", "w2", "1", "1/3", "5m"},
		"package": {f.tasks["package"].TaskID, "wf", "pending", "-", "0", "0/3", "5m"},
		"lint":    {f.tasks["lint"].TaskID, "wf", "failed", "w3", "1", "1/1", "5m"},
		"test":    {f.tasks["test"].TaskID, "wf", "blocked", "-", "0", "0/3", "5m"},
		"docs":    {f.tasks["docs"].TaskID, "wf", "cancelled", "-", "0", "0/3", "5m"},
		"deploy":  {f.tasks["deploy"].TaskID, "wf", "cancelled", "-", "0", "0/3", "5m"},
		"solo":    {"", "other", "pending", "-", "0", "0/3", "5m"},
	}
	for _, l := range lines[1:] {
		fs := strings.Fields(l)
		if len(fs) != 8 {
			t.Fatalf("row %q has %d cells, want 8", l, len(fs))
		}
		w, ok := want[fs[2]]
		if !ok {
			t.Fatalf("unexpected row %q", l)
		}
		delete(want, fs[2])
		if w[0] != "" && fs[0] != w[0] {
			t.Errorf("row %q: id %s, want %s", l, fs[0], w[0])
		}
		if got := []string{fs[1], fs[3], fs[4], fs[5], fs[6], fs[7]}; strings.Join(got, " ") != strings.Join(w[1:], " ") {
			t.Errorf("row %q: got %v, want %v", l, got, w[1:])
		}
		if strings.Index(l, fs[3]) != stateCol {
			t.Errorf("row %q: STATE cell at column %d, header at %d", l, strings.Index(l, fs[3]), stateCol)
		}
	}
	if len(want) != 0 {
		t.Fatalf("rows missing for %v", want)
	}
	// Two days on, ages read in days and the lapsed lease (no server has
	// processed it) is flagged.
	e.clock.Advance(48 * time.Hour)
	r = e.cli("", "tasks", "list", "--state", "claimed").want(t, exitOK)
	if row := lineWith(t, r.stdout, "build"); !strings.HasSuffix(row, "  2d") || !strings.Contains(row, "claimed (lease expired)") {
		t.Fatalf("build row %q: want age 2d and the lapsed lease flagged", row)
	}
}

func TestTasksListFilters(t *testing.T) {
	e := newEnv(t)
	f := e.fixture()
	r := e.cli("", "tasks", "list", "--workflow", "other").want(t, exitOK)
	if strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stdout, "solo") {
		t.Fatalf("--workflow other: want only solo:\n%s", r.stdout)
	}
	r = e.cli("", "tasks", "list", "--state", "failed", "--workflow", "wf").want(t, exitOK)
	if strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stdout, f.tasks["lint"].TaskID) {
		t.Fatalf("--state failed: want only lint:\n%s", r.stdout)
	}
	r = e.cli("", "tasks", "list", "--limit", "2").want(t, exitOK)
	if strings.Count(r.stdout, "\n") != 3 {
		t.Fatalf("--limit 2: want 2 rows:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "showing the first 2 tasks") {
		t.Fatalf("--limit 2: want a note that the list was cut, stderr:\n%s", r.stderr)
	}
	r = e.cli("", "tasks", "list", "--workflow", "nosuch").want(t, exitOK)
	if r.stdout != "no tasks match\n" {
		t.Fatalf("no match: got %q", r.stdout)
	}
}

func TestTasksListUsageErrors(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tasks", "list", "--database", e.path, "--state", "bogus"}, "must be one of blocked, pending, claimed, completed, failed, cancelled"},
		{[]string{"tasks", "list", "--limit", "0"}, "must be between 1 and 10000"},
		{[]string{"tasks", "list", "--limit", "10001"}, "must be between 1 and 10000"},
		{[]string{"tasks", "list", "--limit", "many"}, "invalid value"},
		{[]string{"tasks", "list", "--database", e.path, "--workflow", "not valid!"}, "invalid workflow_id"},
		{[]string{"tasks", "list", "extra"}, "tasks list takes no arguments"},
		{[]string{"tasks", "list", "--bogus"}, "unknown flag --bogus for graph-engineering-mcp tasks list"},
		{[]string{"tasks"}, "tasks needs a command: list, show"},
		{[]string{"tasks", "frobnicate"}, `unknown command "frobnicate"`},
	} {
		r := e.cliCtx(e.ctx, "", tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

func TestTasksListJSON(t *testing.T) {
	e := newEnv(t)
	f := e.fixture()
	r := e.cli("", "tasks", "list", "--json", "--workflow", "wf").want(t, exitOK)
	var out struct {
		Now       time.Time
		Limit     int
		Truncated bool
		Tasks     []map[string]any
	}
	decodeJSON(t, r.stdout, &out)
	if len(out.Tasks) != 7 || out.Limit != 100 || out.Truncated || !out.Now.Equal(e.clock.Now()) {
		t.Fatalf("got %d tasks, limit %d, truncated %v, now %v", len(out.Tasks), out.Limit, out.Truncated, out.Now)
	}
	build := out.Tasks[1]
	if build["task_id"] != f.tasks["build"].TaskID || build["state"] != "claimed" || build["owner"] != "w2" ||
		build["generation"] != 1.0 || build["lease_expires_at"] == nil {
		t.Fatalf("build: %v", build)
	}
	if deps, _ := build["depends_on"].([]any); len(deps) != 1 || deps[0] != "fetch" {
		t.Fatalf("build depends_on: %v", build["depends_on"])
	}
	if _, ok := out.Tasks[0]["result"]; !ok {
		t.Fatalf("fetch has no result: %v", out.Tasks[0])
	}
}

func TestTasksShow(t *testing.T) {
	e := newEnv(t)
	f := e.fixture()
	build := f.tasks["build"].TaskID
	e.clock.Advance(20 * time.Second)
	r := e.cli("", "tasks", "show", build).want(t, exitOK)
	for _, want := range []string{
		"task        " + build,
		"workflow    wf",
		"node        build",
		"state       claimed",
		"status      claimed by w2 (generation 1)",
		"depends on  fetch",
		"attempts    1 of 3",
		"owner       w2",
		"result      (none)",
		"error       (none)",
		"lease       live: held by w2, generation 1, expires 2026-03-01T12:10:03Z (in 9m)",
		"created     2026-03-01T12:00:00Z (23s ago)",
		"updated     2026-03-01T12:00:03Z (20s ago)",
		"history (3 events)",
	} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("missing line %q in:\n%s", want, r.stdout)
		}
	}
	for _, kind := range []string{"create", "ready", "claim"} {
		lineWith(t, r.stdout, "2026-03-01T12:00:0", " "+kind+" ")
	}
	claimLine := lineWith(t, r.stdout, " claim ")
	if fs := strings.Fields(claimLine); len(fs) < 7 || fs[3] != "w2" || fs[4] != "1" || fs[5] != "worker:w2" || !strings.HasPrefix(fs[6], `{"attempt":1`) {
		t.Fatalf("claim event line %q: want owner w2, generation 1, actor worker:w2 and the detail", claimLine)
	}
	if strings.Contains(r.stdout, f.build.Lease.Token) {
		t.Fatal("tasks show printed the claim token")
	}

	// JSON: every field, the lease, the events; still no token.
	r = e.cli("", "tasks", "show", build, "--json").want(t, exitOK)
	if strings.Contains(r.stdout, f.build.Lease.Token) {
		t.Fatal("tasks show --json printed the claim token")
	}
	var out struct {
		Task   map[string]any
		Lease  struct{ Status, Owner string }
		Events []struct {
			Seq  int64
			Kind string
		}
	}
	decodeJSON(t, r.stdout, &out)
	if out.Task["node_id"] != "build" || out.Lease.Status != "live" || out.Lease.Owner != "w2" || len(out.Events) != 3 || out.Events[2].Kind != "claim" {
		t.Fatalf("JSON: %+v", out)
	}

	// Past its expiry the read-only command shows the lapse without
	// processing it (that is a write, left to the server) ...
	e.clock.Advance(claimLease)
	before := e.fingerprint()
	r = e.cli("", "tasks", "show", build).want(t, exitOK)
	if !strings.Contains(r.stdout, "state       claimed (lease expired)\n") || !strings.Contains(r.stdout, "not yet processed by a server") {
		t.Fatalf("after expiry:\n%s", r.stdout)
	}
	if e.fingerprint() != before {
		t.Fatal("tasks show changed the database")
	}
	// ... and once the server has processed it, the task is pending again
	// and its history says so.
	if got := e.task(build).State; got != taskgraph.StatePending {
		t.Fatalf("store sees build %s after the expiry was processed, want pending", got)
	}
	r = e.cli("", "tasks", "show", build).want(t, exitOK)
	if !strings.Contains(r.stdout, "state       pending\n") || !strings.Contains(r.stdout, "lease       none (last granted generation 1)\n") {
		t.Fatalf("after the server processed the expiry:\n%s", r.stdout)
	}
	lineWith(t, r.stdout, " expire ", "w2")
	if !strings.Contains(r.stdout, "losses      1 lease(s) lapsed") {
		t.Fatalf("the lost lease is not shown:\n%s", r.stdout)
	}

	r = e.cli("", "tasks", "show", f.tasks["fetch"].TaskID).want(t, exitOK)
	if !strings.Contains(r.stdout, "payload:\n  {\n    \"url\": \"https://example.com/src.tar\"\n  }\nresult:\n  {\n    \"ok\": true\n  }\n") {
		t.Fatalf("fetch: want its payload and result:\n%s", r.stdout)
	}

	// A failed task shows its error text in full.
	r = e.cli("", "tasks", "show", f.tasks["lint"].TaskID).want(t, exitOK)
	if !strings.Contains(r.stdout, "error:\n  lint: 3 problems\n  second line\n") || !strings.Contains(r.stdout, "lease       none (last held by w3, generation 1)") {
		t.Fatalf("lint:\n%s", r.stdout)
	}
}

func TestTasksShowErrors(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	r := e.cli("", "tasks", "show", "01ARZ3NDEKTSV4RRFFQ69G5FAV").want(t, exitFailure)
	if !strings.Contains(r.stderr, `task "01ARZ3NDEKTSV4RRFFQ69G5FAV" not found`) {
		t.Fatalf("unknown id: stderr %q", r.stderr)
	}
	r = e.cli("", "tasks", "show", "not-an-id").want(t, exitFailure)
	if !strings.Contains(r.stderr, "not found") {
		t.Fatalf("malformed id: stderr %q", r.stderr)
	}
	e.cli("", "tasks", "show").want(t, exitUsage)
	e.cli("", "tasks", "show", "a", "b").want(t, exitUsage)
}

// Flags may come before or after the positional argument, and --database may
// be given before the command name or through the environment.
func TestDatabasePathRules(t *testing.T) {
	e := newEnv(t)
	f := e.fixture()
	id := f.tasks["fetch"].TaskID
	e.cliCtx(e.ctx, "", "tasks", "show", "--json", "--database", e.path, id).want(t, exitOK)
	e.cliCtx(e.ctx, "", "tasks", "show", id, "--db="+e.path).want(t, exitOK)
	e.cliCtx(e.ctx, "", "--database", e.path, "tasks", "show", id).want(t, exitOK)

	t.Setenv(databaseEnv, e.path)
	r := e.cliCtx(e.ctx, "", "tasks", "show", id).want(t, exitOK)
	if !strings.Contains(r.stdout, "node        fetch") {
		t.Fatalf("via %s:\n%s", databaseEnv, r.stdout)
	}
	// An explicit flag beats the environment, wherever it is given.
	missing := filepath.Join(t.TempDir(), "missing.db")
	for _, args := range [][]string{
		{"tasks", "list", "--database", missing},
		{"--database", missing, "tasks", "list"},
	} {
		r = e.cliCtx(e.ctx, "", args...)
		if r.code != exitFailure || !strings.Contains(r.stderr, "no database at "+missing) {
			t.Fatalf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("a read command created %s (stat: %v)", missing, err)
	}
}

func TestHumanDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"}, {0, "0s"}, {999 * time.Millisecond, "0s"}, {3 * time.Second, "3s"}, {59 * time.Second, "59s"},
		{time.Minute, "1m"}, {5*time.Minute + 59*time.Second, "5m"}, {2 * time.Hour, "2h"}, {23*time.Hour + 59*time.Minute, "23h"},
		{24 * time.Hour, "1d"}, {4*24*time.Hour + 23*time.Hour, "4d"},
	} {
		if got := humanDuration(tc.d); got != tc.want {
			t.Errorf("humanDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// A command interrupted while it waits for the database fails cleanly.
func TestCancelledContext(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	r := e.cliCtx(ctx, "", "tasks", "list", "--database", e.path)
	if r.code != exitFailure || !strings.Contains(r.stderr, "context canceled") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}
