package mcpadapter

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestLegacyVersionsAreEchoed(t *testing.T) {
	f := newFixture(t)
	for _, v := range manifest.LegacyVersions {
		cs := f.client(v, nil)
		ir := cs.InitializeResult()
		if ir.ProtocolVersion != v {
			t.Errorf("initialize %s answered %s", v, ir.ProtocolVersion)
		}
		if ir.ServerInfo.Name != ServerName || ir.Instructions != Instructions {
			t.Errorf("%s: server info %+v", v, ir.ServerInfo)
		}
		assertNoUnservedCapabilities(t, v, ir.Capabilities)
		if _, ok := ir.Capabilities.Extensions[manifest.TasksExtension]; ok {
			t.Errorf("%s: the tasks extension is advertised to a legacy session", v)
		}
		tools, err := cs.ListTools(f.ctx, nil)
		if err != nil || len(tools.Tools) != 7 {
			t.Fatalf("%s: tools/list: %v (%d tools)", v, err, len(tools.Tools))
		}
	}
}

func TestUnknownVersionsNegotiateLatestLegacy(t *testing.T) {
	f := newFixture(t)
	for _, v := range []string{"2024-01-01", "2099-12-31", manifest.ModernVersion, "not-a-version"} {
		res := f.raw().initialize(v)
		if res["protocolVersion"] != "2025-11-25" {
			t.Errorf("initialize %q answered %v, want 2025-11-25", v, res["protocolVersion"])
		}
	}
}

func assertNoUnservedCapabilities(t *testing.T, era string, c *mcp.ServerCapabilities) {
	t.Helper()
	if c == nil {
		t.Fatalf("%s: no capabilities", era)
	}
	b, _ := json.Marshal(c)
	for _, k := range []string{`"logging"`, `"prompts"`, `"completions"`, `"subscribe"`, `"listChanged":true`} {
		if strings.Contains(string(b), k) {
			t.Errorf("%s: capabilities advertise %s: %s", era, k, b)
		}
	}
}

func TestModernClientNeedsNoInitialize(t *testing.T) {
	f := newFixture(t)
	cs := f.client("", nil)
	ir := cs.InitializeResult()
	if ir.ProtocolVersion != modern {
		t.Fatalf("negotiated %s", ir.ProtocolVersion)
	}
	assertNoUnservedCapabilities(t, "discover", ir.Capabilities)
	if _, ok := ir.Capabilities.Extensions[manifest.TasksExtension]; !ok {
		t.Errorf("server/discover does not advertise the tasks extension: %+v", ir.Capabilities.Extensions)
	}
	if ir.Capabilities.Tools == nil || ir.Capabilities.Resources == nil {
		t.Errorf("tools or resources not advertised: %+v", ir.Capabilities)
	}
	_, out := callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": "a"})
	if out["created"] != true {
		t.Fatalf("create: %v", out)
	}
}

func TestDiscoverShape(t *testing.T) {
	f := newFixture(t)
	r := f.raw()
	res := mustResult(t, r.modernCall("server/discover", nil, nil))
	if res["resultType"] != "complete" {
		t.Errorf("resultType %v", res["resultType"])
	}
	got := fmt.Sprint(res["supportedVersions"])
	for _, v := range manifest.Protocols {
		if !strings.Contains(got, v) {
			t.Errorf("supportedVersions %s lacks %s", got, v)
		}
	}
	caps, _ := json.Marshal(res["capabilities"])
	for _, k := range []string{"logging", "prompts", "completions"} {
		if strings.Contains(string(caps), k) {
			t.Errorf("discover advertises %s: %s", k, caps)
		}
	}
	meta, _ := res["_meta"].(map[string]any)
	if si, _ := meta["io.modelcontextprotocol/serverInfo"].(map[string]any); si["name"] != ServerName {
		t.Errorf("serverInfo %v", meta)
	}
	if res["instructions"] != Instructions {
		t.Errorf("instructions %v", res["instructions"])
	}
}

var unservedForTest = []string{"prompts/list", "prompts/get", "completion/complete", "logging/setLevel",
	"resources/subscribe", "resources/unsubscribe", "subscriptions/listen", "tasks/list", "tasks/result", "no/such/method"}

