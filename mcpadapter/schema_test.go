package mcpadapter

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
)

// schemaChecker validates results against the output schemas tools/list
// publishes, with an independent JSON Schema implementation, as a client
// that validates structured results (the MCP Inspector) does: a result
// without isError must carry structured content that satisfies its tool's
// outputSchema; a tool error may carry none, but what it carries must
// satisfy it too.
type schemaChecker struct {
	t       *testing.T
	schemas map[string]*jsonschema.Resolved
	checked map[string]int // results checked, by tool or "tasks/get of <tool>"
}

func newSchemaChecker(t *testing.T, r *raw) *schemaChecker {
	t.Helper()
	list := mustResult(t, r.modernCall("tools/list", nil, nil))
	c := &schemaChecker{t: t, schemas: map[string]*jsonschema.Resolved{}, checked: map[string]int{}}
	for _, tool := range list["tools"].([]any) {
		tool := tool.(map[string]any)
		b, _ := json.Marshal(tool["outputSchema"])
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: the published output schema does not parse: %v", tool["name"], err)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: the published output schema does not resolve: %v", tool["name"], err)
		}
		c.schemas[tool["name"].(string)] = rs
	}
	if len(c.schemas) != len(manifest.AllTools) {
		t.Fatalf("tools/list published %d output schemas, want %d", len(c.schemas), len(manifest.AllTools))
	}
	return c
}

// result checks a CallToolResult of tool, as what: the answer of a
// tools/call or the result a task handle settled with.
func (c *schemaChecker) result(tool, what string, res map[string]any) {
	c.t.Helper()
	sc, has := res["structuredContent"]
	if !has {
		if res["isError"] != true {
			c.t.Errorf("%s: a result without isError carries no structured content, though %s declares an outputSchema: %v", what, tool, res)
		}
		c.checked[what]++
		return
	}
	var v any
	b, _ := json.Marshal(sc)
	_ = json.Unmarshal(b, &v)
	if err := c.schemas[tool].Validate(v); err != nil {
		c.t.Errorf("%s: the structured content does not satisfy %s's outputSchema: %v\n%.600s", what, tool, err, b)
	}
	// The text is the same JSON, for clients that read only content.
	if content, _ := res["content"].([]any); len(content) != 1 || !json.Valid([]byte(content[0].(map[string]any)["text"].(string))) {
		c.t.Errorf("%s: the text content is not the structured content as JSON: %v", what, res["content"])
	}
	c.checked[what]++
}

// call runs a tools/call and checks its answer; it returns the structured
// content (nil for a tool error).
func (c *schemaChecker) call(r *raw, tool string, args map[string]any, caps map[string]any) map[string]any {
	c.t.Helper()
	res := mustResult(c.t, r.modernCall("tools/call", map[string]any{"name": tool, "arguments": args}, caps))
	if res["resultType"] == "task" {
		return res // a task handle: settled through tasks/get
	}
	c.result(tool, tool, res)
	out, _ := res["structuredContent"].(map[string]any)
	return out
}

// get runs tasks/get and checks the result a finished handle carries
// against graph_task_create's outputSchema.
func (c *schemaChecker) get(r *raw, taskID string) map[string]any {
	c.t.Helper()
	g := tasksGet(c.t, r, taskID)
	if inner, ok := g["result"].(map[string]any); ok {
		c.result(manifest.ToolCreate, "tasks/get of "+manifest.ToolCreate, inner)
	} else {
		c.checked["tasks/get while "+g["status"].(string)]++
	}
	return g
}

