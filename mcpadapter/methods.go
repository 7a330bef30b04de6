package mcpadapter

import (
	"sort"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/skills"
)

// ServedMethods lists every JSON-RPC method this server answers (when the
// surface enables it), for documentation and its drift test.
func ServedMethods() []string {
	m := []string{
		"initialize", "notifications/initialized", "ping", "server/discover",
		"tools/list", "tools/call", "resources/list", "resources/read", "resources/templates/list",
		MethodTasksGet, MethodTasksUpdate, MethodTasksCancel,
		"notifications/cancelled",
	}
	m = append(m, extraServedMethods...)
	sort.Strings(m)
	return m
}

// extraServedMethods are served by package skills when skills are served.
var extraServedMethods = []string{skills.MethodList, skills.MethodGet, skills.MethodDirectoryRead}

// UnservedMethods lists the methods that are answered with -32601 although
// the SDK knows them: this server neither serves nor advertises them.
func UnservedMethods() []string {
	var m []string
	for k := range unservedMethods {
		m = append(m, k)
	}
	sort.Strings(m)
	return m
}

// ErrorCodes lists every JSON-RPC error code this server sends.
func ErrorCodes() []int64 {
	return []int64{
		jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound,
		jsonrpc.CodeInvalidParams, jsonrpc.CodeInternalError,
		mcp.CodeHeaderMismatch, mcp.CodeMissingRequiredClientCapabilities, mcp.CodeUnsupportedProtocolVersion,
	}
}