func TestUnservedMethodsBothEras(t *testing.T) {
	f := newFixture(t)
	legacy := f.raw()
	legacy.initialize("2025-11-25")
	modernConn := f.raw()
	for _, m := range unservedForTest {
		wantCode(t, legacy.call(m, map[string]any{}), jsonrpc.CodeMethodNotFound)
		if m == "subscriptions/listen" {
			continue // served in 2026-07-28 for the Tasks extension (listen_test.go)
		}
		wantCode(t, modernConn.modernCall(m, nil, nil), jsonrpc.CodeMethodNotFound)
	}
	// Removed in 2026-07-28 per the spec.
	for _, m := range []string{"ping", "initialize", "logging/setLevel"} {
		wantCode(t, modernConn.modernCall(m, nil, nil), jsonrpc.CodeMethodNotFound)
	}
	// The server advertises resources, so clients list templates too: an
	// empty list, not -32601, in both eras.
	for _, res := range []map[string]any{
		mustResult(t, legacy.call("resources/templates/list", map[string]any{})),
		mustResult(t, modernConn.modernCall("resources/templates/list", nil, nil)),
	} {
		if tpl, ok := res["resourceTemplates"].([]any); !ok || len(tpl) != 0 {
			t.Errorf("resources/templates/list: want an empty resourceTemplates list, got %v", res)
		}
	}
	// Both connections still serve.
	mustResult(t, legacy.call("tools/list", map[string]any{}))
	mustResult(t, modernConn.modernCall("tools/list", nil, nil))
}

func TestModernMetaErrors(t *testing.T) {
	f := newFixture(t)
	r := f.raw()
	wantCode(t, r.call("tools/list", map[string]any{}), jsonrpc.CodeInvalidParams)
	wantCode(t, r.call("tools/list", nil), jsonrpc.CodeInvalidParams)
	for _, v := range []string{"1900-01-01", "2099-01-01", "2025-11-25", ""} {
		je := wantCode(t, r.call("tools/list", map[string]any{"_meta": map[string]any{wire.MetaProtocolVersion: v, wire.MetaClientCapabilities: map[string]any{}}}), -32022)
		var data struct {
			Supported []string `json:"supported"`
			Requested string   `json:"requested"`
		}
		if err := json.Unmarshal(je.Data, &data); err != nil || data.Requested != v || !slices.Contains(data.Supported, modern) {
			t.Errorf("-32022 data for %q: %s", v, je.Data)
		}
	}
	wantCode(t, r.call("tools/list", map[string]any{"_meta": map[string]any{wire.MetaProtocolVersion: 20260728, wire.MetaClientCapabilities: map[string]any{}}}), jsonrpc.CodeInvalidParams)
	wantCode(t, r.call("tools/list", map[string]any{"_meta": map[string]any{wire.MetaProtocolVersion: modern}}), jsonrpc.CodeInvalidParams)
	wantCode(t, r.call("tools/list", map[string]any{"_meta": map[string]any{wire.MetaProtocolVersion: modern, wire.MetaClientCapabilities: "x"}}), jsonrpc.CodeInvalidParams)
	// A modern request followed by initialize on the same connection: the
	// legacy handshake still works, and the modern era is unaffected.
	mustResult(t, r.modernCall("tools/list", nil, nil))
	if res := r.initialize("2025-06-18"); res["protocolVersion"] != "2025-06-18" {
		t.Fatalf("initialize after a modern request: %v", res)
	}
	wantCode(t, r.call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "x", "version": "1"}}), jsonrpc.CodeInvalidRequest)
	mustResult(t, r.modernCall("tools/list", nil, nil))
	mustResult(t, r.call("tools/list", map[string]any{}))
}

func TestToolsListGolden(t *testing.T) {
	f := newFixture(t)
	res := mustResult(t, f.raw().modernCall("tools/list", nil, nil))
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res["tools"]); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "tools_list.golden.json")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./mcpadapter -run TestToolsListGolden -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("tools/list differs from %s; if the change is intended, rerun with -update and review the diff\n%s", golden, buf.String())
	}
	var tools []map[string]any
	json.Unmarshal(buf.Bytes(), &tools)
	var names []string
	for _, tl := range tools {
		names = append(names, tl["name"].(string))
		in := tl["inputSchema"].(map[string]any)
		if in["additionalProperties"] != false {
			t.Errorf("%s: inputSchema allows additional properties", tl["name"])
		}
		if tl["outputSchema"] == nil {
			t.Errorf("%s: no outputSchema", tl["name"])
		}
	}
	if !slices.Equal(names, manifest.AllTools) {
		t.Errorf("tools %v, want %v", names, manifest.AllTools)
	}
}

