package mcpadapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// This file holds the native fuzz targets of the MCP boundary. Their seed
// corpora (the f.Add calls and testdata/fuzz/FuzzXxx) run as ordinary tests;
// fuzz one with, for example,
//
//	go test ./mcpadapter -run '^$' -fuzz '^FuzzDecodeArgs$' -fuzztime 3m -parallel 1

// fuzzTool is a tool's argument table with its published input schema,
// resolved by an independent JSON Schema implementation.
type fuzzTool struct {
	name   string
	fields []field
	schema *jsonschema.Resolved
}

// fuzzTools resolves inputSchema(fields) of every tool exactly as tools/list
// publishes it (through its JSON encoding).
func fuzzTools(tb testing.TB) []fuzzTool {
	tb.Helper()
	var out []fuzzTool
	for _, d := range toolDefs() {
		b, err := json.Marshal(inputSchema(d.fields))
		if err != nil {
			tb.Fatal(err)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			tb.Fatalf("%s: the published input schema does not parse as JSON Schema: %v", d.name, err)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			tb.Fatalf("%s: the published input schema does not resolve: %v", d.name, err)
		}
		out = append(out, fuzzTool{name: d.name, fields: d.fields, schema: rs})
	}
	return out
}

var jsonNumberRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// exactValue is the exact value of a JSON number literal. ok is false if lit
// is not a JSON number or its exponent is too large to expand cheaply (such
// a number is far outside every bound unless it is zero).
func exactValue(lit string) (r *big.Rat, ok bool) {
	if !jsonNumberRE.MatchString(lit) {
		return nil, false
	}
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		if strings.Trim(lit[:i], "-0.") == "" {
			return new(big.Rat), true // zero, whatever the exponent
		}
		e, err := strconv.Atoi(lit[i+1:])
		if err != nil || e > len(lit)+400 || e < -len(lit)-400 {
			return nil, false
		}
	}
	return new(big.Rat).SetString(lit)
}

// floatExact reports whether a float64 holds the number literal exactly, so
// that a validator working on float64 values sees the number as written.
func floatExact(lit string) bool {
	r, ok := exactValue(lit)
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return false
	}
	return r.Cmp(new(big.Rat).SetFloat64(f)) == 0
}

// schemaComparable reports whether a JSON Schema validator working on the
// standard decoding of raw sees what decodeArgs sees: raw is one valid JSON
// value, not absent or null (absent arguments are a protocol matter), with no
// key twice in the top-level object (the JSON data model has no duplicate
// keys; decodeArgs refuses them) and no number a float64 would round.
func schemaComparable(raw []byte) bool {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" || !json.Valid(trimmed) {
		return false
	}
	if trimmed[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		if _, err := dec.Token(); err != nil {
			return false
		}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return false
			}
			k, _ := kt.(string)
			if seen[k] {
				return false
			}
			seen[k] = true
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return false
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			return false
		}
		if n, ok := tok.(json.Number); ok && !floatExact(n.String()) {
			return false
		}
	}
}

func schemaAccepts(rs *jsonschema.Resolved, raw []byte) error {
	var inst any
	if err := json.Unmarshal(raw, &inst); err != nil {
		return err
	}
	return rs.Validate(inst)
}

