package mcpadapter

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/mcptest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
)

var tasksCaps = map[string]any{"extensions": map[string]any{manifest.TasksExtension: map[string]any{}}}

// worker claims and finishes tasks through the ordinary tools.
type worker struct {
	t    *testing.T
	r    *raw
	name string
}

func (w *worker) claim(taskID string) map[string]any {
	w.t.Helper()
	args := map[string]any{"owner": w.name}
	if taskID != "" {
		args["task_id"] = taskID
	}
	out := toolOut(w.t, w.r.modernCall("tools/call", map[string]any{"name": manifest.ToolClaim, "arguments": args}, nil))
	if out["claimed"] != true {
		w.t.Fatalf("%s could not claim: %v", w.name, out)
	}
	return out
}

// toolOut decodes a successful tools/call result's structured content.
func toolOut(t *testing.T, resp *jsonrpc.Response) map[string]any {
	t.Helper()
	res := mustResult(t, resp)
	if res["isError"] == true {
		t.Fatalf("tool error: %v", res["content"])
	}
	out, ok := res["structuredContent"].(map[string]any)
	if !ok {
		t.Fatalf("no structured content: %v", res)
	}
	return out
}

func (w *worker) finish(claim map[string]any, tool string, extra map[string]any) *jsonrpc.Response {
	args := holderArgs(claim)
	for k, v := range extra {
		args[k] = v
	}
	return w.r.modernCall("tools/call", map[string]any{"name": tool, "arguments": args}, nil)
}

func createTask(t *testing.T, r *raw, caps map[string]any, wf, node string, deps ...string) map[string]any {
	t.Helper()
	args := map[string]any{"workflow_id": wf, "node_id": node}
	if len(deps) > 0 {
		args["depends_on"] = deps
	}
	return mustResult(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolCreate, "arguments": args}, caps))
}

func tasksGet(t *testing.T, r *raw, id string) map[string]any {
	t.Helper()
	return mustResult(t, r.modernCall(tools.MethodTasksGet, map[string]any{"taskId": id}, tasksCaps))
}

// Both flows at once against one server: a core-only client polls
// graph_task_inspect while a Tasks-aware client polls tasks/get, and workers
// use the ordinary tools.
func TestTasksBothFlowsOneServer(t *testing.T) {
	f := newFixture(t)
	core, aware, w := f.raw(), f.raw(), &worker{t: t, r: f.raw(), name: "w1"}

	// (1) core-only: an ordinary result, then inspect polling.
	plain := createTask(t, core, nil, "core", "a")
	if plain["resultType"] == "task" || plain["structuredContent"] == nil {
		t.Fatalf("core-only create returned %v", plain)
	}
	coreID := plain["structuredContent"].(map[string]any)["task"].(map[string]any)["task_id"].(string)

	// (2) Tasks-aware: a flat CreateTaskResult.
	handle := createTask(t, aware, tasksCaps, "aware", "a")
	if handle["resultType"] != "task" || handle["status"] != "working" || handle["task"] != nil || handle["content"] != nil {
		t.Fatalf("task handle: %v", handle)
	}
	if v, ok := handle["ttlMs"]; !ok || v != nil {
		t.Fatalf("ttlMs must be present and null (kept until pruned): %v", handle)
	}
	if handle["pollIntervalMs"] != float64(tools.TaskPollIntervalMs) || handle["createdAt"] == nil || handle["lastUpdatedAt"] == nil {
		t.Fatalf("task handle fields: %v", handle)
	}
	if _, ok := handle["_meta"].(map[string]any)[tools.ReceiptMetaKey]; !ok {
		t.Fatalf("no receipt in _meta: %v", handle["_meta"])
	}
	awareID := handle["taskId"].(string)
	if g := tasksGet(t, aware, awareID); g["resultType"] != "complete" || g["status"] != "working" || !strings.HasPrefix(g["statusMessage"].(string), "pending") || g["result"] != nil {
		t.Fatalf("tasks/get before claim: %v", g)
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// The worker serves both at once, in creation order.
		for _, id := range []string{coreID, awareID} {
			c := w.claim(id)
			toolOut(t, w.finish(c, manifest.ToolComplete, map[string]any{"result": map[string]any{"done": id}}))
		}
	}()
	wg.Wait()

	insp := toolOut(t, core.modernCall("tools/call", map[string]any{"name": manifest.ToolInspect, "arguments": map[string]any{"task_id": coreID}}, nil))
	if task := insp["task"].(map[string]any); task["state"] != "completed" || task["result"].(map[string]any)["done"] != coreID {
		t.Fatalf("core client sees %v", task)
	}
	g := tasksGet(t, aware, awareID)
	res, _ := g["result"].(map[string]any)
	if g["status"] != "completed" || res["isError"] != false {
		t.Fatalf("tasks/get after completion: %v", g)
	}
	// The inlined CallToolResult is a 2026-07-28 result: the official Tasks
	// client refuses to settle one without resultType.
	if res["resultType"] != "complete" {
		t.Fatalf("inlined result without resultType \"complete\": %v", res)
	}
	// It is what graph_task_create declares in its outputSchema ({task,
	// created, receipt}), with the task as it is now: the worker's result
	// is task.result.
	sc := res["structuredContent"].(map[string]any)
	if task, _ := sc["task"].(map[string]any); task["task_id"] != awareID || task["state"] != "completed" || task["result"].(map[string]any)["done"] != awareID {
		t.Fatalf("worker result not in result.structuredContent.task.result: %v", res)
	}
	if sc["created"] != true || sc["receipt"] == nil || len(sc) != 3 {
		t.Fatalf("result.structuredContent is not graph_task_create's output: %v", sc)
	}
	if content := res["content"].([]any); len(content) != 1 || !strings.Contains(content[0].(map[string]any)["text"].(string), awareID) {
		t.Fatalf("result content: %v", content)
	}
}

