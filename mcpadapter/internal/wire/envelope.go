package mcpadapter

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// HTTP header names of the Streamable HTTP transport.
const (
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerSessionID       = "Mcp-Session-Id"
	headerMethod          = "Mcp-Method"
	headerName            = "Mcp-Name"
	headerLastEventID     = "Last-Event-Id"
	// headerArrival carries a request's server arrival time (Unix
	// nanoseconds) from the HTTP handler to the tool handler through the
	// SDK. The handler always overwrites it, so a client cannot choose it.
	headerArrival = "Graph-Engineering-Arrival"
)

// withHeaderArrival returns ctx carrying the arrival time that the HTTP
// handler put into the request's header, or ctx itself when there is none
// (stdio, or a request that did not come through HTTPHandler).
func withHeaderArrival(ctx context.Context, extra *mcp.RequestExtra) context.Context {
	if extra == nil || extra.Header == nil {
		return ctx
	}
	ns, err := strconv.ParseInt(extra.Header.Get(headerArrival), 10, 64)
	if err != nil || ns <= 0 {
		return ctx
	}
	return taskgraph.WithArrival(ctx, time.Unix(0, ns).UTC())
}

// httpMessage is the one JSON-RPC message of a POST body, checked for a
// valid envelope before any SDK code sees it.
type httpMessage struct {
	id     jsonrpc.ID // valid only when hasID
	hasID  bool
	method string // "" for a response
	params json.RawMessage
	meta   map[string]json.RawMessage // params._meta, nil when absent
	call   *toolCallParams            // params of a tools/call, read once by toolCall
}

// toolCallParams are the name and arguments of a tools/call.
type toolCallParams struct {
	name string
	args json.RawMessage
	ok   bool // params are an object with a string name
}

// toolCall returns the tool name and raw arguments of a tools/call
// (toolCallParts), reading params only the first time: admission and the
// overflow check both need them for every call.
func (m *httpMessage) toolCall() (name string, args json.RawMessage, ok bool) {
	if m.call == nil {
		m.call = &toolCallParams{}
		if m.method == "tools/call" {
			m.call.name, m.call.args, m.call.ok = toolCallParts(m.params)
		}
	}
	return m.call.name, m.call.args, m.call.ok
}

func (m *httpMessage) isCall() bool         { return m.method != "" && m.hasID }
func (m *httpMessage) isNotification() bool { return m.method != "" && !m.hasID }
func (m *httpMessage) isResponse() bool     { return m.method == "" }

// rpcFailure is a request the HTTP layer answers itself: an HTTP status and
// the JSON-RPC error of the body. id is the request's id when it is known.
type rpcFailure struct {
	status int
	id     *jsonrpc.ID
	code   int64
	msg    string
	data   any
}

func failure(status int, m *httpMessage, code int64, format string, args ...any) *rpcFailure {
	f := &rpcFailure{status: status, code: code, msg: fmt.Sprintf(format, args...)}
	if m != nil && m.hasID {
		id := m.id
		f.id = &id
	}
	return f
}

// era is the protocol generation a request belongs to.
type era int

const (
	// eraLegacy: the initialize handshake and sessions (2025-11-25 and
	// earlier), served by the SDK's stateful handler.
	eraLegacy era = iota
	// eraModern: 2026-07-28, every request self-describing, served by the
	// SDK's stateless handler.
	eraModern
)

func (e era) String() string {
	if e == eraModern {
		return "modern"
	}
	return "legacy"
}

// parseHTTPMessage checks that body is exactly one well-formed JSON-RPC
// message and returns it, or the -32700 / -32600 / -32602 error to answer.
// The SDK answers such bodies with plain-text 400s (checklist C1).
func parseHTTPMessage(body []byte) (*httpMessage, *rpcFailure) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, failure(http.StatusBadRequest, nil, jsonrpc.CodeParseError, "parse error: the request body is empty; POST exactly one JSON-RPC message")
	}
	return parseMessage(body)
}

