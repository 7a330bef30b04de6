package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/fsfault"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// serve refuses, at start and before serving anything, a database it
// cannot write: exit 2 with a message naming the path, on stdio and HTTP.
// Root ignores file modes, so the database is made immutable or reached
// through a read-only bind mount.
func TestServeRefusesUnwritableDatabase(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, path string) string
	}{
		{"immutable file", func(t *testing.T, path string) string {
			if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
				t.Skipf("cannot make a file immutable here (chattr +i: %v %s)", err, out)
			}
			t.Cleanup(func() {
				if out, err := exec.Command("chattr", "-i", path).CombinedOutput(); err != nil {
					t.Errorf("chattr -i: %v %s", err, out)
				}
			})
			return path
		}},
		{"read-only mount", func(t *testing.T, path string) string {
			return filepath.Join(fsfault.ReadOnly(t, filepath.Dir(path)), filepath.Base(path))
		}},
		{"full disk", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tasks.db")
			want := "database read-only"
			if tc.prepare == nil {
				// A small tmpfs holds the database; once it is full the
				// probe write cannot commit.
				dir := fsfault.Tmpfs(t, 2<<20)
				path, want = filepath.Join(dir, "tasks.db"), "database disk full"
				tc.prepare = func(t *testing.T, path string) string {
					fsfault.Fill(t, dir)
					return path
				}
			}
			s, err := taskgraph.Open(context.Background(), path, taskgraph.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			db := tc.prepare(t, path)
			for _, args := range [][]string{{"serve"}, {"serve", "--http", "127.0.0.1:0"}} {
				var stdout, stderr bytes.Buffer
				code := run(context.Background(), append([]string{"graph-engineering-mcp"}, append(args, "--database", db)...), strings.NewReader(""), &stdout, &stderr)
				if code != exitUsage || !strings.Contains(stderr.String(), "refusing to serve database "+db+": it cannot be written") ||
					!strings.Contains(stderr.String(), want) {
					t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %s and %q", args, code, stderr.String(), db, want)
				}
				if stdout.Len() != 0 {
					t.Errorf("%v: wrote to stdout: %q", args, stdout.String())
				}
			}
		})
	}
}

// A server whose -shm is removed under it refuses the next write with the
// unavailable tool error (not -32603), logs the file, and at the end of
// input closes without a checkpoint and exits 1 instead of reporting a clean
// close; the acknowledged write is in the database afterwards.
func TestServeStdioRefusesWritesAfterShmRemoved(t *testing.T) {
	s := startStdio(t)
	create := func(id int, node string) map[string]any {
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"w","node_id":%q},`+modernMetaJSON+`}}`, id, node))
		return s.recv()
	}
	if m := create(1, "kept"); m["result"] == nil || m["result"].(map[string]any)["isError"] == true {
		t.Fatalf("create before: %v", m)
	}
	if err := os.Remove(s.db + "-shm"); err != nil {
		t.Fatal(err)
	}
	m := create(2, "refused")
	res, _ := m["result"].(map[string]any)
	if res == nil || res["isError"] != true {
		t.Fatalf("create after the -shm was removed: %v, want a tool error", m)
	}
	detail := res["_meta"].(map[string]any)["graph-engineering/error"].(map[string]any)
	if detail["kind"] != "unavailable" || detail["reason"] != "files_replaced" || detail["retryable"] != false {
		t.Fatalf("error detail %v, want unavailable/files_replaced/false", detail)
	}
	s.in.Close()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	err := testwait.Recv(t, "the server to exit at end of input", done)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailure {
		t.Fatalf("exit: %v, want exit code %d\n%s", err, exitFailure, s.stderr)
	}
	stderr := s.stderr.String()
	if !strings.Contains(stderr, s.db+"-shm") || strings.Contains(stderr, "closed cleanly") {
		t.Fatalf("stderr must name %s-shm and not claim a clean close:\n%s", s.db, stderr)
	}
	st, err := taskgraph.Open(context.Background(), s.db, taskgraph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts, err := st.ListTasks(context.Background(), taskgraph.ListFilter{WorkflowID: "w"})
	if err != nil || len(ts) == 0 || ts[0].NodeID != "kept" {
		t.Fatalf("after restart: %v %v, want the acknowledged task", ts, err)
	}
	if res, err := st.Check(context.Background()); err != nil || !res.OK() {
		t.Fatalf("integrity after restart: %v %v", res.Integrity, err)
	}
}
