package httpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// inspectOutputSchema resolves graph_task_inspect's output schema as
// tools/list publishes it, with an independent JSON Schema implementation.
func inspectOutputSchema(t *testing.T, cs *mcp.ClientSession) *jsonschema.Resolved {
	t.Helper()
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range lt.Tools {
		if tool.Name != manifest.ToolInspect {
			continue
		}
		b, _ := json.Marshal(tool.OutputSchema)
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("the inspect output schema does not parse: %v", err)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("the inspect output schema does not resolve: %v", err)
		}
		return rs
	}
	t.Fatal("no graph_task_inspect in tools/list")
	return nil
}

// conforms asserts that a result's structured content satisfies schema.
func conforms(t *testing.T, what string, rs *jsonschema.Resolved, res *mcp.CallToolResult) {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	if err := schemaAccepts(rs, b); err != nil {
		t.Errorf("%s: the answer does not satisfy the published output schema: %v\n%.400s", what, err, b)
	}
}

func outlineTasks(t *testing.T, out map[string]any) (wf map[string]any, tasks []map[string]any) {
	t.Helper()
	wf, ok := out["workflow"].(map[string]any)
	if !ok {
		t.Fatalf("no workflow in %v", out)
	}
	for _, x := range wf["tasks"].([]any) {
		tasks = append(tasks, x.(map[string]any))
	}
	return wf, tasks
}

