package mcpadapter

import (
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

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
