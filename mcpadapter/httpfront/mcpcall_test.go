package httpfront

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP calls the front's tests make through the SDK client, and what
// they read from the answers (as the MCP server's own tests do).

// callTool calls a tool through the SDK client and returns its structured
// content decoded, failing on a protocol error.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
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

func toolText(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// holderArgs are the holder arguments of a claim's structured content.
func holderArgs(claim map[string]any) map[string]any {
	l := claim["lease"].(map[string]any)
	return map[string]any{"task_id": claim["task"].(map[string]any)["task_id"], "owner": l["owner"], "generation": l["generation"], "claim_token": l["claim_token"]}
}

func toJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// schemaAccepts validates raw JSON against a resolved schema.
func schemaAccepts(rs *jsonschema.Resolved, raw []byte) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	return rs.Validate(v)
}

// formatTime is a time as the tools write it: RFC 3339 in UTC with
// milliseconds.
func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// inspectForms is how graph_task_inspect's errors name its three forms.
const inspectForms = "give exactly one of: task_id; workflow_id with node_id (a task by its node); workflow_id alone (the workflow's outline)"