// checkAccepted asserts that arguments decodeArgs accepted satisfy every rule
// of every field, judged independently of decodeArgs.
func checkAccepted(t *testing.T, tool fuzzTool, raw []byte, a *args) {
	t.Helper()
	trimmed := bytes.TrimSpace(raw)
	m := map[string]json.RawMessage{}
	if len(trimmed) != 0 && string(trimmed) != "null" {
		if err := json.Unmarshal(trimmed, &m); err != nil {
			t.Fatalf("%s accepted %s, which is not a JSON object: %v", tool.name, short(raw), err)
		}
	}
	byName := map[string]field{}
	for _, f := range tool.fields {
		byName[f.name] = f
	}
	for k := range m {
		if _, ok := byName[k]; !ok {
			t.Fatalf("%s accepted the unknown argument %q in %s", tool.name, k, short(raw))
		}
	}
	identifierRE := regexp.MustCompile(taskgraph.IdentifierPattern)
	for _, f := range tool.fields {
		v, present := m[f.name]
		if !present {
			if f.required {
				t.Fatalf("%s accepted %s without the required %s", tool.name, short(raw), f.name)
			}
			if _, ok := a.raw[f.name]; ok {
				t.Fatalf("%s: %s is absent from %s but decoded", tool.name, f.name, short(raw))
			}
			continue
		}
		if string(v) == "null" && f.kind != kindAny {
			t.Fatalf("%s accepted %s: null in %s; its schema type does not include null", tool.name, f.name, short(raw))
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("%s accepted %s = %s (from %s): %s", tool.name, f.name, short(v), short(raw), fmt.Sprintf(format, args...))
		}
		var s string
		switch f.kind {
		case kindIdentifier, kindTaskID, kindToken, kindErrorText:
			if err := json.Unmarshal(v, &s); err != nil {
				fail("not a string")
			}
			if a.str[f.name] != s {
				fail("decoded as %q, want %q", a.str[f.name], s)
			}
		}
		runes := utf8.RuneCountInString(s)
		switch f.kind {
		case kindIdentifier:
			if !identifierRE.MatchString(s) || runes < 1 || runes > taskgraph.MaxIdentifierLen {
				fail("not an identifier")
			}
		case kindTaskID:
			if len(s) != 26 || strings.Trim(s, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
				fail("not a task id")
			}
		case kindToken:
			if runes < 1 || runes > taskgraph.MaxTokenLen {
				fail("%d characters", runes)
			}
		case kindErrorText:
			if runes < 1 || runes > taskgraph.MaxErrorBytes {
				fail("%d characters", runes)
			}
		case kindInt:
			n, ok := a.num[f.name]
			exact, isNum := exactValue(string(v))
			switch {
			case !ok:
				fail("no integer decoded")
			case !isNum:
				fail("not a JSON number of manageable size")
			case !exact.IsInt():
				fail("%s is not an integer", exact.RatString())
			case exact.Num().Cmp(big.NewInt(n)) != 0:
				fail("decoded as %d, the number is %s", n, exact.RatString())
			case n < f.min || n > f.max:
				fail("%d is outside %d..%d", n, f.min, f.max)
			}
		case kindBool:
			b, ok := a.bln[f.name]
			if !ok || (string(v) != "true" && string(v) != "false") || b != (string(v) == "true") {
				fail("decoded as %v", b)
			}
		case kindObject:
			var obj map[string]json.RawMessage
			if json.Unmarshal(v, &obj) != nil || obj == nil {
				fail("not a JSON object")
			}
			if !bytes.Equal(a.raw[f.name], v) {
				fail("passed on as %s", a.raw[f.name])
			}
		case kindAny:
			if !bytes.Equal(a.raw[f.name], v) {
				fail("passed on as %s", a.raw[f.name])
			}
		case kindIdentifierList:
			var list []string
			if err := json.Unmarshal(v, &list); err != nil {
				fail("not an array of strings")
			}
			if len(list) > taskgraph.MaxDependsOn {
				fail("%d entries", len(list))
			}
			seen := map[string]bool{}
			for _, e := range list {
				if !identifierRE.MatchString(e) || seen[e] {
					fail("entry %q", e)
				}
				seen[e] = true
			}
			if !slices.Equal(a.lst[f.name], list) {
				fail("decoded as %q", a.lst[f.name])
			}
		}
	}
}

