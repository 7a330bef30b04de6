package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

func TestDBCheck(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	r := e.cli("", "db", "check").want(t, exitOK)
	walSize := func() int64 {
		fi, err := os.Stat(e.path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	for _, want := range []string{"database:   " + e.path + "\n", "integrity:  ok\n",
		fmt.Sprintf("wal:        %d bytes, not checkpointed (db check only reads; the server checkpoints)\n", walSize()),
		"tasks:      8 (1 blocked, 2 pending, 1 claimed, 1 completed, 1 failed, 2 cancelled)\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	r = e.cli("", "db", "check", "--json").want(t, exitOK)
	var out struct {
		Database  string
		OK        bool
		Integrity []string
		WAL       struct {
			Bytes int64
		}
		Tasks map[string]int
	}
	decodeJSON(t, r.stdout, &out)
	if out.Database != e.path || !out.OK || len(out.Integrity) != 1 || out.Integrity[0] != "ok" || out.Tasks["cancelled"] != 2 || len(out.Tasks) != 6 ||
		out.WAL.Bytes != walSize() || out.WAL.Bytes == 0 {
		t.Fatalf("JSON: %+v", out)
	}
}

// finishedWorkflow creates a workflow of one task and completes it.
func (e *env) finishedWorkflow(id string) {
	e.t.Helper()
	c, err := e.s.CreateTask(context.Background(), id, taskgraph.NodeSpec{NodeID: "only"})
	if err != nil {
		e.t.Fatal(err)
	}
	cl := e.claim("w1", c.Task.TaskID)
	if _, err := e.s.Complete(context.Background(), holderOfClaim(cl), json.RawMessage(`1`)); err != nil {
		e.t.Fatal(err)
	}
}

func TestDBPrune(t *testing.T) {
	e := newEnv(t)
	e.fixture() // unfinished: never pruned
	e.finishedWorkflow("old-a")
	e.finishedWorkflow("old-b")
	e.clock.Advance(31 * 24 * time.Hour)
	e.finishedWorkflow("recent")

	before := e.fingerprint()
	r := e.cli("n\n", "db", "prune", "--older-than", "30d").want(t, exitFailure)
	if !strings.Contains(r.stderr, "unchanged since 2026-03-02T12:00:03Z (older than 30d)") || !strings.Contains(r.stderr, "Prune? [y/N]") ||
		!strings.Contains(r.stderr, "aborted, nothing changed") {
		t.Fatalf("stderr:\n%s", r.stderr)
	}
	if e.fingerprint() != before {
		t.Fatal("an unconfirmed prune changed the database")
	}

	r = e.cli("", "db", "prune", "--older-than", "30d", "--yes").want(t, exitOK)
	if r.stdout != "removed 2 workflow(s) (2 tasks, 6 events): old-a, old-b\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
	for _, wf := range []string{"old-a", "old-b"} {
		e.cli("", "workflow", "show", wf).want(t, exitFailure)
	}
	for _, wf := range []string{"recent", "wf", "other"} {
		e.cli("", "workflow", "show", wf).want(t, exitOK)
	}
	// The remaining history still verifies.
	e.cli("", "audit", "verify").want(t, exitOK)

	r = e.cli("y\n", "db", "prune", "--older-than", "1d12h", "--json").want(t, exitOK)
	var out struct {
		Before    time.Time
		Workflows []string
		Tasks     int64
	}
	decodeJSON(t, r.stdout, &out)
	if len(out.Workflows) != 0 || out.Tasks != 0 || !out.Before.Equal(e.clock.Now().Add(-36*time.Hour)) {
		t.Fatalf("second prune: %+v", out)
	}
	r = e.cli("", "db", "prune", "--older-than", "1h", "--yes").want(t, exitOK)
	if !strings.HasPrefix(r.stdout, "nothing to prune") {
		t.Fatalf("stdout %q", r.stdout)
	}
	// Nothing to prune (the old workflows left are unfinished): nothing to
	// confirm either, with no answer on stdin (issue 29 item 15).
	r = e.cli("", "db", "prune", "--older-than", "1h").want(t, exitOK)
	if !strings.HasPrefix(r.stdout, "nothing to prune") || strings.Contains(r.stderr, "Prune?") {
		t.Fatalf("prune with nothing to prune: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	// Something to prune still asks.
	e.finishedWorkflow("later")
	e.clock.Advance(2 * time.Hour)
	r = e.cli("n\n", "db", "prune", "--older-than", "1h").want(t, exitFailure)
	if !strings.Contains(r.stderr, "Prune? [y/N]") {
		t.Fatalf("prune with a prunable workflow did not ask: %q", r.stderr)
	}
}

func TestDBPruneUsage(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	before := e.fingerprint()
	for _, args := range [][]string{
		{"db", "prune", "--yes"},
		{"db", "prune", "--older-than", "soon", "--yes"},
		{"db", "prune", "--older-than", "-5d", "--yes"},
		{"db", "prune", "--older-than", "0s", "--yes"},
		{"db", "prune", "--older-than", "30d", "extra", "--yes"},
		{"db"},
	} {
		if r := e.cli("y\n", args...); r.code != exitUsage {
			t.Errorf("%v: exit %d (stderr %q), want 2", args, r.code, r.stderr)
		}
	}
	if e.fingerprint() != before {
		t.Fatal("a usage error changed the database")
	}
}

func TestParseAge(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"30d", 30 * 24 * time.Hour}, {"1.5d", 36 * time.Hour}, {"1d12h", 36 * time.Hour}, {"72h", 72 * time.Hour},
		{"90m", 90 * time.Minute}, {" 2d ", 48 * time.Hour},
	} {
		if got, err := parseAge(tc.in); err != nil || got != tc.want {
			t.Errorf("parseAge(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "d", "30", "-1d", "0d", "1dx", "1w", "99999999d"} {
		if got, err := parseAge(in); err == nil {
			t.Errorf("parseAge(%q) = %v, want an error", in, got)
		}
	}
}

// The built binary works as a separate process on a database that another
// process's Store holds open, as beside a running server.
func TestBinaryAgainstOpenDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "graph-engineering-mcp")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := sqlitestore.Open(context.Background(), path, taskgraph.Options{Sweep: true}, tgsqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	c, err := s.CreateTask(context.Background(), "live", taskgraph.NodeSpec{NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Claim(context.Background(), taskgraph.ClaimRequest{Owner: "w1", TaskID: c.Task.TaskID, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	runBin := func(args ...string) (string, string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), databaseEnv+"="+path)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("run %v: %v", args, err)
		}
		return out.String(), errb.String(), code
	}
	out, errOut, code := runBin("tasks", "list")
	if code != 0 || !strings.Contains(out, c.Task.TaskID) || !strings.Contains(lineWith(t, out, c.Task.TaskID), "claimed") {
		t.Fatalf("tasks list: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = runBin("db", "check")
	if code != 0 || !strings.Contains(out, "integrity:  ok") {
		t.Fatalf("db check: exit %d\n%s\n%s", code, out, errOut)
	}
	// The store beside it still works after the child's check.
	if _, err := s.CreateTask(context.Background(), "live", taskgraph.NodeSpec{NodeID: "n2"}); err != nil {
		t.Fatalf("write after db check: %v", err)
	}
	_, errOut, code = runBin("tasks", "list", "--state", "bogus")
	if code != 2 || !strings.Contains(errOut, "must be one of") {
		t.Fatalf("bogus state: exit %d, stderr %q", code, errOut)
	}
}

// Every operator command documents itself with an example, read commands
// take --json, and --help works before or after the arguments.
func TestCommandsHelp(t *testing.T) {
	e := newEnv(t)
	readCommands := map[string]bool{"tasks list": true, "tasks show": true, "workflow show": true, "workflow watch": true,
		"audit verify": true, "audit head": true, "db check": true}
	groups := map[string]bool{"tasks": true, "workflow": true, "admin": true, "audit": true, "db": true}
	leaves := 0
	for _, g := range newApp(nil, io.Discard, io.Discard).Commands {
		if !groups[g.Name] {
			continue
		}
		delete(groups, g.Name)
		if g.Usage == "" || g.Description == "" {
			t.Errorf("%s: no usage or description", g.Name)
		}
		for _, c := range g.Subcommands {
			if c.Hidden {
				continue // "GROUP help", tested in cliux_test.go
			}
			leaves++
			name := g.Name + " " + c.Name
			if !strings.HasPrefix(c.UsageText, "graph-engineering-mcp "+name) {
				t.Errorf("%s: UsageText %q", name, c.UsageText)
			}
			if !strings.Contains(c.Description, "Example") || !strings.Contains(c.Description, "   graph-engineering-mcp "+name) {
				t.Errorf("%s: the description has no example", name)
			}
			if readCommands[name] && findFlag(c.Flags, "json") == nil {
				t.Errorf("%s: a read command without --json", name)
			}
			if findFlag(c.Flags, "database") == nil {
				t.Errorf("%s: no --database", name)
			}
			r := e.cliCtx(e.ctx, "", g.Name, c.Name, "--help").want(t, exitOK)
			if !strings.Contains(r.stdout, "USAGE:\n"+wrapHelp("   "+strings.ReplaceAll(c.UsageText, "\n", "\n   "), helpWidth)) {
				t.Errorf("%s --help:\n%s", name, r.stdout)
			}
		}
	}
	if len(groups) != 0 || leaves != 19 { // admin limit, approve and reject are the last three
		t.Fatalf("groups not found: %v; %d commands", groups, leaves)
	}
	r := e.cliCtx(e.ctx, "", "admin", "skip", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "--help").want(t, exitOK)
	if !strings.Contains(r.stdout, "admin skip - mark a task completed") {
		t.Fatalf("help after the argument:\n%s", r.stdout)
	}
}
