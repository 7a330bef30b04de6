package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxRewriteBytes bounds the JSON response the fixer holds to inspect; a
// larger one is passed through unchanged (no response of this server's
// tools comes near it).
const maxRewriteBytes = 8 << 20

// FixWriter sits between the SDK's Streamable HTTP handler and the client
// and corrects what the SDK (v1.8.0) gets wrong on the wire:
//   - a JSON-RPC error with code 0 (a plain Go error from a handler) is sent
//     as -32603, never as 0;
//   - in the 2026-07-28 era the HTTP status follows the error code: -32601
//     404; -32700, -32600, -32602, -32020, -32021, -32022 400; any other 500
//     (the SDK v1.8.0 does so itself for errors with a code, but sends a
//     plain error with 200; TestSDKCanaryPlainErrorsGetCodeZero watches it);
//   - an SSE response carries X-Accel-Buffering: no, so reverse proxies do
//     not hold back events.
//
// JSON responses are buffered whole (the SDK writes them in one piece once
// the result is ready) and rewritten only when they carry an error; Finish
// sends them.
type FixWriter struct {
	w      http.ResponseWriter
	modern bool

	wroteHeader bool
	status      int
	buffering   bool
	buf         bytes.Buffer
}

// NewFixWriter returns the FixWriter of w for a request of the modern era
// (2026-07-28) or not.
func NewFixWriter(w http.ResponseWriter, modern bool) *FixWriter {
	return &FixWriter{w: w, modern: modern}
}

// Header implements http.ResponseWriter.
func (f *FixWriter) Header() http.Header { return f.w.Header() }

// WriteHeader implements http.ResponseWriter.
func (f *FixWriter) WriteHeader(code int) {
	if f.wroteHeader {
		return
	}
	if code >= 100 && code < 200 {
		f.w.WriteHeader(code)
		return
	}
	f.wroteHeader, f.status = true, code
	switch MediaType(f.w.Header().Get("Content-Type")) {
	case "application/json":
		f.buffering = true
		return
	case "text/event-stream":
		f.w.Header().Set("X-Accel-Buffering", "no")
	}
	f.w.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (f *FixWriter) Write(p []byte) (int, error) {
	if !f.wroteHeader {
		f.WriteHeader(http.StatusOK)
	}
	if !f.buffering {
		return f.w.Write(p)
	}
	if f.buf.Len()+len(p) > maxRewriteBytes {
		// Too large to inspect: send what is held and the rest unchanged.
		f.buffering = false
		f.w.WriteHeader(f.status)
		if _, err := f.w.Write(f.buf.Bytes()); err != nil {
			return 0, err
		}
		f.buf = bytes.Buffer{}
		return f.w.Write(p)
	}
	return f.buf.Write(p)
}

// Flush implements http.Flusher; a buffered JSON response is sent by finish.
func (f *FixWriter) Flush() {
	if f.buffering {
		return
	}
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (f *FixWriter) Unwrap() http.ResponseWriter { return f.w }

// Finish sends a buffered JSON response, corrected.
func (f *FixWriter) Finish() {
	if !f.buffering {
		return
	}
	f.buffering = false
	WriteFixed(f.w, f.buf.Bytes(), f.status, f.modern)
}

// WriteFixed writes body, a whole JSON-RPC response with HTTP status, as a
// FixWriter sends it once buffered: corrected (FixRPCResponse), with its
// Content-Length. The header's Content-Type is the caller's to set.
func WriteFixed(w http.ResponseWriter, body []byte, status int, modern bool) {
	body, status = FixRPCResponse(body, status, modern)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// FixRPCResponse returns body and status with the rules of FixWriter applied.
func FixRPCResponse(body []byte, status int, modern bool) ([]byte, int) {
	if !TopLevelError(body) {
		return body, status
	}
	msg, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		return body, status
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || resp.Error == nil {
		return body, status
	}
	var je *jsonrpc.Error
	if !errors.As(resp.Error, &je) || je.Code == 0 {
		resp.Error = NormalizeError(resp.Error)
		errors.As(resp.Error, &je)
		if b, err := jsonrpc.EncodeMessage(resp); err == nil {
			body = b
		}
	}
	if modern {
		status = StatusForCode(je.Code)
	}
	return body, status
}

// TopLevelError reports whether body, a JSON-RPC response, has an "error"
// member at the top level. It reads the top-level keys only and stops at
// "result": a tool result mentions "error" in its content (every task has
// an error field), and decoding every such response again cost more than
// the rest of our HTTP layer together.
func TopLevelError(body []byte) bool {
	if !bytes.Contains(body, []byte(`"error"`)) || resultFirst(body) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch key, _ := tok.(string); key {
		case "error":
			return true
		case "result":
			return false
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return false
		}
	}
	return false
}

// resultFirst reports whether body opens as the SDK's jsonrpc2 layer (and
// EncodeToolCallResponse) writes a result: jsonrpc, an id that is a string
// or an integer, then "result". Such a body has no top-level error before
// its result, which is all TopLevelError reads; this check reads the
// opening bytes only, where the decoder would allocate its buffer and scan.
func resultFirst(body []byte) bool {
	rest, ok := bytes.CutPrefix(body, []byte(`{"jsonrpc":"2.0","id":`))
	if !ok || len(rest) == 0 {
		return false
	}
	i := 0
	if rest[0] == '"' {
		for i = 1; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' {
				i++
			}
		}
		i++ // past the closing quote
	} else {
		for i < len(rest) && (rest[i] == '-' || rest[i] >= '0' && rest[i] <= '9') {
			i++
		}
	}
	return i <= len(rest) && bytes.HasPrefix(rest[i:], []byte(`,"result":`))
}