// The outline form over the SDK client in both eras (over HTTP; the tool
// surface answers the same on every transport): the whole workflow,
// downstream and siblings included, in creation order, with counts, edges,
// holders and clipped texts, never a payload, result or token; every form's
// answer satisfies the published output schema.
func TestInspectOutlineOverTheSDKClient(t *testing.T) {
	f := newHTTPFixture(t, Options{})
	ctx := context.Background()
	nodes := slices.Clone(twelveNodes)
	nodes[0].Payload = json.RawMessage(`{"secret":"payload-text"}`)
	nodes[6].Requires = []string{"gpu"}
	if _, err := f.store.CreateWorkflow(ctx, "build-7", nodes); err != nil {
		t.Fatal(err)
	}
	claim := func(node string, d time.Duration) taskgraph.Claimed {
		task, err := f.store.TaskByNode(ctx, "build-7", node)
		if err != nil {
			t.Fatal(err)
		}
		c, ok, err := f.store.Claim(ctx, taskgraph.ClaimRequest{Owner: "w-" + node, TaskID: task.TaskID, Lease: d})
		if err != nil || !ok {
			t.Fatalf("claim %s: %v %v", node, ok, err)
		}
		return c
	}
	for _, n := range []string{"fetch-sources", "fetch-deps"} {
		if _, err := f.store.Complete(ctx, holder(claim(n, time.Minute)), json.RawMessage(`{"result":"result-text"}`)); err != nil {
			t.Fatal(err)
		}
	}
	long := strings.Repeat("é", 400) // 800 bytes
	if _, err := f.store.Fail(ctx, holder(claim("gen-docs", time.Minute)), long, false); err != nil {
		t.Fatal(err)
	}
	compile := claim("compile", 10*time.Second)
	f.clock.Advance(11 * time.Second) // compile's lease lapses: a stuck claim

	for _, era := range []string{"", "2025-11-25"} {
		cs := f.client(era, "", nil)
		schema := inspectOutputSchema(t, cs)
		res, out := callTool(t, cs, manifest.ToolInspect, map[string]any{"workflow_id": "build-7"})
		if res.IsError {
			t.Fatalf("era %q: outline: %s", era, toolText(res))
		}
		conforms(t, "outline", schema, res)
		if _, ok := out["task"]; ok {
			t.Errorf("era %q: the outline carries task: %v", era, out["task"])
		}
		if _, ok := out["dependencies"]; ok {
			t.Errorf("era %q: the outline carries dependencies", era)
		}
		if rec, _ := out["receipt"].(map[string]any); rec["manifestSha256"] != f.srv.Manifest().SHA256() {
			t.Errorf("era %q: receipt %v", era, out["receipt"])
		}
		text := toolText(res)
		for _, w := range []string{"payload", "result-text", "claim_token", compile.Lease.Token, `"result"`} {
			if strings.Contains(text, w) {
				t.Errorf("era %q: the outline shows %q", era, w)
			}
		}
		wf, tasks := outlineTasks(t, out)
		if wf["workflow_id"] != "build-7" || wf["truncated"] != false || wf["read_at"] != formatTime(f.clock.Now()) {
			t.Errorf("era %q: outline header %v %v %v", era, wf["workflow_id"], wf["truncated"], wf["read_at"])
		}
		// gen-docs failed: publish-docs and announce after it are cancelled.
		wantCounts := map[string]any{"completed": 2.0, "failed": 1.0, "cancelled": 2.0, "claimed": 1.0, "pending": 1.0, "blocked": 5.0}
		if fmt.Sprint(wf["counts"]) != fmt.Sprint(wantCounts) {
			t.Errorf("era %q: counts %v, want %v", era, wf["counts"], wantCounts)
		}
		stored, err := f.store.Workflow(ctx, "build-7")
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) != len(stored.Tasks) || len(tasks) != len(twelveNodes) {
			t.Fatalf("era %q: %d tasks, want %d", era, len(tasks), len(stored.Tasks))
		}
		for i, n := range stored.Tasks {
			task := tasks[i]
			deps := []string{}
			for _, d := range task["depends_on"].([]any) {
				deps = append(deps, d.(string))
			}
			want := n.DependsOn
			if want == nil {
				want = []string{}
			}
			if task["node_id"] != n.NodeID || task["task_id"] != n.TaskID || !slices.Equal(deps, want) {
				t.Errorf("era %q: task %d is %v depending on %v, want %s on %v", era, i, task["node_id"], deps, n.NodeID, want)
			}
		}
		byNode := map[string]map[string]any{}
		for _, task := range tasks {
			byNode[task["node_id"].(string)] = task
		}
		c := byNode["compile"]
		if c["state"] != "claimed" || c["owner"] != "w-compile" || c["generation"] != 1.0 || c["lease_expires_at"] != formatTime(compile.Lease.ExpiresAt) {
			t.Errorf("era %q: the stuck claim reads %v; the outline must not expire it", era, c)
		}
		if e, _ := byNode["gen-docs"]["error"].(string); len(e) > tools.MaxOutlineTextBytes+len("…") || !strings.HasSuffix(e, "…") || !strings.HasPrefix(long, strings.TrimSuffix(e, "…")) {
			t.Errorf("era %q: a long error reads %d bytes %q, want it clipped to %d", era, len(e), e, tools.MaxOutlineTextBytes)
		}
		if byNode["publish-docs"]["state"] != "cancelled" || fmt.Sprint(byNode["integration"]["requires"]) != "[gpu]" {
			t.Errorf("era %q: publish-docs %v, integration requires %v", era, byNode["publish-docs"]["state"], byNode["integration"]["requires"])
		}

		// The task forms still answer as before, and satisfy the schema.
		byID, bout := callTool(t, cs, manifest.ToolInspect, map[string]any{"task_id": byNode["release"]["task_id"]})
		conforms(t, "inspect by task_id", schema, byID)
		if bout["task"] == nil || bout["dependencies"] == nil || bout["workflow"] != nil {
			t.Errorf("era %q: inspect by task_id answered %v", era, bout)
		}
		byNodeRes, _ := callTool(t, cs, manifest.ToolInspect, map[string]any{"workflow_id": "build-7", "node_id": "announce"})
		conforms(t, "inspect by node", schema, byNodeRes)
	}
	// Inspecting the task by task_id expires the lapsed claim; the outline
	// then shows it pending again.
	cs := f.client("", "", nil)
	callTool(t, cs, manifest.ToolInspect, map[string]any{"task_id": compile.Task.TaskID})
	_, out := callTool(t, cs, manifest.ToolInspect, map[string]any{"workflow_id": "build-7"})
	_, tasks := outlineTasks(t, out)
	for _, task := range tasks {
		if task["node_id"] == "compile" && (task["state"] != "pending" || task["owner"] != nil) {
			t.Errorf("after an inspect expired the lease, compile reads %v", task)
		}
	}
	missing, _ := callTool(t, cs, manifest.ToolInspect, map[string]any{"workflow_id": "no-such-workflow"})
	if k, _ := toolErrorKind(missing); k != "not_found" || toolText(missing) != `workflow "no-such-workflow" not found` {
		t.Errorf("outline of a missing workflow: %q (%s)", toolText(missing), k)
	}
}