// Every result a client gets validates against its tool's declared output
// schema: every tool's every kind of answer, and the results task handles
// settle with through tasks/get (completed, failed, cancelled). The MCP
// Inspector (2.12.0, 2026-07-28) refused the result of a completed handle,
// which was the worker's result rather than graph_task_create's (issue 29
// item 1); scripts/clients-check runs it too.
func TestEveryResultSatisfiesItsOutputSchema(t *testing.T) {
	f := newFixture(t)
	r := f.raw()
	c := newSchemaChecker(t, r)
	holder := func(claim map[string]any) map[string]any { return holderArgs(claim) }

	// graph_task_create: created, then found again.
	c.call(r, manifest.ToolCreate, map[string]any{"workflow_id": "s", "node_id": "a", "payload": map[string]any{"n": 1}, "requires": []string{"cpu"}}, nil)
	c.call(r, manifest.ToolCreate, map[string]any{"workflow_id": "s", "node_id": "a", "payload": map[string]any{"n": 1}, "requires": []string{"cpu"}}, nil)
	c.call(r, manifest.ToolCreate, map[string]any{"workflow_id": "s", "node_id": "b", "depends_on": []string{"a"}, "not_before": f.clock.Now().Add(time.Hour).Format(time.RFC3339)}, nil)
	for _, n := range []string{"c", "d", "e", "f"} {
		c.call(r, manifest.ToolCreate, map[string]any{"workflow_id": "s", "node_id": n}, nil)
	}
	// The whole-graph form: created, found again, and through the Tasks
	// extension (the ordinary result, not a handle).
	graph := map[string]any{"workflow_id": "g", "nodes": []any{map[string]any{"node_id": "x"}, map[string]any{"node_id": "y", "depends_on": []string{"x"}}}}
	c.call(r, manifest.ToolCreate, graph, nil)
	c.call(r, manifest.ToolCreate, graph, nil)
	if g := c.call(r, manifest.ToolCreate, graph, tasksCaps); g["resultType"] == "task" {
		t.Fatalf("a whole graph got a task handle: %v", g)
	}
	// graph_task_claim: nothing (without and with capabilities), then
	// tasks with their dependencies, by id and next.
	c.call(r, manifest.ToolClaim, map[string]any{"owner": "w", "workflow_id": "none"}, nil)
	a := c.call(r, manifest.ToolClaim, map[string]any{"owner": "w", "workflow_id": "s", "capabilities": []string{"cpu"}, "lease_ms": 60000}, nil)
	c.call(r, manifest.ToolHeartbeat, holder(a), nil)
	// graph_task_complete with claim_next: it claims (next is a claim's
	// answer), then nothing (next null, with the hint of an unknown
	// workflow), then the refusal of claim_next with request_id.
	cn := c.call(r, manifest.ToolComplete, map[string]any{"task_id": holder(a)["task_id"], "owner": "w", "generation": holder(a)["generation"], "claim_token": holder(a)["claim_token"], "result": []any{1, "two", nil}, "claim_next": map[string]any{"workflow_id": "s"}}, nil)
	next := cn["next"].(map[string]any)
	c.call(r, manifest.ToolComplete, map[string]any{"task_id": holder(next)["task_id"], "owner": "w", "generation": holder(next)["generation"], "claim_token": holder(next)["claim_token"], "result": 1, "claim_next": map[string]any{"workflow_id": "none"}}, nil)
	c.call(r, manifest.ToolComplete, map[string]any{"task_id": holder(next)["task_id"], "owner": "w", "generation": holder(next)["generation"], "claim_token": holder(next)["claim_token"], "result": 1, "claim_next": map[string]any{}, "request_id": "r"}, nil)
	d := c.call(r, manifest.ToolClaim, map[string]any{"owner": "w", "workflow_id": "s"}, nil)
	c.call(r, manifest.ToolFail, map[string]any{"task_id": holder(d)["task_id"], "owner": "w", "generation": holder(d)["generation"], "claim_token": holder(d)["claim_token"], "error": "again", "retryable": true, "retry_after_ms": 0}, nil)
	d = c.call(r, manifest.ToolClaim, map[string]any{"owner": "w", "task_id": holder(d)["task_id"]}, nil)
	c.call(r, manifest.ToolFail, map[string]any{"task_id": holder(d)["task_id"], "owner": "w", "generation": holder(d)["generation"], "claim_token": holder(d)["claim_token"], "error": "broken"}, nil)
	e := c.call(r, manifest.ToolClaim, map[string]any{"owner": "w", "workflow_id": "s"}, nil)
	c.call(r, manifest.ToolCancel, map[string]any{"task_id": holder(e)["task_id"], "owner": "w", "generation": holder(e)["generation"], "claim_token": holder(e)["claim_token"], "release": true}, nil)
	e = c.call(r, manifest.ToolClaim, map[string]any{"owner": "w", "task_id": holder(e)["task_id"]}, nil)
	c.call(r, manifest.ToolCancel, holder(e), nil)
	// graph_task_inspect in its three forms.
	c.call(r, manifest.ToolInspect, map[string]any{"task_id": holder(a)["task_id"]}, nil)
	c.call(r, manifest.ToolInspect, map[string]any{"workflow_id": "s", "node_id": "b"}, nil)
	c.call(r, manifest.ToolInspect, map[string]any{"workflow_id": "s"}, nil)
	// Tool errors.
	c.call(r, manifest.ToolHeartbeat, holder(a), nil)
	c.call(r, manifest.ToolInspect, map[string]any{"task_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, nil)

	// Task handles, settled every way through tasks/get.
	handle := func(node string) string {
		h := c.call(r, manifest.ToolCreate, map[string]any{"workflow_id": "h", "node_id": node}, tasksCaps)
		if h["resultType"] != "task" {
			t.Fatalf("create with the extension declared: %v", h)
		}
		return h["taskId"].(string)
	}
	done, failed, gone := handle("done"), handle("failed"), handle("gone")
	c.get(r, done)
	w := c.call(r, manifest.ToolClaim, map[string]any{"owner": "w", "task_id": done}, nil)
	c.get(r, done)
	c.call(r, manifest.ToolComplete, map[string]any{"task_id": done, "owner": "w", "generation": holder(w)["generation"], "claim_token": holder(w)["claim_token"], "result": map[string]any{"answer": 42}}, nil)
	if g := c.get(r, done); g["status"] != "completed" {
		t.Fatalf("tasks/get of the completed task: %v", g)
	} else if sc := g["result"].(map[string]any)["structuredContent"].(map[string]any); fmt.Sprint(sc["task"].(map[string]any)["result"]) != "map[answer:42]" {
		t.Fatalf("the settled result does not carry the worker's result in task.result: %v", sc)
	}
	w = c.call(r, manifest.ToolClaim, map[string]any{"owner": "w", "task_id": failed}, nil)
	c.call(r, manifest.ToolFail, map[string]any{"task_id": failed, "owner": "w", "generation": holder(w)["generation"], "claim_token": holder(w)["claim_token"], "error": "no"}, nil)
	c.call(r, manifest.ToolFail, map[string]any{"task_id": failed, "owner": "w", "generation": holder(w)["generation"], "claim_token": holder(w)["claim_token"], "error": "no"}, nil)
	if g := c.get(r, failed); g["status"] != "completed" || g["result"].(map[string]any)["isError"] != true {
		t.Fatalf("tasks/get of the failed task: %v", g)
	}
	resp := r.modernCall(tools.MethodTasksCancel, map[string]any{"taskId": gone}, tasksCaps)
	if resp.Error != nil {
		t.Fatalf("tasks/cancel: %v", resp.Error)
	}
	c.get(r, gone)

	for _, tool := range manifest.AllTools {
		if c.checked[tool] == 0 {
			t.Errorf("no result of %s was checked", tool)
		}
	}
	if c.checked["tasks/get of "+manifest.ToolCreate] < 2 {
		t.Errorf("settled results checked: %v", c.checked)
	}
	var kinds []string
	for k, n := range c.checked {
		kinds = append(kinds, fmt.Sprintf("%s ×%d", k, n))
	}
	t.Logf("checked: %s", strings.Join(kinds, ", "))
}