func FuzzDecodeArgs(f *testing.F) {
	tools := fuzzTools(f)
	index := map[string]uint8{}
	for i, tl := range tools {
		index[tl.name] = uint8(i)
	}
	const id = `"01ARZ3NDEKTSV4RRFFQ69G5FAV"`
	holder := `"task_id":` + id + `,"owner":"w1","generation":1,"claim_token":"tok"`
	seeds := map[string][]string{
		"graph_task_create": {
			`{"workflow_id":"wf","node_id":"a"}`,
			`{"workflow_id":"wf","node_id":"a","payload":{"x":[1,2,{"y":null}]},"depends_on":["b","c"],"max_attempts":100}`,
			`{"workflow_id":"wf","node_id":"a","max_attempts":0}`,
			`{"workflow_id":"wf","node_id":"a","max_attempts":101}`,
			`{"workflow_id":"wf","node_id":"a","max_attempts":1.5}`,
			`{"workflow_id":"wf","node_id":"a","max_attempts":1e1}`,
			`{"workflow_id":"wf","node_id":"a","max_attempts":3.0000000000000000001}`,
			`{"workflow_id":"wf","node_id":"a","depends_on":["b","b"]}`,
			`{"workflow_id":"wf","node_id":"a","depends_on":null}`,
			`{"workflow_id":"wf","node_id":"a","payload":null}`,
			`{"workflow_id":"wf","node_id":"a","payload":[1]}`,
			`{"workflow_id":"wf","node_id":"a","payload":{"k":1,"k":2}}`,
			`{"workflow_id":"wf","workflow_id":"wf","node_id":"a"}`,
			`{"workflow_id":"w\u0066","node_id":"a"}`,
			`{"workflow_id":"wf\u200d","node_id":"a"}`,
			`{"workflow_id":"wf\u0000","node_id":"a"}`,
			`{"workflow_id":"аpple","node_id":"a"}`,
			`{"workflow_id":"` + strings.Repeat("a", 128) + `","node_id":"a"}`,
			`{"workflow_id":"` + strings.Repeat("a", 129) + `","node_id":"a"}`,
			`{"workflow_id":"wf","node_id":"a","force":true}`,
			`{"workflow_id":"wf","node_id":"a","` + strings.Repeat("k", 1100) + `":true}`,
			`{"workflow_id":"wf","node_id":"a","depends_on":[1]}`,
			`{"workflow_id":"wf","node_id":"a","depends_on":["b",null]}`,
			"{\"workflow_id\":\"wf\",\"node_id\":\"\xff\"}",
		},
		"graph_task_claim": {
			`{"owner":"w"}`,
			`{"owner":"w","lease_ms":1000,"wait_ms":0,"workflow_id":"wf"}`,
			`{"owner":"w","lease_ms":999}`,
			`{"owner":"w","lease_ms":900001}`,
			`{"owner":"w","lease_ms":-1000}`,
			`{"owner":"w","lease_ms":"30000"}`,
			`{"owner":"w","lease_ms":1e3}`,
			`{"owner":"w","lease_ms":1000.0}`,
			`{"owner":"w","lease_ms":1E+3}`,
			`{"owner":"w","lease_ms":1e400}`,
			`{"owner":"w","wait_ms":0e99999999999}`,
			`{"owner":"w","wait_ms":-0.0e-7}`,
			`{"owner":"w","lease_ms":18446744073709551616}`,
			`{"owner":"w","wait_ms":-0}`,
			`{"owner":"w","wait_ms":-0.0}`,
			`{"owner":"w","wait_ms":1e-400}`,
			`{"owner":"w","wait_ms":0.1e1}`,
			`{"owner":"w","lease_ms":null}`,
			`{"owner":"w","task_id":null}`,
			`{"owner":"w","task_id":"01arz3ndektsv4rrffq69g5fav"}`,
			`{"owner":"w","task_id":"01ARZ3NDEKTSV4RRFFQ69G5FA"}`,
			`{"owner":true}`,
			`{"owner":["w"]}`,
			`{"owner":{"w":1}}`,
			`["owner","w"]`,
			`"owner"`,
			`null`,
			``,
			`{}`,
			`{"owner":"w"} {}`,
			`{"owner":"w",}`,
		},
		"graph_task_heartbeat": {
			`{` + holder + `}`,
			`{` + holder + `,"lease_ms":900000}`,
			`{"task_id":` + id + `,"owner":"w1","generation":9007199254740991,"claim_token":"t"}`,
			`{"task_id":` + id + `,"owner":"w1","generation":9007199254740992,"claim_token":"t"}`,
			`{"task_id":` + id + `,"owner":"w1","generation":9007199254740993,"claim_token":"t"}`,
			`{"task_id":` + id + `,"owner":"w1","generation":0,"claim_token":"t"}`,
			`{"task_id":` + id + `,"owner":"w1","generation":-1,"claim_token":"t"}`,
			`{"task_id":` + id + `,"owner":"w1","generation":1,"claim_token":""}`,
			`{"task_id":` + id + `,"owner":"w1","generation":1,"claim_token":"` + strings.Repeat("t", 128) + `"}`,
			`{"task_id":` + id + `,"owner":"w1","generation":1,"claim_token":"` + strings.Repeat("t", 129) + `"}`,
			`{"task_id":` + id + `,"owner":"w1","generation":1,"claim_token":"` + strings.Repeat("é", 100) + `"}`,
		},
		"graph_task_complete": {
			`{` + holder + `,"result":null}`,
			`{` + holder + `,"result":{"big":9007199254740993}}`,
			`{` + holder + `}`,
		},
		"graph_task_fail": {
			`{` + holder + `,"error":"boom","retryable":true}`,
			`{` + holder + `,"error":"","retryable":false}`,
			`{` + holder + `,"error":"boom","retryable":"true"}`,
			`{` + holder + `,"error":"boom","retryable":1}`,
		},
		"graph_task_cancel": {
			`{` + holder + `}`,
			`{` + holder + `,"generation":2}`,
		},
		"graph_task_inspect": {
			`{"task_id":` + id + `}`,
			`{"task_id":"../../etc/passwd"}`,
			`{"task_id":7}`,
		},
	}
	for tool, list := range seeds {
		for _, s := range list {
			f.Add(index[tool], []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		tool := tools[int(which)%len(tools)]
		a, err := decodeArgs(raw, tool.fields)
		if err != nil {
			var ae *argError
			if !errors.Is(err, errArgsNotObject) && !errors.As(err, &ae) {
				t.Fatalf("%s: %s: an error that is neither a tool error nor -32602: %v", tool.name, short(raw), err)
			}
			if msg := err.Error(); !utf8.ValidString(msg) || len(msg) > 1024 {
				t.Fatalf("%s: %s: the error message is not short, valid UTF-8 (%d bytes)", tool.name, short(raw), len(msg))
			}
		} else {
			checkAccepted(t, tool, raw, a)
		}
		if !schemaComparable(raw) {
			return
		}
		verr := schemaAccepts(tool.schema, bytes.TrimSpace(raw))
		if (err == nil) != (verr == nil) {
			t.Fatalf("%s: decodeArgs and the published inputSchema disagree on %s:\ndecodeArgs: %.300v\ninputSchema: %.300v", tool.name, short(raw), err, verr)
		}
	})
}

// stdioOut is the stdout of a fuzzed stdio session, closed when ServeStdio
// returns. It counts writes that arrive after that: the command closes the
// database at that point, so nothing may still be running.
type stdioOut struct{ testwait.Buffer }

var lateStdioWrites atomic.Int64

func (b *stdioOut) Write(p []byte) (int, error) {
	n, err := b.Buffer.Write(p)
	if errors.Is(err, testwait.ErrClosed) {
		lateStdioWrites.Add(1)
	}
	return n, err
}

// newStdioFuzzServer is a server on a real store in a temporary folder.
func newStdioFuzzServer(tb testing.TB) *Server {
	tb.Helper()
	st, err := taskgraph.Open(context.Background(), filepath.Join(tb.TempDir(), "tasks.db"),
		taskgraph.Options{Clock: lease.NewManualClock(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)), Sync: taskgraph.SyncNormal})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		// Whatever the inputs did, the history still verifies and the file
		// is intact.
		if rep, err := st.VerifyHistory(context.Background()); err != nil || rep.Broken != nil {
			tb.Errorf("history after fuzzing: %+v %v", rep, err)
		}
		if res, err := st.Check(context.Background()); err != nil || !res.OK() {
			tb.Errorf("integrity after fuzzing: %+v %v", res, err)
		}
		st.Close()
	})
	srv, err := New(Config{Store: st, Version: "fuzz", Surface: manifest.NewSurface(manifest.Options{}),
		ExtraLimits: map[string]int64{"maxStdioLineBytes": MaxStdioLineBytes}})
	if err != nil {
		tb.Fatal(err)
	}
	return srv
}