// StatusForCode is the HTTP status of a 2026-07-28 error response.
func StatusForCode(code int64) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeInvalidParams,
		mcp.CodeHeaderMismatch, mcp.CodeMissingRequiredClientCapabilities, mcp.CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// MediaType returns the lower-case media type of a Content-Type value.
func MediaType(v string) string {
	t, _, err := mime.ParseMediaType(v)
	if err != nil {
		return ""
	}
	return t
}

// WriteError writes a JSON-RPC error response the HTTP layer produced
// itself. Without a known id the id is null, as JSON-RPC requires for
// errors that precede reading the id.
func WriteError(w http.ResponseWriter, f *Failure) {
	type rpcError struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}
	resp := struct {
		JSONRPC string   `json:"jsonrpc"`
		ID      any      `json:"id"`
		Error   rpcError `json:"error"`
	}{JSONRPC: "2.0", Error: rpcError{Code: f.Code, Message: f.Msg, Data: f.Data}}
	if f.ID != nil {
		resp.ID = f.ID.Raw()
	}
	// Messages quote what a client sent ("Bearer <token>"): a JSON body is
	// not HTML, so <, > and & stay readable instead of \u003c.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(resp); err != nil {
		http.Error(w, f.Msg, f.Status)
		return
	}
	WriteJSONBody(w, f.Status, bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// WriteJSONBody writes body as a JSON response with status.
func WriteJSONBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// NormalizeError makes sure no error leaves with code 0 (the SDK v1.8.0
// sends a handler's plain Go error that way): anything that is not a
// JSON-RPC error becomes -32603. A wrapped JSON-RPC error (the SDK's
// fmt.Errorf("%w: %q", ErrMethodNotFound, method)) keeps its whole message,
// as the SDK's HTTP transport sends it, not only the inner one, so both
// transports agree. TestSDKCanaryPlainErrorsGetCodeZero is the canary.
func NormalizeError(err error) error {
	if err == nil {
		return nil
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) && je.Code != 0 {
		if error(je) != err && err.Error() != je.Error() {
			return &jsonrpc.Error{Code: je.Code, Message: err.Error(), Data: je.Data}
		}
		return je
	}
	msg := "internal error"
	if je != nil && je.Message != "" {
		msg = je.Message
	} else if err.Error() != "" {
		msg = err.Error()
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
}
