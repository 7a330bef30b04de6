package mcpadapter

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
)

// A worker's report over the SDK's real client: heartbeat, complete and
// fail take progress, status_message and usage; the task, inspect and the
// outline show them; a retry's claim clears the report and keeps the
// usage; bad values are tool errors naming the field and the rule.
func TestWorkerReportsOverTheClient(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cs := f.client("", nil)
	_, out := callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": "a", "max_attempts": 2})
	id := out["task"].(map[string]any)["task_id"].(string)
	callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": "b"})
	if _, ok := out["task"].(map[string]any)["report"]; ok {
		t.Fatalf("a task nobody reported on shows a report: %v", out["task"])
	}
	_, out = callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w1", "task_id": id})
	l := out["lease"].(map[string]any)
	holder := func(extra map[string]any) map[string]any {
		m := map[string]any{"task_id": id, "owner": "w1", "generation": l["generation"], "claim_token": l["claim_token"]}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}

	res, out := callTool(t, cs, manifest.ToolHeartbeat, holder(map[string]any{
		"progress": map[string]any{"done": 3, "total": 10}, "status_message": "parsing files",
		"usage": map[string]any{"input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.0125}}))
	if res.IsError {
		t.Fatalf("heartbeat with a report: %s", toolText(res))
	}
	want := `{"generation":1,"progress":{"done":3,"total":10},"status_message":"parsing files","usage":{"cost_usd":0.0125,"input_tokens":1200,"output_tokens":300}}`
	report := func(task map[string]any) string {
		t.Helper()
		r, ok := task["report"].(map[string]any)
		if !ok {
			t.Fatalf("no report in %v", task)
		}
		if _, ok := r["reported_at"].(string); !ok {
			t.Fatalf("report without reported_at: %v", r)
		}
		delete(r, "reported_at")
		b, _ := json.Marshal(r)
		return string(b)
	}
	if got := report(out["task"].(map[string]any)); got != want {
		t.Fatalf("the heartbeat's answer shows report %s, want %s", got, want)
	}
	_, out = callTool(t, cs, manifest.ToolInspect, map[string]any{"task_id": id})
	task := out["task"].(map[string]any)
	if got := report(task); got != want {
		t.Fatalf("inspect shows report %s, want %s", got, want)
	}
	if u, _ := json.Marshal(task["total_usage"]); string(u) != `{"cost_usd":0.0125,"input_tokens":1200,"output_tokens":300}` {
		t.Fatalf("inspect shows total_usage %s", u)
	}

	// Bad reports: the field and the rule, nothing written.
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"progress": map[string]any{"done": 11, "total": 10}}, "invalid progress.done: must be at most progress.total (got 11 of 10)"},
		{map[string]any{"progress": map[string]any{"done": -1}}, "progress.done must be a number from 0"},
		{map[string]any{"progress": map[string]any{"total": 1}}, "progress.done is required"},
		{map[string]any{"progress": map[string]any{"done": 1, "percent": 5}}, `unknown key "percent"`},
		{map[string]any{"status_message": strings.Repeat("x", 513)}, "status_message must be at most 512 characters and 512 bytes"},
		// Within the characters, beyond the bytes: the store's rule.
		{map[string]any{"status_message": strings.Repeat("é", 300)}, "invalid status_message: must be at most 512 bytes (got 600)"},
		{map[string]any{"usage": map[string]any{"input_tokens": 1.5}}, "usage.input_tokens must be a whole number"},
		{map[string]any{"usage": map[string]any{"cost_usd": -0.01}}, "usage.cost_usd must be a number from 0"},
		{map[string]any{"usage": "lots"}, "usage must be a JSON object"},
	} {
		res, _ := callTool(t, cs, manifest.ToolHeartbeat, holder(tc.args))
		if !res.IsError || !strings.Contains(toolText(res), tc.want) {
			t.Errorf("heartbeat with %v: isError %v %q, want an error saying %q", tc.args, res.IsError, toolText(res), tc.want)
		}
	}

	// A failure's report replaces the heartbeat's whole; the next claim
	// clears it and keeps its usage.
	res, _ = callTool(t, cs, manifest.ToolFail, holder(map[string]any{"error": "rate limited", "retryable": true, "retry_after_ms": 0,
		"usage": map[string]any{"input_tokens": 2000, "output_tokens": 400, "cost_usd": 0.02}}))
	if res.IsError {
		t.Fatalf("fail with a report: %s", toolText(res))
	}
	_, out = callTool(t, cs, manifest.ToolInspect, map[string]any{"workflow_id": "wf"})
	wf := out["workflow"].(map[string]any)
	var first map[string]any
	for _, tk := range wf["tasks"].([]any) {
		if tk.(map[string]any)["task_id"] == id {
			first = tk.(map[string]any)
		}
	}
	if got := report(first); got != `{"generation":1,"usage":{"cost_usd":0.02,"input_tokens":2000,"output_tokens":400}}` {
		t.Fatalf("the outline shows report %s", got)
	}
	if u, _ := json.Marshal(wf["usage"]); string(u) != `{"cost_usd":0.02,"input_tokens":2000,"output_tokens":400}` {
		t.Fatalf("the outline's workflow usage is %s", u)
	}
	_, out = callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w2", "task_id": id})
	task = out["task"].(map[string]any)
	if _, ok := task["report"]; ok {
		t.Fatalf("a new claim shows the last attempt's report: %v", task["report"])
	}
	if u, _ := json.Marshal(task["total_usage"]); string(u) != `{"cost_usd":0.02,"input_tokens":2000,"output_tokens":400}` {
		t.Fatalf("after the retry's claim total_usage is %s, want the first attempt's", u)
	}
}

// tasks/get tells a Tasks-aware submitter how far a claimed task is.
func TestTasksGetShowsProgress(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	aware, w := f.raw(), &worker{t: t, r: f.raw(), name: "w1"}
	handle := createTask(t, aware, tasksCaps, "aware", "a")
	id := handle["taskId"].(string)
	c := w.claim(id)
	toolOut(t, w.finish(c, manifest.ToolHeartbeat, map[string]any{"progress": map[string]any{"done": 3, "total": 10}, "status_message": "parsing files"}))
	g := tasksGet(t, aware, id)
	if msg, _ := g["statusMessage"].(string); g["status"] != "working" || !strings.HasPrefix(msg, "claimed by w1") || !strings.HasSuffix(msg, ": 3 of 10 done: parsing files") {
		t.Fatalf("tasks/get of a task reporting progress: %v", g)
	}
}
