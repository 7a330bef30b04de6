package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// runFor runs args in-process with empty stdin (a stdio server exits at its
// end) under a context that ends at the test's deadline, so that a server
// the test expects to be refused stops (and the test fails) instead of
// serving forever.
func runFor(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := testwait.Bound(t, context.Background())
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, append([]string{appName}, args...), strings.NewReader(""), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// TestServeRefusesADatabaseInAMissingFolder pins that a mistyped --database
// (or GRAPH_ENGINEERING_DATABASE) is a usage error naming the path, on stdio
// and HTTP and on the bare command, and that nothing is created.
func TestServeRefusesADatabaseInAMissingFolder(t *testing.T) {
	dir := t.TempDir()
	typo := filepath.Join(dir, "tasks.db.typo", "x.db")
	file := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(file, []byte("not a folder"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{args: []string{"serve", "--database", typo}, want: "does not exist"},
		{args: []string{"--database", typo}, want: "does not exist"},
		{args: []string{"serve", "--database", typo, "--http", "127.0.0.1:0"}, want: "does not exist"},
		{args: []string{"serve"}, env: typo, want: "does not exist"},
		{args: []string{"serve", "--database", filepath.Join(file, "x.db")}, want: "is not a folder"},
	} {
		t.Setenv(databaseEnv, tc.env)
		r := runFor(t, tc.args...)
		path := typo
		if strings.Contains(tc.want, "folder") {
			path = filepath.Join(file, "x.db")
		}
		if r.code != exitUsage || !strings.Contains(r.stderr, "--database "+path+": ") || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q (env %q): exit %d, want %d naming %s and %q\nstderr: %s", tc.args, tc.env, r.code, exitUsage, path, tc.want, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Dir(typo)); !os.IsNotExist(err) {
		t.Fatalf("the mistyped folder was created: %v", err)
	}
	// The default path, named explicitly (as an MCP client's configuration
	// should), still gets its folder on first start.
	state := filepath.Join(dir, "state")
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv(databaseEnv, "")
	def := filepath.Join(state, "graph-engineering", "tasks.db")
	runFor(t, "serve", "--database", def).want(t, exitOK)
	if _, err := os.Stat(def); err != nil {
		t.Fatalf("serve --database DEFAULT did not create the default database: %v", err)
	}
}

// TestServeSaysWhenItCreatesADatabase pins the one warning serve logs when
// it creates a database, naming its absolute path, and its absence when the
// database already exists.
func TestServeSaysWhenItCreatesADatabase(t *testing.T) {
	t.Setenv(databaseEnv, "")
	dir := t.TempDir()
	t.Chdir(dir)
	const msg = "creating a new, empty database"
	first := runFor(t, "serve", "--database", "new.db").want(t, exitOK)
	if n := strings.Count(first.stderr, msg); n != 1 || !strings.Contains(first.stderr, "database="+filepath.Join(dir, "new.db")) || !strings.Contains(first.stderr, "level=WARN") {
		t.Fatalf("first start: %d lines saying %q (want 1, a warning with the absolute path):\n%s", n, msg, first.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.db")); err != nil {
		t.Fatalf("no database created: %v", err)
	}
	again := runFor(t, "serve", "--database", "new.db", "--log-level", "debug").want(t, exitOK)
	if strings.Contains(again.stderr, msg) {
		t.Fatalf("second start on the existing database says it creates one:\n%s", again.stderr)
	}
}
