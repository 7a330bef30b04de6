package faults

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// A create whose COMMIT's answer the server loses is answered over MCP as
// unavailable/unknown_outcome, not retryable, with advice to inspect; the
// database then holds the task or not, and a repeated create (idempotent)
// says which. The connection is cut by a proxy between the server and
// PostgreSQL at the COMMIT of the transaction that inserted the task.
func TestUnknownOutcomeOverMCP(t *testing.T) {
	if testing.Short() {
		t.Skip("faults: skipped with -short")
	}
	t.Parallel()
	proxy, proxied := pgtest.NewCutProxy(t, pgtest.URL(t))
	srv := newServer(t, "proxied", proxied)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := &Client{HTTP: &http.Client{Timeout: time.Minute}, Rec: NewRecorder(), Endpoints: func() []string { return []string{srv.endpoint()} }}
	call := func(node string) (rpcAnswer, toolOut) {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
			"params": map[string]any{"name": "graph_task_create", "arguments": map[string]any{"workflow_id": "outcome", "node_id": node},
				"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": protocolVersion, "io.modelcontextprotocol/clientCapabilities": map[string]any{}}}})
		status, resp, err := c.post(ctx, srv.endpoint(), "graph_task_create", body)
		if err != nil || status != http.StatusOK {
			t.Fatalf("create %s: HTTP %d %v %s", node, status, err, resp)
		}
		var a rpcAnswer
		var out toolOut
		if err := json.Unmarshal(resp, &a); err != nil || a.Result == nil {
			t.Fatalf("create %s: %s", node, resp)
		}
		_ = json.Unmarshal(a.Result.StructuredContent, &out)
		return a, out
	}
	var created struct {
		Created bool `json:"created"`
	}
	for _, tc := range []struct {
		cut       pgtest.Cut
		committed bool
	}{{pgtest.CutAfterCommit, true}, {pgtest.CutBeforeCommit, false}} {
		node := map[bool]string{true: "committed", false: "lost"}[tc.committed]
		proxy.ArmAfter(tc.cut, "INSERT INTO tasks")
		a, _ := call(node)
		if got := <-proxy.Fired; got != tc.cut {
			t.Fatalf("%s: the proxy cut at %v", node, got)
		}
		var d struct {
			Kind, Reason string
			Retryable    bool
		}
		_ = json.Unmarshal(a.Result.Meta[errorMetaKey], &d)
		text := ""
		if len(a.Result.Content) > 0 {
			text = a.Result.Content[0].Text
		}
		if !a.Result.IsError || d.Kind != "unavailable" || d.Reason != "unknown_outcome" || d.Retryable {
			t.Errorf("%s: answered %+v %q, want unavailable/unknown_outcome, not retryable", node, d, text)
		}
		if !strings.Contains(text, "may have been applied") || !strings.Contains(text, "Inspect the task") {
			t.Errorf("%s: the text does not say the call may have been applied and to inspect: %q", node, text)
		}
		// The repeat, after inspecting, tells what happened.
		a, _ = call(node)
		if a.Result.IsError {
			t.Fatalf("%s: repeated create: %s", node, a.Result.Content[0].Text)
		}
		_ = json.Unmarshal(a.Result.StructuredContent, &created)
		if created.Created == tc.committed {
			t.Errorf("%s: the repeated create says created=%v; the first one committed: %v", node, created.Created, tc.committed)
		}
	}
	if err := srv.stop(); err != nil {
		t.Errorf("server: %v\n%s", err, srv.logs.String())
	}
}
