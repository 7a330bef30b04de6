package httpfront

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// BenchmarkHTTPToolCall measures one graph_task_inspect call over real
// loopback HTTP with the SDK client, per era: the cost of the transport,
// the era router and the wrapper on top of a store read.
func BenchmarkHTTPToolCall(b *testing.B) {
	for _, version := range []string{"", "2025-11-25"} {
		name := "modern"
		if version != "" {
			name = "legacy"
		}
		b.Run(name, func(b *testing.B) {
			f := newHTTPFixture(b, Options{})
			c, err := f.store.CreateTask(f.ctx, "wf", taskgraph.NodeSpec{NodeID: "a"})
			if err != nil {
				b.Fatal(err)
			}
			cs := f.client(version, "", nil)
			args := map[string]any{"task_id": c.Task.TaskID}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				res, err := cs.CallTool(f.ctx, &mcp.CallToolParams{Name: manifest.ToolInspect, Arguments: args})
				if err != nil || res.IsError {
					b.Fatalf("%v %+v", err, res)
				}
			}
		})
	}
}
