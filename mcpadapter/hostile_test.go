package mcpadapter

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
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
	ctx := testwait.Context(t)
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

// Echoed input went into error messages byte for byte, so a value holding
// bytes that are not UTF-8 (here "generation":"\x93") made the message
// itself invalid UTF-8. Found by FuzzDecodeArgs.
func TestRegressionEchoedInputIsValidUTF8(t *testing.T) {
	for _, in := range []string{"\x93", "ok\xff\xfe", strings.Repeat("é", 40) + "\xc3", strings.Repeat("\xff", 100)} {
		if got := clip(in); !utf8.ValidString(got) || len(got) > 64+len("…")+3*64 {
			t.Errorf("clip(%q) = %q", in, got)
		}
	}
	_, err := decodeArgs(json.RawMessage("{\"task_id\":\"00000000000000000000000000\",\"owner\":\"0\",\"generation\":\"\x93\"}"), fieldsOf(t, manifest.ToolHeartbeat))
	if err == nil || !utf8.ValidString(err.Error()) {
		t.Errorf("decodeArgs: %q", err)
	}
}

// rpcConn is one client connection that sends raw messages and collects
// every response, so a test sees exactly what came back.
type rpcConn interface {
	// send writes one message; hostile is the raw line (stdio) or message.
	send(t *testing.T, m hostileMsg)
	// next returns the next response, failing after a timeout.
	next(t *testing.T) *jsonrpc.Response
}

// hostileMsg is what a case sends: a typed JSON-RPC message over the
// in-memory transport (method set), or a raw line over stdio (line set).
type hostileMsg struct {
	id     any    // string or float64; nil for a notification
	method string // in-memory transport
	params string // raw JSON params
	line   string // stdio: the whole line, sent as is
}

// memConn speaks over the SDK's in-memory transport to ServeTransport.
type memConn struct {
	ctx  context.Context
	conn mcp.Connection
}

func (c *memConn) send(t *testing.T, m hostileMsg) {
	t.Helper()
	req := &jsonrpc.Request{Method: m.method}
	if m.id != nil {
		id, err := jsonrpc.MakeID(m.id)
		if err != nil {
			t.Fatal(err)
		}
		req.ID = id
	}
	if m.params != "" {
		req.Params = json.RawMessage(m.params)
	}
	if err := c.conn.Write(c.ctx, req); err != nil {
		t.Fatalf("write %s: %v", m.method, err)
	}
}

func (c *memConn) next(t *testing.T) *jsonrpc.Response {
	t.Helper()
	ctx, cancel := testwait.Bound(t, c.ctx)
	defer cancel()
	for {
		msg, err := c.conn.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v (the server stopped serving this connection)", err)
		}
		if resp, ok := msg.(*jsonrpc.Response); ok {
			return resp
		}
		t.Fatalf("the server sent a request to a 2026-07-28 client: %+v", msg)
	}
}

// stdioConn speaks newline-delimited JSON-RPC to ServeStdio over pipes.
type stdioConn struct {
	in    *io.PipeWriter
	lines chan []byte
}

func newStdioConn(t *testing.T, srv *Server) *stdioConn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.ServeStdio(ctx, inR, outW); err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
		outW.Close()
	}()
	c := &stdioConn{in: inW, lines: make(chan []byte, 64)}
	go func() {
		defer close(c.lines)
		br := bufio.NewReader(outR)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				c.lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		testwait.Recv(t, "ServeStdio to return at end of input", done)
		cancel()
	})
	return c
}

