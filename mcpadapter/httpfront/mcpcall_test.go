package httpfront

import (
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/mcptest"
)

// formatTime is a time as the tools write it: RFC 3339 in UTC with
// milliseconds.
func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// inspectForms is how graph_task_inspect's errors name its three forms.
const inspectForms = "give exactly one of: task_id; workflow_id with node_id (a task by its node); workflow_id alone (the workflow's outline)"

// The MCP calls and answer readers shared with the other adapter packages'
// tests (package mcptest).
var (
	callTool      = mcptest.CallTool
	toolText      = mcptest.ToolText
	holderArgs    = mcptest.HolderArgs
	toJSON        = mcptest.ToJSON
	schemaAccepts = mcptest.SchemaAccepts
)