// parseMessage checks one JSON-RPC message as every transport receives it
// (an HTTP body, a stdio line): the envelope rules are written once, here,
// so stdio and HTTP cannot drift apart (the golden conversations in
// testdata/golden replay the same input over both). A failure's status is
// the HTTP status; stdio ignores it.
func parseMessage(body []byte) (*httpMessage, *rpcFailure) {
	body = bytes.TrimSpace(body)
	if !json.Valid(body) {
		return nil, failure(http.StatusBadRequest, nil, jsonrpc.CodeParseError, "parse error: the message is not valid JSON")
	}
	switch body[0] {
	case '{':
	case '[':
		return nil, failure(http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "invalid request: JSON-RPC batches are not supported; send one message at a time (one line on stdio, one POST over HTTP)")
	default:
		return nil, failure(http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "invalid request: a JSON-RPC message must be a JSON object")
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, failure(http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "invalid request: the message is not a JSON object")
	}
	m := &httpMessage{}
	if rawID, ok := env["id"]; ok {
		id, err := decodeID(rawID)
		if err != nil {
			return nil, failure(http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "invalid request: %v", err)
		}
		m.id, m.hasID = id, true
	}
	if string(env["jsonrpc"]) != `"2.0"` {
		return nil, failure(http.StatusBadRequest, m, jsonrpc.CodeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)
	}
	rawMethod, hasMethod := env["method"]
	if hasMethod {
		if json.Unmarshal(rawMethod, &m.method) != nil || m.method == "" {
			return nil, failure(http.StatusBadRequest, m, jsonrpc.CodeInvalidRequest, "invalid request: method must be a non-empty string")
		}
	} else {
		if !m.hasID {
			return nil, failure(http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "invalid request: a message needs a method (request or notification) or an id (response)")
		}
		_, hasResult := env["result"]
		_, hasError := env["error"]
		if hasResult == hasError {
			return nil, failure(http.StatusBadRequest, m, jsonrpc.CodeInvalidRequest, "invalid request: a response carries exactly one of result and error")
		}
		return m, nil
	}
	if p, ok := env["params"]; ok && string(p) != "null" {
		if p[0] != '{' {
			return nil, failure(http.StatusBadRequest, m, jsonrpc.CodeInvalidParams, "invalid params: params must be a JSON object")
		}
		m.params = p
		var wrap struct {
			Meta json.RawMessage `json:"_meta"`
		}
		if err := json.Unmarshal(p, &wrap); err != nil {
			return nil, failure(http.StatusBadRequest, m, jsonrpc.CodeInvalidParams, "invalid params: params must be a JSON object")
		}
		if len(wrap.Meta) > 0 && string(wrap.Meta) != "null" {
			if wrap.Meta[0] != '{' || json.Unmarshal(wrap.Meta, &m.meta) != nil {
				return nil, failure(http.StatusBadRequest, m, jsonrpc.CodeInvalidParams, "invalid params: params._meta must be a JSON object")
			}
		}
	}
	return m, nil
}

// decodeID decodes a JSON-RPC id: a string or a number, never null.
func decodeID(raw json.RawMessage) (jsonrpc.ID, error) {
	if string(bytes.TrimSpace(raw)) == "null" {
		return jsonrpc.ID{}, fmt.Errorf("id must be a string or a number, not null")
	}
	// The same id rule as stdio (readID): the SDK would decode the body
	// again and answer 1.5 as 1 and 9007199254740993 as 9007199254740992.
	return readID(raw)
}

func isLegacyVersion(v string) bool { return slices.Contains(manifest.LegacyVersions, v) }

func unsupportedVersion(m *httpMessage, requested, where string) *rpcFailure {
	f := failure(http.StatusBadRequest, m, mcp.CodeUnsupportedProtocolVersion,
		"unsupported protocol version %s in %s; this server supports %s per request and %s and earlier through initialize",
		clipQuote(requested), where, manifest.ModernVersion, manifest.LegacyVersions[len(manifest.LegacyVersions)-1])
	f.data = map[string]any{"supported": SupportedVersions(), "requested": requested}
	return f
}

