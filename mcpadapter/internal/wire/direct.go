package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/input"
)

// The direct tools/call: a 2026-07-28 tools/call in its ordinary form is
// served by the HTTP front without the SDK's Streamable HTTP handler, which
// (v1.8.0) decodes the body about a dozen times, each with a decoder that
// allocates 32 KiB, and builds a session per request: about 0.5 MB and
// most of a call's CPU before any tool runs. DirectToolCall decides which
// requests the SDK would decode exactly as Parse did and answer through
// its tool path, and decodes their params once; EncodeToolCallResponse
// writes the answer with the SDK's own encoders and rules. Anything else
// (an unusual member, a value the SDK could refuse, a client capability
// it could fail to decode) goes through the SDK as before, so its answers,
// right or wrong, stay what they were. TestDirectToolCallsAnswerAsTheSDK
// (package httpfront) replays requests through both paths and compares
// the HTTP answers byte for byte.

// sdkMaxDepth is the SDK's bound on the nesting of a message it decodes
// (internal/json defaultMaxDepth); a direct call stays well below it.
const sdkMaxDepth = 1000

// DirectToolCall returns the params of m, a checked 2026-07-28 request
// (ClassifyHTTP and CheckModernHeaders passed) with header h, as the SDK
// would decode them, and true when the SDK would serve m through its tool
// path without refusing anything: a tools/call whose envelope has only
// jsonrpc, id, method and params; whose params have only a string name,
// arguments that are an object (or none) and _meta; whose _meta has only
// the protocol version, client capabilities and client info the SDK
// decodes (and a progress token), in shapes it decodes without error;
// valid UTF-8, nested far less than the SDK allows; and whose routing
// headers the SDK's own check compares equal. It returns false for any
// other request, which must then go to the SDK.
func DirectToolCall(h http.Header, m *Message) (*mcp.CallToolParamsRaw, bool) {
	if !m.IsCall() || m.Method != "tools/call" || !m.plain || m.params == nil {
		return nil, false
	}
	if h.Get(HeaderProtocolVersion) != manifest.ModernVersion || h.Get(HeaderMethod) != m.Method {
		return nil, false
	}
	if !utf8.Valid(m.Params) || nesting(m.Params) > sdkMaxDepth/2 {
		return nil, false
	}
	p := &mcp.CallToolParamsRaw{}
	for key, raw := range m.params {
		switch key {
		case "name":
			if raw[0] != '"' || json.Unmarshal(raw, &p.Name) != nil {
				return nil, false
			}
		case "arguments":
			if raw[0] != '{' {
				return nil, false
			}
			p.Arguments = raw
		case "_meta":
			if !plainMeta(m.Meta) || json.Unmarshal(raw, &p.Meta) != nil {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	if p.Name == "" || h.Get(HeaderName) != p.Name {
		return nil, false
	}
	return p, true
}

// plainMeta reports whether meta, a request's _meta, has only members the
// SDK decodes without error: the protocol version 2026-07-28, client
// capabilities and client info of plain shapes, and a progress token.
func plainMeta(meta map[string]json.RawMessage) bool {
	for key, raw := range meta {
		var ok bool
		switch key {
		case MetaProtocolVersion:
			ok = string(raw) == `"`+manifest.ModernVersion+`"`
		case MetaClientCapabilities:
			ok = plainCapabilities(raw)
		case metaClientInfo:
			ok = plainObject(raw, func(k string, v json.RawMessage) bool {
				switch k {
				case "name", "title", "description", "version", "websiteUrl":
					return v[0] == '"'
				case "icons":
					return false
				}
				return true // the SDK ignores members it does not know
			})
		case "progressToken":
			ok = raw[0] == '"' || raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')
		}
		if !ok {
			return false
		}
	}
	return true
}

// metaClientInfo is the _meta key of the client's identity (2026-07-28).
const metaClientInfo = "io.modelcontextprotocol/clientInfo"

// plainCapabilities reports whether raw, a request's client capabilities,
// is an object the SDK (v1.8.0) decodes into its ClientCapabilities
// without error: experimental and extensions objects of anything, and
// roots, sampling and elicitation objects whose known members have their
// types. Members it does not know it ignores.
func plainCapabilities(raw json.RawMessage) bool {
	return plainObject(raw, func(k string, v json.RawMessage) bool {
		switch k {
		case "experimental", "extensions":
			return v[0] == '{'
		case "roots":
			return plainObject(v, func(k string, v json.RawMessage) bool {
				return k != "listChanged" || string(v) == "true" || string(v) == "false"
			})
		case "sampling", "elicitation":
			return plainObject(v, func(_ string, v json.RawMessage) bool { return v[0] == '{' })
		}
		return true
	})
}

// plainObject reports whether raw is a JSON object each of whose members
// member accepts (with a value that is never empty). Every occurrence of a
// repeated key is checked (the SDK keeps the last): stricter, so never a
// request the SDK would refuse. raw is part of a message Parse accepted,
// so valid JSON.
func plainObject(raw json.RawMessage, member func(key string, v json.RawMessage) bool) bool {
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	return input.RawMembers(raw, func(rk []byte, v json.RawMessage) error {
		if len(v) == 0 || !member(protocolKey(rk), v) {
			return errNotPlain
		}
		return nil
	}) == nil
}

// errNotPlain stops plainObject at the first member it does not accept.
var errNotPlain = errors.New("not plain")

// SDKHostAllowed is the SDK's DNS-rebinding check (StreamableHTTPHandler,
// v1.8.0, internal/util.IsLoopback) as it applies to r: on a loopback
// listener the Host must be "localhost" (exactly) or a loopback address.
// The front's own check is case-blind; a direct call must be refused
// wherever the SDK would have refused it, so it goes to the SDK instead.
func SDKHostAllowed(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !sdkLoopback(local.String()) {
		return true
	}
	return sdkLoopback(r.Host)
}

func sdkLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// SDKResponseHeader sets on h what the SDK's Streamable HTTP handler sets
// on a JSON response (JSONResponse mode) before it writes the body.
func SDKResponseHeader(h http.Header) {
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "application/json")
}

// EncodeToolCallResponse is the JSON-RPC response body the SDK (v1.8.0)
// writes for the answer res, err of a 2026-07-28 tools/call with id, by
// its own rules: on success, the multi-round-trip rules of its callTool
// (resultType, content never null), then the server's identity in _meta
// (unless the result names one) and resultType "complete", encoded as its
// jsonrpc2 layer encodes (no HTML escaping); on error, the error as its
// jsonrpc2 layer turns it into a wire error. FixRPCResponse then applies
// the same corrections as to the SDK's own answer.
func EncodeToolCallResponse(id jsonrpc.ID, res *mcp.CallToolResult, err error, server *mcp.Implementation, log *slog.Logger) []byte {
	if errors.Is(err, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound}) {
		// jsonrpc2.Connection.processResult (nomethodnotfoundcodeinerror
		// unset): a -32601 from a handler is sent as the generic one,
		// naming the method.
		err = fmt.Errorf("%w: %q", &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}, "tools/call")
	}
	if err == nil {
		// What jsonrpc.EncodeMessage writes for a result, without
		// compacting the result once more: it is compact already. The
		// result is written after the envelope's opening, in one buffer.
		rawID, idErr := marshalNoEscape(id.Raw())
		body := make([]byte, 0, len(rawID)+64)
		body = append(body, `{"jsonrpc":"2.0","id":`...)
		body = append(body, rawID...)
		body = append(body, `,"result":`...)
		body, err = toolCallResult(body, res, server, log)
		if err == nil && idErr == nil {
			return append(body, '}')
		}
		if err == nil {
			err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error: the result could not be encoded"}
		}
	}
	body, encErr := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: err})
	if encErr != nil {
		body, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error: the result could not be encoded"}})
	}
	return body
}

