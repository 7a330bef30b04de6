package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

func TestDBBackupWhileServing(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "tasks.db")
	s, err := sqlitestore.Open(context.Background(), db, taskgraph.Options{}, tgsqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreateTask(context.Background(), "wf", taskgraph.NodeSpec{NodeID: "a"}); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "copy.db")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"graph-engineering-mcp", "db", "backup", "--database", db, dest}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("backup: exit %d %s", code, stderr.String())
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"graph-engineering-mcp", "tasks", "list", "--database", dest}, strings.NewReader(""), &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "wf") {
		t.Fatalf("list the backup: exit %d %q %s", code, stdout.String(), stderr.String())
	}
	if code := run(context.Background(), []string{"graph-engineering-mcp", "db", "backup", "--database", db, dest}, strings.NewReader(""), &stdout, &stderr); code != 1 {
		t.Fatalf("backup over an existing file: exit %d", code)
	}
	if code := run(context.Background(), []string{"graph-engineering-mcp", "db", "backup", "--database", db}, strings.NewReader(""), &stdout, &stderr); code != exitUsage {
		t.Fatalf("backup without DEST: exit %d", code)
	}
}
