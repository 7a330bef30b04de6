package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/input"
)

// Per-request _meta keys of the 2026-07-28 revision.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	// MetaServerInfo is the _meta key of the server's identity on every
	// 2026-07-28 result.
	MetaServerInfo = "io.modelcontextprotocol/serverInfo"
)

// Message is one JSON-RPC message as a transport received it (an HTTP body,
// a stdio line), checked for a valid envelope before any SDK code sees it.
// Parse reads the envelope, params and params._meta in one pass over the
// body; later readers (admission, header checks, stdio flow control) use
// its parts and never decode the body again.
type Message struct {
	ID     jsonrpc.ID // valid only when HasID
	HasID  bool
	Method string // "" for a response
	Params json.RawMessage
	Meta   map[string]json.RawMessage // params._meta, nil when absent

	// params are the members of params, by key (nil when params is absent
	// or not an object).
	params map[string]json.RawMessage
	// plain: the envelope has no member but jsonrpc, id, method and params.
	plain bool
}

// Param returns the raw member key of params, and whether it is there.
func (m *Message) Param(key string) (json.RawMessage, bool) {
	v, ok := m.params[key]
	return v, ok
}

// ToolCall returns the tool name and raw arguments of a tools/call; ok is
// false for any other message, or params without a string name.
func (m *Message) ToolCall() (name string, args json.RawMessage, ok bool) {
	if m.Method != "tools/call" || m.params == nil {
		return "", nil, false
	}
	if json.Unmarshal(m.params["name"], &name) != nil {
		return "", nil, false
	}
	return name, m.params["arguments"], true
}

// IsCall reports whether m is a request that expects an answer.
func (m *Message) IsCall() bool { return m.Method != "" && m.HasID }

// IsNotification reports whether m is a request without an id.
func (m *Message) IsNotification() bool { return m.Method != "" && !m.HasID }

// IsResponse reports whether m is a response (result or error).
func (m *Message) IsResponse() bool { return m.Method == "" }

// ToolCallParts returns the name and raw arguments of tools/call params
// (for a message the stdio router holds as a jsonrpc.Request), matching
// keys exactly; ok is false when params are not an object with a string
// name.
func ToolCallParts(params json.RawMessage) (name string, args json.RawMessage, ok bool) {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || json.Unmarshal(p["name"], &name) != nil {
		return "", nil, false
	}
	return name, p["arguments"], true
}

// Failure is a request the wire layer answers itself: an HTTP status (stdio
// ignores it) and the JSON-RPC error of the body. ID is the request's id when
// it is known.
type Failure struct {
	Status int
	ID     *jsonrpc.ID
	Code   int64
	Msg    string
	Data   any
}

// Failf returns the Failure of m (its id, when it has one) with status, code
// and the message format.
func Failf(status int, m *Message, code int64, format string, args ...any) *Failure {
	f := &Failure{Status: status, Code: code, Msg: fmt.Sprintf(format, args...)}
	if m != nil && m.HasID {
		id := m.ID
		f.ID = &id
	}
	return f
}

// Err returns f as the JSON-RPC error it answers with.
func (f *Failure) Err() *jsonrpc.Error {
	e := &jsonrpc.Error{Code: f.Code, Message: f.Msg}
	if f.Data != nil {
		e.Data = ErrorData(f.Data)
	}
	return e
}

// ErrorData marshals v for a jsonrpc.Error's Data.
func ErrorData(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// Era is the protocol generation a request belongs to.
type Era int

const (
	// Legacy: the initialize handshake and sessions (2025-11-25 and
	// earlier), served by the SDK's stateful handler (HTTP) or the legacy
	// session of a stdio connection.
	Legacy Era = iota
	// Modern: 2026-07-28, every request self-describing, served by the SDK's
	// stateless handler (HTTP) or the modern session of a stdio connection.
	Modern
)

func (e Era) String() string {
	if e == Modern {
		return "modern"
	}
	return "legacy"
}

// ParseBody is Parse for an HTTP body, which may not be empty.
func ParseBody(body []byte) (*Message, *Failure) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, Failf(http.StatusBadRequest, nil, jsonrpc.CodeParseError, "parse error: the request body is empty; POST exactly one JSON-RPC message")
	}
	return Parse(body)
}

