package httpfront

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

var httpTasksCaps = &mcp.ClientCapabilities{Extensions: map[string]any{manifest.TasksExtension: map[string]any{}}}

func createArgs(node string) map[string]any {
	return map[string]any{"workflow_id": "wf", "node_id": node}
}

func TestHTTPModernClientIsServedStatelessly(t *testing.T) {
	f := newHTTPFixture(t, Options{})
	cs := f.client("", "", httpTasksCaps)
	if v := cs.InitializeResult().ProtocolVersion; v != modern {
		t.Fatalf("negotiated %q, want %s", v, modern)
	}
	if cs.ID() != "" {
		t.Fatalf("a 2026-07-28 client got session id %q; the revision has no sessions", cs.ID())
	}
	if _, ok := cs.InitializeResult().Capabilities.Extensions[manifest.TasksExtension]; !ok {
		t.Fatalf("server/discover does not advertise the tasks extension: %+v", cs.InitializeResult().Capabilities)
	}
	list, err := cs.ListTools(f.ctx, nil)
	if err != nil || len(list.Tools) != 7 {
		t.Fatalf("tools/list: %v, %d tools", err, len(list.Tools))
	}
	// With the extension declared, graph_task_create answers with a task
	// handle; tasks/get (with the Mcp-Name the round tripper adds) reads it.
	res, err := cs.CallTool(f.ctx, &mcp.CallToolParams{Name: manifest.ToolCreate, Arguments: createArgs("a")})
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if res.IsError {
		t.Fatalf("tools/call failed: %+v", res.Content)
	}
	tasks, err := f.store.ListTasks(f.ctx, taskgraph.ListFilter{})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("store holds %d tasks (%v), want 1", len(tasks), err)
	}
	got, err := mcp.CallCustomMethod[*tools.TaskIDParams, *tools.TaskResult](f.ctx, cs, tools.MethodTasksGet, &tools.TaskIDParams{TaskID: tasks[0].TaskID})
	if err != nil {
		t.Fatalf("tasks/get: %v", err)
	}
	if got.TaskID != tasks[0].TaskID || got.Status != "working" || got.ResultType != "complete" {
		t.Fatalf("tasks/get = %+v", got)
	}
}

func TestHTTPLegacyClientGetsASessionThatDeleteEnds(t *testing.T) {
	f := newHTTPFixture(t, Options{})
	cs := f.client("2025-11-25", "", nil)
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("negotiated %q, want 2025-11-25", v)
	}
	sid := cs.ID()
	if sid == "" {
		t.Fatal("a legacy client got no Mcp-Session-Id")
	}
	if _, ok := cs.InitializeResult().Capabilities.Extensions[manifest.TasksExtension]; ok {
		t.Fatal("the legacy initialize result advertises the tasks extension, which exists only in 2026-07-28")
	}
	res, err := cs.CallTool(f.ctx, &mcp.CallToolParams{Name: manifest.ToolCreate, Arguments: createArgs("a")})
	if err != nil || res.IsError {
		t.Fatalf("tools/call in the session: %v %+v", err, res)
	}
	if n := f.h.legacySessions(); n != 1 {
		t.Fatalf("%d live sessions, want 1", n)
	}
	legacy := map[string]string{wire.HeaderSessionID: sid, wire.HeaderProtocolVersion: "2025-11-25"}
	r := f.do(http.MethodDelete, f.url, nil, legacy)
	if r.status != http.StatusNoContent {
		t.Fatalf("DELETE: HTTP %d %s, want 204", r.status, r.body)
	}
	r = f.post(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, legacy)
	if r.status != http.StatusNotFound {
		t.Fatalf("POST on the ended session: HTTP %d %s, want 404", r.status, r.body)
	}
	if r = f.do(http.MethodDelete, f.url, nil, legacy); r.status != http.StatusNotFound {
		t.Fatalf("second DELETE: HTTP %d, want 404", r.status)
	}
	if n := f.h.legacySessions(); n != 0 {
		t.Fatalf("%d live sessions after DELETE, want 0", n)
	}
}

func TestHTTPLegacySessionsExpireAndAreBounded(t *testing.T) {
	f := newHTTPFixture(t, Options{MaxSessions: 2, SessionIdleTimeout: time.Hour})
	// Both sessions wait for work, so neither may be closed to make room.
	claims := make(chan error, 2)
	for i, v := range []string{"2025-11-25", "2025-06-18"} {
		cs := f.client(v, "", nil)
		go func() {
			_, err := fleetCall(f.ctx, cs, manifest.ToolClaim, map[string]any{"owner": fmt.Sprintf("w%d", i), "workflow_id": "busy", "wait_ms": 30000})
			claims <- err
		}()
	}
	testwait.For(t, "both sessions to wait for work", func() bool { return f.h.longPolls.Load() == 2 })
	if _, err := f.connect("2025-11-25", "", nil); err == nil {
		t.Fatal("a third session was opened beyond MaxSessions 2 while both were in use")
	}
	r := f.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, nil)
	r.wantError(t, http.StatusServiceUnavailable, jsonrpc.CodeInternalError)
	if !strings.Contains(r.rpc.Error.Message, "too many sessions") || r.header.Get("Retry-After") == "" {
		t.Fatalf("refusal %s (Retry-After %q) does not say why or when to retry", r.body, r.header.Get("Retry-After"))
	}
	// A 2026-07-28 client needs no session and is still served.
	f.client("", "", nil)
	for i := range 2 {
		if _, err := f.store.CreateTask(f.ctx, "busy", taskgraph.NodeSpec{NodeID: fmt.Sprintf("n%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := <-claims; err != nil {
			t.Fatalf("a claim of a session at the cap: %v", err)
		}
	}

	// Idle expiry: the SDK closes a session idle for SessionIdleTimeout.
	// One initialize opens it (a client's connect takes two requests, and
	// on a loaded machine 50 ms may pass between them).
	g := newHTTPFixture(t, Options{SessionIdleTimeout: 50 * time.Millisecond})
	opened := g.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, nil)
	if opened.header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize opened no session: %s", opened.body)
	}
	testwait.For(t, "the idle session to expire", func() bool { return g.h.legacySessions() == 0 })
}