// toolCallResult appends to dst res encoded as the SDK encodes the result
// of a 2026-07-28 tools/call.
func toolCallResult(dst []byte, res *mcp.CallToolResult, server *mcp.Implementation, log *slog.Logger) ([]byte, error) {
	if res == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error: empty result"}
	}
	// Server.callTool: input requests with content are a server bug; the
	// result type of a client that supports multiple round trips (every
	// 2026-07-28 request) is set; content is never null.
	resultType := "complete"
	if res.InputRequests != nil {
		if len(res.Content) > 0 || res.StructuredContent != nil {
			log.Warn("handler returned both content and inputRequests")
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server bug: result has both content and inputRequests"}
		}
		resultType = "input_required"
	}
	if resultType == "complete" {
		if out, ok := plainToolCallResult(dst, res, server); ok {
			return out, nil
		}
	}
	b, err := encodeToolCallResult(res, resultType, server)
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}

// encodeToolCallResult is res, of resultType, encoded as the SDK encodes
// the result of a 2026-07-28 tools/call, by its own MarshalJSON.
func encodeToolCallResult(res *mcp.CallToolResult, resultType string, server *mcp.Implementation) (json.RawMessage, error) {
	cp := *res
	if cp.Content == nil && resultType != "input_required" {
		cp.Content = []mcp.Content{}
	}
	// ServerSession.handle: the server's identity in _meta (the SDK sets
	// it in the result's own map, which the handler may have shared).
	meta := res.GetMeta()
	if meta == nil {
		meta = map[string]any{}
	}
	if _, ok := meta[MetaServerInfo]; !ok {
		meta[MetaServerInfo] = server
	}
	cp.SetMeta(meta)
	// CallToolResult.MarshalJSON writes resultType from an unexported
	// field, after every other member but inputRequests: encode without
	// input requests and add both at the end.
	// The SDK's encoder compacts what MarshalJSON returns, which is compact
	// already (json.Marshal's): the bytes are the same.
	cp.InputRequests = nil
	b, err := cp.MarshalJSON()
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[len(b)-1] != '}' {
		return nil, errors.New("wire: a tool result did not encode as an object")
	}
	out := make([]byte, 0, len(b)+64)
	out = append(out, b[:len(b)-1]...)
	out = append(out, `,"resultType":"`...)
	out = append(out, resultType...)
	out = append(out, '"')
	if res.InputRequests != nil {
		ir, err := json.Marshal(res.InputRequests)
		if err != nil {
			return nil, err
		}
		out = append(out, `,"inputRequests":`...)
		out = append(out, ir...)
	}
	return append(out, '}'), nil
}