// The outline's bounds: at most tools.MaxOutlineTasks tasks and tools.MaxOutlineBytes
// bytes of them, in creation order, with truncated true and the counts of
// the whole workflow.
func TestInspectOutlineBounds(t *testing.T) {
	f := newHTTPFixture(t, Options{})
	ctx := context.Background()
	many := make([]taskgraph.NodeSpec, tools.MaxOutlineTasks+1)
	for i := range many {
		many[i].NodeID = fmt.Sprintf("n%04d", i)
	}
	if _, err := f.store.CreateWorkflow(ctx, "many", many); err != nil {
		t.Fatal(err)
	}
	// Wide: 100 leaves of about 8 KiB each: the byte bound is reached first.
	wide := wideWorkflow("x", 100)
	if _, err := f.store.CreateWorkflow(ctx, "wide", wide); err != nil {
		t.Fatal(err)
	}
	cs := f.client("", "", nil)
	schema := inspectOutputSchema(t, cs)

	res, out := callTool(t, cs, manifest.ToolInspect, map[string]any{"workflow_id": "many"})
	conforms(t, "outline of many", schema, res)
	wf, tasks := outlineTasks(t, out)
	if len(tasks) != tools.MaxOutlineTasks || wf["truncated"] != true || wf["counts"].(map[string]any)["pending"] != float64(tools.MaxOutlineTasks+1) {
		t.Errorf("outline of %d tasks: %d tasks, truncated %v, counts %v", tools.MaxOutlineTasks+1, len(tasks), wf["truncated"], wf["counts"])
	}
	if tasks[0]["node_id"] != "n0000" || tasks[len(tasks)-1]["node_id"] != fmt.Sprintf("n%04d", tools.MaxOutlineTasks-1) {
		t.Errorf("the outline is not the first tasks in creation order: %v … %v", tasks[0]["node_id"], tasks[len(tasks)-1]["node_id"])
	}

	res, out = callTool(t, cs, manifest.ToolInspect, map[string]any{"workflow_id": "wide"})
	conforms(t, "outline of wide", schema, res)
	wf, tasks = outlineTasks(t, out)
	b, _ := json.Marshal(wf["tasks"])
	if wf["truncated"] != true || len(tasks) >= len(wide) || len(b) > tools.MaxOutlineBytes || len(tasks) < taskgraph.MaxDependsOn {
		t.Errorf("outline of wide: %d of %d tasks in %d bytes (bound %d), truncated %v", len(tasks), len(wide), len(b), tools.MaxOutlineBytes, wf["truncated"])
	}
	for i, task := range tasks {
		if task["node_id"] != wide[i].NodeID {
			t.Fatalf("task %d is %v, want %s: not a prefix in creation order", i, task["node_id"], wide[i].NodeID)
		}
	}
	t.Logf("wide outline: %d of %d tasks, %d bytes of tasks; result text %d bytes", len(tasks), len(wide), len(b), len(toolText(res)))

	// Exactly one form; the messages name the three.
	for _, a := range []map[string]any{{}, {"node_id": "n0000"}, {"task_id": missingTaskID, "workflow_id": "many"}} {
		res, _ := callTool(t, cs, manifest.ToolInspect, a)
		if k, _ := toolErrorKind(res); k != "invalid" || !strings.Contains(toolText(res), inspectForms) {
			t.Errorf("inspect %v: %q (%s), want invalid naming the three forms", a, toolText(res), k)
		}
	}
}

