package mcpadapter

import (
	"fmt"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/mcptest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// A whole graph submitted through the SDK's real client, in each protocol
// era: one graph_task_create with nodes creates every node (answered with
// each node's task id and state, the same tasks when repeated), a refused
// graph writes nothing and names the node, and workers then run the graph
// in dependency order.
func TestWholeGraphOverTheSDKClient(t *testing.T) {
	for _, era := range []string{"", "2025-11-25"} {
		t.Run("era="+map[string]string{"": manifest.ModernVersion}[era]+era, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			cs := f.client(era, nil)
			nodes := []any{
				map[string]any{"node_id": "report", "depends_on": []string{"left", "right"}},
				map[string]any{"node_id": "left", "depends_on": []string{"root"}, "payload": map[string]any{"side": "l"}},
				map[string]any{"node_id": "right", "depends_on": []string{"root"}, "priority": 3},
				map[string]any{"node_id": "root"},
			}
			args := map[string]any{"workflow_id": "wf", "nodes": nodes}
			res, out := mcptest.CallTool(t, cs, manifest.ToolCreate, args)
			if res.IsError || out["created"] != true {
				t.Fatalf("whole graph: %s", mcptest.ToolText(res))
			}
			ids := map[string]string{}
			for i, n := range out["nodes"].([]any) {
				n := n.(map[string]any)
				want := map[bool]string{true: "pending", false: "blocked"}[n["node_id"] == "root"]
				if n["node_id"] != nodes[i].(map[string]any)["node_id"] || n["state"] != want || n["created"] != true {
					t.Errorf("node %d: %v", i, n)
				}
				ids[n["node_id"].(string)] = n["task_id"].(string)
			}
			_, again := mcptest.CallTool(t, cs, manifest.ToolCreate, args)
			for _, n := range again["nodes"].([]any) {
				n := n.(map[string]any)
				if n["created"] != false || n["task_id"] != ids[n["node_id"].(string)] {
					t.Errorf("repeated graph: %v, want task %s", n, ids[n["node_id"].(string)])
				}
			}
			res, _ = mcptest.CallTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "nodes": []any{
				map[string]any{"node_id": "extra"}, map[string]any{"node_id": "loop1", "depends_on": []string{"loop2"}}, map[string]any{"node_id": "loop2", "depends_on": []string{"loop1"}}}})
			if !res.IsError || !strings.Contains(mcptest.ToolText(res), "loop1 -> loop2 -> loop1") {
				t.Errorf("cycle: %s", mcptest.ToolText(res))
			}
			if v, err := f.store.WorkflowSummary(f.ctx, "wf"); err != nil || v.Counts[taskgraph.StatePending]+v.Counts[taskgraph.StateBlocked] != 4 {
				t.Errorf("after the refused graph: %+v, %v", v, err)
			}
			// Workers run it: root, then right (priority 3) and left, then report.
			var order []string
			for {
				_, c := mcptest.CallTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w", "workflow_id": "wf"})
				if c["claimed"] != true {
					break
				}
				order = append(order, c["task"].(map[string]any)["node_id"].(string))
				h := mcptest.HolderArgs(c)
				h["result"] = map[string]any{"ok": true}
				if res, _ := mcptest.CallTool(t, cs, manifest.ToolComplete, h); res.IsError {
					t.Fatal(mcptest.ToolText(res))
				}
			}
			if got := fmt.Sprint(order); got != "[root right left report]" {
				t.Errorf("claimed in order %s", got)
			}
		})
	}
}