// canonicalJSON is the test's own canonical encoding for objects of strings,
// booleans, integers, arrays and nested objects: sorted keys, no whitespace,
// no HTML escaping. It is enough for receipts and the manifest and does not
// use package manifest.
func canonicalJSON(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func TestReceiptsAndManifestDigest(t *testing.T) {
	f := newFixture(t)
	cs := f.client("", nil)
	rr, err := cs.ReadResource(f.ctx, &mcp.ReadResourceParams{URI: manifest.ManifestURI})
	if err != nil {
		t.Fatal(err)
	}
	body := rr.Contents[0].Text
	if rr.Contents[0].MIMEType != "application/json" || body != string(f.srv.Manifest().Bytes()) {
		t.Fatalf("manifest resource: %s %q", rr.Contents[0].MIMEType, body)
	}
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	claimed := m["sha256"].(string)
	delete(m, "sha256")
	if got := sha(canonicalJSON(t, m)); got != claimed {
		t.Fatalf("manifest digest %s, recomputed %s", claimed, got)
	}
	if m["humanOnlyOperationsExposed"] != false || fmt.Sprint(m["tools"]) != fmt.Sprint(manifest.AllTools) {
		t.Errorf("manifest content: %v", m)
	}
	// Every tool result carries a receipt recomputable from its parts.
	check := func(out map[string]any, op string) {
		t.Helper()
		rec := out["receipt"].(map[string]any)
		taskID, gen := "", json.Number("0")
		if task, ok := out["task"].(map[string]any); ok {
			taskID = task["task_id"].(string)
			gen = json.Number(fmt.Sprint(task["generation"]))
		}
		want := sha(canonicalJSON(t, map[string]any{"generation": gen, "manifestSha256": claimed, "operation": op, "taskId": taskID}))
		if rec["manifestSha256"] != claimed || rec["receiptSha256"] != want {
			t.Errorf("%s receipt %v, want receiptSha256 %s", op, rec, want)
		}
	}
	_, out := callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": "a"})
	check(out, "create")
	id := out["task"].(map[string]any)["task_id"].(string)
	_, out = callTool(t, cs, manifest.ToolInspect, map[string]any{"task_id": id})
	check(out, "inspect")
	_, out = callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w1"})
	check(out, "claim")
	l := out["lease"].(map[string]any)
	holder := map[string]any{"task_id": id, "owner": "w1", "generation": l["generation"], "claim_token": l["claim_token"]}
	_, out = callTool(t, cs, manifest.ToolHeartbeat, holder)
	check(out, "heartbeat")
	holder["result"] = map[string]any{"ok": true}
	_, out = callTool(t, cs, manifest.ToolComplete, holder)
	check(out, "complete")
	_, out = callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w1"})
	if out["claimed"] != false || out["task"] != nil {
		t.Fatalf("empty claim-next: %v", out)
	}
	check(out, "claim")
}

func TestToolFlowAndErrors(t *testing.T) {
	f := newFixture(t)
	cs := f.client("", nil)
	_, out := callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": "a", "payload": map[string]any{"n": 1}})
	task := out["task"].(map[string]any)
	if task["state"] != "pending" || task["owner"] != nil || task["lease_expires_at"] != nil || task["result"] != nil {
		t.Fatalf("created task: %v", task)
	}
	id := task["task_id"].(string)
	_, out = callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w1", "lease_ms": 2000})
	l := out["lease"].(map[string]any)
	if out["claimed"] != true || l["generation"].(float64) != 1 || len(l["claim_token"].(string)) < 22 {
		t.Fatalf("claim: %v", out)
	}
	if strings.Contains(fmt.Sprint(out["task"]), l["claim_token"].(string)) {
		t.Fatal("the claim token appears in the task")
	}
	_, insp := callTool(t, cs, manifest.ToolInspect, map[string]any{"task_id": id})
	if strings.Contains(fmt.Sprint(insp), l["claim_token"].(string)) {
		t.Fatal("inspect shows the claim token")
	}
	// The lease lapses; another worker reclaims; the first is fenced out.
	f.clock.Advance(3000 * 1e6)
	_, out2 := callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w2", "task_id": id})
	if out2["lease"].(map[string]any)["generation"].(float64) != 2 {
		t.Fatalf("reclaim: %v", out2)
	}
	res, _ := callTool(t, cs, manifest.ToolComplete, map[string]any{"task_id": id, "owner": "w1", "generation": 1, "claim_token": l["claim_token"], "result": "late"})
	if !res.IsError || !strings.Contains(toolText(res), "superseded generation") {
		t.Fatalf("late complete: %v %s", res.IsError, toolText(res))
	}
	for name, tc := range map[string]struct {
		tool string
		args map[string]any
		want string
	}{
		"bad identifier": {manifest.ToolCreate, map[string]any{"workflow_id": "bad id", "node_id": "x"}, "workflow_id must match"},
		"unknown arg":    {manifest.ToolCreate, map[string]any{"workflow_id": "w", "node_id": "x", "force": true}, `unknown argument "force"`},
		"missing":        {manifest.ToolCreate, map[string]any{"workflow_id": "w"}, "node_id is required"},
		"lease bounds":   {manifest.ToolClaim, map[string]any{"owner": "w", "lease_ms": 999}, "lease_ms must be an integer between 1000 and 900000"},
		"negative wait":  {manifest.ToolClaim, map[string]any{"owner": "w", "wait_ms": -1}, "wait_ms must be"},
		"payload type":   {manifest.ToolCreate, map[string]any{"workflow_id": "w", "node_id": "x", "payload": []int{1}}, "payload must be a JSON object"},
		"unknown dep":    {manifest.ToolCreate, map[string]any{"workflow_id": "w", "node_id": "x", "depends_on": []string{"nope"}}, `depends on "nope"`},
		"unknown task":   {manifest.ToolInspect, map[string]any{"task_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "not found"},
		"bad task id":    {manifest.ToolInspect, map[string]any{"task_id": "../etc"}, "task_id must be a task id"},
		"wrong token":    {manifest.ToolHeartbeat, map[string]any{"task_id": id, "owner": "w2", "generation": 2, "claim_token": "x"}, "wrong claim token"},
		"empty error":    {manifest.ToolFail, map[string]any{"task_id": id, "owner": "w2", "generation": 2, "claim_token": "x", "error": ""}, "error must say what went wrong"},
		"float gen":      {manifest.ToolCancel, map[string]any{"task_id": id, "owner": "w2", "generation": 1.5, "claim_token": "x"}, "generation must be an integer"},
	} {
		res, _ := callTool(t, cs, tc.tool, tc.args)
		if !res.IsError || !strings.Contains(toolText(res), tc.want) {
			t.Errorf("%s: isError=%v %q, want it to mention %q", name, res.IsError, toolText(res), tc.want)
		}
	}
	// Protocol errors: unknown tool, arguments not an object.
	r := f.raw()
	wantCode(t, r.modernCall("tools/call", map[string]any{"name": "graph_task_force", "arguments": map[string]any{}}, nil), jsonrpc.CodeInvalidParams)
	wantCode(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolInspect, "arguments": []int{1}}, nil), jsonrpc.CodeInvalidParams)
	wantCode(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolInspect, "arguments": "x"}, nil), jsonrpc.CodeInvalidParams)
}

