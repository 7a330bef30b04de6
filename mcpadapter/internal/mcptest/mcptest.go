// Package mcptest holds the MCP calls and answer readers that the tests of
// the adapter's packages (mcpadapter, httpfront, tools) share: one copy,
// where each package's tests had their own. Nothing in the server imports
// it. The helpers fail the test through testing.TB; they never mock
// anything: every call goes through the SDK's real client.
package mcptest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
)

// CallTool calls a tool through the SDK client and returns its structured
// content decoded, failing the test on a protocol error.
func CallTool(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
	}
	return res, out
}

// ToolText is the text of a tool result's first content, "" when it has
// none or the first is not text.
func ToolText(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// HolderArgs are the holder arguments (task_id, owner, generation,
// claim_token) of a claim's structured content.
func HolderArgs(claim map[string]any) map[string]any {
	l := claim["lease"].(map[string]any)
	return map[string]any{"task_id": claim["task"].(map[string]any)["task_id"], "owner": l["owner"], "generation": l["generation"], "claim_token": l["claim_token"]}
}

// ModernMeta returns the per-request _meta of a 2026-07-28 request
// declaring caps (nil: none).
func ModernMeta(caps map[string]any) map[string]any {
	if caps == nil {
		caps = map[string]any{}
	}
	return map[string]any{
		wire.MetaProtocolVersion:             manifest.ModernVersion,
		wire.MetaClientCapabilities:          caps,
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "raw", "version": "1"},
	}
}

// SchemaAccepts validates raw JSON against a resolved schema.
func SchemaAccepts(rs *jsonschema.Resolved, raw []byte) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	return rs.Validate(v)
}

// ToJSON is v encoded as JSON ("" for a value that has no encoding).
func ToJSON(v any) string { b, _ := json.Marshal(v); return string(b) }
