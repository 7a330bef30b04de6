package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// nodesArg renders n nodes of a chain as graph_task_create's nodes, each
// with a payload of pad bytes.
func nodesArg(n, pad int) string {
	var b strings.Builder
	b.WriteString(`[`)
	for i := range n {
		if i > 0 {
			b.WriteString(`,`)
		}
		fmt.Fprintf(&b, `{"node_id":"n%d","payload":{"pad":%q}`, i, strings.Repeat("x", pad))
		if i > 0 {
			fmt.Fprintf(&b, `,"depends_on":["n%d"]`, i-1)
		}
		b.WriteString(`}`)
	}
	b.WriteString(`]`)
	return b.String()
}

// The nodes argument is bounded by count and bytes, each stated in the
// error, and a bad field of one node names the node and the field's path.
func TestDecodeNodes(t *testing.T) {
	t.Parallel()
	create := fieldsOf(t, manifest.ToolCreate)
	a, err := decodeArgs(json.RawMessage(`{"workflow_id":"g","nodes":`+nodesArg(taskgraph.MaxCreateNodes, 0)+`}`), create)
	if err != nil || len(a.nodes) != taskgraph.MaxCreateNodes || a.nodes[1].lst["depends_on"][0] != "n0" {
		t.Fatalf("%d nodes refused: %v", taskgraph.MaxCreateNodes, err)
	}
	big := 1 + taskgraph.MaxCreateBytes/10
	for _, tc := range []struct {
		name, args, field, says string
	}{
		{"too many", `{"workflow_id":"g","nodes":` + nodesArg(taskgraph.MaxCreateNodes+1, 0) + `}`, "nodes", fmt.Sprintf("1 to %d nodes (got %d)", taskgraph.MaxCreateNodes, taskgraph.MaxCreateNodes+1)},
		{"too large", `{"workflow_id":"g","nodes":` + nodesArg(10, big) + `}`, "nodes", fmt.Sprintf("at most %d bytes", taskgraph.MaxCreateBytes)},
		{"empty", `{"workflow_id":"g","nodes":[]}`, "nodes", "at least one node"},
		{"not an array", `{"workflow_id":"g","nodes":{"node_id":"a"}}`, "nodes", "must be an array of node objects"},
		{"not an object", `{"workflow_id":"g","nodes":[{"node_id":"a"},"b"]}`, "nodes[1]", "nodes[1] must be a JSON object"},
		{"no node_id", `{"workflow_id":"g","nodes":[{"node_id":"a"},{"payload":{}}]}`, "nodes[1].node_id", "nodes[1]: node_id is required"},
		{"bad field", `{"workflow_id":"g","nodes":[{"node_id":"a","priority":101}]}`, "nodes[0].priority", `nodes[0] (node_id "a"): priority must be an integer between -100 and 100`},
		{"unknown key", `{"workflow_id":"g","nodes":[{"node_id":"a","workflow_id":"h"}]}`, "nodes[0].workflow_id", `unknown argument "workflow_id"`},
		{"null node_id", `{"workflow_id":"g","node_id":null}`, "node_id", "node_id is required (got null) unless nodes is given"},
	} {
		_, err := decodeArgs(json.RawMessage(tc.args), create)
		var ae *argError
		if !errors.As(err, &ae) || ae.field != tc.field || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: err = %v (field %v), want field %s saying %q", tc.name, err, ae, tc.field, tc.says)
		}
	}
}