func (c *stdioConn) send(t *testing.T, m hostileMsg) {
	t.Helper()
	if _, err := io.WriteString(c.in, m.line+"\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
}

func (c *stdioConn) next(t *testing.T) *jsonrpc.Response {
	t.Helper()
	ctx, cancel := testwait.Bound(t, context.Background())
	defer cancel()
	select {
	case line, ok := <-c.lines:
		if !ok {
			t.Fatal("stdout closed: the server stopped serving")
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil || string(m["jsonrpc"]) != `"2.0"` {
			t.Fatalf("stdout carried a line that is not JSON-RPC 2.0: %s", short(line))
		}
		if _, ok := m["id"]; !ok {
			t.Fatalf("response without an id member: %s", line)
		}
		msg, err := jsonrpc.DecodeMessage(line)
		if string(m["id"]) == "null" {
			// The SDK's decoder refuses id null; read the error by hand.
			var e struct {
				Error *jsonrpc.Error `json:"error"`
			}
			if json.Unmarshal(line, &e) != nil || e.Error == nil {
				t.Fatalf("id null on a line that is not an error: %s", line)
			}
			return &jsonrpc.Response{Error: e.Error}
		}
		if err != nil {
			t.Fatalf("undecodable response %s: %v", line, err)
		}
		resp, ok := msg.(*jsonrpc.Response)
		if !ok {
			t.Fatalf("the server sent a request: %s", line)
		}
		return resp
	case <-ctx.Done():
		t.Fatal("no response before the test's deadline")
	}
	return nil
}

// toolCall is a 2026-07-28 tools/call of tool with raw JSON arguments.
func toolCall(tool, arguments string) hostileMsg {
	return hostileMsg{method: "tools/call", params: `{"name":` + quote(tool) + `,"arguments":` + arguments + `,` + hostileMeta + `}`}
}

// modernReq is a 2026-07-28 request of method with raw JSON members in params.
func modernReq(method, members string) hostileMsg {
	if members != "" {
		members += ","
	}
	return hostileMsg{method: method, params: `{` + members + hostileMeta + `}`}
}

func tasksReq(method, members string) hostileMsg {
	if members != "" {
		members += ","
	}
	return hostileMsg{method: method, params: `{` + members + hostileTasksMeta + `}`}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func nested(open, close string, depth int, inner string) string {
	return strings.Repeat(open, depth) + inner + strings.Repeat(close, depth)
}

type hostileCase struct {
	name  string
	msg   hostileMsg
	setup []hostileMsg // stdio lines whose answers are read and ignored first
	code  int64        // the JSON-RPC error code; 0 for a tool error (isError)
	none  bool         // no answer at all: a notification or a response
	want  string       // a fragment of the error message or tool error text
}

// TestHostileInputs sends each hostile input on a live connection (the
// in-memory transport for tool-level input, stdio for framing) and checks
// that it gets a clear JSON-RPC or tool error, that the same connection then
// serves a valid request, and that the database is unchanged.
func TestHostileInputs(t *testing.T) {
	f := newFixture(t)
	path := f.store.Path()
	mem := &memConn{ctx: f.ctx}
	conn, err := f.serve().Connect(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	mem.conn = conn
	std := newStdioConn(t, f.srv)

	// State for the cases to aim at: task a claimed by w1 (whose live
	// token some cases use, to show that even the rightful holder cannot
	// commit an invalid write), task b pending.
	r := f.raw()
	create := func(node string) string {
		out := toolOut(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolCreate, "arguments": map[string]any{"workflow_id": "hw", "node_id": node}}, nil))
		return out["task"].(map[string]any)["task_id"].(string)
	}
	taskA, pendingB := create("a"), create("b")
	claim := toolOut(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolClaim, "arguments": map[string]any{"owner": "w1", "task_id": taskA}}, nil))
	token := claim["lease"].(map[string]any)["claim_token"].(string)
	holder := func(extra string) string {
		h := fmt.Sprintf(`{"task_id":%q,"owner":"w1","generation":1,"claim_token":%q`, taskA, token)
		if extra != "" {
			h += "," + extra
		}
		return h + "}"
	}
	createArgs := func(extra string) string {
		return `{"workflow_id":"hw","node_id":"new",` + extra + `}`
	}
	long := strings.Repeat("a", 129)
	big := strings.Repeat("x", 10<<20)
	line := func(s string) hostileMsg { return hostileMsg{line: s} }

	cases := []hostileCase{
		// Wrong types, for every kind of argument.
		{name: "identifier as number", msg: toolCall(manifest.ToolCreate, `{"workflow_id":7,"node_id":"n"}`), want: "workflow_id must be a string"},
		{name: "identifier as object", msg: toolCall(manifest.ToolCreate, `{"workflow_id":"hw","node_id":{"n":1}}`), want: "node_id must be a string"},
		{name: "owner as array", msg: toolCall(manifest.ToolClaim, `{"owner":["w1"]}`), want: "owner must be a string"},
		{name: "task id as number", msg: toolCall(manifest.ToolInspect, `{"task_id":12345678901234567890123456}`), want: "task_id must be a string"},
		{name: "claim token as number", msg: toolCall(manifest.ToolHeartbeat, fmt.Sprintf(`{"task_id":%q,"owner":"w1","generation":1,"claim_token":1}`, taskA)), want: "claim_token must be a string"},
		{name: "error text as object", msg: toolCall(manifest.ToolFail, holder(`"error":{"e":1}`)), want: "error must be a string"},
		{name: "payload as string", msg: toolCall(manifest.ToolCreate, createArgs(`"payload":"{}"`)), want: "payload must be a JSON object"},
		{name: "payload as array", msg: toolCall(manifest.ToolCreate, createArgs(`"payload":[{}]`)), want: "payload must be a JSON object"},
		{name: "depends_on as string", msg: toolCall(manifest.ToolCreate, createArgs(`"depends_on":"a"`)), want: "depends_on must be an array of node ids"},
		{name: "depends_on with a number", msg: toolCall(manifest.ToolCreate, createArgs(`"depends_on":["a",1]`)), want: "depends_on must be an array of node ids"},
		{name: "max_attempts as string", msg: toolCall(manifest.ToolCreate, createArgs(`"max_attempts":"3"`)), want: "max_attempts must be an integer between 1 and 100"},
		{name: "retryable as string", msg: toolCall(manifest.ToolFail, holder(`"error":"e","retryable":"true"`)), want: "retryable must be true or false"},
		{name: "generation as string", msg: toolCall(manifest.ToolHeartbeat, fmt.Sprintf(`{"task_id":%q,"owner":"w1","generation":"1","claim_token":%q}`, taskA, token)), want: "generation must be an integer"},
		{name: "lease_ms as boolean", msg: toolCall(manifest.ToolClaim, `{"owner":"w1","lease_ms":true}`), want: "lease_ms must be an integer"},
		{name: "explicit null for an optional argument", msg: toolCall(manifest.ToolClaim, `{"owner":"w1","task_id":null}`), want: "task_id must not be null"},
		{name: "explicit null for a required argument", msg: toolCall(manifest.ToolCreate, `{"workflow_id":null,"node_id":"n"}`), want: "workflow_id is required (got null)"},
		// Numbers.
		{name: "generation 1e400", msg: toolCall(manifest.ToolComplete, fmt.Sprintf(`{"task_id":%q,"owner":"w1","generation":1e400,"claim_token":%q,"result":1}`, taskA, token)), want: "generation must be an integer between 1 and 9007199254740991 (got 1e400)"},
		{name: "generation 2^64", msg: toolCall(manifest.ToolComplete, fmt.Sprintf(`{"task_id":%q,"owner":"w1","generation":18446744073709551616,"claim_token":%q,"result":1}`, taskA, token)), want: "(got 18446744073709551616)"},
		{name: "generation -0", msg: toolCall(manifest.ToolComplete, fmt.Sprintf(`{"task_id":%q,"owner":"w1","generation":-0,"claim_token":%q,"result":1}`, taskA, token)), want: "(got -0)"},
		{name: "generation 9007199254740993", msg: toolCall(manifest.ToolComplete, fmt.Sprintf(`{"task_id":%q,"owner":"w1","generation":9007199254740993,"claim_token":%q,"result":1}`, taskA, token)), want: "(got 9007199254740993)"},
		{name: "generation a hair above 1", msg: toolCall(manifest.ToolComplete, fmt.Sprintf(`{"task_id":%q,"owner":"w1","generation":1.00000000000000000001,"claim_token":%q,"result":1}`, taskA, token)), want: "generation must be an integer"},
		{name: "negative lease", msg: toolCall(manifest.ToolClaim, `{"owner":"w1","lease_ms":-30000}`), want: "lease_ms must be an integer between 1000 and 900000 (got -30000)"},
		{name: "lease_ms 999", msg: toolCall(manifest.ToolClaim, `{"owner":"w1","lease_ms":999}`), want: "(got 999)"},
		{name: "lease_ms 900001", msg: toolCall(manifest.ToolHeartbeat, holder(`"lease_ms":900001`)), want: "(got 900001)"},
		{name: "wait_ms 1e-400", msg: toolCall(manifest.ToolClaim, `{"owner":"w1","wait_ms":1e-400}`), want: "wait_ms must be an integer"},
		{name: "max_attempts 0", msg: toolCall(manifest.ToolCreate, createArgs(`"max_attempts":0`)), want: "(got 0)"},
		{name: "max_attempts 101", msg: toolCall(manifest.ToolCreate, createArgs(`"max_attempts":101`)), want: "(got 101)"},
		{name: "max_attempts 1.5", msg: toolCall(manifest.ToolCreate, createArgs(`"max_attempts":1.5`)), want: "(got 1.5)"},
		// Identifiers.
		{name: "homoglyph owner", msg: toolCall(manifest.ToolClaim, `{"owner":"w\u04351"}`), want: "owner must match"},
		{name: "RTL mark in owner", msg: toolCall(manifest.ToolClaim, `{"owner":"w\u200f1"}`), want: "owner must match"},
		{name: "zero-width joiner in node_id", msg: toolCall(manifest.ToolCreate, `{"workflow_id":"hw","node_id":"a\u200db"}`), want: "node_id must match"},
		{name: "NUL in workflow_id", msg: toolCall(manifest.ToolCreate, `{"workflow_id":"hw\u0000","node_id":"n"}`), want: "workflow_id must match"},
		{name: "identifier of 129 characters", msg: toolCall(manifest.ToolCreate, `{"workflow_id":"hw","node_id":"`+long+`"}`), want: "node_id must match"},
		{name: "10 MB identifier", msg: toolCall(manifest.ToolCreate, `{"workflow_id":"`+big+`","node_id":"n"}`), want: "workflow_id must match"},
		{name: "task_id malformed", msg: toolCall(manifest.ToolInspect, `{"task_id":"../../etc/passwd"}`), want: "task_id must be a task id"},
		{name: "task_id lowercase", msg: toolCall(manifest.ToolInspect, `{"task_id":`+quote(strings.ToLower(taskA))+`}`), want: "task_id must be a task id"},
		{name: "task_id of 27 characters", msg: toolCall(manifest.ToolInspect, `{"task_id":`+quote(taskA+"0")+`}`), want: "task_id must be a task id"},
		{name: "claim_token of 129 characters", msg: toolCall(manifest.ToolComplete, fmt.Sprintf(`{"task_id":%q,"owner":"w1","generation":1,"claim_token":%q,"result":1}`, taskA, long)), want: "claim_token must be the claim_token returned by graph_task_claim (1 to 128 characters)"},
		// Size and shape.
		{name: "payload nested 65 deep", msg: toolCall(manifest.ToolCreate, createArgs(`"payload":`+nested(`{"a":`, `}`, 65, "1"))), want: "nests deeper than 64 levels"},
		{name: "payload nested 900 deep", msg: toolCall(manifest.ToolCreate, createArgs(`"payload":{"a":`+nested(`[`, `]`, 900, "")+`}`)), want: "nests deeper than 64 levels"},
		{name: "arguments nested 900 deep", msg: toolCall(manifest.ToolCreate, createArgs(`"x":`+nested(`[`, `]`, 900, ""))), want: `unknown argument "x"`},
		{name: "10 MB payload", msg: toolCall(manifest.ToolCreate, createArgs(`"payload":{"s":"`+big+`"}`)), want: "invalid payload: must be at most 65536 bytes"},
		{name: "duplicate key in arguments", msg: toolCall(manifest.ToolCreate, `{"workflow_id":"hw","node_id":"n1","node_id":"n2"}`), want: `the key "node_id" appears twice`},
		{name: "duplicate key in payload", msg: toolCall(manifest.ToolCreate, createArgs(`"payload":{"k":1,"k":1}`)), want: `has the key "k" twice`},
		{name: "result of 300 KiB with the live claim", msg: toolCall(manifest.ToolComplete, holder(`"result":"`+strings.Repeat("r", 300<<10)+`"`)), want: "invalid result: must be at most 262144 bytes"},
		{name: "error text of 70 KiB with the live claim", msg: toolCall(manifest.ToolFail, holder(`"error":"`+strings.Repeat("e", 70<<10)+`"`)), want: "error must be at most 65536 characters"},
		{name: "error text of 40000 two-byte characters", msg: toolCall(manifest.ToolFail, holder(`"error":"`+strings.Repeat("é", 40000)+`"`)), want: "invalid error: must be at most 65536 bytes (got 80000)"},
		{name: "depends_on with 65 entries", msg: toolCall(manifest.ToolCreate, createArgs(`"depends_on":[`+func() string {
			var s []string
			for i := range 65 {
				s = append(s, fmt.Sprintf(`"d%d"`, i))
			}
			return strings.Join(s, ",")
		}()+`]`)), want: "depends_on must list at most 64 nodes (got 65)"},
		{name: "depends_on with a duplicate", msg: toolCall(manifest.ToolCreate, createArgs(`"depends_on":["a","a"]`)), want: `depends_on lists "a" twice`},
		{name: "depends_on itself", msg: toolCall(manifest.ToolCreate, createArgs(`"depends_on":["new"]`)), want: "cannot depend on itself"},
		{name: "unknown argument", msg: toolCall(manifest.ToolCreate, createArgs(`"force":true`)), want: `unknown argument "force"`},
		{name: "argument name of 10 MB", msg: toolCall(manifest.ToolCreate, createArgs(`"`+big+`":1`)), want: `unknown argument "xxxxxxxx`},
		// Forged and stale claims.
		{name: "complete with a forged token", msg: toolCall(manifest.ToolComplete, fmt.Sprintf(`{"task_id":%q,"owner":"w1","generation":1,"claim_token":"forged","result":1}`, taskA)), want: "wrong claim token"},
		{name: "complete as another owner", msg: toolCall(manifest.ToolComplete, fmt.Sprintf(`{"task_id":%q,"owner":"w2","generation":1,"claim_token":%q,"result":1}`, taskA, token)), want: "wrong owner"},
		{name: "complete at a generation never granted", msg: toolCall(manifest.ToolComplete, fmt.Sprintf(`{"task_id":%q,"owner":"w1","generation":2,"claim_token":%q,"result":1}`, taskA, token)), want: "unknown generation"},
		{name: "cancel a task nobody holds", msg: toolCall(manifest.ToolCancel, fmt.Sprintf(`{"task_id":%q,"owner":"w1","generation":1,"claim_token":%q}`, pendingB, token)), want: "unknown generation"},
		// tools/call itself.
		{name: "arguments as string", msg: toolCall(manifest.ToolInspect, `"{}"`), code: jsonrpc.CodeInvalidParams, want: "arguments must be a JSON object"},
		{name: "arguments as array", msg: toolCall(manifest.ToolInspect, `[]`), code: jsonrpc.CodeInvalidParams, want: "arguments must be a JSON object"},
		{name: "arguments null", msg: toolCall(manifest.ToolInspect, `null`), want: "task_id or workflow_id is required"},
		{name: "tools/call without name", msg: modernReq("tools/call", `"arguments":{}`), code: jsonrpc.CodeInvalidParams, want: "unknown tool"},
		{name: "tool name as number", msg: modernReq("tools/call", `"name":7,"arguments":{}`), code: jsonrpc.CodeInvalidParams, want: "invalid"},
		{name: "unknown tool", msg: toolCall("graph_task_force", `{}`), code: jsonrpc.CodeInvalidParams, want: "unknown tool"},
		// Methods and _meta.
		{name: "unknown method", msg: modernReq("graph/escalate", ""), code: jsonrpc.CodeMethodNotFound, want: "method not found"},
		{name: "unserved SDK method", msg: modernReq("prompts/list", ""), code: jsonrpc.CodeMethodNotFound, want: "method not found"},
		{name: "no _meta at all", msg: hostileMsg{method: "tools/list", params: `{}`}, code: jsonrpc.CodeInvalidParams, want: "missing _meta"},
		{name: "no protocolVersion", msg: hostileMsg{method: "tools/list", params: `{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}`}, code: jsonrpc.CodeInvalidParams, want: "missing _meta"},
		{name: "no clientCapabilities", msg: hostileMsg{method: "tools/list", params: `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`}, code: jsonrpc.CodeInvalidParams, want: "clientCapabilities"},
		{name: "clientCapabilities as array", msg: hostileMsg{method: "tools/list", params: `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[]}}`}, code: jsonrpc.CodeInvalidParams, want: "clientCapabilities"},
		{name: "protocolVersion as number", msg: hostileMsg{method: "tools/list", params: `{"_meta":{"io.modelcontextprotocol/protocolVersion":20260728,"io.modelcontextprotocol/clientCapabilities":{}}}`}, code: jsonrpc.CodeInvalidParams, want: "must be a string"},
		{name: "protocolVersion from the past", msg: hostileMsg{method: "tools/list", params: `{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01","io.modelcontextprotocol/clientCapabilities":{}}}`}, code: -32022, want: "unsupported protocol version"},
		{name: "notifications/initialized with an id", msg: modernReq("notifications/initialized", ""), code: jsonrpc.CodeMethodNotFound, want: "method not found"},
		{name: "tools/call sent as a notification", msg: func() hostileMsg {
			m := toolCall(manifest.ToolCreate, createArgs(`"payload":{}`))
			m.id = nil
			return m
		}(), none: true},
		{name: "params as array", msg: hostileMsg{method: "tools/list", params: `[1,2]`}, code: jsonrpc.CodeInvalidParams, want: "missing _meta"},
		// Tasks extension.
		{name: "tasks/get without taskId", msg: tasksReq(MethodTasksGet, ""), code: jsonrpc.CodeInvalidParams, want: "params.taskId is required"},
		{name: "tasks/get with a numeric taskId", msg: tasksReq(MethodTasksGet, `"taskId":7`), code: jsonrpc.CodeInvalidParams, want: "invalid params"},
		{name: "tasks/get of an unknown task", msg: tasksReq(MethodTasksGet, `"taskId":"01ARZ3NDEKTSV4RRFFQ69G5FAV"`), code: jsonrpc.CodeInvalidParams, want: `unknown task "01ARZ3NDEKTSV4RRFFQ69G5FAV"`},
		{name: "tasks/get without declaring the extension", msg: modernReq(MethodTasksGet, `"taskId":`+quote(taskA)), code: mcp.CodeMissingRequiredClientCapabilities, want: "requires"},
		{name: "tasks/update with 65 keys", msg: tasksReq(MethodTasksUpdate, `"taskId":`+quote(taskA)+`,"inputResponses":{`+func() string {
			var s []string
			for i := range 65 {
				s = append(s, fmt.Sprintf(`"k%d":1`, i))
			}
			return strings.Join(s, ",")
		}()+`}`), code: jsonrpc.CodeInvalidParams, want: "at most 64 keys (got 65)"},
		{name: "tasks/update over 64 KiB", msg: tasksReq(MethodTasksUpdate, `"taskId":`+quote(taskA)+`,"inputResponses":{"k":"`+strings.Repeat("u", 70<<10)+`"}`), code: jsonrpc.CodeInvalidParams, want: "at most 65536 bytes"},
		{name: "tasks/cancel of an unknown task", msg: tasksReq(MethodTasksCancel, `"taskId":"01ARZ3NDEKTSV4RRFFQ69G5FAW"`), code: jsonrpc.CodeInvalidParams, want: "unknown task"},
		// Resources.
		{name: "resources/read of a relative path", msg: modernReq("resources/read", `"uri":"../../etc/passwd"`), code: jsonrpc.CodeInvalidParams, want: "not found"},
		{name: "resources/read of a file URI", msg: modernReq("resources/read", `"uri":"file:///etc/passwd"`), code: jsonrpc.CodeInvalidParams, want: "not found"},
		{name: "resources/read of an empty URI", msg: modernReq("resources/read", `"uri":""`), code: jsonrpc.CodeInvalidParams, want: "not found"},

		// Framing, over stdio.
		{name: "stdio: not JSON", msg: line(`{"jsonrpc":"2.0","id":1,"method":`), code: jsonrpc.CodeParseError, want: "not valid JSON"},
		{name: "stdio: NaN literal", msg: line(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"graph_task_claim","arguments":{"owner":"w1","lease_ms":NaN},` + hostileMeta + `}}`), code: jsonrpc.CodeParseError, want: "not valid JSON"},
		{name: "stdio: Infinity literal", msg: line(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"graph_task_claim","arguments":{"owner":"w1","lease_ms":Infinity},` + hostileMeta + `}}`), code: jsonrpc.CodeParseError, want: "not valid JSON"},
		{name: "stdio: NUL bytes", msg: line("\x00{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}"), code: jsonrpc.CodeParseError, want: "not valid JSON"},
		{name: "stdio: two messages on a CR-separated line", msg: line(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\r" + `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`), code: jsonrpc.CodeParseError, want: "not valid JSON"},
		{name: "stdio: batch", msg: line(`[{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + hostileMeta + `}}]`), code: jsonrpc.CodeInvalidRequest, want: "batches are not supported"},
		{name: "stdio: empty batch", msg: line(`[]`), code: jsonrpc.CodeInvalidRequest, want: "batches are not supported"},
		{name: "stdio: id null", msg: line(`{"jsonrpc":"2.0","id":null,"method":"tools/list","params":{` + hostileMeta + `}}`), code: jsonrpc.CodeInvalidRequest, want: "not null"},
		{name: "stdio: fractional id", msg: line(`{"jsonrpc":"2.0","id":1.5,"method":"tools/list","params":{` + hostileMeta + `}}`), code: jsonrpc.CodeInvalidRequest, want: "numeric id must be an integer"},
		{name: "stdio: id beyond 2^53", msg: line(`{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/list","params":{` + hostileMeta + `}}`), code: jsonrpc.CodeInvalidRequest, want: "numeric id must be an integer"},
		{name: "stdio: id beyond 2^64", msg: line(`{"jsonrpc":"2.0","id":18446744073709551616,"method":"tools/list","params":{` + hostileMeta + `}}`), code: jsonrpc.CodeInvalidRequest, want: "numeric id must be an integer"},
		{name: "stdio: id 1e400", msg: line(`{"jsonrpc":"2.0","id":1e400,"method":"tools/list","params":{` + hostileMeta + `}}`), code: jsonrpc.CodeInvalidRequest, want: "numeric id must be an integer"},
		{name: "stdio: id as object", msg: line(`{"jsonrpc":"2.0","id":{"n":1},"method":"tools/list","params":{` + hostileMeta + `}}`), code: jsonrpc.CodeInvalidRequest, want: "id must be a string or a number"},
		{name: "stdio: jsonrpc 1.0", msg: line(`{"jsonrpc":"1.0","id":1,"method":"tools/list","params":{` + hostileMeta + `}}`), code: jsonrpc.CodeInvalidRequest, want: `"jsonrpc" must be "2.0"`},
		{name: "stdio: no jsonrpc member", msg: line(`{"id":1,"method":"tools/list","params":{` + hostileMeta + `}}`), code: jsonrpc.CodeInvalidRequest, want: `"jsonrpc" must be "2.0"`},
		{name: "stdio: method as number", msg: line(`{"jsonrpc":"2.0","id":1,"method":7}`), code: jsonrpc.CodeInvalidRequest, want: "method must be a non-empty string"},
		{name: "stdio: params as array", msg: line(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[1]}`), code: jsonrpc.CodeInvalidParams, want: "params must be a JSON object"},
		{name: "stdio: params as string", msg: line(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}`), code: jsonrpc.CodeInvalidParams, want: "params must be a JSON object"},
		{name: "stdio: 10 MB line", msg: line(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"hw","node_id":"n","payload":{"s":"` + big + `"}},` + hostileMeta + `}}`), code: jsonrpc.CodeInvalidRequest, want: "message too large"},
		{name: "stdio: payload nested 10,000 deep", msg: line(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"hw","node_id":"n","payload":` + nested(`{"a":`, `}`, 10000, "1") + `},` + hostileMeta + `}}`), code: jsonrpc.CodeParseError, want: "not valid JSON"},
		{name: "stdio: arguments nested 10,000 deep", msg: line(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"graph_task_create","arguments":` + nested(`[`, `]`, 10000, "") + `,` + hostileMeta + `}}`), code: jsonrpc.CodeParseError, want: "not valid JSON"},
		{name: "stdio: params nested 2,000 deep", msg: line(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"graph_task_create","arguments":` + nested(`[`, `]`, 2000, "") + `,` + hostileMeta + `}}`), code: jsonrpc.CodeInvalidRequest, want: "unmarshaling jsonrpc message"},
		{name: "stdio: duplicate method member", msg: line(`{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"prompts/list","params":{` + hostileMeta + `}}`), code: jsonrpc.CodeMethodNotFound, want: "method not found"},
		{name: "stdio: notifications/initialized with an id", msg: line(`{"jsonrpc":"2.0","id":1,"method":"notifications/initialized"}`), code: jsonrpc.CodeInvalidParams, want: "missing _meta"},
		{name: "stdio: an unsolicited response", msg: line(`{"jsonrpc":"2.0","id":"r1","result":{}}`), none: true},
		{name: "stdio: an unsolicited error with code 0", msg: line(`{"jsonrpc":"2.0","id":"r2","error":{"code":0,"message":""}}`), none: true},
		{name: "stdio: cancelling an unknown request", msg: line(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"nope"}}`), none: true},
		{name: "stdio: second initialize", setup: []hostileMsg{
			line(`{"jsonrpc":"2.0","id":"i1","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}`),
			line(`{"jsonrpc":"2.0","method":"notifications/initialized"}`),
		}, msg: line(`{"jsonrpc":"2.0","id":"i2","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}`), code: jsonrpc.CodeInvalidRequest, want: "initialize was already received"},
	}
	if len(cases) < 40 {
		t.Fatalf("only %d hostile inputs", len(cases))
	}

	// The valid request each case is followed by, on the same connection.
	followUp := map[bool]hostileMsg{
		false: {id: "ok", method: "tools/call", params: `{"name":"graph_task_inspect","arguments":{"task_id":` + quote(taskA) + `},` + hostileMeta + `}`},
		true:  {line: `{"jsonrpc":"2.0","id":"ok","method":"tools/call","params":{"name":"graph_task_inspect","arguments":{"task_id":` + quote(taskA) + `},` + hostileMeta + `}}`},
	}
	before := dbFingerprint(t, path)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			isStdio := tc.msg.line != ""
			var c rpcConn = mem
			if isStdio {
				c = std
			}
			for _, m := range tc.setup {
				c.send(t, m)
				if m.line != "" && strings.Contains(m.line, `"id"`) {
					c.next(t)
				}
			}
			msg := tc.msg
			if !isStdio && msg.id == nil && !tc.none {
				msg.id = fmt.Sprintf("h%d", i)
			}
			c.send(t, msg)
			c.send(t, followUp[isStdio])
			// Answers may come in any order: wait for the follow-up and for
			// the one answer the hostile input should get.
			want := 1
			if tc.none {
				want = 0
			}
			var answers []*jsonrpc.Response
			for gotOK := false; !gotOK || len(answers) < want; {
				resp := c.next(t)
				if resp.ID.IsValid() && resp.ID.Raw() == "ok" {
					res := mustResult(t, resp)
					if res["isError"] == true {
						t.Fatalf("the follow-up request failed: %v", res["content"])
					}
					gotOK = true
					continue
				}
				if len(answers) == want {
					t.Fatalf("an answer beyond the %d expected: %+v %s", want, resp.Error, short(resp.Result))
				}
				answers = append(answers, resp)
			}
			if want == 1 {
				if !isStdio && answers[0].ID.Raw() != msg.id {
					t.Fatalf("answered with id %v, the request had %v", answers[0].ID.Raw(), msg.id)
				}
				checkHostileAnswer(t, answers[0], tc)
			}
			if after := dbFingerprint(t, path); after != before {
				t.Fatalf("the database changed: %s -> %s", before, after)
			}
		})
	}
	// A last round trip on each connection: nothing answered late, and the
	// database is still as it was.
	for isStdio, c := range map[bool]rpcConn{false: mem, true: std} {
		c.send(t, followUp[isStdio])
		if resp := c.next(t); !resp.ID.IsValid() || resp.ID.Raw() != "ok" {
			t.Fatalf("a late answer: %+v %s", resp.Error, short(resp.Result))
		}
	}
	if after := dbFingerprint(t, path); after != before {
		t.Fatalf("the database changed: %s -> %s", before, after)
	}
}