// plainToolCallResult appends to dst, without reflection, what
// toolCallResult writes for res when it has the plain shape of every tool result of ours:
// one text content without _meta or annotations, structured content that
// is a json.RawMessage already in the form the SDK's encoder would write
// (valid, compact, nothing it would escape), no _meta of its own, no input
// requests or request state. It reports false for anything else. The
// bytes are those of CallToolResult.MarshalJSON under json.Marshal: the
// members in struct order, the server's identity as the only _meta member,
// the text escaped as encoding/json escapes a string (HTML characters
// too), the raw structured content as is, resultType "complete" last.
// TestPlainToolCallResultIsTheSDKs compares the two.
func plainToolCallResult(dst []byte, res *mcp.CallToolResult, server *mcp.Implementation) ([]byte, bool) {
	if len(res.Meta) != 0 || res.InputRequests != nil || res.RequestState != "" || len(res.Content) != 1 {
		return nil, false
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok || text == nil || len(text.Meta) != 0 || text.Annotations != nil {
		return nil, false
	}
	var structured json.RawMessage
	switch sc := res.StructuredContent.(type) {
	case nil:
	case json.RawMessage:
		if sc == nil || !encodedAsIs(sc) {
			return nil, false
		}
		structured = sc
	default:
		return nil, false
	}
	impl, err := json.Marshal(server)
	if err != nil {
		return nil, false
	}
	quoted, err := json.Marshal(text.Text)
	if err != nil {
		return nil, false
	}
	out := slices.Grow(dst, len(impl)+len(quoted)+len(structured)+160)
	out = append(out, `{"_meta":{"`+MetaServerInfo+`":`...)
	out = append(out, impl...)
	out = append(out, `},"content":[{"type":"text","text":`...)
	out = append(out, quoted...)
	out = append(out, "}]"...)
	if structured != nil {
		out = append(out, `,"structuredContent":`...)
		out = append(out, structured...)
	}
	if res.IsError {
		out = append(out, `,"isError":true`...)
	}
	return append(out, `,"resultType":"complete"}`...), true
}

// encodedAsIs reports whether raw is JSON that encoding/json (escaping
// HTML, as json.Marshal does) writes unchanged when it encodes it as a
// json.RawMessage: valid, with no space outside strings, and no <, >, &,
// U+2028 or U+2029 anywhere. What json.Marshal writes always is.
func encodedAsIs(raw json.RawMessage) bool {
	inString := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '<' || c == '>' || c == '&':
			return false
		case c == 0xE2 && i+2 < len(raw) && raw[i+1] == 0x80 && (raw[i+2] == 0xA8 || raw[i+2] == 0xA9):
			return false
		case inString:
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return false
		}
	}
	return json.Valid(raw)
}

// marshalNoEscape is json.Marshal without HTML escaping, as the SDK's
// jsonrpc2 layer encodes messages.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