func TestHTTPRequiresTheBearerTokenAndNeverLeaksIt(t *testing.T) {
	const token = "s3cr3t-t0ken-for-tests-0123456789"
	f := newHTTPFixture(t, Options{AuthToken: token})
	body := modernBody(1, "tools/list", nil, nil)
	// The message says which it was: clients such as the MCP Inspector react
	// to any 401 by starting OAuth, and the message is all a user sees.
	for name, c := range map[string]struct{ auth, says string }{
		"missing":      {"", "no bearer token was sent"},
		"wrong":        {"Bearer not-the-token-0123456789", "the bearer token is wrong"},
		"basic scheme": {"Basic " + token, "the Authorization header is malformed"},
		"empty bearer": {"Bearer ", "the Authorization header is malformed"},
		"token prefix": {"Bearer " + token[:len(token)-1], "the bearer token is wrong"},
		"token suffix": {"Bearer " + token + "x", "the bearer token is wrong"},
	} {
		t.Run(name, func(t *testing.T) {
			r := f.post(body, modernHeaders("tools/list", "Authorization", c.auth))
			r.wantError(t, http.StatusUnauthorized, jsonrpc.CodeInvalidRequest)
			if !strings.Contains(r.rpc.Error.Message, c.says) {
				t.Errorf("401 message %q does not say %q", r.rpc.Error.Message, c.says)
			}
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("WWW-Authenticate = %q, want a Bearer challenge", r.header.Get("WWW-Authenticate"))
			}
			if strings.Contains(string(r.body), token) {
				t.Fatal("the response body contains the token")
			}
		})
	}
	if r := f.do(http.MethodGet, f.ts.URL+MetricsPath, nil, nil); r.status != http.StatusUnauthorized {
		t.Fatalf("/metrics without the token: HTTP %d, want 401", r.status)
	}
	if r := f.do(http.MethodGet, f.ts.URL+HealthPath, nil, nil); r.status != http.StatusOK {
		t.Fatalf("/healthz without the token: HTTP %d, want 200 (health checks need no token)", r.status)
	}
	if _, err := f.connect("", "", nil); err == nil {
		t.Fatal("an SDK client without the token connected")
	}
	for _, version := range []string{"", "2025-11-25"} {
		cs := f.client(version, token, nil)
		if res, err := cs.CallTool(f.ctx, &mcp.CallToolParams{Name: manifest.ToolCreate, Arguments: createArgs("n" + version)}); err != nil || res.IsError {
			t.Fatalf("authorized %q client: %v %+v", version, err, res)
		}
	}
	r := f.do(http.MethodGet, f.ts.URL+MetricsPath, nil, map[string]string{"Authorization": "Bearer " + token})
	if r.status != http.StatusOK {
		t.Fatalf("/metrics with the token: HTTP %d", r.status)
	}
	logs := f.logs.String()
	if !strings.Contains(logs, "http request") {
		t.Fatalf("no request was logged at debug level; the leak check below would be vacuous:\n%s", logs)
	}
	if strings.Contains(logs, token) || strings.Contains(logs, token[:12]) {
		t.Fatalf("the token appears in the logs:\n%s", logs)
	}
}

func TestHTTPRefusesForeignOriginsAndHosts(t *testing.T) {
	f := newHTTPFixture(t, Options{AllowedOrigins: []string{"https://console.example:8443"}})
	body := modernBody(1, "tools/list", nil, nil)
	self := "http://" + strings.TrimPrefix(f.ts.URL, "http://")
	cases := []struct {
		name   string
		extra  map[string]string
		status int
	}{
		{"foreign origin", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"null origin", map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"origin on another port", map[string]string{"Origin": "http://127.0.0.1:1"}, http.StatusForbidden},
		{"foreign host (DNS rebinding)", map[string]string{"Host": "evil.example"}, http.StatusForbidden},
		{"foreign host and origin", map[string]string{"Host": "evil.example", "Origin": "http://evil.example"}, http.StatusForbidden},
		{"no origin", nil, http.StatusOK},
		{"same origin", map[string]string{"Origin": self}, http.StatusOK},
		{"allowed origin", map[string]string{"Origin": "https://CONSOLE.example:8443"}, http.StatusOK},
		{"localhost host", map[string]string{"Host": "localhost"}, http.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			extra := modernHeaders("tools/list")
			for k, v := range c.extra {
				extra[k] = v
			}
			if r := f.post(body, extra); r.status != c.status {
				t.Fatalf("HTTP %d %s, want %d", r.status, r.body, c.status)
			}
		})
	}
	if r := f.do(http.MethodGet, f.ts.URL+HealthPath, nil, map[string]string{"Host": "evil.example"}); r.status != http.StatusForbidden {
		t.Fatalf("/healthz with a foreign Host: HTTP %d, want 403", r.status)
	}
	if _, err := New(f.srv, Options{AllowedOrigins: []string{"https://x.example/path"}}); err == nil {
		t.Fatal("an origin with a path was accepted")
	}
}

