package wire

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/input"
)

// HTTP header names of the Streamable HTTP transport.
const (
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderMethod          = "Mcp-Method"
	HeaderName            = "Mcp-Name"
	HeaderLastEventID     = "Last-Event-Id"
)

// Methods of the Tasks extension whose Mcp-Name mirrors params.taskId.
const (
	methodTasksGet    = "tasks/get"
	methodTasksUpdate = "tasks/update"
	methodTasksCancel = "tasks/cancel"
)

// ClassifyHTTP decides which era serves m, given the POST's header, or the
// error to answer instead. The rules, in order:
//   - a response (a client's answer to a server request) belongs to a
//     legacy session and needs its Mcp-Session-Id;
//   - a request whose _meta names a protocol version is modern-style: the
//     MCP-Protocol-Version header must be present and equal (-32020), the
//     version must be 2026-07-28 (-32022), and a call must also carry
//     _meta clientCapabilities as an object (-32602);
//   - the header 2026-07-28 without _meta: a notification is served, a call
//     lacks its _meta (-32602);
//   - any other header value that is not a supported legacy version: -32022;
//   - otherwise the request is legacy: it needs a session (Mcp-Session-Id)
//     unless it is initialize, ping or a notification. A session-less call
//     gets HTTP 400 (the SDK would answer HTTP 200 with error code 0).
func ClassifyHTTP(h http.Header, m *Message) (Era, *Failure) {
	hv := strings.TrimSpace(h.Get(HeaderProtocolVersion))
	sid := h.Get(HeaderSessionID)
	if m.IsResponse() {
		if sid == "" {
			return 0, ResponseOutsideSession()
		}
		return Legacy, nil
	}
	if pv, ok, fail := MetaVersion(m); fail != nil {
		return 0, fail
	} else if ok {
		if hv == "" {
			return 0, Failf(http.StatusBadRequest, m, mcp.CodeHeaderMismatch, `header mismatch: the MCP-Protocol-Version header is required on a request whose _meta["%s"] is %s, and must equal it`, MetaProtocolVersion, input.Quote(pv))
		}
		if hv != pv {
			return 0, Failf(http.StatusBadRequest, m, mcp.CodeHeaderMismatch, `header mismatch: the MCP-Protocol-Version header %s does not equal _meta["%s"] %s`, input.Quote(hv), MetaProtocolVersion, input.Quote(pv))
		}
		if fail := CheckModernMeta(m, pv); fail != nil {
			return 0, fail
		}
		return Modern, nil
	}
	if hv == manifest.ModernVersion {
		if m.IsNotification() {
			return Modern, nil
		}
		return 0, MissingMeta(m)
	}
	if hv != "" && !isLegacyVersion(hv) {
		return 0, unsupportedVersion(m, hv, "the MCP-Protocol-Version header")
	}
	if sid != "" || m.Method == "initialize" || m.Method == "ping" || m.IsNotification() {
		return Legacy, nil
	}
	if hv == "" {
		return 0, MissingMeta(m)
	}
	return 0, Failf(http.StatusBadRequest, m, jsonrpc.CodeInvalidRequest, "invalid request: missing Mcp-Session-Id header: send initialize first to open a session (protocol %s)", hv)
}

// ResponseOutsideSession is the answer, on every transport, to a JSON-RPC
// response (a client's answer to a server request) that belongs to no
// legacy session: this server sends requests only within one, so such a
// message answers nothing. Over HTTP a session is named by Mcp-Session-Id;
// on stdio the connection is one once initialize was received. JSON-RPC
// answers no response; the id is null, since the message's id names no
// request of the client's.
func ResponseOutsideSession() *Failure {
	return Failf(http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "invalid request: a JSON-RPC response is accepted only within a legacy session (after initialize; over HTTP with its Mcp-Session-Id); this server sends no requests outside one")
}

// nameParam is the params field that the Mcp-Name header mirrors, per method.
var nameParam = map[string]string{
	"tools/call":      "name",
	"prompts/get":     "name",
	"resources/read":  "uri",
	methodTasksGet:    "taskId",
	methodTasksUpdate: "taskId",
	methodTasksCancel: "taskId",
}

