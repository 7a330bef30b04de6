package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A client may write its requests and close stdin at once (a script piping
// into the server). End of input must finish and answer every request in
// flight; it used to cancel them unanswered, most often before they ran.
func TestStdioEndOfInputAnswersEveryRequest(t *testing.T) {
	bin := builtBinary(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	var in strings.Builder
	const n = 20
	for i := range n {
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"piped","node_id":"n%d"},%s}}`+"\n", i, i, modernMetaJSON)
	}
	fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{%s}}`+"\n", n, modernMetaJSON)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--database", db)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(in.String()), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	}
	answered := map[float64]bool{}
	for line := range strings.SplitSeq(strings.TrimSuffix(stdout.String(), "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil || m["jsonrpc"] != "2.0" {
			t.Fatalf("stdout carried a non-protocol line: %q", line)
		}
		res, _ := m["result"].(map[string]any)
		if res == nil || res["isError"] == true {
			t.Fatalf("request %v failed: %v", m["id"], m)
		}
		answered[m["id"].(float64)] = true
	}
	if len(answered) != n+1 {
		t.Fatalf("%d of %d requests answered before exit\nstderr:\n%s", len(answered), n+1, stderr.String())
	}
	sdb, err := sql.Open("sqlite3", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	var count int
	if err := sdb.QueryRow(`SELECT COUNT(*) FROM tasks WHERE workflow_id = 'piped'`).Scan(&count); err != nil || count != n {
		t.Fatalf("%d tasks stored (%v), want %d", count, err, n)
	}
}