// Parse checks that body is exactly one well-formed JSON-RPC message, as
// every transport receives it (an HTTP body, a stdio line), and returns it,
// or the -32700 / -32600 / -32602 error to answer. The envelope rules are
// written once, here, so stdio and HTTP cannot drift apart (the golden
// conversations replay the same input over both). The SDK answers such
// input with plain-text 400s (HTTP) or ends the session (stdio).
//
// A member named twice is refused, as the argument validator refuses a
// repeated argument: in the envelope with -32600 and id null (which of two
// ids would it answer?), in params or params._meta with -32602. The SDK
// would take the last.
func Parse(body []byte) (*Message, *Failure) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		switch {
		case !json.Valid(body):
			return nil, Failf(http.StatusBadRequest, nil, jsonrpc.CodeParseError, "parse error: the message is not valid JSON")
		case body[0] == '[':
			return nil, Failf(http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "invalid request: JSON-RPC batches are not supported; send one message at a time (one line on stdio, one POST over HTTP)")
		}
		return nil, Failf(http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "invalid request: a JSON-RPC message must be a JSON object")
	}
	w, err := walkMessage(body)
	if err != nil {
		return nil, Failf(http.StatusBadRequest, nil, jsonrpc.CodeParseError, "parse error: the message is not valid JSON")
	}
	if w.dupEnvelope != "" {
		return nil, Failf(http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "invalid request: the member %s appears twice; a JSON-RPC message names each member once", input.Quote(w.dupEnvelope))
	}
	env := w.envelope
	m := &Message{plain: true}
	for key := range env {
		switch key {
		case "jsonrpc", "id", "method", "params":
		default:
			m.plain = false
		}
	}
	if rawID, ok := env["id"]; ok {
		id, err := decodeID(rawID)
		if err != nil {
			return nil, Failf(http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "invalid request: %v", err)
		}
		m.ID, m.HasID = id, true
	}
	if string(env["jsonrpc"]) != `"2.0"` {
		return nil, Failf(http.StatusBadRequest, m, jsonrpc.CodeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)
	}
	rawMethod, hasMethod := env["method"]
	if hasMethod {
		if json.Unmarshal(rawMethod, &m.Method) != nil || m.Method == "" {
			return nil, Failf(http.StatusBadRequest, m, jsonrpc.CodeInvalidRequest, "invalid request: method must be a non-empty string")
		}
	} else {
		if !m.HasID {
			return nil, Failf(http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "invalid request: a message needs a method (request or notification) or an id (response)")
		}
		_, hasResult := env["result"]
		_, hasError := env["error"]
		if hasResult == hasError {
			return nil, Failf(http.StatusBadRequest, m, jsonrpc.CodeInvalidRequest, "invalid request: a response carries exactly one of result and error")
		}
		return m, nil
	}
	if p, ok := env["params"]; ok && string(p) != "null" {
		if p[0] != '{' {
			return nil, Failf(http.StatusBadRequest, m, jsonrpc.CodeInvalidParams, "invalid params: params must be a JSON object")
		}
		if w.dupParams != "" {
			return nil, Failf(http.StatusBadRequest, m, jsonrpc.CodeInvalidParams, "invalid params: the member %s of params appears twice; name each member once", input.Quote(w.dupParams))
		}
		m.Params, m.params = p, w.params
		if meta, ok := w.params["_meta"]; ok && string(meta) != "null" {
			if meta[0] != '{' {
				return nil, Failf(http.StatusBadRequest, m, jsonrpc.CodeInvalidParams, "invalid params: params._meta must be a JSON object")
			}
			if w.dupMeta != "" {
				return nil, Failf(http.StatusBadRequest, m, jsonrpc.CodeInvalidParams, "invalid params: the key %s of params._meta appears twice; name each key once", input.Quote(w.dupMeta))
			}
			m.Meta = w.meta
		}
	}
	return m, nil
}

