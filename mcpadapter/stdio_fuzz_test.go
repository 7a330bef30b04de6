package mcpadapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/jsonnum"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// FuzzStdio and its helpers; FuzzDecodeArgs lives with the argument
// validator (package tools). Fuzz it with
//
//	go test ./mcpadapter -run '^$' -fuzz '^FuzzStdio$' -fuzztime 3m -parallel 1

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
	st, drv, err := sqlitestore.OpenDriver(context.Background(), filepath.Join(tb.TempDir(), "tasks.db"),
		taskgraph.Options{Clock: lease.NewManualClock(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))}, tgsqlite.Options{Sync: tgsqlite.SyncNormal})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		// Whatever the inputs did, the history still verifies and the file
		// is intact.
		if rep, err := st.VerifyHistory(context.Background()); err != nil || rep.Broken != nil {
			tb.Errorf("history after fuzzing: %+v %v", rep, err)
		}
		if res, err := drv.Check(context.Background()); err != nil || !res.OK() {
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
	if r, ok := jsonnum.Exact(string(raw)); ok {
		return "n:" + r.RatString()
	}
	if jsonnum.Pattern.Match(raw) {
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
