package mcpadapter

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// At the store's bound on parked claims, a claim-next with wait_ms answers at
// once with a normal result: claimed false and a hint to retry, not an error.
func TestClaimAtWaitLimitAnswersWithHint(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "tasks.db"),
		taskgraph.Options{Clock: lease.NewManualClock(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)), MaxWaiters: 1}, tgsqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := New(Config{Store: st, Version: "test", Surface: manifest.NewSurface(manifest.Options{}), ExtraLimits: map[string]int64{"maxStdioLineBytes": MaxStdioLineBytes}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: ctx, store: st, srv: srv}
	cs := f.client("", nil)

	parked := make(chan error, 1)
	go func() {
		_, _, err := st.Claim(ctx, taskgraph.ClaimRequest{Owner: "w0", Wait: taskgraph.MaxClaimWait})
		parked <- err
	}()
	testwait.For(t, "the claim to park", func() bool { return st.Waiters() >= 1 })
	res, out := callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w1", "wait_ms": 30000})
	if res.IsError || out["claimed"] != false || out["task"] != nil || out["hint"] != tools.WaitLimitHint {
		t.Fatalf("claim-next at the wait limit: isError=%v %v", res.IsError, out)
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range lt.Tools {
		if tool.Name != manifest.ToolClaim {
			continue
		}
		b, _ := json.Marshal(tool.OutputSchema)
		var schema struct {
			Properties map[string]struct{ Type string } `json:"properties"`
		}
		if err := json.Unmarshal(b, &schema); err != nil || schema.Properties["hint"].Type != "string" {
			t.Fatalf("claim output schema has no string hint: %s", b)
		}
	}
	cancel()
	<-parked
}

// A claim-next within a workflow that does not exist says so in its hint,
// so a worker with a typo in workflow_id is told rather than left waiting;
// one within an existing but empty workflow has no hint (issue 29 item 3).
func TestClaimInUnknownWorkflowSaysSo(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cs := f.client("", nil)
	res, out := callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w1", "workflow_id": "relase-1"})
	if res.IsError || out["claimed"] != false || out["task"] != nil || out["hint"] != fmt.Sprintf(tools.UnknownWorkflowHint, "relase-1") {
		t.Fatalf("claim-next in an unknown workflow: isError=%v %v", res.IsError, out)
	}
	callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "release-1", "node_id": "a"})
	if res, out := callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w1", "workflow_id": "release-1"}); res.IsError || out["claimed"] != true {
		t.Fatalf("claim-next in release-1: isError=%v %v", res.IsError, out)
	}
	res, out = callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w1", "workflow_id": "release-1"})
	if _, has := out["hint"]; res.IsError || out["claimed"] != false || has {
		t.Fatalf("claim-next in a workflow with no ready task: isError=%v %v", res.IsError, out)
	}
}