// walked is what walkMessage read: the envelope's members, params' and
// params._meta's when they are objects, and the first member each names
// twice.
type walked struct {
	envelope, params, meta          map[string]json.RawMessage
	dupEnvelope, dupParams, dupMeta string
}

// walkMessage reads the JSON object body: the raw value of every envelope
// member and, where params (and its _meta) is an object, of every member
// of it. An error means body is not one valid JSON value. json.Valid bounds
// the nesting of the whole message (maxNesting, as the SDK's decoder does);
// input.Members then splits the objects without decoding any value.
func walkMessage(body []byte) (*walked, error) {
	if !json.Valid(body) {
		return nil, errors.New("not one valid JSON value")
	}
	w := &walked{envelope: make(map[string]json.RawMessage, 4)}
	err := input.RawMembers(body, func(rk []byte, val json.RawMessage) error {
		key := protocolKey(rk)
		if _, dup := w.envelope[key]; dup && w.dupEnvelope == "" {
			w.dupEnvelope = key
		}
		w.envelope[key] = val
		if key == "params" && val[0] == '{' {
			return w.walkParams(val)
		}
		return nil
	})
	return w, err
}

// walkParams reads the members of params, an object (and of its _meta).
func (w *walked) walkParams(params json.RawMessage) error {
	w.params = make(map[string]json.RawMessage, 4)
	return input.RawMembers(params, func(rk []byte, val json.RawMessage) error {
		key := protocolKey(rk)
		if _, dup := w.params[key]; dup && w.dupParams == "" {
			w.dupParams = key
		}
		w.params[key] = val
		if key == "_meta" && val[0] == '{' {
			return w.walkMeta(val)
		}
		return nil
	})
}

// walkMeta reads the members of params._meta, an object.
func (w *walked) walkMeta(meta json.RawMessage) error {
	w.meta = make(map[string]json.RawMessage, 4)
	return input.RawMembers(meta, func(rk []byte, val json.RawMessage) error {
		key := protocolKey(rk)
		if _, dup := w.meta[key]; dup && w.dupMeta == "" {
			w.dupMeta = key
		}
		w.meta[key] = val
		return nil
	})
}

// protocolKeys are the keys of the envelope, params and _meta that every
// request names: protocolKey takes them from here, without allocating.
var protocolKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"jsonrpc", "id", "method", "params", "result", "error", "name", "arguments", "_meta", "cursor", "uri",
		"progressToken", MetaProtocolVersion, MetaClientCapabilities, metaClientInfo,
		"experimental", "extensions", "roots", "sampling", "elicitation", "listChanged", "title", "description", "version", "websiteUrl", "icons"} {
		m[k] = k
	}
	return m
}()

// protocolKey decodes a member's key (a JSON string, input.RawMembers).
func protocolKey(raw []byte) string {
	if k, ok := protocolKeys[string(raw[1:len(raw)-1])]; ok {
		return k
	}
	return input.Key(raw)
}

// maxNesting is encoding/json's bound on nesting (json.Valid and
// json.Unmarshal refuse deeper values), which the SDK applies when it
// decodes the body: a message the SDK cannot decode is not valid JSON here
// either.
const maxNesting = 10000