// The per-request _meta rules of 2026-07-28, written once for every
// transport (router.classify on stdio, classify over HTTP), so the same
// request gets the same error on both.

// metaVersion returns the protocol version a request's _meta names, whether
// it names one, or the -32602 for a version that is not a string.
func metaVersion(m *httpMessage) (string, bool, *rpcFailure) {
	raw, ok := m.meta[metaProtocolVersion]
	if !ok {
		return "", false, nil
	}
	var pv string
	if json.Unmarshal(raw, &pv) != nil {
		return "", false, failure(http.StatusBadRequest, m, jsonrpc.CodeInvalidParams, `invalid params: _meta["%s"] must be a string`, metaProtocolVersion)
	}
	return pv, true, nil
}

// checkModernMeta checks a request whose _meta names version pv: it must be
// 2026-07-28 (else -32022), and a call must carry the client capabilities
// as an object (else -32602).
func checkModernMeta(m *httpMessage, pv string) *rpcFailure {
	if pv != manifest.ModernVersion {
		return unsupportedVersion(m, pv, `_meta["`+metaProtocolVersion+`"]`)
	}
	if m.isCall() {
		raw, ok := m.meta[metaClientCapabilities]
		if !ok || len(raw) == 0 || raw[0] != '{' {
			return failure(http.StatusBadRequest, m, jsonrpc.CodeInvalidParams, `invalid params: missing or invalid _meta["%s"]: every %s request carries it as an object ({} when the client declares nothing)`, metaClientCapabilities, manifest.ModernVersion)
		}
	}
	return nil
}

// missingMeta is the -32602 for a call that names no protocol version and
// belongs to no legacy session.
func missingMeta(m *httpMessage) *rpcFailure {
	return failure(http.StatusBadRequest, m, jsonrpc.CodeInvalidParams, `invalid params: missing _meta["%s"]: send initialize first to open a session (protocol %s and earlier), or carry the protocol version and client capabilities in every request's _meta (%s)`,
		metaProtocolVersion, manifest.LegacyVersions[len(manifest.LegacyVersions)-1], manifest.ModernVersion)
}

// classify decides which era serves m, or the error to answer instead. The
// rules, in order:
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
func classify(h http.Header, m *httpMessage) (era, *rpcFailure) {
	hv := strings.TrimSpace(h.Get(headerProtocolVersion))
	sid := h.Get(headerSessionID)
	if m.isResponse() {
		if sid == "" {
			return 0, failure(http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "invalid request: a JSON-RPC response is accepted only within a session (Mcp-Session-Id); this server sends no requests outside one")
		}
		return eraLegacy, nil
	}
	if pv, ok, fail := metaVersion(m); fail != nil {
		return 0, fail
	} else if ok {
		if hv == "" {
			return 0, failure(http.StatusBadRequest, m, mcp.CodeHeaderMismatch, `header mismatch: the MCP-Protocol-Version header is required on a request whose _meta["%s"] is %s, and must equal it`, metaProtocolVersion, clipQuote(pv))
		}
		if hv != pv {
			return 0, failure(http.StatusBadRequest, m, mcp.CodeHeaderMismatch, `header mismatch: the MCP-Protocol-Version header %s does not equal _meta["%s"] %s`, clipQuote(hv), metaProtocolVersion, clipQuote(pv))
		}
		if fail := checkModernMeta(m, pv); fail != nil {
			return 0, fail
		}
		return eraModern, nil
	}
	if hv == manifest.ModernVersion {
		if m.isNotification() {
			return eraModern, nil
		}
		return 0, missingMeta(m)
	}
	if hv != "" && !isLegacyVersion(hv) {
		return 0, unsupportedVersion(m, hv, "the MCP-Protocol-Version header")
	}
	if sid != "" || m.method == "initialize" || m.method == "ping" || m.isNotification() {
		return eraLegacy, nil
	}
	if hv == "" {
		return 0, missingMeta(m)
	}
	return 0, failure(http.StatusBadRequest, m, jsonrpc.CodeInvalidRequest, "invalid request: missing Mcp-Session-Id header: send initialize first to open a session (protocol %s)", hv)
}