func TestLargeNumbersSurviveExactly(t *testing.T) {
	f := newFixture(t)
	r := f.raw()
	resp := r.modernCall("tools/call", map[string]any{"name": manifest.ToolCreate, "arguments": json.RawMessage(`{"workflow_id":"w","node_id":"n","payload":{"big":9007199254740993,"neg":-12345678901234567890,"f":1.000000000000000001}}`)}, nil)
	if !strings.Contains(string(resp.Result), `"payload":{"big":9007199254740993,"neg":-12345678901234567890,"f":1.000000000000000001}`) {
		t.Fatalf("payload numbers were altered: %s", resp.Result)
	}
}

func TestProfileNarrowsSurface(t *testing.T) {
	p, err := manifest.ParseProfile([]byte(`{"allowed_tools":["graph_task_claim","graph_task_complete","graph_task_heartbeat"],"resources":false}`))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *Config) { c.Surface = manifest.NewSurface(manifest.Options{Profile: &p}) })
	cs := f.client("", nil)
	tools, err := cs.ListTools(f.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "graph_task_claim,graph_task_complete,graph_task_heartbeat" {
		t.Fatalf("tools %v", names)
	}
	ir := cs.InitializeResult()
	if ir.Capabilities.Resources != nil || ir.Capabilities.Extensions[manifest.TasksExtension] != nil {
		t.Errorf("profile without resources/create still advertises: %+v", ir.Capabilities)
	}
	r := f.raw()
	wantCode(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolCreate, "arguments": map[string]any{"workflow_id": "w", "node_id": "n"}}, nil), jsonrpc.CodeInvalidParams)
	wantCode(t, r.modernCall("resources/list", nil, nil), jsonrpc.CodeMethodNotFound)
	wantCode(t, r.modernCall("resources/read", map[string]any{"uri": manifest.ManifestURI}, nil), jsonrpc.CodeMethodNotFound)
}

func TestPanicIsInternalErrorAndServerKeepsServing(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Register = func(s *mcp.Server) error {
			s.AddTool(&mcp.Tool{Name: "boom", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				panic("kaboom")
			})
			return nil
		}
	})
	r := f.raw()
	wantCode(t, r.modernCall("tools/call", map[string]any{"name": "boom", "arguments": map[string]any{}}, nil), jsonrpc.CodeInternalError)
	mustResult(t, r.modernCall("tools/list", nil, nil))
}

