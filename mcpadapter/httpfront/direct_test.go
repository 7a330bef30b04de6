package httpfront

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// TestDirectToolCallsAnswerAsTheSDK replays 2026-07-28 tools/call requests
// through the front's direct path and through the SDK's handler (a twin
// front on the same MCP server that hands everything to the SDK) and
// requires the same HTTP answer: status, headers (but Date) and body, byte
// for byte. Each case also states whether the direct path serves it, so
// the comparison is known to cover both paths.
func TestDirectToolCallsAnswerAsTheSDK(t *testing.T) {
	t.Parallel()
	f := newHTTPFixture(t, Options{}, func(c *mcpadapter.Config) { c.Surface.UIExtension = true })
	twin, err := New(f.srv, Options{Logger: f.logger})
	if err != nil {
		t.Fatal(err)
	}
	twin.sdkOnly = true
	tsTwin := httptest.NewServer(twin)
	t.Cleanup(tsTwin.Close)

	free, err := f.store.CreateTask(f.ctx, "wf-direct", taskgraph.NodeSpec{NodeID: "free", Payload: json.RawMessage(`{"html":"<a href='x'>&amp;</a>","n":1.5e300}`)})
	if err != nil {
		t.Fatal(err)
	}
	held, err := f.store.CreateTask(f.ctx, "wf-direct", taskgraph.NodeSpec{NodeID: "held"})
	if err != nil {
		t.Fatal(err)
	}
	cl, ok, err := f.store.Claim(f.ctx, taskgraph.ClaimRequest{Owner: "w", TaskID: held.Task.TaskID, Lease: time.Minute})
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	holder := func(extra ...any) map[string]any {
		m := map[string]any{"task_id": held.Task.TaskID, "owner": "w", "generation": cl.Lease.Generation, "claim_token": cl.Lease.Token}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i].(string)] = extra[i+1]
		}
		return m
	}
	call := func(name string, args any) map[string]any {
		p := map[string]any{"name": name}
		if args != nil {
			p["arguments"] = args
		}
		return p
	}
	goSDKMeta := map[string]any{
		wire.MetaProtocolVersion:             manifest.ModernVersion,
		wire.MetaClientCapabilities:          map[string]any{"roots": map[string]any{"listChanged": true}},
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "go", "version": "1.8.0"},
	}
	type tc struct {
		name   string
		id     any
		params map[string]any
		meta   map[string]any // nil: modernBody's
		raw    string         // the body as is, instead of id, params, meta
		header []string       // more header pairs
		direct bool           // the direct path serves it
	}
	inspect := call(manifest.ToolInspect, map[string]any{"task_id": free.Task.TaskID})
	cases := []tc{
		{name: "inspect", id: 1, params: inspect, direct: true},
		{name: "inspect as the Go SDK sends it", id: 2, params: inspect, meta: goSDKMeta, direct: true},
		{name: "string id", id: "a<b>&c", params: inspect, direct: true},
		{name: "largest id", id: 9007199254740991, params: inspect, direct: true},
		{name: "negative id", id: -3, params: inspect, direct: true},
		{name: "raw id forms", raw: `{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"graph_task_inspect","arguments":{"task_id":"` + free.Task.TaskID + `"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, direct: true},
		{name: "spaces and escapes", raw: " {\"jsonrpc\" : \"2.0\", \"id\" : 10 ,\"method\":\"tools\\/call\",\n\"params\":{\"name\":\"graph_task_\\u0069nspect\" , \"arguments\" : { \"task_id\" : \"" + free.Task.TaskID + "\" } ,\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{ }}}} ", direct: true},
		{name: "invalid argument echoes HTML", id: 3, params: call(manifest.ToolInspect, map[string]any{"task_id": "<script>&"}), direct: true},
		{name: "unknown task", id: 4, params: call(manifest.ToolInspect, map[string]any{"task_id": strings.Repeat("0", 26)}), direct: true},
		{name: "unknown argument", id: 5, params: call(manifest.ToolInspect, map[string]any{"task_id": free.Task.TaskID, "extra": 1}), direct: true},
		{name: "no arguments", id: 6, params: call(manifest.ToolInspect, nil), direct: true},
		{name: "claim finds nothing", id: 7, params: call(manifest.ToolClaim, map[string]any{"owner": "w2", "workflow_id": "nothing-here", "wait_ms": 0}), direct: true},
		{name: "stale claim token", id: 8, params: call(manifest.ToolComplete, holder("claim_token", strings.Repeat("A", 43), "result", map[string]any{"ok": true})), direct: true},
		{name: "superseded generation", id: 9, params: call(manifest.ToolHeartbeat, holder("generation", cl.Lease.Generation+1)), direct: true},
		{name: "fail without error", id: 10, params: call(manifest.ToolFail, holder()), direct: true},
		{name: "cancel by a stranger", id: 11, params: call(manifest.ToolCancel, holder("owner", "someone-else")), direct: true},
		{name: "create invalid", id: 12, params: call(manifest.ToolCreate, map[string]any{"workflow_id": ""}), direct: true},
		{name: "progress token", id: 13, params: inspect, meta: map[string]any{wire.MetaProtocolVersion: manifest.ModernVersion, wire.MetaClientCapabilities: map[string]any{}, "progressToken": "p1"}, direct: true},
		{name: "UI extension declared", id: 14, params: inspect, meta: map[string]any{wire.MetaProtocolVersion: manifest.ModernVersion, wire.MetaClientCapabilities: map[string]any{"extensions": map[string]any{manifest.UIExtension: map[string]any{"mimeTypes": []string{manifest.UIMIMEType}}}}}, direct: true},
		{name: "Tasks extension declared, not create", id: 15, params: inspect, meta: map[string]any{wire.MetaProtocolVersion: manifest.ModernVersion, wire.MetaClientCapabilities: map[string]any{"extensions": map[string]any{manifest.TasksExtension: map[string]any{}}}}, direct: true},
		{name: "sampling and elicitation", id: 16, params: inspect, meta: map[string]any{wire.MetaProtocolVersion: manifest.ModernVersion, wire.MetaClientCapabilities: map[string]any{"sampling": map[string]any{"tools": map[string]any{}}, "elicitation": map[string]any{"form": map[string]any{}}, "other": 5}}, direct: true},

		// Left to the SDK: each must reach it, and so answer as before.
		{name: "Tasks extension create", id: 20, params: call(manifest.ToolCreate, map[string]any{"workflow_id": ""}), meta: map[string]any{wire.MetaProtocolVersion: manifest.ModernVersion, wire.MetaClientCapabilities: map[string]any{"extensions": map[string]any{manifest.TasksExtension: map[string]any{}}}}},
		{name: "unknown tool", id: 21, params: call("graph_task_nope", map[string]any{}), header: []string{wire.HeaderName, "graph_task_nope"}},
		{name: "arguments null", id: 22, raw: `{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":"graph_task_inspect","arguments":null,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`},
		{name: "arguments an array", id: 23, params: call(manifest.ToolInspect, []any{1})},
		{name: "another params member", id: 24, params: map[string]any{"name": manifest.ToolInspect, "arguments": map[string]any{"task_id": free.Task.TaskID}, "task": map[string]any{"ttl": 1}}},
		{name: "another envelope member", raw: `{"jsonrpc":"2.0","id":25,"method":"tools/call","extra":1,"params":{"name":"graph_task_inspect","arguments":{"task_id":"` + free.Task.TaskID + `"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`},
		{name: "log level in _meta", id: 26, params: inspect, meta: map[string]any{wire.MetaProtocolVersion: manifest.ModernVersion, wire.MetaClientCapabilities: map[string]any{}, "io.modelcontextprotocol/logLevel": "debug"}},
		{name: "roots of the wrong type", id: 27, params: inspect, meta: map[string]any{wire.MetaProtocolVersion: manifest.ModernVersion, wire.MetaClientCapabilities: map[string]any{"roots": map[string]any{"listChanged": "yes"}}}},
		{name: "client info with icons", id: 28, params: inspect, meta: map[string]any{wire.MetaProtocolVersion: manifest.ModernVersion, wire.MetaClientCapabilities: map[string]any{}, "io.modelcontextprotocol/clientInfo": map[string]any{"name": "x", "version": "1", "icons": []any{}}}},
		{name: "client info not an object", id: 29, params: inspect, meta: map[string]any{wire.MetaProtocolVersion: manifest.ModernVersion, wire.MetaClientCapabilities: map[string]any{}, "io.modelcontextprotocol/clientInfo": "x"}},
		{name: "name not a string", id: 30, params: map[string]any{"name": 5, "arguments": map[string]any{}}, header: []string{wire.HeaderName, "5"}},
		{name: "host in capitals", id: 31, params: inspect, header: []string{"Host", "LOCALHOST"}},
	}
	for _, c := range cases {
		body := c.raw
		if body == "" {
			p := map[string]any{}
			for k, v := range c.params {
				p[k] = v
			}
			if c.meta != nil {
				p["_meta"] = c.meta
				b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": "tools/call", "params": p})
				body = string(b)
			} else {
				body = modernBody(c.id, "tools/call", p, nil)
			}
		}
		name, _ := c.params["name"].(string)
		if name == "" {
			name = manifest.ToolInspect
		}
		hdr := modernHeaders("tools/call", wire.HeaderName, name)
		for i := 0; i+1 < len(c.header); i += 2 {
			hdr[c.header[i]] = c.header[i+1]
		}
		if got := servedDirectly(t, body, hdr); got != c.direct {
			t.Errorf("%s: served directly %v, want %v", c.name, got, c.direct)
		}
		a, b := rawExchange(t, f.url, body, hdr), rawExchange(t, tsTwin.URL+MCPPath, body, hdr)
		if a != b {
			t.Errorf("%s: the direct path answered\n%s\nthe SDK\n%s", c.name, a, b)
		}
	}
}

// servedDirectly reports whether the front would serve body with header
// hdr on its direct path (the checks of mcpadapter.DirectToolCall aside).
func servedDirectly(t *testing.T, body string, hdr map[string]string) bool {
	t.Helper()
	m, fail := wire.ParseBody([]byte(body))
	if fail != nil {
		t.Fatalf("parse %s: %s", body, fail.Msg)
	}
	h := http.Header{}
	for k, v := range hdr {
		h.Set(k, v)
	}
	if e, fail := wire.ClassifyHTTP(h, m); fail != nil || e != wire.Modern || wire.CheckModernHeaders(h, m) != nil {
		return false
	}
	if host := hdr["Host"]; host != "" && host != strings.ToLower(host) {
		return false // wire.SDKHostAllowed refuses it on a loopback listener
	}
	p, ok := wire.DirectToolCall(h, m)
	if !ok || (p.Name == manifest.ToolCreate && strings.Contains(body, manifest.TasksExtension)) {
		return false
	}
	return slices.Contains([]string{manifest.ToolCreate, manifest.ToolClaim, manifest.ToolHeartbeat, manifest.ToolComplete,
		manifest.ToolFail, manifest.ToolCancel, manifest.ToolInspect}, p.Name)
}

// rawExchange posts body with the usual headers plus hdr and returns the
// answer as text: the status, the headers but Date, sorted, and the body.
func rawExchange(t *testing.T, url, body string, hdr map[string]string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for k, vs := range resp.Header {
		if k != "Date" {
			lines = append(lines, fmt.Sprintf("%s: %s", k, strings.Join(vs, ", ")))
		}
	}
	slices.Sort(lines)
	return fmt.Sprintf("HTTP %d\n%s\n\n%s", resp.StatusCode, strings.Join(lines, "\n"), b)
}