func TestHTTPBodyLimit(t *testing.T) {
	f := newHTTPFixture(t, Options{})
	huge := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", DefaultMaxBodyBytes) + `"}}`
	// With Content-Length: refused before the body is read.
	r := f.post(huge, modernHeaders("tools/list"))
	r.wantError(t, http.StatusRequestEntityTooLarge, jsonrpc.CodeInvalidRequest)
	// Chunked (no Content-Length): refused once the reader passes the bound.
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(huge))
		pw.Close()
	}()
	r = f.do(http.MethodPost, f.url, pr, modernHeaders("tools/list"))
	r.wantError(t, http.StatusRequestEntityTooLarge, jsonrpc.CodeInvalidRequest)
	// A declared Content-Length over the bound is refused at once, without
	// waiting for (or reading) a body that never comes.
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100000000\r\n\r\n{")
	if end, ok := testwait.Deadline(t); ok { // a hang fails the test instead of killing the binary
		conn.SetReadDeadline(end)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a body that never arrives: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
		t.Fatalf("declared 100 MB body: HTTP %d (close %v), want 413 and the connection closed", resp.StatusCode, resp.Close)
	}
	// Just under the bound is served.
	pad := DefaultMaxBodyBytes - len(modernBody(1, "tools/list", map[string]any{"pad": ""}, nil)) - 16
	ok := modernBody(1, "tools/list", map[string]any{"pad": strings.Repeat("x", pad)}, nil)
	if r := f.post(ok, modernHeaders("tools/list")); r.status != http.StatusOK {
		t.Fatalf("a %d-byte body: HTTP %d %s", len(ok), r.status, r.body)
	}
}

func TestHTTPConcurrencyCap(t *testing.T) {
	const n = 3
	f := newHTTPFixture(t, Options{MaxConcurrent: n, AdmissionWait: 50 * time.Second})
	cs := f.client("", "", nil)
	// n short calls hold every slot. The test takes the slots itself: a real
	// short call is over too soon to hold one while the test looks.
	takeSlots(t, f.h, n)
	// A claim that waits for work needs no slot: it is admitted at once.
	claim := make(chan error, 1)
	go func() {
		out, err := fleetCall(f.ctx, cs, manifest.ToolClaim, map[string]any{"owner": "w", "workflow_id": "wf", "wait_ms": 30000})
		if err == nil && out["claimed"] != true {
			err = fmt.Errorf("claim returned %v", out)
		}
		claim <- err
	}()
	testwait.For(t, "the claim to wait in the store", func() bool { return f.store.Waiters() == 1 })
	// A short call waits for a slot instead of being refused...
	listed := make(chan error, 1)
	go func() {
		_, err := cs.ListTools(f.ctx, nil)
		listed <- err
	}()
	testwait.For(t, "the short call to wait for a slot", func() bool { _, others := f.h.slots.waiting(); return others == 1 })
	f.h.slots.release() // ...and gets one when a call in progress finishes.
	if err := <-listed; err != nil {
		t.Fatalf("the call that waited for a slot: %v", err)
	}
	if _, err := f.store.CreateTask(f.ctx, "wf", taskgraph.NodeSpec{NodeID: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := <-claim; err != nil {
		t.Fatalf("the waiting claim: %v", err)
	}
	if got := testutil.ToFloat64(f.metrics.rejections.WithLabelValues("busy")); got != 0 {
		t.Fatalf("busy rejections = %v, want 0", got)
	}

	// When no slot comes free within AdmissionWait, the call gets 503.
	g := newHTTPFixture(t, Options{MaxConcurrent: n, AdmissionWait: time.Millisecond})
	takeSlots(t, g.h, n)
	r := g.post(modernBody(1, "tools/list", nil, nil), modernHeaders("tools/list"))
	r.wantError(t, http.StatusServiceUnavailable, jsonrpc.CodeInvalidRequest)
	if r.header.Get("Retry-After") == "" || !strings.Contains(r.rpc.Error.Message, "server busy") {
		t.Fatalf("503 %s without Retry-After or reason", r.body)
	}
	if got := testutil.ToFloat64(g.metrics.rejections.WithLabelValues("busy")); got != 1 {
		t.Fatalf("busy rejections = %v, want 1", got)
	}
	for range n {
		g.h.slots.release()
	}
	if r := g.post(modernBody(2, "tools/list", nil, nil), modernHeaders("tools/list")); r.status != http.StatusOK {
		t.Fatalf("after the calls finished: HTTP %d", r.status)
	}
}

func TestHTTPProtocolErrors(t *testing.T) {
	f := newHTTPFixture(t, Options{})
	taskID := func() string {
		c, err := f.store.CreateTask(f.ctx, "wf", taskgraph.NodeSpec{NodeID: "x"})
		if err != nil {
			t.Fatal(err)
		}
		return c.Task.TaskID
	}()
	ext := map[string]any{"extensions": map[string]any{manifest.TasksExtension: map[string]any{}}}
	metaWith := func(pv string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + pv + `","io.modelcontextprotocol/clientCapabilities":{}}}}`
	}
	b64 := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
	cases := []struct {
		name   string
		body   string
		extra  map[string]string
		status int
		code   int64 // 0: success expected
		id     any   // the id the error must carry; nil for null
	}{
		{"unparsable JSON", `{"jsonrpc":`, modernHeaders("tools/list"), 400, jsonrpc.CodeParseError, nil},
		{"empty body", ``, modernHeaders("tools/list"), 400, jsonrpc.CodeParseError, nil},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, modernHeaders("tools/list"), 400, jsonrpc.CodeInvalidRequest, nil},
		{"not an object", `"hello"`, modernHeaders("tools/list"), 400, jsonrpc.CodeInvalidRequest, nil},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"tools/list"}`, modernHeaders("tools/list"), 400, jsonrpc.CodeInvalidRequest, nil},
		{"boolean id", `{"jsonrpc":"2.0","id":true,"method":"tools/list"}`, modernHeaders("tools/list"), 400, jsonrpc.CodeInvalidRequest, nil},
		{"no jsonrpc member", `{"id":3,"method":"tools/list"}`, modernHeaders("tools/list"), 400, jsonrpc.CodeInvalidRequest, 3.0},
		{"numeric method", `{"jsonrpc":"2.0","id":3,"method":5}`, modernHeaders("tools/list"), 400, jsonrpc.CodeInvalidRequest, 3.0},
		{"params not an object", `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":[1]}`, modernHeaders("tools/list"), 400, jsonrpc.CodeInvalidParams, 3.0},
		{"modern header without _meta", `{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}`, modernHeaders("tools/list"), 400, jsonrpc.CodeInvalidParams, "a"},
		{"modern without clientCapabilities", `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, modernHeaders("tools/list"), 400, jsonrpc.CodeInvalidParams, 4.0},
		{"version not a string", `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":20260728,"io.modelcontextprotocol/clientCapabilities":{}}}}`, modernHeaders("tools/list"), 400, jsonrpc.CodeInvalidParams, 4.0},
		{"version 1900-01-01", metaWith("1900-01-01"), modernHeaders("tools/list", wire.HeaderProtocolVersion, "1900-01-01"), 400, mcp.CodeUnsupportedProtocolVersion, 7.0},
		{"version 2099-01-01", metaWith("2099-01-01"), modernHeaders("tools/list", wire.HeaderProtocolVersion, "2099-01-01"), 400, mcp.CodeUnsupportedProtocolVersion, 7.0},
		{"legacy version in _meta", metaWith("2025-11-25"), modernHeaders("tools/list", wire.HeaderProtocolVersion, "2025-11-25"), 400, mcp.CodeUnsupportedProtocolVersion, 7.0},
		{"header 1900-01-01 without _meta", `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`, map[string]string{wire.HeaderProtocolVersion: "1900-01-01"}, 400, mcp.CodeUnsupportedProtocolVersion, 8.0},
		{"header and _meta differ", metaWith("1900-01-01"), modernHeaders("tools/list"), 400, mcp.CodeHeaderMismatch, 7.0},
		{"_meta without the header", modernBody(9, "tools/list", nil, nil), map[string]string{wire.HeaderMethod: "tools/list"}, 400, mcp.CodeHeaderMismatch, 9.0},
		{"Mcp-Method missing", modernBody(9, "tools/list", nil, nil), map[string]string{wire.HeaderProtocolVersion: modern}, 400, mcp.CodeHeaderMismatch, 9.0},
		{"Mcp-Method differs", modernBody(9, "tools/list", nil, nil), modernHeaders("prompts/list"), 400, mcp.CodeHeaderMismatch, 9.0},
		{"Mcp-Method differs in case", modernBody(9, "tools/list", nil, nil), modernHeaders("TOOLS/LIST"), 400, mcp.CodeHeaderMismatch, 9.0},
		{"Mcp-Name differs on tools/call", modernBody(10, "tools/call", map[string]any{"name": manifest.ToolInspect, "arguments": map[string]any{"task_id": taskID}}, nil),
			modernHeaders("tools/call", wire.HeaderName, manifest.ToolCreate), 400, mcp.CodeHeaderMismatch, 10.0},
		{"Mcp-Name in base64 on tools/call", modernBody(10, "tools/call", map[string]any{"name": manifest.ToolInspect, "arguments": map[string]any{"task_id": taskID}}, nil),
			modernHeaders("tools/call", wire.HeaderName, b64(manifest.ToolInspect)), 200, 0, 10.0},
		{"Mcp-Name missing on tasks/get", modernBody(11, tools.MethodTasksGet, map[string]any{"taskId": taskID}, ext), modernHeaders(tools.MethodTasksGet), 400, mcp.CodeHeaderMismatch, 11.0},
		{"Mcp-Name differs on tasks/get", modernBody(11, tools.MethodTasksGet, map[string]any{"taskId": taskID}, ext),
			modernHeaders(tools.MethodTasksGet, wire.HeaderName, "01ARZ3NDEKTSV4RRFFQ69G5FAV"), 400, mcp.CodeHeaderMismatch, 11.0},
		{"Mcp-Name differs on tasks/cancel", modernBody(11, tools.MethodTasksCancel, map[string]any{"taskId": taskID}, ext),
			modernHeaders(tools.MethodTasksCancel, wire.HeaderName, "other"), 400, mcp.CodeHeaderMismatch, 11.0},
		{"bad base64 Mcp-Name", modernBody(11, tools.MethodTasksGet, map[string]any{"taskId": taskID}, ext),
			modernHeaders(tools.MethodTasksGet, wire.HeaderName, "=?base64?!!!?="), 400, mcp.CodeHeaderMismatch, 11.0},
		{"tasks/get with Mcp-Name", modernBody(12, tools.MethodTasksGet, map[string]any{"taskId": taskID}, ext), modernHeaders(tools.MethodTasksGet, wire.HeaderName, taskID), 200, 0, 12.0},
		{"tasks/get with base64 Mcp-Name", modernBody(12, tools.MethodTasksGet, map[string]any{"taskId": taskID}, ext), modernHeaders(tools.MethodTasksGet, wire.HeaderName, b64(taskID)), 200, 0, 12.0},
		{"tasks/get without the extension", modernBody(13, tools.MethodTasksGet, map[string]any{"taskId": taskID}, nil), modernHeaders(tools.MethodTasksGet, wire.HeaderName, taskID), 400, mcp.CodeMissingRequiredClientCapabilities, 13.0},
		{"unknown task", modernBody(14, tools.MethodTasksGet, map[string]any{"taskId": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, ext),
			modernHeaders(tools.MethodTasksGet, wire.HeaderName, "01ARZ3NDEKTSV4RRFFQ69G5FAV"), 400, jsonrpc.CodeInvalidParams, 14.0},
		{"unknown method", modernBody(15, "tasks/list", nil, nil), modernHeaders("tasks/list"), 404, jsonrpc.CodeMethodNotFound, 15.0},
		{"removed method ping", modernBody(15, "ping", nil, nil), modernHeaders("ping"), 404, jsonrpc.CodeMethodNotFound, 15.0},
		{"unserved prompts/list", modernBody(15, "prompts/list", nil, nil), modernHeaders("prompts/list"), 404, jsonrpc.CodeMethodNotFound, 15.0},
		{"unknown tool", modernBody(16, "tools/call", map[string]any{"name": "nope", "arguments": map[string]any{}}, nil), modernHeaders("tools/call", wire.HeaderName, "nope"), 400, jsonrpc.CodeInvalidParams, 16.0},
		{"Last-Event-ID on a POST is ignored", modernBody(17, "tools/list", nil, nil), modernHeaders("tools/list", "Last-Event-ID", "abc_1"), 200, 0, 17.0},
		{"legacy call without a session", `{"jsonrpc":"2.0","id":18,"method":"tools/list"}`, nil, 400, jsonrpc.CodeInvalidParams, 18.0},
		{"legacy header without a session", `{"jsonrpc":"2.0","id":18,"method":"tools/list"}`, map[string]string{wire.HeaderProtocolVersion: "2025-11-25"}, 400, jsonrpc.CodeInvalidRequest, 18.0},
		{"unknown session", `{"jsonrpc":"2.0","id":19,"method":"tools/list"}`, map[string]string{wire.HeaderProtocolVersion: "2025-11-25", wire.HeaderSessionID: "nope"}, 404, -1, nil},
		{"modern notification", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, map[string]string{wire.HeaderProtocolVersion: modern}, 202, -1, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.post(c.body, c.extra)
			switch {
			case c.code == -1:
				if r.status != c.status {
					t.Fatalf("HTTP %d %s, want %d", r.status, r.body, c.status)
				}
				return
			case c.code == 0:
				if r.status != c.status || r.rpc.Error != nil || r.rpc.Result == nil {
					t.Fatalf("HTTP %d %s, want %d with a result", r.status, r.body, c.status)
				}
			default:
				r.wantError(t, c.status, c.code)
			}
			if fmt.Sprint(r.rpc.ID) != fmt.Sprint(c.id) {
				t.Fatalf("response id %v, want %v: %s", r.rpc.ID, c.id, r.body)
			}
			if !strings.Contains(string(r.body), `"id":`) {
				t.Fatalf("the response has no id member: %s", r.body)
			}
			if c.code == mcp.CodeUnsupportedProtocolVersion {
				var data struct {
					Supported []string `json:"supported"`
					Requested string   `json:"requested"`
				}
				if err := json.Unmarshal(r.rpc.Error.Data, &data); err != nil || len(data.Supported) != 5 || data.Requested == "" {
					t.Fatalf("-32022 data = %s (%v), want supported and requested", r.rpc.Error.Data, err)
				}
			}
		})
	}
	// Other HTTP methods and media types.
	if r := f.do(http.MethodGet, f.url, nil, map[string]string{"Accept": "text/event-stream"}); r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") == "" {
		t.Fatalf("GET: HTTP %d Allow %q, want 405 with Allow", r.status, r.header.Get("Allow"))
	}
	if r := f.do(http.MethodDelete, f.url, nil, nil); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE without a session: HTTP %d, want 405", r.status)
	}
	if r := f.post(modernBody(1, "tools/list", nil, nil), modernHeaders("tools/list", "Content-Type", "text/plain")); r.status != http.StatusUnsupportedMediaType {
		t.Fatalf("text/plain body: HTTP %d, want 415", r.status)
	}
	if r := f.do(http.MethodGet, f.ts.URL+"/other", nil, nil); r.status != http.StatusNotFound {
		t.Fatalf("unknown path: HTTP %d, want 404", r.status)
	}
}