func TestToolErrorsCarryAMachineReadableKind(t *testing.T) {
	f := newFixture(t)
	r := f.raw()
	res := mustResult(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolHeartbeat, "arguments": map[string]any{
		"task_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "owner": "w", "generation": 1, "claim_token": "t"}}, nil))
	detail := res["_meta"].(map[string]any)[tools.ErrorMetaKey].(map[string]any)
	if res["isError"] != true || detail["kind"] != "not_found" {
		t.Fatalf("unknown task: %v", res)
	}
	created := toolOut(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolCreate, "arguments": map[string]any{"workflow_id": "w", "node_id": "n"}}, nil))
	id := created["task"].(map[string]any)["task_id"]
	claim := toolOut(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolClaim, "arguments": map[string]any{"owner": "w", "task_id": id}}, nil))
	l := claim["lease"].(map[string]any)
	res = mustResult(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolHeartbeat, "arguments": map[string]any{
		"task_id": id, "owner": "w", "generation": l["generation"], "claim_token": "wrong"}}, nil))
	detail = res["_meta"].(map[string]any)[tools.ErrorMetaKey].(map[string]any)
	if detail["kind"] != "stale_claim" || detail["reason"] != "wrong claim token" {
		t.Fatalf("stale claim detail: %v", detail)
	}
	res = mustResult(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolCreate, "arguments": map[string]any{"workflow_id": "w", "node_id": "m", "depends_on": []string{"ghost"}}}, nil))
	detail = res["_meta"].(map[string]any)[tools.ErrorMetaKey].(map[string]any)
	if detail["kind"] != "invalid" || detail["field"] != "depends_on" {
		t.Fatalf("validation detail: %v", detail)
	}
}

func TestClientCancellationIsNotAnInternalError(t *testing.T) {
	var logs testwait.Buffer
	var mu sync.Mutex
	outcomes := map[string]string{}
	f := newFixture(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.OnToolCall = func(tool, outcome string) { mu.Lock(); outcomes[tool] = outcome; mu.Unlock() }
	})
	r := f.raw()
	id, _ := jsonrpc.MakeID(float64(99))
	params, _ := json.Marshal(map[string]any{"name": manifest.ToolClaim, "arguments": map[string]any{"owner": "w", "wait_ms": 20000}, "_meta": modernMeta(nil)})
	if err := r.conn.Write(r.ctx, &jsonrpc.Request{ID: id, Method: "tools/call", Params: params}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the claim to park", func() bool { return f.store.Waiters() > 0 })
	r.notify("notifications/cancelled", map[string]any{"requestId": 99, "reason": "worker stopping", "_meta": modernMeta(nil)})
	testwait.For(t, "the cancelled claim's outcome", func() bool { mu.Lock(); defer mu.Unlock(); return outcomes[manifest.ToolClaim] != "" })
	mu.Lock()
	defer mu.Unlock()
	if outcomes[manifest.ToolClaim] != "cancelled" {
		t.Fatalf("outcome %q, want cancelled", outcomes[manifest.ToolClaim])
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("a client cancellation was logged as an error:\n%s", logs.String())
	}
	// The cancelled request gets no response: the next message on the
	// connection is the answer to a later request.
	next, _ := jsonrpc.MakeID(float64(100))
	lp, _ := json.Marshal(map[string]any{"_meta": modernMeta(nil)})
	if err := r.conn.Write(r.ctx, &jsonrpc.Request{ID: next, Method: "tools/list", Params: lp}); err != nil {
		t.Fatal(err)
	}
	msg, err := r.conn.Read(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if resp, ok := msg.(*jsonrpc.Response); !ok || resp.ID != next {
		t.Fatalf("got %#v before the answer to the next request; a cancelled request must not be answered", msg)
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
		detail, _ := res["_meta"].(map[string]any)[tools.ErrorMetaKey].(map[string]any)
		if res["isError"] != true || detail["kind"] != "invalid" || detail["field"] != c.field {
			t.Errorf("%s %v: want kind invalid with field %q, got %v", c.tool, c.args, c.field, res)
		}
	}
	// The same overflow rule as over HTTP (TestHTTPOverflowingNumberIsAToolError).
	for _, raw := range []string{`{"workflow_id":"w","node_id":"n","payload":{"x":1e400}}`} {
		res := mustResult(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolCreate, "arguments": json.RawMessage(raw)}, nil))
		detail, _ := res["_meta"].(map[string]any)[tools.ErrorMetaKey].(map[string]any)
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