// nameParam is the params field that the Mcp-Name header mirrors, per method.
var nameParam = map[string]string{
	"tools/call":      "name",
	"prompts/get":     "name",
	"resources/read":  "uri",
	MethodTasksGet:    "taskId",
	MethodTasksUpdate: "taskId",
	MethodTasksCancel: "taskId",
}

// checkModernHeaders applies the 2026-07-28 routing-header rules that the
// SDK misses or gets wrong: Mcp-Method must equal the method; Mcp-Name must
// equal params.taskId on tasks/* (the SDK checks it only for tools/call,
// resources/read and prompts/get); a =?base64?…?= Mcp-Name is decoded before
// comparing (the SDK compares it literally). On success the header holds the
// decoded value, so the SDK's own check agrees. Notifications that lack
// Mcp-Method get it from the body: the revision requires it on requests only.
func checkModernHeaders(h http.Header, m *httpMessage) *rpcFailure {
	methods := h.Values(headerMethod)
	switch {
	case len(methods) == 0 && m.isNotification():
		h.Set(headerMethod, m.method)
	case len(methods) == 0:
		return failure(http.StatusBadRequest, m, mcp.CodeHeaderMismatch, "header mismatch: missing required Mcp-Method header; it must equal the request's method %s", clipQuote(m.method))
	case len(methods) > 1:
		return failure(http.StatusBadRequest, m, mcp.CodeHeaderMismatch, "header mismatch: send exactly one Mcp-Method header")
	case strings.TrimSpace(methods[0]) != m.method:
		return failure(http.StatusBadRequest, m, mcp.CodeHeaderMismatch, "header mismatch: the Mcp-Method header %s does not equal the request's method %s", clipQuote(strings.TrimSpace(methods[0])), clipQuote(m.method))
	}
	field, ok := nameParam[m.method]
	if !ok || !m.isCall() {
		return nil
	}
	var params map[string]json.RawMessage
	_ = json.Unmarshal(m.params, &params)
	var bodyVal string
	rawVal, inBody := params[field]
	bodyIsString := inBody && json.Unmarshal(rawVal, &bodyVal) == nil
	names := h.Values(headerName)
	if len(names) > 1 {
		return failure(http.StatusBadRequest, m, mcp.CodeHeaderMismatch, "header mismatch: send exactly one Mcp-Name header")
	}
	if len(names) == 0 || strings.TrimSpace(names[0]) == "" {
		if !inBody {
			return nil // the method's own validation reports the missing parameter
		}
		return failure(http.StatusBadRequest, m, mcp.CodeHeaderMismatch, "header mismatch: missing required Mcp-Name header for %s; it must equal params.%s", m.method, field)
	}
	raw := strings.TrimSpace(names[0])
	val, ok := decodeHeaderValue(raw)
	if !ok {
		return failure(http.StatusBadRequest, m, mcp.CodeHeaderMismatch, "header mismatch: the Mcp-Name header is not valid =?base64?…?= encoding")
	}
	if !bodyIsString || val != bodyVal {
		return failure(http.StatusBadRequest, m, mcp.CodeHeaderMismatch, "header mismatch: the Mcp-Name header %s does not equal params.%s of %s", clipQuote(val), field, m.method)
	}
	if val != raw {
		h.Set(headerName, val)
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

// methodLabel bounds the method label of metrics to known methods.
func methodLabel(method string) string {
	switch method {
	case "initialize", "ping", "server/discover", "tools/list", "tools/call", "resources/list", "resources/read",
		"resources/templates/list", "prompts/list", "prompts/get", "completion/complete", "logging/setLevel",
		"subscriptions/listen", "skills/list", "skills/get", "resources/directory/read",
		MethodTasksGet, MethodTasksUpdate, MethodTasksCancel,
		"notifications/initialized", "notifications/cancelled":
		return method
	case "":
		return "response"
	}
	if strings.HasPrefix(method, "notifications/") {
		return "notifications/other"
	}
	return "other"
}