// rpcID is a JSON-RPC id as a comparable key: "s:" and the string, or "n:"
// and the exact number; "" for no usable id.
func rpcID(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return "s:" + s
	}
	if r, ok := exactValue(string(raw)); ok {
		return "n:" + r.RatString()
	}
	if jsonNumberRE.Match(raw) {
		return "n:huge:" + string(raw)
	}
	return ""
}

// stdioLines splits input as the server frames it: lines end at '\n'; a
// line is answerable if it is over the limit or not blank.
func stdioLines(in []byte) (answerable int, ids map[string]int) {
	ids = map[string]int{}
	for len(in) > 0 {
		line := in
		if i := bytes.IndexByte(in, '\n'); i >= 0 {
			line, in = in[:i+1], in[i+1:]
		} else {
			in = nil
		}
		if len(line) > MaxStdioLineBytes+2 {
			answerable++
			continue
		}
		body := bytes.TrimSpace(bytes.TrimRight(line, "\r\n"))
		if len(body) == 0 {
			continue
		}
		answerable++
		var env map[string]json.RawMessage
		if json.Unmarshal(body, &env) == nil {
			if id := rpcID(env["id"]); id != "" {
				ids[id]++
			}
		}
	}
	return answerable, ids
}

// checkStdioOutput asserts that out is a sequence of newline-terminated
// JSON-RPC 2.0 responses to the requests in in: never code 0, never more
// responses than answerable lines, and no id answered that was not sent (or
// answered more often than sent).
func checkStdioOutput(t *testing.T, in, out []byte) {
	t.Helper()
	answerable, ids := stdioLines(in)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		t.Fatalf("stdout does not end with a newline: %s", short(out[max(0, len(out)-200):]))
	}
	responses := 0
	for line := range bytes.SplitSeq(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
		if len(out) == 0 {
			break
		}
		responses++
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("stdout line is not a JSON object: %s (input %s)", short(line), short(in))
		}
		for k := range m {
			if k != "jsonrpc" && k != "id" && k != "result" && k != "error" {
				t.Fatalf("stdout line has the member %q, so it is not a response: %s (input %s)", k, short(line), short(in))
			}
		}
		if string(m["jsonrpc"]) != `"2.0"` {
			t.Fatalf("stdout line without jsonrpc 2.0: %s (input %s)", short(line), short(in))
		}
		_, hasResult := m["result"]
		rawErr, hasError := m["error"]
		if hasResult == hasError {
			t.Fatalf("a response needs exactly one of result and error: %s (input %s)", short(line), short(in))
		}
		if hasError {
			var e struct {
				Code    *json.Number `json:"code"`
				Message *string      `json:"message"`
			}
			if err := json.Unmarshal(rawErr, &e); err != nil || e.Code == nil || e.Message == nil {
				t.Fatalf("malformed error object: %s (input %s)", short(line), short(in))
			}
			code, err := e.Code.Int64()
			if err != nil || code == 0 {
				t.Fatalf("error code %s: %s (input %s)", *e.Code, short(line), short(in))
			}
		}
		rawID, hasID := m["id"]
		if !hasID {
			t.Fatalf("response without an id: %s (input %s)", short(line), short(in))
		}
		id := rpcID(rawID)
		switch {
		case string(bytes.TrimSpace(rawID)) == "null":
			if !hasError {
				t.Fatalf("a result for id null: %s (input %s)", short(line), short(in))
			}
		case id == "":
			t.Fatalf("response id %s is neither a string nor a number: %s", rawID, short(line))
		case ids[id] == 0:
			t.Fatalf("response to id %s, which no request line carried (or more answers than requests with it): %s (input %s)", rawID, short(line), short(in))
		default:
			ids[id]--
		}
	}
	if responses > answerable {
		t.Fatalf("%d responses to %d answerable lines (input %s)", responses, answerable, short(in))
	}
}