// newGraphSurface is a surface over a real SQLite store in a temporary
// folder.
func newGraphSurface(t *testing.T) (*Surface, *taskgraph.Store, *bytes.Buffer) {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "tasks.db"), taskgraph.Options{}, tgsqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var log bytes.Buffer
	s, err := New(Config{Store: st, Surface: manifest.NewSurface(manifest.Options{}), Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return s, st, &log
}

// callText calls graph_task_create and returns its result.
func callCreate(t *testing.T, s *Surface, args string) *mcp.CallToolResult {
	t.Helper()
	res, err := s.Call(context.Background(), Caller{}, manifest.ToolCreate, json.RawMessage(args))
	if err != nil {
		t.Fatalf("graph_task_create %s: %v", args, err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string { return res.Content[0].(*mcp.TextContent).Text }

// A whole graph is created through the surface in one call, answered node
// by node; the same graph again returns the same tasks; a refused graph
// (either form, both forms, a cycle, an unknown dependency) writes nothing.
func TestCreateGraph(t *testing.T) {
	t.Parallel()
	s, st, log := newGraphSurface(t)
	ctx := context.Background()
	graph := `{"workflow_id":"g","nodes":[{"node_id":"c","depends_on":["a","b"],"requires":["gpu"]},{"node_id":"a","payload":{"k":1}},{"node_id":"b","depends_on":["a"],"priority":5}]}`
	var first, again graphOutput
	for _, out := range []*graphOutput{&first, &again} {
		res := callCreate(t, s, graph)
		if res.IsError {
			t.Fatalf("refused: %s; log %s", resultText(res), log)
		}
		if err := json.Unmarshal(res.StructuredContent.(json.RawMessage), out); err != nil {
			t.Fatal(err)
		}
		if len(out.Receipt.ReceiptSHA256) == 0 {
			t.Fatalf("no receipt: %+v", out)
		}
	}
	if !first.Created || again.Created || len(first.Nodes) != 3 {
		t.Fatalf("first %+v, again %+v", first, again)
	}
	wantStates := []string{"blocked", "pending", "blocked"}
	for i, n := range first.Nodes {
		if n.NodeID != []string{"c", "a", "b"}[i] || n.State != wantStates[i] || !n.Created || again.Nodes[i].TaskID != n.TaskID || again.Nodes[i].Created {
			t.Errorf("node %d: first %+v, again %+v", i, n, again.Nodes[i])
		}
		task, err := st.Task(ctx, n.TaskID)
		if err != nil || task.NodeID != n.NodeID || task.WorkflowID != "g" {
			t.Errorf("node %d: the store has %+v, %v", i, task, err)
		}
	}
	if task, _ := st.Task(ctx, first.Nodes[0].TaskID); len(task.Requires) != 1 || len(task.DependsOn) != 2 {
		t.Errorf("c lost its fields: %+v", task)
	}
	count := func() int {
		v, err := st.WorkflowSummary(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range v.Counts {
			n += c
		}
		return n
	}
	for _, tc := range []struct{ args, says string }{
		{`{"workflow_id":"g","nodes":[{"node_id":"x","depends_on":["y"]},{"node_id":"y","depends_on":["x"]}]}`, `node "x" is on a dependency cycle: x -> y -> x`},
		{`{"workflow_id":"g","nodes":[{"node_id":"x"},{"node_id":"y","depends_on":["zz"]}]}`, `node "y" depends on "zz"`},
		{`{"workflow_id":"g","nodes":[{"node_id":"x"},{"node_id":"a","payload":{"k":2}}]}`, `node "a" already exists`},
		{`{"workflow_id":"g","nodes":[{"node_id":"x"},{"node_id":"x"}]}`, `node "x" appears twice`},
		{`{"workflow_id":"g","node_id":"x","nodes":[{"node_id":"y"}]}`, "not both: node_id cannot be combined with nodes"},
		{`{"workflow_id":"g","payload":{},"nodes":[{"node_id":"y"}]}`, "payload cannot be combined with nodes"},
		{`{"workflow_id":"g","payload":{}}`, "node_id is required"},
	} {
		res := callCreate(t, s, tc.args)
		if !res.IsError || !strings.Contains(resultText(res), tc.says) {
			t.Errorf("%s: %v %s, want a tool error saying %s", tc.args, res.IsError, resultText(res), tc.says)
		}
		if n := count(); n != 3 {
			t.Errorf("%s: the workflow has %d tasks after a refused call, want 3", tc.args, n)
		}
	}
	// The single-node form is unchanged.
	if res := callCreate(t, s, `{"workflow_id":"g","node_id":"d","depends_on":["c"]}`); res.IsError || !strings.Contains(resultText(res), `"created":true`) {
		t.Errorf("single-node create: %s", resultText(res))
	}
}

// Through the Tasks extension a whole graph gets graph_task_create's
// ordinary result (a handle stands for one task), and a single node its
// handle as before.
func TestCreateGraphThroughTasksExtension(t *testing.T) {
	t.Parallel()
	s, _, _ := newGraphSurface(t)
	res, err := s.CreateTask(context.Background(), Caller{}, json.RawMessage(`{"workflow_id":"g","nodes":[{"node_id":"a"},{"node_id":"b","depends_on":["a"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ctr, ok := res.(*mcp.CallToolResult)
	if !ok || ctr.IsError || !strings.Contains(resultText(ctr), `"nodes":[{"node_id":"a"`) {
		t.Fatalf("graph through the extension: %#v", res)
	}
	res, err = s.CreateTask(context.Background(), Caller{}, json.RawMessage(`{"workflow_id":"g","node_id":"c","depends_on":["b"]}`))
	if h, ok := res.(*TaskResult); err != nil || !ok || h.ResultType != "task" || h.Status != "working" {
		t.Fatalf("single node through the extension: %#v, %v", res, err)
	}
	res, err = s.CreateTask(context.Background(), Caller{}, json.RawMessage(`{"workflow_id":"g"}`))
	if ctr, ok := res.(*mcp.CallToolResult); err != nil || !ok || !ctr.IsError || !strings.Contains(resultText(ctr), "node_id is required") {
		t.Fatalf("neither form through the extension: %#v, %v", res, err)
	}
}
