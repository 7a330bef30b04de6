package mcpadapter

import (
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// TestUpstreamResultsAndReleaseOverMCP drives issue 16's worker tools with
// the SDK client: a claim returns the dependencies' results within the
// answer's bound, inspect by workflow_id + node_id returns an omitted result
// whole, and cancel with release gives the claim back without penalty.
func TestUpstreamResultsAndReleaseOverMCP(t *testing.T) {
	f := newFixture(t)
	cs := f.client("", nil)
	ids := map[string]string{}
	for _, n := range []struct {
		node string
		deps []string
	}{{"a", nil}, {"b", nil}, {"c", []string{"a", "b"}}} {
		args := map[string]any{"workflow_id": "wf", "node_id": n.node}
		if n.deps != nil {
			args["depends_on"] = n.deps
		}
		_, out := callTool(t, cs, manifest.ToolCreate, args)
		ids[n.node] = out["task"].(map[string]any)["task_id"].(string)
	}
	big := strings.Repeat("x", taskgraph.MaxDependencyResultBytes*3/4)
	for _, node := range []string{"a", "b"} {
		_, out := callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "up", "task_id": ids[node]})
		l := out["lease"].(map[string]any)
		res, _ := callTool(t, cs, manifest.ToolComplete, map[string]any{"task_id": ids[node], "owner": "up", "generation": l["generation"], "claim_token": l["claim_token"], "result": big})
		if res.IsError {
			t.Fatalf("complete %s: %s", node, toolText(res))
		}
	}
	_, out := callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "down", "workflow_id": "wf"})
	if out["claimed"] != true || out["task"].(map[string]any)["node_id"] != "c" {
		t.Fatalf("claim-next: %v", out["task"])
	}
	deps := out["dependencies"].([]any)
	if len(deps) != 2 {
		t.Fatalf("dependencies: %v", deps)
	}
	da, db := deps[0].(map[string]any), deps[1].(map[string]any)
	if da["node_id"] != "a" || da["task_id"] != ids["a"] || da["state"] != "completed" || da["result"] != big || da["result_omitted"] != false {
		t.Fatalf("dependency a: %v %v %v (result %d bytes)", da["node_id"], da["state"], da["result_omitted"], len(da["result"].(string)))
	}
	if db["node_id"] != "b" || db["result"] != nil || db["result_omitted"] != true {
		t.Fatalf("dependency b: %v %v omitted %v", db["node_id"], db["state"], db["result_omitted"])
	}
	// The omitted result, read by name.
	_, insp := callTool(t, cs, manifest.ToolInspect, map[string]any{"workflow_id": "wf", "node_id": "b"})
	if insp["task"].(map[string]any)["result"] != big {
		t.Fatal("inspect by name did not return b's result whole")
	}
	if d := insp["dependencies"].([]any); len(d) != 0 {
		t.Fatalf("b has no dependencies, inspect shows %v", d)
	}
	// Release: back to pending, the attempt not counted, claimable again.
	l := out["lease"].(map[string]any)
	hold := map[string]any{"task_id": ids["c"], "owner": "down", "generation": l["generation"], "claim_token": l["claim_token"]}
	res, out := callTool(t, cs, manifest.ToolCancel, merge(hold, map[string]any{"release": true}))
	task := out["task"].(map[string]any)
	if res.IsError || task["state"] != "pending" || task["attempts"].(float64) != 0 || task["owner"] != nil {
		t.Fatalf("release: %s %v", toolText(res), task)
	}
	res, _ = callTool(t, cs, manifest.ToolComplete, merge(hold, map[string]any{"result": 1}))
	if !res.IsError || !strings.Contains(toolText(res), "claim no longer held") {
		t.Fatalf("complete by the released claim: %v %s", res.IsError, toolText(res))
	}
	_, out = callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "other", "workflow_id": "wf"})
	if out["claimed"] != true || out["lease"].(map[string]any)["generation"].(float64) != 2 || out["task"].(map[string]any)["attempts"].(float64) != 1 {
		t.Fatalf("claim after release: %v", out)
	}
	// Without release, or release false, cancel means what it meant.
	_, out = callTool(t, cs, manifest.ToolCancel, merge(hold, map[string]any{"generation": 2, "owner": "other", "claim_token": out["lease"].(map[string]any)["claim_token"], "release": false}))
	if out["task"].(map[string]any)["state"] != "cancelled" {
		t.Fatalf("cancel with release false: %v", out["task"])
	}
	for name, tc := range map[string]struct {
		tool string
		args map[string]any
		want string
	}{
		"release type":     {manifest.ToolCancel, merge(hold, map[string]any{"release": "yes"}), "release must be true or false"},
		"inspect both":     {manifest.ToolInspect, map[string]any{"task_id": ids["a"], "workflow_id": "wf", "node_id": "a"}, "task_id and workflow_id cannot be given together; " + inspectForms},
		"inspect id+node":  {manifest.ToolInspect, map[string]any{"task_id": ids["a"], "node_id": "a"}, "task_id and node_id cannot be given together; " + inspectForms},
		"inspect half":     {manifest.ToolInspect, map[string]any{"node_id": "a"}, "workflow_id is required with node_id; " + inspectForms},
		"inspect neither":  {manifest.ToolInspect, map[string]any{}, "task_id or workflow_id is required; " + inspectForms},
		"inspect no wf":    {manifest.ToolInspect, map[string]any{"workflow_id": "nope"}, `workflow "nope" not found`},
		"inspect bad node": {manifest.ToolInspect, map[string]any{"workflow_id": "wf", "node_id": "bad id"}, "node_id must match"},
		"inspect no node":  {manifest.ToolInspect, map[string]any{"workflow_id": "wf", "node_id": "zz"}, `node "zz" of workflow "wf" not found`},
	} {
		res, _ := callTool(t, cs, tc.tool, tc.args)
		if !res.IsError || !strings.Contains(toolText(res), tc.want) {
			t.Errorf("%s: isError=%v %q, want it to mention %q", name, res.IsError, toolText(res), tc.want)
		}
	}
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// TestRoutingAndRetryTimingOverMCP drives capability routing and retry
// timing with the SDK client: a parked claim-next with gpu is woken by a gpu
// task while a claim without capabilities finds nothing; a retryable failure
// with retry_after_ms is not claimable until the server's clock passes it,
// and then is.
func TestRoutingAndRetryTimingOverMCP(t *testing.T) {
	f := newFixture(t)
	cs := f.client("", nil)
	type answer struct {
		out  map[string]any
		took time.Duration
	}
	parked := make(chan answer, 1)
	go func() {
		start := time.Now()
		_, out := callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "gpu1", "capabilities": []string{"gpu"}, "wait_ms": 30000})
		parked <- answer{out, time.Since(start)}
	}()
	testwait.For(t, "the claim with gpu to park", func() bool { return f.store.Waiters() > 0 })
	_, out := callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "r", "node_id": "g", "requires": []string{"gpu"}})
	id := out["task"].(map[string]any)["task_id"].(string)
	a := testwait.Recv(t, "the parked claim with gpu to answer", parked)
	// Answering before its own 30 s wait ran out is what tells that the gpu
	// task woke it (the store's timer, not a bound on the test's speed).
	if a.took >= 30*time.Second {
		t.Fatalf("the parked claim with gpu answered after its whole 30 s wait: the gpu task did not wake it")
	}
	got := a.out
	if got["claimed"] != true || got["task"].(map[string]any)["task_id"] != id {
		t.Fatalf("parked claim: %v", got)
	}
	l := got["lease"].(map[string]any)
	hold := map[string]any{"task_id": id, "owner": "gpu1", "generation": l["generation"], "claim_token": l["claim_token"]}
	_, out = callTool(t, cs, manifest.ToolFail, merge(hold, map[string]any{"error": "GPU busy", "retryable": true, "retry_after_ms": 60000}))
	task := out["task"].(map[string]any)
	if task["state"] != "pending" || task["due_at"] != "2026-05-01T09:01:00.000Z" {
		t.Fatalf("after retry_after_ms: %v", task)
	}
	for _, caps := range [][]string{nil, {"gpu"}} {
		args := map[string]any{"owner": "w"}
		if caps != nil {
			args["capabilities"] = caps
		}
		if _, out := callTool(t, cs, manifest.ToolClaim, args); out["claimed"] != false {
			t.Fatalf("claim-next with %v before the retry is due: %v", caps, out)
		}
	}
	f.clock.Advance(time.Minute)
	_, out = callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "gpu2", "capabilities": []string{"gpu", "cuda"}})
	if out["claimed"] != true || out["task"].(map[string]any)["attempts"].(float64) != 2 || out["task"].(map[string]any)["due_at"] != nil {
		t.Fatalf("claim-next once due: %v", out)
	}
}
