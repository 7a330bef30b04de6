package faults

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
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
	// The proxy finds a transaction by the text of its statements, which
	// pgx sends only when it prepares one: with its statement cache, a
	// connection that ran "INSERT INTO requests" once sends only the
	// statement's name afterwards. describe_exec sends the text every time.
	u, err := url.Parse(proxied)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("default_query_exec_mode", "describe_exec")
	u.RawQuery = q.Encode()
	proxied = u.String()
	srv := newServer(t, "proxied", proxied)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := &Client{HTTP: &http.Client{Timeout: time.Minute}, Rec: NewRecorder(), Endpoints: func() []string { return []string{srv.endpoint()} }}
	tool := func(name string, args map[string]any) (rpcAnswer, toolOut) {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
			"params": map[string]any{"name": name, "arguments": args,
				"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": protocolVersion, "io.modelcontextprotocol/clientCapabilities": map[string]any{}}}})
		status, resp, err := c.post(ctx, srv.endpoint(), name, body)
		if err != nil || status != http.StatusOK {
			t.Fatalf("%s: HTTP %d %v %s", name, status, err, resp)
		}
		var a rpcAnswer
		var out toolOut
		if err := json.Unmarshal(resp, &a); err != nil || a.Result == nil {
			t.Fatalf("%s: %s", name, resp)
		}
		_ = json.Unmarshal(a.Result.StructuredContent, &out)
		return a, out
	}
	call := func(node string) (rpcAnswer, toolOut) {
		return tool("graph_task_create", map[string]any{"workflow_id": "outcome", "node_id": node})
	}
	// cut returns the cut the proxy made for the call that just returned
	// (it reports after it closed the connection); the test's context
	// ends the wait if the proxy never saw the armed transaction.
	cut := func(what string) pgtest.Cut {
		t.Helper()
		select {
		case got := <-proxy.Fired:
			return got
		case <-ctx.Done():
			t.Fatalf("%s: the proxy never cut its commit (the armed statement text was not seen)", what)
			return pgtest.CutNone
		}
	}
	wantUnknown := func(what string, a rpcAnswer) {
		t.Helper()
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
			t.Errorf("%s: answered %+v %q, want unavailable/unknown_outcome, not retryable", what, d, text)
		}
		if !strings.Contains(text, "may have been applied") || !strings.Contains(text, "inspect the task") || !strings.Contains(text, "same request_id") {
			t.Errorf("%s: the text does not say the call may have been applied, to repeat it with its request_id or inspect: %q", what, text)
		}
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
		if got := cut(node); got != tc.cut {
			t.Fatalf("%s: the proxy cut at %v", node, got)
		}
		wantUnknown(node, a)
		// The repeat without a request id, after inspecting, tells what
		// happened.
		a, _ = call(node)
		if a.Result.IsError {
			t.Fatalf("%s: repeated create: %s", node, a.Result.Content[0].Text)
		}
		_ = json.Unmarshal(a.Result.StructuredContent, &created)
		if created.Created == tc.committed {
			t.Errorf("%s: the repeated create says created=%v; the first one committed: %v", node, created.Created, tc.committed)
		}

		// A claim and a complete with request ids, each cut at its commit:
		// the repeat with the same id returns the committed answer (the
		// same lease, whose token then completes the task) or acts now;
		// either way exactly one claim and one completion happened.
		wf := "outcome-" + node
		tool("graph_task_create", map[string]any{"workflow_id": wf, "node_id": "t"})
		claim := map[string]any{"owner": "w", "workflow_id": wf, "request_id": "claim-" + node}
		proxy.ArmAfter(tc.cut, "INSERT INTO requests")
		a, _ = tool("graph_task_claim", claim)
		if got := cut(node + " claim"); got != tc.cut {
			t.Fatalf("%s claim: the proxy cut at %v", node, got)
		}
		wantUnknown(node+" claim", a)
		// The repeat may wait: a transaction cut before its COMMIT holds
		// the task's row until its backend sees the connection gone and
		// rolls back, and a claim-next passes over a locked task (SKIP
		// LOCKED) and would answer nothing claimable meanwhile. The wait
		// is not one of the claim's arguments under its request id.
		again := map[string]any{"wait_ms": 30000}
		for k, v := range claim {
			again[k] = v
		}
		a, cl := tool("graph_task_claim", again)
		if a.Result.IsError || !cl.Claimed || cl.Lease == nil || cl.Lease.Generation != 1 {
			t.Fatalf("%s: the claim repeated with its request_id: %s %+v, want the claim at generation 1", node, string(a.Result.StructuredContent), cl)
		}
		done := map[string]any{"task_id": cl.Task.TaskID, "owner": "w", "generation": cl.Lease.Generation, "claim_token": cl.Lease.ClaimToken,
			"result": "ok", "request_id": "done-" + node}
		proxy.ArmAfter(tc.cut, "INSERT INTO requests")
		a, _ = tool("graph_task_complete", done)
		if got := cut(node + " complete"); got != tc.cut {
			t.Fatalf("%s complete: the proxy cut at %v", node, got)
		}
		wantUnknown(node+" complete", a)
		a, out := tool("graph_task_complete", done)
		if a.Result.IsError || out.Task == nil || out.Task.State != "completed" {
			t.Fatalf("%s: the complete repeated with its request_id: %s, want the completion acknowledged", node, a.Result.Content)
		}
		a, insp := tool("graph_task_inspect", map[string]any{"task_id": cl.Task.TaskID})
		if a.Result.IsError || insp.Task.State != "completed" || insp.Task.Generation != 1 {
			t.Fatalf("%s: the task after the repeats: %s, want completed at generation 1", node, string(a.Result.StructuredContent))
		}
	}
	if err := srv.stop(); err != nil {
		t.Errorf("server: %v\n%s", err, srv.logs.String())
	}
}