func TestHTTPHealthz(t *testing.T) {
	f := newHTTPFixture(t, Options{AuthToken: "a-token-long-enough-1234"})
	r := f.do(http.MethodGet, f.ts.URL+HealthPath, nil, nil)
	if r.status != http.StatusOK || string(r.body) != "ok\n" {
		t.Fatalf("healthz: HTTP %d %q", r.status, r.body)
	}
	if r := f.do(http.MethodPost, f.ts.URL+HealthPath, nil, nil); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("POST /healthz: HTTP %d, want 405", r.status)
	}
	if err := f.store.Close(); err != nil {
		t.Fatal(err)
	}
	r = f.do(http.MethodGet, f.ts.URL+HealthPath, nil, nil)
	if r.status != http.StatusServiceUnavailable || !strings.HasPrefix(string(r.body), "not ok") {
		t.Fatalf("healthz with the database closed: HTTP %d %q, want 503 not ok", r.status, r.body)
	}
}

func TestHTTPMetrics(t *testing.T) {
	const token = "metrics-token-0123456789"
	f := newHTTPFixture(t, Options{AuthToken: token})
	cs := f.client("", token, nil)
	if _, err := cs.CallTool(f.ctx, &mcp.CallToolParams{Name: manifest.ToolCreate, Arguments: createArgs("a")}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(f.ctx, &mcp.CallToolParams{Name: manifest.ToolCreate, Arguments: createArgs("b")}); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(f.ctx, &mcp.CallToolParams{Name: manifest.ToolClaim, Arguments: map[string]any{"owner": "w1", "workflow_id": "wf"}})
	if err != nil || res.IsError {
		t.Fatalf("claim: %v %+v", err, res)
	}
	// The holder reports its usage: the usage gauges sum it.
	var claimed struct {
		Task struct {
			TaskID string `json:"task_id"`
		} `json:"task"`
		Lease struct {
			Generation int64  `json:"generation"`
			ClaimToken string `json:"claim_token"`
		} `json:"lease"`
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(sc, &claimed); err != nil {
		t.Fatal(err)
	}
	hb, err := cs.CallTool(f.ctx, &mcp.CallToolParams{Name: manifest.ToolHeartbeat, Arguments: map[string]any{"task_id": claimed.Task.TaskID, "owner": "w1",
		"generation": claimed.Lease.Generation, "claim_token": claimed.Lease.ClaimToken, "usage": map[string]any{"input_tokens": 1500, "output_tokens": 250, "cost_usd": 0.02}}})
	if err != nil || hb.IsError {
		t.Fatalf("heartbeat with usage: %v %+v", err, hb)
	}
	if res, _ := cs.CallTool(f.ctx, &mcp.CallToolParams{Name: manifest.ToolInspect, Arguments: map[string]any{"task_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}}); res == nil || !res.IsError {
		t.Fatal("inspecting an unknown task did not fail")
	}
	f.client("2025-11-25", token, nil)
	// The lease clock moves past the claim's expiry without the sweeper
	// running (the fixture's store does not sweep): the overdue gauge shows it.
	f.store.Clock().(interface{ Advance(time.Duration) time.Time }).Advance(10 * time.Minute)
	r := f.do(http.MethodGet, f.ts.URL+MetricsPath, nil, map[string]string{"Authorization": "Bearer " + token})
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: HTTP %d %s", r.status, r.header.Get("Content-Type"))
	}
	text := string(r.body)
	for _, want := range []string{
		`graph_engineering_tasks{state="pending"} 1`,
		`graph_engineering_tasks{state="claimed"} 1`,
		`graph_engineering_tasks{state="completed"} 0`,
		`graph_engineering_claims_total 1`,
		`graph_engineering_completions_total 0`,
		`graph_engineering_failures_total 0`,
		`graph_engineering_lease_expiries_total 0`,
		`graph_engineering_reclaims_total 0`,
		`graph_engineering_stale_claim_rejections_total 0`,
		`graph_engineering_tool_calls_total{outcome="ok",tool="graph_task_create"} 2`,
		`graph_engineering_tool_calls_total{outcome="ok",tool="graph_task_claim"} 1`,
		`graph_engineering_tool_calls_total{outcome="not_found",tool="graph_task_inspect"} 1`,
		`graph_engineering_store_batch_size_bucket{le="1"}`,
		`graph_engineering_store_batch_duration_seconds_count`,
		`graph_engineering_http_request_duration_seconds_bucket{code="200",method="POST",route="/mcp"`,
		`graph_engineering_mcp_request_duration_seconds_count{era="modern",method="tools/call"} 5`,
		`graph_engineering_tool_calls_total{outcome="ok",tool="graph_task_heartbeat"} 1`,
		`graph_engineering_usage_input_tokens 1500`,
		`graph_engineering_usage_output_tokens 250`,
		`graph_engineering_usage_cost_usd 0.02`,
		`graph_engineering_mcp_request_duration_seconds_count{era="legacy",method="initialize"} 1`,
		`graph_engineering_mcp_sessions 1`,
		`graph_engineering_http_slot_waiters{kind="holder"} 0`,
		`graph_engineering_http_slot_waiters{kind="other"} 0`,
		`graph_engineering_http_requests_in_flight 0`,
		`graph_engineering_database_up 1`,
		`graph_engineering_claim_waiters 0`,
		`graph_engineering_listen_streams_open 0`,
		`graph_engineering_listen_queued_notifications 0`,
		`graph_engineering_listen_notifications_sent_total 0`,
		`graph_engineering_listen_streams_ended_total{reason="fell_behind"} 0`,
		`graph_engineering_ui_streams_open 0`,
		`graph_engineering_ui_streams_refused_total 0`,
		`graph_engineering_lease_overdue_seconds 570`,
		`graph_engineering_oldest_lease_expiry_timestamp_seconds 1.7776260`,
		`go_goroutines`,
		`process_open_fds`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", text)
	}
}

// serving runs Serve on a fresh loopback listener.
type serving struct {
	addr string
	stop context.CancelFunc
	done chan error
}

func (f *httpFixture) serveOn(t *testing.T, opts Options) *serving {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	s := &serving{addr: ln.Addr().String(), stop: stop, done: make(chan error, 1)}
	opts.Metrics, opts.Logger = f.metrics, f.logger
	go func() { s.done <- Serve(ctx, ln, f.srv, opts) }()
	f.url = "http://" + s.addr + MCPPath
	return s
}

// holdCreates makes every graph_task_create call wait, after its write and
// before its answer, until release is closed: a write in flight that a
// shutdown must let finish.
func holdCreates(release <-chan struct{}) fixtureOpt {
	return func(c *mcpadapter.Config) {
		observe := c.OnToolCall
		c.OnToolCall = func(tool, outcome string) {
			if tool == manifest.ToolCreate {
				<-release
			}
			observe(tool, outcome)
		}
	}
}

// On shutdown a parked claim-next answers claimed: false at once with the
// shutting-down hint, and a write in flight still finishes and is kept.
func TestServeDrainsInFlightCallsOnShutdown(t *testing.T) {
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("version="+version, func(t *testing.T) {
			release := make(chan struct{})
			f, st := newHTTPStore(t, holdCreates(release))
			srv := f.serveOn(t, Options{ShutdownTimeout: time.Hour})
			cs, err := f.connect(version, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			claimed := make(chan *mcp.CallToolResult, 1)
			go func() {
				res, err := cs.CallTool(f.ctx, &mcp.CallToolParams{Name: manifest.ToolClaim, Arguments: map[string]any{"owner": "w", "workflow_id": "parked", "wait_ms": 30000}})
				if err != nil {
					t.Errorf("the parked claim: %v", err)
				}
				claimed <- res
			}()
			testwait.For(t, "the claim to park in the store", func() bool { return st.Waiters() == 1 })
			created := make(chan error, 1)
			go func() {
				res, err := cs.CallTool(f.ctx, &mcp.CallToolParams{Name: manifest.ToolCreate, Arguments: createArgs("n")})
				if err == nil && res.IsError {
					err = fmt.Errorf("create returned %+v", res.Content)
				}
				created <- err
			}()
			testwait.For(t, "the create and the claim to be in flight", func() bool { return testutil.ToFloat64(f.metrics.inFlight) == 2 })
			srv.stop() // SIGTERM
			res := testwait.Recv(t, "the parked claim's answer after the shutdown began", claimed)
			if res == nil || res.IsError || !strings.Contains(fmt.Sprint(res.StructuredContent), "claimed:false") || !strings.Contains(fmt.Sprint(res.StructuredContent), tools.ShuttingDownHint) {
				t.Fatalf("the parked claim answered %+v, want claimed: false with the shutting-down hint", res)
			}
			// The listener closes; the write in flight is still served.
			testwait.For(t, "the listener to close", func() bool {
				c, err := net.Dial("tcp", srv.addr)
				if err == nil {
					c.Close()
				}
				return err != nil
			})
			select {
			case err := <-srv.done:
				t.Fatalf("the server returned (%v) with a write in flight", err)
			default:
			}
			close(release)
			if err := testwait.Recv(t, "the held create's answer", created); err != nil {
				t.Fatalf("the in-flight create: %v", err)
			}
			if err := testwait.Recv(t, "Serve to return", srv.done); err != nil {
				t.Fatalf("Serve: %v", err)
			}
			if err := st.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			if fi, err := os.Stat(f.path + "-wal"); err == nil && fi.Size() > 0 {
				t.Fatalf("the WAL holds %d bytes after close; it was not checkpointed", fi.Size())
			}
			re, drv, err := sqlitestore.OpenDriver(context.Background(), f.path, taskgraph.Options{}, tgsqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer re.Close()
			chk, err := drv.Check(context.Background())
			if err != nil || !chk.OK() {
				t.Fatalf("integrity after shutdown: %+v %v", chk, err)
			}
			counts, err := re.CountByState(context.Background())
			if err != nil || counts[taskgraph.StatePending] != 1 || counts[taskgraph.StateClaimed] != 0 {
				t.Fatalf("after reopening: %v %v, want the created task pending and nothing claimed", counts, err)
			}
		})
	}
}

func TestServeCancelsCallsAfterTheDrainBound(t *testing.T) {
	release := make(chan struct{})
	f, _ := newHTTPStore(t, holdCreates(release))
	srv := f.serveOn(t, Options{ShutdownTimeout: 100 * time.Millisecond})
	cs, err := f.connect("2025-11-25", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	result := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(f.ctx, &mcp.CallToolParams{Name: manifest.ToolCreate, Arguments: createArgs("held")})
		result <- err
	}()
	testwait.For(t, "the create to be in flight", func() bool { return testutil.ToFloat64(f.metrics.inFlight) == 1 })
	srv.stop()
	// The held create ignores cancellation; it is let go once the
	// shutdown has given up on it, after which its connection is gone.
	testwait.For(t, "the shutdown to give up on the held call", func() bool { return strings.Contains(f.logs.String(), "cancelling them") })
	close(release)
	if err := testwait.Recv(t, "Serve to return", srv.done); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if err := testwait.Recv(t, "the held call's answer", result); err == nil {
		t.Fatal("the call cut off by shutdown reported success")
	}
}

func TestOptionsAreValidated(t *testing.T) {
	f, _ := newHTTPStore(t)
	for name, o := range map[string]Options{
		"short token":             {AuthToken: "short"},
		"token with a space":      {AuthToken: "0123456789 abcdef"},
		"call timeout below wait": {CallTimeout: 10 * time.Second},
		"negative concurrency":    {MaxConcurrent: -1},
		"admission wait too long": {AdmissionWait: 2 * time.Minute},
		"tiny body":               {MaxBodyBytes: 10},
	} {
		_, err := New(f.srv, o)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if o.AuthToken != "" && strings.Contains(err.Error(), o.AuthToken) {
			t.Errorf("%s: the error contains the token: %v", name, err)
		}
	}
	for addr, want := range map[string]bool{
		"127.0.0.1:7330": true, "[::1]:7330": true, "localhost:1": true, "127.1.2.3:80": true,
		"0.0.0.0:7330": false, ":7330": false, "[::]:7330": false, "example.com:80": false, "10.0.0.1:80": false, "bad": false,
	} {
		if got := IsLoopbackAddr(addr); got != want {
			t.Errorf("IsLoopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestHTTPSecondInitializeInASession(t *testing.T) {
	f := newHTTPFixture(t, Options{})
	cs := f.client("2025-11-25", "", nil)
	init := `{"jsonrpc":"2.0","id":"again","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	r := f.post(init, map[string]string{wire.HeaderSessionID: cs.ID(), wire.HeaderProtocolVersion: "2025-11-25"})
	r.wantError(t, http.StatusOK, jsonrpc.CodeInvalidRequest)
	if r.rpc.ID != "again" {
		t.Fatalf("id %v, want again", r.rpc.ID)
	}
	// The session still serves.
	if _, err := cs.ListTools(f.ctx, nil); err != nil {
		t.Fatalf("tools/list after the refused initialize: %v", err)
	}
	// An unknown session id is 404, as for any request.
	if r := f.post(init, map[string]string{wire.HeaderSessionID: "gone", wire.HeaderProtocolVersion: "2025-11-25"}); r.status != http.StatusNotFound {
		t.Fatalf("initialize with an unknown session: HTTP %d, want 404", r.status)
	}
}

// TestHTTPCallsCarryTheCallDeadline checks that tool handlers see the
// per-call deadline in both eras: the front admits it with each request
// (mcpadapter.Inbound), and the MCP server applies it to the call, whose
// context is the request's (modern) or its session's (legacy).
func TestHTTPCallsCarryTheCallDeadline(t *testing.T) {
	deadlines := make(chan time.Duration, 4)
	inner := func(s *mcp.Server) error {
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "tools/call" {
					d := time.Duration(-1)
					if dl, ok := ctx.Deadline(); ok {
						d = time.Until(dl)
					}
					deadlines <- d
				}
				return next(ctx, method, req)
			}
		})
		return nil
	}
	f := newHTTPFixture(t, Options{CallTimeout: 45 * time.Second}, func(c *mcpadapter.Config) { c.Register = inner })
	for _, version := range []string{"", "2025-11-25"} {
		cs := f.client(version, "", nil)
		if _, err := cs.CallTool(f.ctx, &mcp.CallToolParams{Name: manifest.ToolCreate, Arguments: createArgs("d" + version)}); err != nil {
			t.Fatal(err)
		}
		if d := <-deadlines; d < 40*time.Second || d > 45*time.Second {
			t.Fatalf("version %q: the tool saw deadline %v, want about 45s", version, d)
		}
	}
}

func TestServeLimitsHeadersAndRefusesOpenBinds(t *testing.T) {
	f, _ := newHTTPStore(t)
	srv := f.serveOn(t, Options{})
	req, err := http.NewRequest(http.MethodGet, "http://"+srv.addr+HealthPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Padding", strings.Repeat("x", 2*MaxHeaderBytes))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a %d-byte header: HTTP %d, want 431", 2*MaxHeaderBytes, resp.StatusCode)
	}
	srv.stop()
	if err := <-srv.done; err != nil {
		t.Fatal(err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	open := openAddrListener{ln}
	if err := Serve(f.ctx, open, f.srv, Options{}); err == nil || !strings.Contains(err.Error(), "without an auth token") {
		t.Fatalf("serving an all-interfaces listener without a token: %v", err)
	}
}

// openAddrListener reports an all-interfaces address, as a listener on
// 0.0.0.0 would; the test itself only ever listens on loopback.
type openAddrListener struct{ net.Listener }

func (openAddrListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4zero, Port: 7330} }
