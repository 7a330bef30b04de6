package mcpadapter

import (
	"context"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
)

// direct is the server's path for a 2026-07-28 tools/call that the HTTP
// front serves without the SDK's transport (see DirectToolCall).
type direct struct {
	on      bool
	impl    *mcp.Implementation // the server's identity, as the SDK server has it
	tools   map[string]bool     // the tools registered from the tool surface
	handler mcp.MethodHandler   // the receiving middleware around callTool
}

// initDirect builds the direct path from the receiving middleware the SDK
// server runs, outermost first, so both paths run the same chain. With
// Config.Register set the SDK server may hold tools or middleware of the
// caller's, so the direct path stays off.
func (s *Server) initDirect(middleware []mcp.Middleware, on bool) {
	s.direct.tools = map[string]bool{}
	for _, t := range s.tools.Tools() {
		s.direct.tools[t.Name] = true
	}
	h := mcp.MethodHandler(s.callToolDirect)
	for i := len(middleware) - 1; i >= 0; i-- {
		h = middleware[i](h)
	}
	s.direct.handler, s.direct.on = h, on
}

// callToolDirect is what the SDK server (v1.8.0) runs inside the receiving
// middleware for a 2026-07-28 tools/call: its multi-round-trip middleware
// passes such a request through, and callTool runs the registered tool's
// handler (the one New registers) or refuses an unknown tool.
func (s *Server) callToolDirect(ctx context.Context, _ string, req mcp.Request) (mcp.Result, error) {
	p := req.(*mcp.CallToolRequest).Params
	if !s.direct.tools[p.Name] {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", p.Name)}
	}
	return s.tools.Call(ctx, callerOf(ctx), p.Name, p.Arguments)
}

// DirectToolCall serves a 2026-07-28 tools/call without the SDK's
// Streamable HTTP handler and returns the JSON-RPC response body the SDK
// would have written, with true; or false, having done nothing, for a
// call this path does not serve (then hand the request to the SDK). params
// are the request's as wire.DirectToolCall decoded them; header is the
// HTTP request's header, which carries the key of the request's Inbound
// (wire.HeaderInbound) as it does for the SDK. The call runs through the
// same receiving middleware as every SDK call (inbound, principal,
// unserved, Tasks extension, recovery) and the same tool handler; the
// body goes through wire.FixRPCResponse like the SDK's.
//
// Not served here: a tool not registered from the tool surface, and a
// graph_task_create that declares the Tasks extension (its answer is a
// task handle, which the SDK encodes by the extension's rules).
func (s *Server) DirectToolCall(ctx context.Context, header http.Header, id jsonrpc.ID, params *mcp.CallToolParamsRaw) ([]byte, bool) {
	if !s.direct.on || !s.direct.tools[params.Name] {
		return nil, false
	}
	req := &mcp.CallToolRequest{Params: params, Extra: &mcp.RequestExtra{Header: header}}
	if s.cfg.Surface.TasksExtension && params.Name == manifest.ToolCreate && declaresExtension(req, manifest.TasksExtension) {
		return nil, false
	}
	res, err := s.direct.handler(ctx, "tools/call", req)
	var ctr *mcp.CallToolResult
	if err == nil {
		var ok bool
		if ctr, ok = res.(*mcp.CallToolResult); !ok {
			err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error: a tool call returned no tool result"}
		}
	}
	return wire.EncodeToolCallResponse(id, ctr, err, s.direct.impl, s.log), true
}