// Principal scope: a workflow outside the principal's workflows answers the
// outline (and a node of it) exactly like a missing one, in both eras.
func TestInspectOutlinePrincipalScope(t *testing.T) {
	f, _ := newPrincipalFixture(t)
	ctx := context.Background()
	for _, wf := range []string{"secret-1", "release-1"} {
		if _, err := f.store.CreateWorkflow(ctx, wf, twelveNodes[:3]); err != nil {
			t.Fatal(err)
		}
	}
	for _, era := range []string{"", "2025-11-25"} {
		planner := f.client(era, tokPlanner, nil)
		hidden, _ := callTool(t, planner, manifest.ToolInspect, map[string]any{"workflow_id": "secret-1"})
		missing, _ := callTool(t, planner, manifest.ToolInspect, map[string]any{"workflow_id": "secret-2"})
		hk, _ := toolErrorKind(hidden)
		mk, _ := toolErrorKind(missing)
		if hk != "not_found" || mk != "not_found" || strings.ReplaceAll(toolText(hidden), "secret-1", "W") != strings.ReplaceAll(toolText(missing), "secret-2", "W") ||
			toJSON(hidden.Meta[tools.ErrorMetaKey]) != toJSON(missing.Meta[tools.ErrorMetaKey]) {
			t.Errorf("era %q: hidden workflow %q (%s), missing one %q (%s); want the same not_found", era, toolText(hidden), hk, toolText(missing), mk)
		}
		hn, _ := callTool(t, planner, manifest.ToolInspect, map[string]any{"workflow_id": "secret-1", "node_id": "lint"})
		mn, _ := callTool(t, planner, manifest.ToolInspect, map[string]any{"workflow_id": "release-1", "node_id": "no-node"})
		if k, _ := toolErrorKind(hn); k != "not_found" || strings.ReplaceAll(strings.ReplaceAll(toolText(hn), "secret-1", "W"), "lint", "N") != strings.ReplaceAll(strings.ReplaceAll(toolText(mn), "release-1", "W"), "no-node", "N") {
			t.Errorf("era %q: a node of a hidden workflow %q, a missing node %q; want the same not_found", era, toolText(hn), toolText(mn))
		}
		ok, out := callTool(t, planner, manifest.ToolInspect, map[string]any{"workflow_id": "release-1"})
		if ok.IsError {
			t.Fatalf("era %q: outline in scope: %s", era, toolText(ok))
		}
		if _, tasks := outlineTasks(t, out); len(tasks) != 3 {
			t.Errorf("era %q: outline in scope has %d tasks, want 3", era, len(tasks))
		}
		byNode, _ := callTool(t, planner, manifest.ToolInspect, map[string]any{"workflow_id": "release-1", "node_id": "lint"})
		if byNode.IsError {
			t.Errorf("era %q: inspect by node in scope: %s", era, toolText(byNode))
		}
		// The watcher sees every workflow.
		watcher := f.client(era, tokWatcher, nil)
		if res, _ := callTool(t, watcher, manifest.ToolInspect, map[string]any{"workflow_id": "secret-1"}); res.IsError {
			t.Errorf("era %q: the unscoped watcher's outline: %s", era, toolText(res))
		}
	}
}

// The largest outline crosses Streamable HTTP whole, in both eras: the
// answer holds it twice (text and structuredContent), about 1 MiB.
func TestInspectOutlineOverHTTP(t *testing.T) {
	f := newHTTPFixture(t, Options{})
	ctx := context.Background()
	if _, err := f.store.CreateWorkflow(ctx, "wide", wideWorkflow("y", 80)); err != nil {
		t.Fatal(err)
	}
	for _, era := range []string{"", "2025-11-25"} {
		cs := f.client(era, "", nil)
		schema := inspectOutputSchema(t, cs)
		res, out := callTool(t, cs, manifest.ToolInspect, map[string]any{"workflow_id": "wide"})
		if res.IsError {
			t.Fatalf("era %q: %s", era, toolText(res))
		}
		conforms(t, "outline over HTTP", schema, res)
		wf, tasks := outlineTasks(t, out)
		if wf["truncated"] != true || len(tasks) < taskgraph.MaxDependsOn || len(toolText(res)) < tools.MaxOutlineBytes*9/10 {
			t.Errorf("era %q: %d tasks, truncated %v, %d bytes of text", era, len(tasks), wf["truncated"], len(toolText(res)))
		}
	}
}

// BenchmarkInspectOutline reads the outline of a 1,000-task workflow with
// the SDK client over Streamable HTTP on loopback (SQLite).
func BenchmarkInspectOutline(b *testing.B) {
	ctx := context.Background()
	f := newHTTPFixture(b, Options{})
	if _, err := f.store.CreateWorkflow(ctx, "big", bigWorkflow(tools.MaxOutlineTasks, 25)); err != nil {
		b.Fatal(err)
	}
	cs := f.client("", "", nil)
	var size int
	for b.Loop() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: manifest.ToolInspect, Arguments: map[string]any{"workflow_id": "big"}})
		if err != nil || res.IsError {
			b.Fatalf("%v %v", err, res)
		}
		size = len(res.Content[0].(*mcp.TextContent).Text)
	}
	b.ReportMetric(float64(size), "bytes/answer")
}

// wideWorkflow is taskgraph.MaxDependsOn roots with long names (padded with
// fill) and leaves nodes each depending on every root: about 8 KiB per
// leaf in an outline.
func wideWorkflow(fill string, leaves int) []taskgraph.NodeSpec {
	var nodes []taskgraph.NodeSpec
	var roots []string
	for i := 0; i < taskgraph.MaxDependsOn; i++ {
		id := fmt.Sprintf("root-%03d-%s", i, strings.Repeat(fill, 110))
		roots = append(roots, id)
		nodes = append(nodes, taskgraph.NodeSpec{NodeID: id})
	}
	for i := 0; i < leaves; i++ {
		nodes = append(nodes, taskgraph.NodeSpec{NodeID: fmt.Sprintf("leaf-%03d", i), DependsOn: roots})
	}
	return nodes
}