// nesting returns how deeply arrays and objects nest in the valid JSON
// value raw.
func nesting(raw []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// decodeID decodes a JSON-RPC id: a string or a number, never null.
func decodeID(raw json.RawMessage) (jsonrpc.ID, error) {
	if string(bytes.TrimSpace(raw)) == "null" {
		return jsonrpc.ID{}, fmt.Errorf("id must be a string or a number, not null")
	}
	return ReadID(raw)
}

// ReadID reads a request id: a string, or a number denoting an integer that
// a float64 holds exactly (|n| < 2^53). The SDK (v1.8.0) keeps numeric ids
// as float64 and truncates them to int64, so 1.5 would be answered as 1 and
// 9007199254740993 as 9007199254740992 — answers a client could pair with
// the wrong request. Such ids are refused instead.
func ReadID(raw json.RawMessage) (jsonrpc.ID, error) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return jsonrpc.ID{}, fmt.Errorf("id must be a string or a number")
		}
		return jsonrpc.MakeID(s)
	}
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return jsonrpc.ID{}, fmt.Errorf("id must be a string or a number")
	}
	n, err := input.Int(raw)
	if err != nil || n > input.MaxSafeInteger || n < -input.MaxSafeInteger {
		return jsonrpc.ID{}, fmt.Errorf("a numeric id must be an integer between %d and %d (got %s)", -input.MaxSafeInteger, input.MaxSafeInteger, input.Clip(string(raw)))
	}
	return jsonrpc.MakeID(float64(n))
}

// SupportedVersions are every protocol version this server speaks, newest
// first.
func SupportedVersions() []string {
	v := append([]string{manifest.ModernVersion}, manifest.LegacyVersions...)
	slices.Sort(v)
	slices.Reverse(v)
	return v
}

func isLegacyVersion(v string) bool { return slices.Contains(manifest.LegacyVersions, v) }

func unsupportedVersion(m *Message, requested, where string) *Failure {
	f := Failf(http.StatusBadRequest, m, mcp.CodeUnsupportedProtocolVersion,
		"unsupported protocol version %s in %s; this server supports %s per request and %s and earlier through initialize",
		input.Quote(requested), where, manifest.ModernVersion, manifest.LegacyVersions[len(manifest.LegacyVersions)-1])
	f.Data = map[string]any{"supported": SupportedVersions(), "requested": requested}
	return f
}

// The per-request _meta rules of 2026-07-28, written once for every
// transport (the stdio router and ClassifyHTTP), so the same request gets
// the same error on both.

// MetaVersion returns the protocol version a request's _meta names, whether
// it names one, or the -32602 for a version that is not a string.
func MetaVersion(m *Message) (string, bool, *Failure) {
	raw, ok := m.Meta[MetaProtocolVersion]
	if !ok {
		return "", false, nil
	}
	var pv string
	if json.Unmarshal(raw, &pv) != nil {
		return "", false, Failf(http.StatusBadRequest, m, jsonrpc.CodeInvalidParams, `invalid params: _meta["%s"] must be a string`, MetaProtocolVersion)
	}
	return pv, true, nil
}

// CheckModernMeta checks a request whose _meta names version pv: it must be
// 2026-07-28 (else -32022), and a call must carry the client capabilities
// as an object (else -32602).
func CheckModernMeta(m *Message, pv string) *Failure {
	if pv != manifest.ModernVersion {
		return unsupportedVersion(m, pv, `_meta["`+MetaProtocolVersion+`"]`)
	}
	if m.IsCall() {
		raw, ok := m.Meta[MetaClientCapabilities]
		if !ok || len(raw) == 0 || raw[0] != '{' {
			return Failf(http.StatusBadRequest, m, jsonrpc.CodeInvalidParams, `invalid params: missing or invalid _meta["%s"]: every %s request carries it as an object ({} when the client declares nothing)`, MetaClientCapabilities, manifest.ModernVersion)
		}
	}
	return nil
}

// MissingMeta is the -32602 for a call that names no protocol version and
// belongs to no legacy session.
func MissingMeta(m *Message) *Failure {
	return Failf(http.StatusBadRequest, m, jsonrpc.CodeInvalidParams, `invalid params: missing _meta["%s"]: send initialize first to open a session (protocol %s and earlier), or carry the protocol version and client capabilities in every request's _meta (%s)`,
		MetaProtocolVersion, manifest.LegacyVersions[len(manifest.LegacyVersions)-1], manifest.ModernVersion)
}
