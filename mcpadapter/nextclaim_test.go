package mcpadapter

import (
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
)

// graph_task_complete with claim_next over the SDK's real client: an
// accepted completion claims the next ready task in the same call and
// answers it as graph_task_claim would; nothing ready answers next null;
// a refused completion claims nothing; request_id with claim_next is
// refused naming both, with nothing written.
func TestCompleteClaimsNextOverTheClient(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cs := f.client("", nil)
	for _, n := range []string{"a", "b"} {
		if res, _ := callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": n}); res.IsError {
			t.Fatalf("create %s: %s", n, toolText(res))
		}
	}
	callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": "c", "depends_on": []string{"a"}, "requires": []string{"gpu"}})
	_, a := callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w1", "workflow_id": "wf"})
	if a["task"].(map[string]any)["node_id"] != "a" {
		t.Fatalf("first claim: %v", a)
	}
	complete := func(claim map[string]any, extra map[string]any) (bool, map[string]any, string, map[string]any) {
		t.Helper()
		args := holderArgs(claim)
		args["result"] = map[string]any{"done": true}
		for k, v := range extra {
			args[k] = v
		}
		res, out := callTool(t, cs, manifest.ToolComplete, args)
		var detail map[string]any
		if res.IsError {
			detail, _ = res.Meta[tools.ErrorMetaKey].(map[string]any)
		}
		return res.IsError, out, toolText(res), detail
	}

	// request_id with claim_next: refused, naming both; a is still held.
	isErr, _, text, detail := complete(a, map[string]any{"request_id": "r-1", "claim_next": map[string]any{"workflow_id": "wf"}})
	if !isErr || !strings.Contains(text, "claim_next") || !strings.Contains(text, "request_id") || detail["kind"] != "invalid" || detail["field"] != "request_id" {
		t.Fatalf("request_id with claim_next: isError %v %q %v, want an invalid error naming both fields", isErr, text, detail)
	}
	_, insp := callTool(t, cs, manifest.ToolInspect, map[string]any{"workflow_id": "wf", "node_id": "a"})
	if st := insp["task"].(map[string]any)["state"]; st != "claimed" {
		t.Fatalf("after the refused request_id + claim_next, a is %v, want still claimed", st)
	}
	// A bad claim_next names its inner field.
	isErr, _, text, detail = complete(a, map[string]any{"claim_next": map[string]any{"lease_ms": 5}})
	if !isErr || detail["field"] != "claim_next.lease_ms" || !strings.Contains(text, "claim_next.lease_ms must be an integer between 1000 and 900000") {
		t.Fatalf("bad claim_next.lease_ms: isError %v %q %v", isErr, text, detail)
	}

	// A refused completion (wrong token) claims nothing: b stays pending.
	stale := map[string]any{"task": a["task"], "lease": map[string]any{}}
	for k, v := range a["lease"].(map[string]any) {
		stale["lease"].(map[string]any)[k] = v
	}
	stale["lease"].(map[string]any)["claim_token"] = "wrong"
	isErr, _, _, detail = complete(stale, map[string]any{"claim_next": map[string]any{"workflow_id": "wf"}})
	if !isErr || detail["kind"] != "stale_claim" {
		t.Fatalf("completion with a wrong token: isError %v %v, want stale_claim", isErr, detail)
	}
	_, insp = callTool(t, cs, manifest.ToolInspect, map[string]any{"workflow_id": "wf", "node_id": "b"})
	if st := insp["task"].(map[string]any)["state"]; st != "pending" {
		t.Fatalf("after a refused completion with claim_next, b is %v, want pending (nothing claimed)", st)
	}

	// Accepted: a completes and b is claimed in the same call, answered as
	// graph_task_claim answers a claim.
	isErr, out, text, _ := complete(a, map[string]any{"claim_next": map[string]any{"workflow_id": "wf", "lease_ms": 60000}})
	if isErr {
		t.Fatalf("complete with claim_next: %s", text)
	}
	if out["task"].(map[string]any)["state"] != "completed" || out["claimed_next"] != true {
		t.Fatalf("complete with claim_next: %v", out)
	}
	next, ok := out["next"].(map[string]any)
	if !ok {
		t.Fatalf("next is %v, want the claim", out["next"])
	}
	task := next["task"].(map[string]any)
	l := next["lease"].(map[string]any)
	if task["node_id"] != "b" || task["state"] != "claimed" || task["owner"] != "w1" || next["claimed"] != true ||
		l["owner"] != "w1" || l["claim_token"] == "" || next["dependencies"] == nil || next["receipt"] == nil {
		t.Fatalf("next: %v", next)
	}
	if next["receipt"].(map[string]any)["receiptSha256"] == out["receipt"].(map[string]any)["receiptSha256"] {
		t.Fatalf("next carries the completion's receipt, want the claim's own: %v", out)
	}
	// The claim is live: its holder completes it, and now nothing is
	// ready for w1 (c requires gpu): next is null.
	isErr, out, text, _ = complete(next, map[string]any{"claim_next": map[string]any{"workflow_id": "wf"}})
	if isErr {
		t.Fatalf("complete b with claim_next: %s", text)
	}
	if v, present := out["next"]; !present || v != nil || out["claimed_next"] != false || out["task"].(map[string]any)["state"] != "completed" {
		t.Fatalf("complete with nothing claimable: %v, want next null and claimed_next false", out)
	}
	// With the capability, c is claimed, and carries a's result.
	_, c := callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w1", "workflow_id": "wf", "capabilities": []string{"gpu"}})
	if c["claimed"] != true {
		t.Fatalf("claim of c: %v", c)
	}
	deps := c["dependencies"].([]any)
	if len(deps) != 1 || deps[0].(map[string]any)["node_id"] != "a" {
		t.Fatalf("c's dependencies: %v", deps)
	}
	// Without claim_next the answer is as before: no next, no claimed_next.
	isErr, out, text, _ = complete(c, nil)
	if isErr {
		t.Fatalf("complete c: %s", text)
	}
	if _, ok := out["next"]; ok {
		t.Fatalf("complete without claim_next answers next: %v", out)
	}
	if _, ok := out["claimed_next"]; ok {
		t.Fatalf("complete without claim_next answers claimed_next: %v", out)
	}
}