// CheckModernHeaders applies the 2026-07-28 routing-header rules that the
// SDK misses or gets wrong: Mcp-Method must equal the method; Mcp-Name must
// equal params.taskId on tasks/* (the SDK checks it only for tools/call,
// resources/read and prompts/get); a =?base64?…?= Mcp-Name is decoded before
// comparing (the SDK v1.8.0 compares it literally). On success the header
// holds the decoded value, so the SDK's own check agrees. Notifications
// that lack Mcp-Method get it from the body: the revision requires it on
// requests only.
func CheckModernHeaders(h http.Header, m *Message) *Failure {
	methods := h.Values(HeaderMethod)
	switch {
	case len(methods) == 0 && m.IsNotification():
		h.Set(HeaderMethod, m.Method)
	case len(methods) == 0:
		return Failf(http.StatusBadRequest, m, mcp.CodeHeaderMismatch, "header mismatch: missing required Mcp-Method header; it must equal the request's method %s", input.Quote(m.Method))
	case len(methods) > 1:
		return Failf(http.StatusBadRequest, m, mcp.CodeHeaderMismatch, "header mismatch: send exactly one Mcp-Method header")
	case strings.TrimSpace(methods[0]) != m.Method:
		return Failf(http.StatusBadRequest, m, mcp.CodeHeaderMismatch, "header mismatch: the Mcp-Method header %s does not equal the request's method %s", input.Quote(strings.TrimSpace(methods[0])), input.Quote(m.Method))
	}
	field, ok := nameParam[m.Method]
	if !ok || !m.IsCall() {
		return nil
	}
	var bodyVal string
	rawVal, inBody := m.Param(field)
	bodyIsString := inBody && json.Unmarshal(rawVal, &bodyVal) == nil
	names := h.Values(HeaderName)
	if len(names) > 1 {
		return Failf(http.StatusBadRequest, m, mcp.CodeHeaderMismatch, "header mismatch: send exactly one Mcp-Name header")
	}
	if len(names) == 0 || strings.TrimSpace(names[0]) == "" {
		if !inBody {
			return nil // the method's own validation reports the missing parameter
		}
		return Failf(http.StatusBadRequest, m, mcp.CodeHeaderMismatch, "header mismatch: missing required Mcp-Name header for %s; it must equal params.%s", m.Method, field)
	}
	raw := strings.TrimSpace(names[0])
	val, ok := decodeHeaderValue(raw)
	if !ok {
		return Failf(http.StatusBadRequest, m, mcp.CodeHeaderMismatch, "header mismatch: the Mcp-Name header is not valid =?base64?…?= encoding")
	}
	if !bodyIsString || val != bodyVal {
		return Failf(http.StatusBadRequest, m, mcp.CodeHeaderMismatch, "header mismatch: the Mcp-Name header %s does not equal params.%s of %s", input.Quote(val), field, m.Method)
	}
	if val != raw {
		h.Set(HeaderName, val)
	}
	return nil
}

// decodeHeaderValue decodes a =?base64?…?= header value (standard alphabet,
// padded); any other value is literal.
func decodeHeaderValue(v string) (string, bool) {
	enc, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, true
	}
	enc, ok = strings.CutSuffix(enc, "?=")
	if !ok {
		return v, true
	}
	b, err := base64.StdEncoding.Strict().DecodeString(enc)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// AcceptFailure checks a POST's Accept header with the SDK's own rule (it
// must admit both application/json and text/event-stream; wildcards count)
// and returns the JSON-RPC error to answer when it does not. The SDK
// (v1.8.0, streamableAccepts) refuses such a request itself, but with a
// plain-text 400 that clients cannot read as JSON-RPC; MCP.md §4 promises a
// JSON-RPC error body for every refusal. TestSDKCanaryBadAcceptIsPlainText
// is the canary.
func AcceptFailure(h http.Header) *Failure {
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
	return &Failure{Status: http.StatusBadRequest, Code: jsonrpc.CodeInvalidRequest,
		Msg: "not acceptable: the Accept header must list both application/json and text/event-stream (for example \"Accept: application/json, text/event-stream\")"}
}

// ModernResultBody is the JSON-RPC response body of a 2026-07-28 request
// answered without the SDK: res with what the SDK adds to every result of
// that era (resultType "complete" and the server's identity in _meta). The
// HTTP front answers with it a tools/call whose arguments hold a number
// beyond float64 range: the SDK (v1.8.0) decodes such arguments into `any`
// to check the Mcp-Name header (validateMcpHeaders via extractName), fails,
// and answers a misleading -32020 "failed to extract name" before any tool
// runs, where stdio and legacy sessions give the tool error naming the
// field. TestSDKCanaryOverflowingArgumentsFailTheNameCheck is the canary.
func ModernResultBody(id jsonrpc.ID, res any, serverName, serverVersion string) ([]byte, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	out["resultType"] = "complete"
	meta, _ := out["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[MetaServerInfo] = map[string]any{"name": serverName, "version": serverVersion}
	out["_meta"] = meta
	return json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id.Raw(), "result": out})
}

// UnknownMethod returns the -32601 for a method the server neither serves
// nor knowingly refuses (known reports both), or nil. Both transports answer
// such a method with this one message before any SDK session sees it: the
// SDK's own answer differs by transport (code 0 "JSON RPC not handled" on
// stdio, a plain-text 400 or "method not found" over HTTP).
func UnknownMethod(method string, known func(string) bool) *Failure {
	if method == "" || IsNotificationMethod(method) || known(method) {
		return nil
	}
	return &Failure{Status: http.StatusNotFound, Code: jsonrpc.CodeMethodNotFound, Msg: fmt.Sprintf("method not found: %q", method)}
}

// IsNotificationMethod reports whether method names a notification
// ("notifications/" and more).
func IsNotificationMethod(method string) bool {
	return len(method) > len("notifications/") && strings.HasPrefix(method, "notifications/")
}
