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

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
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
	ctx, cancel := testwait.Bound(t, context.Background())
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

// recvRaw reads one stdout line and returns its members undecoded, so that
// a test can tell "id": null from a missing id.
func (s *stdioServer) recvRaw() map[string]json.RawMessage {
	s.t.Helper()
	type res struct {
		line string
		err  error
	}
	ch := make(chan res, 1)
	go func() { l, err := s.out.ReadString('\n'); ch <- res{l, err} }()
	r := testwait.Recv(s.t, "an answer on stdout", ch)
	if r.err != nil {
		s.t.Fatalf("read stdout: %v\nstderr:\n%s", r.err, s.stderr.String())
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.line), &m); err != nil || string(m["jsonrpc"]) != `"2.0"` {
		s.t.Fatalf("stdout carried a non-protocol line: %q", r.line)
	}
	return m
}

// rowsFingerprint summarises every row of every table of the database at
// path through a read-only connection.
func rowsFingerprint(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables []string
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		rows.Scan(&name)
		tables = append(tables, name)
	}
	rows.Close()
	var out strings.Builder
	for _, table := range tables {
		rows, err := db.Query(`SELECT * FROM "` + table + `" ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&out, "%s %q\n", table, vals)
		}
		rows.Close()
	}
	return out.String()
}

// Input the binary must refuse at the transport, before any tool runs: each
// line gets its error (with an id member, null when the id could not be
// read), the process keeps serving, and the database is unchanged.
func TestStdioHostileTransportInput(t *testing.T) {
	s := startStdio(t)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"w","node_id":"n"},` + modernMetaJSON + `}}`)
	if m := s.recv(); m["result"] == nil {
		t.Fatalf("create: %v", m)
	}
	before := rowsFingerprint(t, s.db)
	create := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"w","node_id":"x"},` + modernMetaJSON + `}}`
	}
	for _, tc := range []struct {
		name, line string
		code       float64
		id         string // the raw id the answer must carry
		want       string
	}{
		{"NUL bytes", "\x00\x00" + create("2"), -32700, "null", "not valid JSON"},
		{"NaN", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"graph_task_claim","arguments":{"owner":"w","lease_ms":NaN},` + modernMetaJSON + `}}`, -32700, "null", "not valid JSON"},
		{"CR-only separator", create("4") + "\r" + create("5"), -32700, "null", "not valid JSON"},
		{"invalid UTF-8 outside strings", "\xff" + create("6"), -32700, "null", "not valid JSON"},
		{"batch", "[" + create("7") + "]", -32600, "null", "batches are not supported"},
		{"id null", create("null"), -32600, "null", "not null"},
		{"fractional id", create("8.5"), -32600, "null", "numeric id must be an integer"},
		{"id 2^64", create("18446744073709551616"), -32600, "null", "numeric id must be an integer"},
		{"id 1e400", create("1e400"), -32600, "null", "numeric id must be an integer"},
		{"10 MB line", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"w","node_id":"x","payload":{"s":"` + strings.Repeat("x", 10<<20) + `"}},` + modernMetaJSON + `}}`, -32600, "null", "message too large"},
		{"payload nested 10,000 deep", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"w","node_id":"x","payload":` + strings.Repeat(`{"a":`, 10000) + `1` + strings.Repeat(`}`, 10000) + `},` + modernMetaJSON + `}}`, -32700, "null", "not valid JSON"},
		{"params nested 2,000 deep", `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"w","node_id":"x","payload":` + strings.Repeat(`[`, 2000) + strings.Repeat(`]`, 2000) + `},` + modernMetaJSON + `}}`, -32600, "11", "unmarshaling"},
		{"params as array", `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":[1]}`, -32602, "12", "params must be a JSON object"},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":13,"method":"tools/list"}`, -32600, "13", `must be \"2.0\"`},
	} {
		s.send(tc.line)
		m := s.recvRaw()
		var e struct {
			Code    float64 `json:"code"`
			Message string  `json:"message"`
		}
		json.Unmarshal(m["error"], &e)
		id, hasID := m["id"]
		if !hasID || string(id) != tc.id || e.Code != tc.code || !strings.Contains(string(m["error"]), tc.want) {
			b, _ := json.Marshal(m)
			t.Errorf("%s: got %s, want code %v with id %s mentioning %q", tc.name, b, tc.code, tc.id, tc.want)
		}
	}
	s.send(`{"jsonrpc":"2.0","id":"ok","method":"tools/list","params":{` + modernMetaJSON + `}}`)
	if m := s.recv(); m["id"] != "ok" || m["result"] == nil {
		t.Fatalf("after the hostile lines: %v", m)
	}
	if after := rowsFingerprint(t, s.db); after != before {
		t.Fatalf("the database changed:\n%s\n->\n%s", before, after)
	}
	s.in.Close()
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, s.stderr.String())
	}
}
