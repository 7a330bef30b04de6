package httpfront

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/liveview"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// While an operator pauses all claiming, /readyz stays 200 and says so,
// graph_task_claim answers claimed false with a hint naming the pause, and a
// lease granted before runs on over MCP; after the resume, claims work.
func TestPauseOverHTTP(t *testing.T) {
	f := newReadyFixture(t)
	cs := f.client("", readyToken, nil)
	_, out := callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": "a"})
	a := out["task"].(map[string]any)["task_id"].(string)
	callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": "b"})
	_, out = callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w1", "task_id": a})
	l := out["lease"].(map[string]any)
	hb := map[string]any{"task_id": a, "owner": "w1", "generation": l["generation"], "claim_token": l["claim_token"]}

	op := taskgraph.Operator{Name: "bob", Reason: "deploy 7.3"}
	if _, err := f.store.PauseClaims(context.Background(), "", op); err != nil {
		t.Fatal(err)
	}
	r := wantReady(t, f, http.StatusOK, "ready; paused: all claiming on this database is paused")
	if !strings.Contains(string(r.body), "deploy 7.3") {
		t.Fatalf("/readyz while paused: %q, want the reason", r.body)
	}
	res, out := callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w2"})
	if res.IsError || out["claimed"] != false || !strings.Contains(out["hint"].(string), "all claiming on this database is paused") {
		t.Fatalf("claim-next while paused: %s", toolText(res))
	}
	if res, _ := callTool(t, cs, manifest.ToolHeartbeat, hb); res.IsError {
		t.Fatalf("heartbeat of a lease granted before the pause: %s", toolText(res))
	}
	if _, ok, err := f.store.ResumeClaims(context.Background(), "", op); err != nil || !ok {
		t.Fatalf("resume: %v %v", ok, err)
	}
	wantReady(t, f, http.StatusOK, "ready\n")
	if res, out := callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w2"}); res.IsError || out["claimed"] != true {
		t.Fatalf("claim-next after the resume: %s", toolText(res))
	}
}

// The live view's workflow JSON says why nothing is claimable while the
// workflow is paused, and nothing once it is resumed.
func TestUIWorkflowShowsItsPause(t *testing.T) {
	f := newUIFixture(t, Options{})
	f.shapeTwelve(t, "build-42")
	op := taskgraph.Operator{Name: "bob", Reason: "INC-9"}
	read := func() liveview.Workflow {
		t.Helper()
		status, _, body := f.get(t, http.MethodGet, "/ui/api/workflows/build-42", nil)
		var wf liveview.Workflow
		if err := json.Unmarshal([]byte(body), &wf); status != http.StatusOK || err != nil {
			t.Fatalf("status %d %v: %s", status, err, body)
		}
		return wf
	}
	if wf := read(); wf.Paused != "" {
		t.Fatalf("paused %q before any pause", wf.Paused)
	}
	if _, err := f.store.PauseClaims(f.ctx, "build-42", op); err != nil {
		t.Fatal(err)
	}
	if wf := read(); !strings.Contains(wf.Paused, "workflow build-42 is paused") || !strings.Contains(wf.Paused, "INC-9") {
		t.Fatalf("paused %q, want the workflow's pause", wf.Paused)
	}
	if _, _, err := f.store.ResumeClaims(f.ctx, "build-42", op); err != nil {
		t.Fatal(err)
	}
	if wf := read(); wf.Paused != "" {
		t.Fatalf("paused %q after the resume", wf.Paused)
	}
}