// claim_next is held to the principal's workflows as a claim-next is: a
// workflow outside them, or none, is forbidden before anything is written.
func TestClaimNextKeepsToThePrincipalsWorkflows(t *testing.T) {
	t.Parallel()
	ps, err := principal.ParseAuthFile([]byte(`{"principals": [
		{"name": "rel", "token_sha256": "` + principal.TokenDigest("rel-token-0123456789abc") + `", "roles": ["submit", "work"], "workflows": ["release-*"]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	local, err := principal.NewAuthenticator(ps).Caller("rel")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *Config) { c.Local = local })
	cs := f.client("", nil)
	callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "release-1", "node_id": "a"})
	callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "release-1", "node_id": "b"})
	_, a := callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "rel:w", "workflow_id": "release-1"})
	for _, tc := range []struct {
		next map[string]any
		want string
	}{
		{map[string]any{}, "pass claim_next.workflow_id"},
		{map[string]any{"workflow_id": "secret-1"}, `may not touch workflow "secret-1"`},
	} {
		args := holderArgs(a)
		args["result"] = 1
		args["claim_next"] = tc.next
		res, _ := callTool(t, cs, manifest.ToolComplete, args)
		detail, _ := res.Meta[tools.ErrorMetaKey].(map[string]any)
		if !res.IsError || detail["kind"] != "forbidden" || detail["scope"] != "workflows" || !strings.Contains(toolText(res), tc.want) {
			t.Fatalf("claim_next %v: isError %v %q %v, want forbidden saying %q", tc.next, res.IsError, toolText(res), detail, tc.want)
		}
	}
	args := holderArgs(a)
	args["result"] = 1
	args["claim_next"] = map[string]any{"workflow_id": "release-1"}
	res, out := callTool(t, cs, manifest.ToolComplete, args)
	if res.IsError || out["claimed_next"] != true {
		t.Fatalf("claim_next within the scope: %s", toolText(res))
	}
}
