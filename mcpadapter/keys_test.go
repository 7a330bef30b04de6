package mcpadapter

import (
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
)

// TestConcurrencyKeysOverMCP drives issue 27's items 1 and 2 with the SDK
// client: graph_task_create sets a task's concurrency key and the key's
// limit, every task answer names the key, claim-next passes over a key at
// its cap, and a claim held back by the key's rate answers
// next_claimable_at (server time) with a hint; a limit without a key is a
// tool error naming concurrency_key.
func TestConcurrencyKeysOverMCP(t *testing.T) {
	f := newFixture(t)
	cs := f.client("", nil)
	for _, node := range []string{"a", "b", "c"} {
		res, out := callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": node, "concurrency_key": "llm",
			"concurrency_max_claimed": 2, "concurrency_rate": 1, "concurrency_rate_interval_ms": 60000})
		if res.IsError || out["task"].(map[string]any)["concurrency_key"] != "llm" {
			t.Fatalf("create %s: %s %v", node, toolText(res), out["task"])
		}
	}
	res, _ := callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": "d", "concurrency_max_claimed": 1})
	if !res.IsError || !strings.Contains(toolText(res), "concurrency_key") {
		t.Fatalf("a limit without a key: %s", toolText(res))
	}
	start := f.clock.Now()
	_, out := callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w", "lease_ms": 900000})
	if out["claimed"] != true || out["task"].(map[string]any)["concurrency_key"] != "llm" {
		t.Fatalf("first claim: %v", out)
	}
	_, out = callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w", "lease_ms": 900000})
	want := start.Add(time.Minute).UTC().Format("2006-01-02T15:04:05.000Z")
	if out["claimed"] != false || out["next_claimable_at"] != want || !strings.Contains(out["hint"].(string), want) {
		t.Fatalf("a claim held back by the rate: %v, want next_claimable_at %s", out, want)
	}
	f.clock.Advance(time.Minute)
	if _, out = callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w", "lease_ms": 900000}); out["claimed"] != true {
		t.Fatalf("a claim once the rate opened: %v", out)
	}
	// Two claimed: the cap holds, and the answer names no time (only a
	// claim's end frees the key).
	f.clock.Advance(time.Minute)
	if _, out = callTool(t, cs, manifest.ToolClaim, map[string]any{"owner": "w", "lease_ms": 900000}); out["claimed"] != false || out["next_claimable_at"] != nil {
		t.Fatalf("a claim past the cap: %v", out)
	}
}