func TestTasksFailureAndCancel(t *testing.T) {
	f := newFixture(t)
	aware, w := f.raw(), &worker{t: t, r: f.raw(), name: "w1"}
	failing := createTask(t, aware, tasksCaps, "wf", "failing")["taskId"].(string)
	downstream := createTask(t, aware, tasksCaps, "wf", "downstream", "failing")["taskId"].(string)
	if g := tasksGet(t, aware, downstream); g["status"] != "working" || !strings.Contains(g["statusMessage"].(string), "waiting on failing") {
		t.Fatalf("blocked task: %v", g)
	}
	c := w.claim(failing)
	if g := tasksGet(t, aware, failing); !strings.Contains(g["statusMessage"].(string), "claimed by w1 at generation 1") {
		t.Fatalf("claimed task: %v", g)
	}
	toolOut(t, w.finish(c, manifest.ToolFail, map[string]any{"error": "compiler exploded"}))
	g := tasksGet(t, aware, failing)
	res := g["result"].(map[string]any)
	if g["status"] != "completed" || res["isError"] != true || !strings.Contains(res["content"].([]any)[0].(map[string]any)["text"].(string), "compiler exploded") {
		t.Fatalf("a worker failure must surface as completed with isError: %v", g)
	}
	if res["resultType"] != "complete" {
		t.Fatalf("inlined failure without resultType \"complete\": %v", res)
	}
	if g := tasksGet(t, aware, downstream); g["status"] != "cancelled" || !strings.Contains(g["statusMessage"].(string), failing) {
		t.Fatalf("downstream of a failure: %v", g)
	}

	// tasks/cancel on a claimed task fences the worker out.
	victim := createTask(t, aware, tasksCaps, "wf2", "v")["taskId"].(string)
	c = w.claim(victim)
	ack := mustResult(t, aware.modernCall(tools.MethodTasksCancel, map[string]any{"taskId": victim}, tasksCaps))
	if ack["resultType"] != "complete" || len(ack) > 3 {
		t.Fatalf("tasks/cancel ack: %v", ack)
	}
	if g := tasksGet(t, aware, victim); g["status"] != "cancelled" {
		t.Fatalf("cancelled task: %v", g)
	}
	late := mustResult(t, w.finish(c, manifest.ToolComplete, map[string]any{"result": 1}))
	if late["isError"] != true || !strings.Contains(late["content"].([]any)[0].(map[string]any)["text"].(string), "already finished") {
		t.Fatalf("the worker was not fenced out: %v", late)
	}
	// Cancelling a finished task is acknowledged and changes nothing.
	before := tasksGet(t, aware, failing)
	mustResult(t, aware.modernCall(tools.MethodTasksCancel, map[string]any{"taskId": failing}, tasksCaps))
	if after := tasksGet(t, aware, failing); after["status"] != before["status"] || after["lastUpdatedAt"] != before["lastUpdatedAt"] {
		t.Fatalf("cancel changed a finished task: %v -> %v", before, after)
	}
	// tasks/update is acknowledged; no key is outstanding, so it is ignored.
	if ack := mustResult(t, aware.modernCall(tools.MethodTasksUpdate, map[string]any{"taskId": failing, "inputResponses": map[string]any{"k": map[string]any{}}}, tasksCaps)); ack["resultType"] != "complete" {
		t.Fatalf("tasks/update ack: %v", ack)
	}
	many := map[string]any{}
	for i := 0; i <= tools.MaxUpdateKeys; i++ {
		many[strings.Repeat("k", i+1)] = 1
	}
	wantCode(t, aware.modernCall(tools.MethodTasksUpdate, map[string]any{"taskId": failing, "inputResponses": many}, tasksCaps), jsonrpc.CodeInvalidParams)
	// Unknown task ids are -32602 naming the id.
	for _, m := range []string{tools.MethodTasksGet, tools.MethodTasksCancel, tools.MethodTasksUpdate} {
		je := wantCode(t, aware.modernCall(m, map[string]any{"taskId": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, tasksCaps), jsonrpc.CodeInvalidParams)
		if !strings.Contains(je.Message, "01ARZ3NDEKTSV4RRFFQ69G5FAV") {
			t.Errorf("%s: %q does not name the task", m, je.Message)
		}
	}
}

func TestTasksNegotiation(t *testing.T) {
	f := newFixture(t)
	r := f.raw()
	id := createTask(t, r, tasksCaps, "wf", "a")["taskId"].(string)
	// Declared on an earlier request only: still -32021, with the capability named.
	for _, m := range []string{tools.MethodTasksGet, tools.MethodTasksCancel, tools.MethodTasksUpdate} {
		je := wantCode(t, r.modernCall(m, map[string]any{"taskId": id}, nil), -32021)
		var data map[string]map[string]map[string]any
		if err := json.Unmarshal(je.Data, &data); err != nil || data["requiredCapabilities"]["extensions"][manifest.TasksExtension] == nil {
			t.Errorf("%s: -32021 data %s", m, je.Data)
		}
	}
	// The same request without the declaration gets the ordinary result.
	if res := createTask(t, r, nil, "wf", "b"); res["resultType"] == "task" {
		t.Fatal("a non-declaring create got a task handle")
	}
	// A legacy session never gets a task handle, even declaring the extension
	// at initialize, and tasks/* are -32021 there.
	legacy := f.raw()
	resp := legacy.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"extensions": map[string]any{manifest.TasksExtension: map[string]any{}}}, "clientInfo": map[string]any{"name": "x", "version": "1"}})
	mustResult(t, resp)
	legacy.notify("notifications/initialized", map[string]any{})
	res := mustResult(t, legacy.call("tools/call", map[string]any{"name": manifest.ToolCreate, "arguments": map[string]any{"workflow_id": "wf", "node_id": "c"}}))
	if res["resultType"] == "task" || res["taskId"] != nil || res["structuredContent"] == nil {
		t.Fatalf("legacy create: %v", res)
	}
	wantCode(t, legacy.call(tools.MethodTasksGet, map[string]any{"taskId": id}), -32021)
	wantCode(t, legacy.call("tasks/result", map[string]any{"taskId": id}), jsonrpc.CodeMethodNotFound)
	// An invalid create from a declaring client: the ordinary tool error.
	bad := mustResult(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolCreate, "arguments": map[string]any{"workflow_id": "bad id", "node_id": "x"}}, tasksCaps))
	if bad["isError"] != true || bad["resultType"] == "task" {
		t.Fatalf("invalid create with the extension: %v", bad)
	}
	// Other tools never return a task handle.
	out := mustResult(t, r.modernCall("tools/call", map[string]any{"name": manifest.ToolInspect, "arguments": map[string]any{"task_id": id}}, tasksCaps))
	if out["resultType"] != "complete" {
		t.Fatalf("inspect with the extension declared: %v", out)
	}
}