// runStdio serves in on srv and returns stdout. Only a claim that waits for
// work (wait_ms) may keep a session busy: a session whose input has one is
// stopped after stop; any other session must end by itself at the end of its
// input, however slow the machine, and one that never does is stuck and
// fails the test at its deadline.
func runStdio(t *testing.T, srv *Server, in []byte, stop time.Duration) []byte {
	t.Helper()
	ctx, cancel := testwait.Bound(t, context.Background())
	defer cancel()
	if bytes.Contains(in, []byte("wait_ms")) {
		var cancelStop context.CancelFunc
		ctx, cancelStop = context.WithTimeout(ctx, stop)
		defer cancelStop()
	}
	buf := &stdioOut{}
	done := make(chan error, 1)
	go func() { done <- srv.ServeStdio(ctx, bytes.NewReader(in), buf) }()
	if err := testwait.Recv(t, "ServeStdio to return (input "+short(in)+")", done); err != nil {
		t.Fatalf("ServeStdio: %v (input %s)", err, short(in))
	}
	return buf.Close()
}

const stdioMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// stdioFuzzSeeds are whole stdin streams: each a few lines.
var stdioFuzzSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + stdioMeta + `}}` + "\n",
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"method":"ping"}` + "\n" +
		`{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}` + "\n",
	`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"wf","node_id":"a"},` + stdioMeta + `}}` + "\r\n" +
		`{"jsonrpc":"2.0","id":"k","method":"tools/call","params":{"name":"graph_task_claim","arguments":{"owner":"w","workflow_id":"wf"},` + stdioMeta + `}}` + "\r\n",
	`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"graph_task_inspect","arguments":"x",` + stdioMeta + `}}` + "\n",
	`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{},` + stdioMeta + `}}` + "\n",
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":7,` + stdioMeta + `}}` + "\n",
	`{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{"taskId":"01ARZ3NDEKTSV4RRFFQ69G5FAV","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}` + "\n",
	`{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"../../etc/passwd",` + stdioMeta + `}}` + "\n",
	`{"jsonrpc":"2.0","id":10,"method":"server/discover","params":{` + stdioMeta + `}}` + "\n",
	`{not json` + "\n" + `[]` + "\n" + `[{"jsonrpc":"2.0","id":1,"method":"ping"}]` + "\n" + `"x"` + "\n" + `null` + "\n" + `7` + "\n",
	`{"jsonrpc":"2.0","id":null,"method":"tools/list"}` + "\n" + `{"jsonrpc":"1.0","id":1,"method":"tools/list"}` + "\n" + `{"id":2}` + "\n" + `{}` + "\n",
	`{"jsonrpc":"2.0","id":1.5,"method":"tools/list","params":{` + stdioMeta + `}}` + "\n",
	`{"jsonrpc":"2.0","id":1e400,"method":"tools/list","params":{` + stdioMeta + `}}` + "\n",
	`{"jsonrpc":"2.0","id":12345678901234567890,"method":"tools/list","params":{` + stdioMeta + `}}` + "\n",
	`{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/list","params":{` + stdioMeta + `}}` + "\n",
	`{"jsonrpc":"2.0","id":-0,"method":"tools/list","params":{` + stdioMeta + `}}` + "\n",
	`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}` + "\n" + `{"jsonrpc":"2.0","id":[1],"method":"tools/list"}` + "\n" + `{"jsonrpc":"2.0","id":true,"method":"tools/list"}` + "\n",
	`{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list","params":{` + stdioMeta + `}}` + "\n",
	`{"jsonrpc":"2.0","id":3,"method":"notifications/initialized"}` + "\n" + `{"jsonrpc":"2.0","id":4,"method":"notifications/cancelled","params":{"requestId":4}}` + "\n",
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[1,2]}` + "\n" + `{"jsonrpc":"2.0","method":"tools/list","params":"x"}` + "\n",
	`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":2,"error":{"code":0,"message":""}}` + "\n",
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":20260728}}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[]}}}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}` + "\n",
	"\x00\x00\n\r\r\n\n \t \n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" + stdioMeta + "}}\r\r\n",
	"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\xfe\",\"method\":\"tools/list\"}\n",
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\r{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}",
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"wf","node_id":"n","payload":` + strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat(`}`, 70) + `},` + stdioMeta + `}}` + "\n",
	`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"x":` + strings.Repeat(`[`, 1100) + strings.Repeat(`]`, 1100) + `,` + stdioMeta + `}}` + "\n",
	`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"x":NaN,` + stdioMeta + `}}` + "\n" + `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"x":Infinity}}` + "\n",
}

func FuzzStdio(f *testing.F) {
	srv := newStdioFuzzServer(f)
	for _, s := range stdioFuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if n := lateStdioWrites.Load(); n != 0 {
			t.Fatalf("%d writes to stdout arrived after ServeStdio returned", n)
		}
		out := runStdio(t, srv, in, 2*time.Second)
		checkStdioOutput(t, in, out)
	})
}