func checkHostileAnswer(t *testing.T, resp *jsonrpc.Response, tc hostileCase) {
	t.Helper()
	if tc.code != 0 {
		je, ok := resp.Error.(*jsonrpc.Error)
		if !ok || je == nil {
			t.Fatalf("got result %s, want JSON-RPC error %d", short(resp.Result), tc.code)
		}
		if je.Code != tc.code || !strings.Contains(je.Message, tc.want) {
			t.Fatalf("got error %d %q, want %d mentioning %q", je.Code, clip(je.Message), tc.code, tc.want)
		}
		return
	}
	if resp.Error != nil {
		t.Fatalf("got JSON-RPC error %v, want a tool error mentioning %q", resp.Error, tc.want)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		t.Fatalf("result is not a tool result: %s", short(resp.Result))
	}
	if !res.IsError || !strings.Contains(toolText(&res), tc.want) {
		t.Fatalf("got isError=%v %q, want a tool error mentioning %q", res.IsError, clip(toolText(&res)), tc.want)
	}
	if res.StructuredContent != nil {
		t.Errorf("a tool error carries structured content (a receipt?): %v", res.StructuredContent)
	}
	if len(toolText(&res)) > 2048 {
		t.Errorf("the tool error echoes %d bytes of input", len(toolText(&res)))
	}
}