func TestTasksExtensionDisabled(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Surface = manifest.NewSurface(manifest.Options{DisableTasksExtension: true}) })
	cs := f.client("", nil)
	if _, ok := cs.InitializeResult().Capabilities.Extensions[manifest.TasksExtension]; ok {
		t.Fatal("a disabled extension is advertised")
	}
	r := f.raw()
	res := createTask(t, r, tasksCaps, "wf", "a")
	if res["resultType"] == "task" {
		t.Fatal("a disabled extension returned a task handle")
	}
	id := res["structuredContent"].(map[string]any)["task"].(map[string]any)["task_id"]
	for _, m := range []string{tools.MethodTasksGet, tools.MethodTasksCancel, tools.MethodTasksUpdate} {
		wantCode(t, r.modernCall(m, map[string]any{"taskId": id}, tasksCaps), jsonrpc.CodeMethodNotFound)
	}
}

// A Tasks-aware create honours request_id as the tool call does: its
// repeat is the same task handle, and a reuse with another node is refused.
func TestTasksCreateWithRequestID(t *testing.T) {
	f := newFixture(t)
	aware := f.raw()
	create := func(node string) map[string]any {
		args := map[string]any{"workflow_id": "rq", "node_id": node, "request_id": "5b7e-create"}
		return mustResult(t, aware.modernCall("tools/call", map[string]any{"name": manifest.ToolCreate, "arguments": args}, tasksCaps))
	}
	first, again := create("a"), create("a")
	if first["resultType"] != "task" || first["taskId"] == nil || first["taskId"] != again["taskId"] {
		t.Fatalf("a repeated Tasks-aware create: %v then %v, want the same task handle", first["taskId"], again["taskId"])
	}
	refused := create("b")
	if refused["isError"] != true || !strings.Contains(fmt.Sprint(refused["content"]), "request_id") {
		t.Fatalf("a reused request_id with another node_id: %v", refused)
	}
}

var holderArgs = mcptest.HolderArgs
