package mcpadapter

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// HTTP answered id 1.5 as 1 and 9007199254740993 as 9007199254740992 (the
// SDK decodes numeric ids through float64), while stdio refused both. One id
// rule now holds on both transports: exact integers within ±(2^53−1) and
// strings are echoed exactly; anything else is -32600 with id null, and the
// request does not run.
func TestHTTPNumericIDsAreEchoedExactly(t *testing.T) {
	f := newHTTPFixture(t, HTTPOptions{})
	create := func(id, node string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"ids","node_id":"` + node + `"},"_meta":` + mustJSON(t, modernMeta(nil)) + `}}`
	}
	for i, id := range []string{"1.5", "9007199254740993", "12345678901234567890", "-9007199254740992", "1e400", "1e-400"} {
		r := f.post(create(id, fmt.Sprintf("r%d", i)), modernHeaders("tools/call", headerName, manifest.ToolCreate))
		r.wantError(t, http.StatusBadRequest, jsonrpc.CodeInvalidRequest)
		if !strings.Contains(r.rpc.Error.Message, "numeric id must be an integer") || !strings.Contains(string(r.body), `"id":null`) {
			t.Errorf("id %s: %s", id, r.body)
		}
	}
	for id, want := range map[string]string{"9007199254740991": "9007199254740991", "-9007199254740991": "-9007199254740991", "1e3": "1000", `"s"`: `"s"`} {
		r := f.post(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/list","params":{"_meta":`+mustJSON(t, modernMeta(nil))+`}}`, modernHeaders("tools/list"))
		var env map[string]json.RawMessage
		if err := json.Unmarshal(r.body, &env); err != nil || r.status != http.StatusOK || string(env["id"]) != want || env["result"] == nil {
			t.Errorf("id %s: want a result with id %s, got HTTP %d %s", id, want, r.status, clipBody(r.body))
		}
	}
	if tasks, err := f.store.ListTasks(f.ctx, taskgraph.ListFilter{WorkflowID: "ids"}); err != nil || len(tasks) != 0 {
		t.Errorf("a refused request ran: %d tasks (%v)", len(tasks), err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// topLevelError decides whether a response must be decoded and corrected;
// only a top-level "error" member counts, wherever else the word appears.
func TestTopLevelError(t *testing.T) {
	for body, want := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"error":{"code":0,"message":"plain"}}`:                          true,
		`{"jsonrpc":"2.0","id":"result","error":{"code":-32603,"message":"result"}}`:             true,
		`{"error":{"code":1,"message":"m"},"jsonrpc":"2.0","id":1}`:                              true,
		`{"jsonrpc":"2.0","id":1,"result":{"error":null}}`:                                       false,
		`{"jsonrpc":"2.0","id":"error","result":{"content":[{"text":"\"error\": x"}]}}`:          false,
		`{"jsonrpc":"2.0","id":{"error":1},"result":{}}`:                                         false,
		`{"jsonrpc":"2.0","id":1,"result":{"task":{"error":"boom","state":"failed"}},"x":"err"}`: false,
		`not json "error"`: false,
	} {
		if got := topLevelError([]byte(body)); got != want {
			t.Errorf("topLevelError(%s) = %v, want %v", body, got, want)
		}
	}
}

// An argument error names its field in _meta, like a store validation
// error; an unknown tool's -32602 lists the tools there are.
func TestArgumentErrorsNameTheirFieldAndUnknownToolsListTheTools(t *testing.T) {
	f := newFixture(t)
	r := f.raw()
	for _, c := range []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{manifest.ToolClaim, map[string]any{"owner": "w", "lease_ms": 0}, "lease_ms"},
		{manifest.ToolClaim, map[string]any{"owner": "w", "wait_ms": "soon"}, "wait_ms"},
		{manifest.ToolClaim, map[string]any{}, "owner"},
		{manifest.ToolClaim, map[string]any{"owner": "w", "task_id": nil}, "task_id"},
		{manifest.ToolClaim, map[string]any{"owner": "w", "force": true}, "force"},
		{manifest.ToolCreate, map[string]any{"workflow_id": "w", "node_id": "n", "max_attempts": 1.5}, "max_attempts"},
	} {
		res := mustResult(t, r.modernCall("tools/call", map[string]any{"name": c.tool, "arguments": c.args}, nil))
		detail, _ := res["_meta"].(map[string]any)[ErrorMetaKey].(map[string]any)
		if res["isError"] != true || detail["kind"] != "invalid" || detail["field"] != c.field {
			t.Errorf("%s %v: want kind invalid with field %q, got %v", c.tool, c.args, c.field, res)
		}
	}
	// The same overflow rule as over HTTP (TestHTTPOverflowingNumberIsAToolError).
	for _, raw := range []string{`{"workflow_id":"w","node_id":"n","payload":{"x":1e400}}`} {
		res := mustResult(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolCreate, "arguments": json.RawMessage(raw)}, nil))
		detail, _ := res["_meta"].(map[string]any)[ErrorMetaKey].(map[string]any)
		if res["isError"] != true || detail["field"] != "payload" || !strings.Contains(fmt.Sprint(res["content"]), "beyond the range of a 64-bit float") {
			t.Errorf("stdio create %s: want a tool error naming payload, got %v", raw, res)
		}
	}
	res := mustResult(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolCreate, "arguments": json.RawMessage(`{"workflow_id":"w","node_id":"ok","payload":{"tiny":1e-400,"big":9007199254740993,"max":1.7976931348623157e308}}`)}, nil))
	if res["isError"] == true {
		t.Errorf("numbers within float64 range (or underflowing to 0) must be accepted: %v", res)
	}
	resp := r.modernCall("tools/call", map[string]any{"name": "graph_task_force", "arguments": map[string]any{}}, nil)
	var je *jsonrpc.Error
	if !errors.As(resp.Error, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("unknown tool: want -32602, got %+v", resp)
	}
	for _, name := range manifest.AllTools {
		if !strings.Contains(je.Message, name) || !strings.Contains(string(je.Data), name) {
			t.Errorf("the unknown-tool error does not list %s: %s %s", name, je.Message, je.Data)
		}
	}
}

// A POST whose Accept header lacks application/json or text/event-stream
// gets a JSON-RPC error body, as every refusal does (MCP.md §4).
func TestBadAcceptGetsAJSONRPCError(t *testing.T) {
	f := newHTTPFixture(t, HTTPOptions{})
	for _, accept := range []string{"", "application/json", "text/event-stream", "text/html", "application/xml, text/plain"} {
		h := modernHeaders("tools/list", "Accept", accept)
		if accept == "" {
			h["Accept"] = ""
		}
		r := f.post(modernBody(1, "tools/list", nil, nil), h)
		r.wantError(t, http.StatusBadRequest, jsonrpc.CodeInvalidRequest)
		if !strings.Contains(r.rpc.Error.Message, "Accept") {
			t.Errorf("Accept %q: %s", accept, r.body)
		}
	}
	for _, accept := range []string{"*/*", "application/*, text/*", "application/json;q=0.9, text/event-stream"} {
		if r := f.post(modernBody(1, "tools/list", nil, nil), modernHeaders("tools/list", "Accept", accept)); r.status != http.StatusOK {
			t.Errorf("Accept %q: HTTP %d %s", accept, r.status, clipBody(r.body))
		}
	}
}

// Canary for acceptFailure: the SDK's own handler still refuses a bad Accept
// with a plain-text 400. When this fails, the SDK answers in JSON-RPC
// itself and acceptFailure can go.
func TestSDKRefusesBadAcceptInPlainText(t *testing.T) {
	f := newHTTPFixture(t, HTTPOptions{})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.srv.mcp }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(modernBody(1, "tools/list", nil, nil)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/html")
	for k, v := range modernHeaders("tools/list") {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	sdk.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("the SDK now answers a bad Accept with HTTP %d %q %s: acceptFailure may no longer be needed", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
}

// A payload number beyond float64 range is one rule on every transport: a
// tool error naming the field. Over HTTP in 2026-07-28 the SDK used to
// answer -32020 "failed to extract name" instead; over stdio the number was
// stored, and a worker whose decoder reads doubles crashed after claiming.
func TestHTTPOverflowingNumberIsAToolError(t *testing.T) {
	f := newHTTPFixture(t, HTTPOptions{})
	call := func(id int, args string) *rawResponse {
		body := `{"jsonrpc":"2.0","id":` + fmt.Sprint(id) + `,"method":"tools/call","params":{"name":"graph_task_create","arguments":` + args + `,"_meta":` + mustJSON(t, modernMeta(nil)) + `}}`
		return f.post(body, modernHeaders("tools/call", headerName, manifest.ToolCreate))
	}
	overflow := call(1, `{"workflow_id":"big","node_id":"n","payload":{"x":[1,-1e400]}}`)
	ordinary := call(2, `{"workflow_id":"big","node_id":"n","payload":"not an object"}`)
	for name, r := range map[string]*rawResponse{"overflow": overflow, "ordinary": ordinary} {
		if r.status != http.StatusOK || r.rpc.Error != nil {
			t.Fatalf("%s: want a tool error result, got HTTP %d %s", name, r.status, clipBody(r.body))
		}
	}
	var o, n map[string]any
	json.Unmarshal(overflow.rpc.Result, &o)
	json.Unmarshal(ordinary.rpc.Result, &n)
	detail, _ := o["_meta"].(map[string]any)[ErrorMetaKey].(map[string]any)
	if o["isError"] != true || detail["field"] != "payload" || !strings.Contains(fmt.Sprint(o["content"]), "-1e400") {
		t.Fatalf("overflow: want a tool error naming payload and the number, got %v", o)
	}
	// Shaped like every other tool error of this era.
	for k := range n {
		if _, ok := o[k]; !ok {
			t.Errorf("the overflow tool error lacks %q that other tool errors carry: %v vs %v", k, o, n)
		}
	}
	for k := range n["_meta"].(map[string]any) {
		if _, ok := o["_meta"].(map[string]any)[k]; !ok {
			t.Errorf("the overflow tool error lacks _meta %q: %v vs %v", k, o["_meta"], n["_meta"])
		}
	}
	if tasks, err := f.store.ListTasks(f.ctx, taskgraph.ListFilter{WorkflowID: "big"}); err != nil || len(tasks) != 0 {
		t.Errorf("a refused create stored %d tasks (%v)", len(tasks), err)
	}
	// Canary: the SDK alone still fails on such a body; when it stops,
	// overflowToolError can go.
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.srv.mcp }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"big","node_id":"n","payload":{"x":1e400}},"_meta":`+mustJSON(t, modernMeta(nil))+`}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range modernHeaders("tools/call", headerName, manifest.ToolCreate) {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	sdk.ServeHTTP(rec, req)
	if !strings.Contains(rec.Body.String(), "failed to extract name") {
		t.Errorf("the SDK no longer fails on an overflowing argument (HTTP %d %s): overflowToolError may no longer be needed", rec.Code, rec.Body)
	}
}

// A 2026-07-28 heartbeat is judged at the server time it arrived at the
// HTTP handler: waiting there for a slot past its lease's expiry does not
// cost the lease.
func TestHTTPHeartbeatJudgedAtArrivalNotAfterAdmission(t *testing.T) {
	const n = 1
	f := newHTTPFixture(t, HTTPOptions{MaxConcurrent: n, AdmissionWait: 50 * time.Second})
	clock := f.store.Clock().(*lease.ManualClock)
	c, err := f.store.CreateTask(f.ctx, "wf", taskgraph.NodeSpec{NodeID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	cl, _, err := f.store.Claim(f.ctx, taskgraph.ClaimRequest{Owner: "w", TaskID: c.Task.TaskID, Lease: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	takeSlots(t, f.h, n) // every slot taken
	done := make(chan *rawResponse, 1)
	go func() {
		args := map[string]any{"task_id": cl.Task.TaskID, "owner": "w", "generation": cl.Lease.Generation, "claim_token": cl.Lease.Token}
		done <- f.post(modernBody(1, "tools/call", map[string]any{"name": manifest.ToolHeartbeat, "arguments": args}, nil), modernHeaders("tools/call", headerName, manifest.ToolHeartbeat))
	}()
	testwait.For(t, "the heartbeat to wait for a slot", func() bool { holders, _ := f.h.slots.waiting(); return holders == 1 })
	clock.Advance(5 * time.Second) // the lease's expiry passes while it waits
	f.h.slots.release()
	r := <-done
	var res map[string]any
	if r.status != http.StatusOK || json.Unmarshal(r.rpc.Result, &res) != nil || res["isError"] == true {
		t.Fatalf("a heartbeat that arrived in time was refused after waiting for a slot: HTTP %d %s", r.status, clipBody(r.body))
	}
}

// A legacy session's heartbeat is judged at the server time it arrived at
// the HTTP handler too, although the SDK runs it in the session's context:
// the arrival reaches the tool through the request header the SDK hands
// over. A value the client sends in that header is overwritten, so a late
// heartbeat cannot claim an earlier arrival, and no call is judged at the
// time its session began.
func TestHTTPLegacyHeartbeatJudgedAtArrival(t *testing.T) {
	f := newHTTPFixture(t, HTTPOptions{MaxConcurrent: 1, AdmissionWait: 50 * time.Second})
	clock := f.store.Clock().(*lease.ManualClock)
	legacy := func(hc *http.Client) *mcp.ClientSession {
		t.Helper()
		client := mcp.NewClient(&mcp.Implementation{Name: "legacy", Version: "1"}, nil)
		cs, err := client.Connect(f.ctx, &mcp.StreamableClientTransport{Endpoint: f.url, HTTPClient: hc, MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
			t.Fatalf("negotiated %q, want a legacy session", v)
		}
		return cs
	}
	claim := func(node string) map[string]any {
		t.Helper()
		c, err := f.store.CreateTask(f.ctx, "wf", taskgraph.NodeSpec{NodeID: node})
		if err != nil {
			t.Fatal(err)
		}
		cl, _, err := f.store.Claim(f.ctx, taskgraph.ClaimRequest{Owner: "w", TaskID: c.Task.TaskID, Lease: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return map[string]any{"task_id": cl.Task.TaskID, "owner": "w", "generation": cl.Lease.Generation, "claim_token": cl.Lease.Token}
	}

	cs := legacy(http.DefaultClient)
	holder := claim("a")
	takeSlots(t, f.h, 1) // every slot taken
	done := make(chan error, 1)
	go func() {
		_, err := fleetCall(f.ctx, cs, manifest.ToolHeartbeat, holder)
		done <- err
	}()
	testwait.For(t, "the heartbeat to wait for a slot", func() bool { holders, _ := f.h.slots.waiting(); return holders == 1 })
	clock.Advance(5 * time.Second) // the lease's expiry passes while it waits
	f.h.slots.release()
	if err := <-done; err != nil {
		t.Fatalf("a legacy heartbeat that arrived in time was refused after waiting for a slot: %v", err)
	}

	// A client that sends the header itself, naming a time at which its
	// lease was still live, is judged at its real arrival.
	holder = claim("b")
	forged := strconv.FormatInt(clock.Now().UnixNano(), 10)
	clock.Advance(5 * time.Second) // b's lease lapsed
	liar := legacy(&http.Client{Transport: headerRT{next: http.DefaultTransport, name: headerArrival, value: forged}})
	if _, err := fleetCall(f.ctx, liar, manifest.ToolHeartbeat, holder); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("a late heartbeat claiming an earlier arrival: %v, want refused as expired", err)
	}

	// Nor is a call judged at the time its session began: the session's
	// context came from its initialize request, before this lease lapsed.
	holder = claim("c")
	clock.Advance(5 * time.Second)
	if _, err := fleetCall(f.ctx, cs, manifest.ToolHeartbeat, holder); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("a late heartbeat in a session begun while its lease was live: %v, want refused as expired", err)
	}
}

// headerRT sets one request header on every request.
type headerRT struct {
	next        http.RoundTripper
	name, value string
}

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	return h.next.RoundTrip(r)
}
