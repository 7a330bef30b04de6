package mcpadapter

import (
	"sort"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
	"github.com/graph-engineering/graph-engineering-mcp/skills"
)

// ServedMethods lists every JSON-RPC method this server answers (when the
// surface enables it), for documentation and its drift test.
func ServedMethods() []string {
	m := []string{
		"initialize", "notifications/initialized", "ping", "server/discover",
		"tools/list", "tools/call", "resources/list", "resources/read", "resources/templates/list",
		tools.MethodTasksGet, tools.MethodTasksUpdate, tools.MethodTasksCancel,
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

// SupportedVersions are every protocol version this server speaks, newest first.
func SupportedVersions() []string { return wire.SupportedVersions() }

// unservedMethods are methods the SDK would answer but this server does not
// serve or advertise; they get -32601 in both eras.
var unservedMethods = map[string]bool{
	"prompts/list":           true,
	"prompts/get":            true,
	"completion/complete":    true,
	"logging/setLevel":       true,
	"resources/subscribe":    true,
	"resources/unsubscribe":  true,
	"subscriptions/listen":   true,
	"sampling/createMessage": true,
	"elicitation/create":     true,
	"roots/list":             true,
}

// resourceMethods are served exactly when resources are. The server has no
// resource templates, but clients that see the resources capability list
// templates too, so resources/templates/list answers an empty list rather
// than -32601.
var resourceMethods = map[string]bool{"resources/list": true, "resources/read": true, "resources/templates/list": true}

// servedMethodSet is ServedMethods as a set, built once.
var servedMethodSet = func() map[string]bool {
	m := map[string]bool{}
	for _, name := range ServedMethods() {
		m[name] = true
	}
	return m
}()

// KnownMethod reports whether this server serves method (whatever the
// surface) or knowingly refuses it (UnservedMethods, -32601 from the
// server's own middleware). Any other method gets wire.UnknownMethod's
// answer from the transport, before any SDK session sees it.
func KnownMethod(method string) bool { return unservedMethods[method] || servedMethodSet[method] }
