package mcpadapter

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// dbFingerprint summarises every row of every table of the SQLite file at
// path, read through a separate read-only connection, so that a test can show
// a request left the database unchanged.
func dbFingerprint(t *testing.T, path string) string {
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
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	h := sha256.New()
	total := 0
	for _, table := range tables {
		rows, err := db.Query(`SELECT * FROM "` + table + `"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		var lines []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, fmt.Sprintf("%q", vals))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		sort.Strings(lines)
		total += len(lines)
		fmt.Fprintf(h, "%s %d\n%s\n", table, len(lines), strings.Join(lines, "\n"))
	}
	return fmt.Sprintf("%d rows in %d tables, sha256 %s", total, len(tables), hex.EncodeToString(h.Sum(nil)))
}

// short quotes at most 200 bytes of b for a failure message.
func short[T ~string | ~[]byte](b T) string {
	if len(b) > 200 {
		return fmt.Sprintf("%q… (%d bytes)", b[:200], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// hostileMeta and hostileTasksMeta are the _meta members of 2026-07-28
// requests, without and with the Tasks extension declared.
const (
	hostileMeta      = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	hostileTasksMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
)

// fieldsOf returns the argument table of the named tool.
func fieldsOf(t *testing.T, tool string) []field {
	t.Helper()
	for _, d := range toolDefs() {
		if d.name == tool {
			return d.fields
		}
	}
	t.Fatalf("no tool %s", tool)
	return nil
}

// Regressions found by FuzzDecodeArgs, FuzzStdio and the hostile table.

// exactInt rounded through float64: 1e-400 read as 0 and
// 3.0000000000000000001 as 3, so a number that is not an integer passed as
// one.
func TestRegressionIntegersAreReadExactly(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "-0": 0, "-0.0": 0, "0e999999999999": 0, "1e3": 1000, "1E+3": 1000, "1000.0": 1000,
		"0.1e1": 1, "0.5e1": 5, "150e-1": 15, "9007199254740991": 9007199254740991, "9.007199254740991e15": 9007199254740991,
		"9223372036854775807": 9223372036854775807, "-9223372036854775808": -9223372036854775808,
		"-9.223372036854775808e18": -9223372036854775808,
	} {
		if got, err := exactInt(json.RawMessage(in)); err != nil || got != want {
			t.Errorf("exactInt(%s) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{
		"1e-400", "-1e-400", "3.0000000000000000001", "1000.00000000000001", "1.5", "0.25e1", "1e19",
		"9223372036854775808", "9.223372036854775808e18", "1e400", "1e999999999999", "-1e999999999999",
		`"1"`, "true", "null", "[1]", "{}",
	} {
		if got, err := exactInt(json.RawMessage(in)); err == nil {
			t.Errorf("exactInt(%s) = %d, want an error", in, got)
		}
	}
	claim := fieldsOf(t, manifest.ToolClaim)
	for _, in := range []string{`{"owner":"w","wait_ms":1e-400}`, `{"owner":"w","lease_ms":1000.00000000000000001}`} {
		if _, err := decodeArgs(json.RawMessage(in), claim); err == nil || !strings.Contains(err.Error(), "must be an integer") {
			t.Errorf("decodeArgs(%s) = %v, want an integer error", in, err)
		}
	}
	if a, err := decodeArgs(json.RawMessage(`{"owner":"w","lease_ms":1e3,"wait_ms":-0}`), claim); err != nil || a.num["lease_ms"] != 1000 || a.num["wait_ms"] != 0 {
		t.Errorf("decodeArgs of 1e3 and -0: %v", err)
	}
}

// decodeArgs took an explicit null as "absent", although the published
// schema's types do not include null: a claim with "task_id": null claimed
// the oldest ready task of any workflow instead of failing.
func TestRegressionNullIsNotAbsent(t *testing.T) {
	f := newFixture(t)
	r := f.raw()
	created := toolOut(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolCreate, "arguments": map[string]any{"workflow_id": "wf", "node_id": "a"}}, nil))
	before := dbFingerprint(t, f.store.Path())
	for _, tc := range []struct{ tool, args, want string }{
		{manifest.ToolClaim, `{"owner":"w","task_id":null}`, "task_id must not be null"},
		{manifest.ToolClaim, `{"owner":"w","workflow_id":null}`, "workflow_id must not be null"},
		{manifest.ToolClaim, `{"owner":"w","lease_ms":null}`, "lease_ms must not be null"},
		{manifest.ToolCreate, `{"workflow_id":"wf","node_id":"b","payload":null}`, "payload must not be null"},
		{manifest.ToolCreate, `{"workflow_id":"wf","node_id":"b","depends_on":null}`, "depends_on must not be null"},
		{manifest.ToolCreate, `{"workflow_id":"wf","node_id":null}`, "node_id is required (got null)"},
	} {
		res := mustResult(t, r.modernCall("tools/call", map[string]any{"name": tc.tool, "arguments": json.RawMessage(tc.args)}, nil))
		text, _ := json.Marshal(res["content"])
		if res["isError"] != true || !strings.Contains(string(text), tc.want) {
			t.Errorf("%s %s: %v, want a tool error mentioning %q", tc.tool, tc.args, res, tc.want)
		}
	}
	if after := dbFingerprint(t, f.store.Path()); after != before {
		t.Fatalf("a rejected call changed the database: %s -> %s", before, after)
	}
	task := toolOut(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolInspect, "arguments": map[string]any{"task_id": created["task"].(map[string]any)["task_id"]}}, nil))["task"].(map[string]any)
	if task["state"] != "pending" {
		t.Fatalf("the task was claimed: %v", task)
	}
	// result is any JSON value, null included.
	complete := fieldsOf(t, manifest.ToolComplete)
	if _, err := decodeArgs(json.RawMessage(`{"task_id":"01ARZ3NDEKTSV4RRFFQ69G5FAV","owner":"w","generation":1,"claim_token":"t","result":null}`), complete); err != nil {
		t.Errorf("result null: %v", err)
	}
}

// decodeArgs counted claim_token and error lengths in bytes while the
// published schema's maxLength counts characters, so a schema-valid call was
// refused. The decoder now applies the schema's character bounds; the store
// keeps the byte bounds, which JSON Schema cannot express.
func TestRegressionLengthsAreCharacters(t *testing.T) {
	heartbeat, fail := fieldsOf(t, manifest.ToolHeartbeat), fieldsOf(t, manifest.ToolFail)
	holder := `"task_id":"01ARZ3NDEKTSV4RRFFQ69G5FAV","owner":"w","generation":1`
	for _, tc := range []struct {
		fields []field
		args   string
		ok     bool
	}{
		{heartbeat, `{` + holder + `,"claim_token":"` + strings.Repeat("é", 128) + `"}`, true},
		{heartbeat, `{` + holder + `,"claim_token":"` + strings.Repeat("é", 129) + `"}`, false},
		{heartbeat, `{` + holder + `,"claim_token":"` + strings.Repeat("t", 129) + `"}`, false},
		{fail, `{` + holder + `,"claim_token":"t","error":"` + strings.Repeat("é", 65536) + `"}`, true},
		{fail, `{` + holder + `,"claim_token":"t","error":"` + strings.Repeat("e", 65537) + `"}`, false},
	} {
		if _, err := decodeArgs(json.RawMessage(tc.args), tc.fields); (err == nil) != tc.ok {
			t.Errorf("decodeArgs(%s): %v, want ok=%v", short(tc.args), err, tc.ok)
		}
	}
	// End to end, the store still refuses more than 64 KiB of error text and
	// leaves the claim as it was.
	f := newFixture(t)
	r := f.raw()
	toolOut(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolCreate, "arguments": map[string]any{"workflow_id": "wf", "node_id": "a"}}, nil))
	claim := toolOut(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolClaim, "arguments": map[string]any{"owner": "w"}}, nil))
	before := dbFingerprint(t, f.store.Path())
	args := holderArgs(claim)
	args["error"] = strings.Repeat("é", 40000)
	res := mustResult(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolFail, "arguments": args}, nil))
	if text, _ := json.Marshal(res["content"]); res["isError"] != true || !strings.Contains(string(text), "must be at most 65536 bytes (got 80000)") {
		t.Fatalf("fail with 80000 bytes of error: %v", res)
	}
	if after := dbFingerprint(t, f.store.Path()); after != before {
		t.Fatalf("the refused fail changed the database: %s -> %s", before, after)
	}
}

// serveLines runs one stdio session over lines (each followed by '\n') and
// returns the stdout lines, each decoded to its members.
func serveLines(t *testing.T, srv *Server, lines ...string) []map[string]json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := srv.ServeStdio(ctx, strings.NewReader(strings.Join(lines, "\n")+"\n"), &out); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("the session was still busy after 20s")
	}
	var msgs []map[string]json.RawMessage
	for line := range strings.SplitSeq(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if line == "" {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stdout line is not JSON: %q", line)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// The SDK's encoder leaves the id member out of a response whose id is
// unknown, but JSON-RPC 2.0 requires "id": null on errors about requests
// whose id could not be read.
func TestRegressionStdioErrorsCarryIDNull(t *testing.T) {
	f := newFixture(t)
	msgs := serveLines(t, f.srv, `{not json`, `[]`, `{"jsonrpc":"2.0","id":null,"method":"ping"}`, `{"jsonrpc":"2.0","method":"tools/list","x":`+strings.Repeat(" ", MaxStdioLineBytes)+`1}`)
	if len(msgs) != 4 {
		t.Fatalf("%d answers to 4 bad lines", len(msgs))
	}
	for _, m := range msgs {
		if id, ok := m["id"]; !ok || string(id) != "null" || m["error"] == nil {
			b, _ := json.Marshal(m)
			t.Errorf("answer without id null: %s", b)
		}
	}
}

// At end of input the SDK cancelled the requests still in flight and dropped
// their answers, so requests piped into the server before it closed its
// input were neither answered nor (usually) executed, although end of input
// is documented to finish them.
func TestRegressionEndOfInputFinishesRequestsInFlight(t *testing.T) {
	f := newFixture(t)
	call := func(id, tool, args string) string {
		return `{"jsonrpc":"2.0","id":"` + id + `","method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` + hostileMeta + `}}`
	}
	for round := range 5 {
		wf := fmt.Sprintf("eof%d", round)
		msgs := serveLines(t, f.srv,
			call("c1", manifest.ToolCreate, `{"workflow_id":"`+wf+`","node_id":"a"}`),
			call("c2", manifest.ToolCreate, `{"workflow_id":"`+wf+`","node_id":"b"}`),
			call("k", manifest.ToolClaim, `{"owner":"w","workflow_id":"`+wf+`"}`),
			`{"jsonrpc":"2.0","id":"l","method":"tools/list","params":{`+hostileMeta+`}}`,
		)
		got := map[string]bool{}
		for _, m := range msgs {
			var id string
			json.Unmarshal(m["id"], &id)
			got[id] = m["result"] != nil
		}
		if !got["c1"] || !got["c2"] || !got["k"] || !got["l"] {
			t.Fatalf("round %d: answered %v, want all four requests answered", round, got)
		}
		if tasks, err := f.store.ListTasks(f.ctx, taskgraph.ListFilter{WorkflowID: wf}); err != nil || len(tasks) != 2 {
			t.Fatalf("round %d: %d tasks stored (%v)", round, len(tasks), err)
		}
	}
}

// Numeric ids went through float64 and were truncated to int64: id 1.5 was
// answered as 1, 9007199254740993 as 9007199254740992 and
// 12345678901234567890 as -9223372036854775808, answers a client could pair
// with the wrong request. Such ids are now refused before anything runs.
func TestRegressionNumericIDsAreEchoedExactly(t *testing.T) {
	f := newFixture(t)
	create := func(id, node string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"ids","node_id":"` + node + `"},` + hostileMeta + `}}`
	}
	refused := []string{"1.5", "9007199254740993", "12345678901234567890", "-9007199254740992", "1e400", "1e-400"}
	var lines []string
	for i, id := range refused {
		lines = append(lines, create(id, fmt.Sprintf("r%d", i)))
	}
	echoed := map[string]string{"9007199254740991": "9007199254740991", "-9007199254740991": "-9007199254740991", "1e3": "1000", "-0": "0", `"s"`: `"s"`}
	for id := range echoed {
		lines = append(lines, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/list","params":{`+hostileMeta+`}}`)
	}
	msgs := serveLines(t, f.srv, lines...)
	nullErrors, answered := 0, map[string]bool{}
	for _, m := range msgs {
		switch {
		case string(m["id"]) == "null":
			if !strings.Contains(string(m["error"]), "numeric id must be an integer") {
				t.Errorf("unexpected error: %s", m["error"])
			}
			nullErrors++
		case m["result"] != nil:
			answered[string(m["id"])] = true
		default:
			b, _ := json.Marshal(m)
			t.Errorf("unexpected answer: %s", b)
		}
	}
	if nullErrors != len(refused) {
		t.Errorf("%d refusals for %d bad ids", nullErrors, len(refused))
	}
	for _, want := range echoed {
		if !answered[want] {
			t.Errorf("no answer with id %s (answered %v)", want, answered)
		}
	}
	if tasks, err := f.store.ListTasks(f.ctx, taskgraph.ListFilter{WorkflowID: "ids"}); err != nil || len(tasks) != 0 {
		t.Fatalf("requests with refused ids ran: %d tasks (%v)", len(tasks), err)
	}
}

// Unknown and duplicate argument names were echoed whole into the tool
// error, so a 10 MB name came back as 10 MB of error text; every other echo
// of input is clipped.
func TestRegressionArgumentNamesAreClipped(t *testing.T) {
	name := strings.Repeat("k", 10<<20)
	for _, in := range []string{`{"` + name + `":1}`, `{"owner":"w","` + name + `":1,"` + name + `":2}`} {
		_, err := decodeArgs(json.RawMessage(in), fieldsOf(t, manifest.ToolClaim))
		if err == nil || len(err.Error()) > 1024 {
			t.Errorf("decodeArgs(%s): %d bytes of error", short(in), len(fmt.Sprint(err)))
		}
	}
}
