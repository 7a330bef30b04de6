package httpfront

import (
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
)

// TestInspectOutlineOnPostgres reads the workflow outline from a
// PostgreSQL store over the SDK client: it uses only the Store API, so it
// answers the same on both drivers.
func TestInspectOutlineOnPostgres(t *testing.T) {
	ctx, st, srv := newPostgresServer(t)
	h, err := New(srv, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	// After the clients' own cleanups (registered later, run earlier), so
	// that their legacy sessions end with the test.
	t.Cleanup(func() { ts.Close(); h.AbortCalls(); h.CloseSessions() })
	f := &httpFixture{t: t, ctx: ctx, store: st, srv: srv, h: h, ts: ts, url: ts.URL + MCPPath}
	uf := &uiFixture{httpFixture: f}
	uf.shapeTwelve(t, "pg-wf")
	want, err := st.Workflow(ctx, "pg-wf")
	if err != nil {
		t.Fatal(err)
	}
	for _, era := range []string{"", "2025-11-25"} {
		cs := f.client(era, "", nil)
		res, out := callTool(t, cs, manifest.ToolInspect, map[string]any{"workflow_id": "pg-wf"})
		if res.IsError {
			t.Fatalf("era %q: %s", era, toolText(res))
		}
		conforms(t, "outline on PostgreSQL", inspectOutputSchema(t, cs), res)
		wf, tasks := outlineTasks(t, out)
		if len(tasks) != len(want.Tasks) || wf["truncated"] != false {
			t.Fatalf("era %q: %d tasks (truncated %v), the store has %d", era, len(tasks), wf["truncated"], len(want.Tasks))
		}
		for i, task := range want.Tasks {
			got := tasks[i]
			deps := []string{}
			for _, x := range got["depends_on"].([]any) {
				deps = append(deps, x.(string))
			}
			if got["task_id"] != task.TaskID || got["state"] != string(task.State) || !slices.Equal(deps, append([]string{}, task.DependsOn...)) {
				t.Errorf("era %q: task %d reads %v, the store has %s %s %v", era, i, got, task.NodeID, task.State, task.DependsOn)
			}
		}
	}
}
