package mcpadapter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// serverInfoMetaKey is the _meta key of the server's identity on every
// 2026-07-28 result.
const serverInfoMetaKey = "io.modelcontextprotocol/serverInfo"

// acceptFailure checks a POST's Accept header with the SDK's own rule (it
// must admit both application/json and text/event-stream; wildcards count)
// and returns the JSON-RPC error to answer when it does not. The SDK
// (v1.8.0, streamableAccepts) refuses such a request itself, but with a
// plain-text 400 that clients cannot read as JSON-RPC; MCP.md §4 promises a
// JSON-RPC error body for every refusal. TestSDKRefusesBadAcceptInPlainText
// is the canary: it fails once the SDK answers in JSON-RPC itself, and this
// check can go.
func acceptFailure(h http.Header) *rpcFailure {
	jsonOK, streamOK := false, false
	for _, value := range h.Values("Accept") {
		for _, raw := range strings.Split(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	if jsonOK && streamOK {
		return nil
	}
	return &rpcFailure{status: http.StatusBadRequest, code: jsonrpc.CodeInvalidRequest,
		msg: "not acceptable: the Accept header must list both application/json and text/event-stream (for example \"Accept: application/json, text/event-stream\")"}
}

// overflowToolError answers, as the tool error the call would get on
// stdio, a 2026-07-28 tools/call whose arguments hold a number beyond
// float64 range. The SDK (v1.8.0) decodes such arguments into `any` to
// check the Mcp-Name header (validateMcpHeaders via extractName), fails,
// and answers a misleading -32020 "failed to extract name" before any tool
// runs; on stdio and in legacy sessions the same call reaches the tool and
// gets a tool error naming the field. It returns nil when the call is not
// such a case. TestHTTPOverflowingNumberIsAToolError is the canary: it
// checks the SDK still fails on such a body when it is sent past us.
func (h *HTTPHandler) overflowToolError(ctx context.Context, msg *httpMessage) []byte {
	if msg.method != "tools/call" || !msg.hasID {
		return nil
	}
	name, args, ok := msg.toolCall()
	if !ok || len(args) == 0 {
		return nil
	}
	if _, ok := taskgraph.OverflowingNumber(args); !ok {
		return nil
	}
	var def *toolDef
	for _, d := range toolDefs() {
		if d.name == name && h.srv.cfg.Surface.Allows(d.name) {
			def = &d
			break
		}
	}
	if def == nil {
		return nil // the SDK answers an unknown tool
	}
	_, err := decodeArgs(args, def.fields)
	if err == nil {
		return nil
	}
	res, rerr := h.srv.toolError(ctx, def.name, err)
	if rerr != nil || res == nil {
		return nil
	}
	b, merr := json.Marshal(res)
	var out map[string]any
	if merr != nil || json.Unmarshal(b, &out) != nil {
		return nil
	}
	// What the SDK adds to every 2026-07-28 result.
	out["resultType"] = "complete"
	meta, _ := out["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[serverInfoMetaKey] = map[string]any{"name": ServerName, "version": h.srv.cfg.Version}
	out["_meta"] = meta
	body, merr := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.id.Raw(), "result": out})
	if merr != nil {
		return nil
	}
	return body
}

// servedMethodSet is ServedMethods as a set, built once.
var servedMethodSet = func() map[string]bool {
	m := map[string]bool{}
	for _, name := range ServedMethods() {
		m[name] = true
	}
	return m
}()

// unknownMethod returns the -32601 for a method this server neither serves
// (ServedMethods, whatever the surface) nor knowingly refuses
// (unservedMethods, answered by unservedMiddleware), or nil. Both
// transports answer such a method with this one message before any SDK
// session sees it: the SDK's own answer differed by transport ("method not
// found" on stdio, "JSON RPC not handled: … unsupported" over HTTP).
func unknownMethod(method string) *rpcFailure {
	if method == "" || isNotification(method) || unservedMethods[method] || servedMethodSet[method] {
		return nil
	}
	return &rpcFailure{status: http.StatusNotFound, code: jsonrpc.CodeMethodNotFound, msg: fmt.Sprintf("method not found: %q", method)}
}
