package httpfront

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// The MCP route (MCPPath): a POST is read and checked once (post), admitted
// (admission.go), bound to its legacy session where it has one
// (sessions.go, auth.go), and handed to the SDK handler of its era
// (handOff) with what the front knows of it registered with the MCP server
// (mcpadapter.Inbound). A 2026-07-28 subscriptions/listen is the front's
// own (listen.go): an SSE stream of task notifications. A DELETE ends a
// legacy session. Nothing else is served: outside subscriptions/listen this
// server sends nothing unsolicited, so a standalone SSE stream (GET) would
// stay empty, and the spec allows 405.

// mcpRequest is one request on the MCP route as the front sees it.
type mcpRequest struct {
	r       *http.Request
	p       *principal.Principal // nil without authentication
	arrived time.Time            // server time at arrival
	msg     *wire.Message        // the POST's one message
	era     wire.Era
	// classified: msg's era (and its header rules) is settled.
	classified bool
	sid        string // Mcp-Session-Id, "" without
}

// serveMCP serves the MCP route.
func (h *Handler) serveMCP(w http.ResponseWriter, r *http.Request, p *principal.Principal) {
	start := time.Now()
	// Server time at arrival, before the body is read or a slot is waited
	// for: a holder write is judged at it, so time spent queued in this
	// handler never costs a lease.
	q := &mcpRequest{r: r, p: p, arrived: h.store.Clock().Now(), sid: r.Header.Get(wire.HeaderSessionID)}
	switch {
	case r.Method == http.MethodPost:
		h.post(w, q)
		if h.metrics != nil {
			method, era := "none", "none"
			if q.msg != nil {
				method = methodLabel(q.msg.Method)
			}
			if q.classified {
				era = q.era.String()
			}
			h.metrics.observeMCP(method, era, time.Since(start))
		}
	case r.Method == http.MethodDelete && q.sid != "":
		h.delete(w, q)
	default:
		w.Header().Set("Allow", "POST, DELETE")
		wire.WriteError(w, &wire.Failure{Status: http.StatusMethodNotAllowed, Code: jsonrpc.CodeInvalidRequest,
			Msg: "method not allowed: POST JSON-RPC messages to this endpoint; DELETE with Mcp-Session-Id ends a session"})
	}
}

// delete ends a legacy session (204, then 404 for that id).
func (h *Handler) delete(w http.ResponseWriter, q *mcpRequest) {
	trustConn(q.r)
	if h.foreignSession(w, q) {
		return
	}
	release, ok := h.admit(q.r.Context(), admitShort)
	if !ok {
		h.busy(w, nil)
		return
	}
	defer release()
	h.stateful.ServeHTTP(w, q.r)
	h.sessions.ended(q.sid)
	h.owners.forget(q.sid)
}

// post serves a POST: one JSON-RPC message.
func (h *Handler) post(w http.ResponseWriter, q *mcpRequest) {
	if fail := h.read(w, q); fail != nil {
		wire.WriteError(w, fail)
		return
	}
	msg := q.msg
	if h.isListen(q) {
		h.serveListen(w, q)
		return
	}
	if q.era == wire.Legacy && q.sid != "" && h.foreignSession(w, q) {
		return
	}
	if h.tokenInsufficientScope(w, q) {
		return
	}
	if q.era == wire.Legacy && msg.Method == "initialize" && q.sid != "" && h.hasSession(q.sid) {
		// Every live session began with initialize; the SDK would answer a
		// second one with error code 0.
		wire.WriteError(w, wire.Failf(http.StatusOK, msg, jsonrpc.CodeInvalidRequest, "invalid request: this session is already initialized; to start over, end it with DELETE and send initialize without Mcp-Session-Id"))
		return
	}
	release, ok := h.admit(q.r.Context(), admissionOf(msg))
	if !ok {
		h.busy(w, msg)
		return
	}
	defer release()
	opening := q.era == wire.Legacy && msg.Method == "initialize" && q.sid == ""
	if opening {
		h.initMu.Lock()
		defer h.initMu.Unlock()
		if !h.makeRoomForSession() {
			if h.metrics != nil {
				h.metrics.reject("too_many_sessions")
			}
			w.Header().Set("Retry-After", retryAfterSeconds)
			wire.WriteError(w, wire.Failf(http.StatusServiceUnavailable, msg, jsonrpc.CodeInternalError,
				"too many sessions: %d legacy sessions are open, the most this server keeps, and each has a request in progress; end one with DELETE, or use protocol 2026-07-28, which needs none", h.opts.MaxSessions))
			return
		}
	} else if q.era == wire.Legacy && q.sid != "" {
		defer h.sessions.begin(q.sid, msg.Method)()
	}
	h.handOff(w, q)
	if opening {
		if id := w.Header().Get(wire.HeaderSessionID); id != "" {
			h.sessions.opened(id, 2*h.opts.MaxSessions+64, h.liveSessionIDs)
			if q.p != nil {
				h.owners.set(id, q.p.Name, 2*h.opts.MaxSessions+64, h.liveSessionIDs)
			}
		}
	}
}

// read reads the POST's body and checks it: its size, media type and
// Accept header, one well-formed JSON-RPC message (decoded once, here), its
// era and that era's header rules, and a method this server knows. It
// returns the error to answer, if any; on success q holds the message and
// its era.
func (h *Handler) read(w http.ResponseWriter, q *mcpRequest) *wire.Failure {
	r := q.r
	if r.ContentLength > h.opts.MaxBodyBytes {
		return h.tooLarge(w)
	}
	if ct := wire.MediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		return &wire.Failure{Status: http.StatusUnsupportedMediaType, Code: jsonrpc.CodeInvalidRequest,
			Msg: "unsupported media type: the request body must be Content-Type: application/json"}
	}
	if fail := wire.AcceptFailure(r.Header); fail != nil {
		return fail
	}
	body, err := h.readBody(w, r)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return h.tooLarge(w)
		}
		return &wire.Failure{Status: http.StatusBadRequest, Code: jsonrpc.CodeInvalidRequest, Msg: "invalid request: the request body could not be read"}
	}
	trustConn(r)
	msg, fail := wire.ParseBody(body)
	if fail != nil {
		return fail
	}
	q.msg = msg
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	e, fail := wire.ClassifyHTTP(r.Header, msg)
	if fail == nil && e == wire.Modern {
		fail = wire.CheckModernHeaders(r.Header, msg)
	}
	if fail != nil {
		return fail
	}
	q.era, q.classified = e, true
	if f := wire.UnknownMethod(msg.Method, mcpadapter.KnownMethod); f != nil && msg.IsCall() && !h.isListen(q) {
		if e == wire.Legacy {
			f.Status = http.StatusOK // errors inside a legacy session travel with 200
		}
		f.ID = &msg.ID
		return f
	}
	return nil
}

// handOff hands a checked, admitted POST to the SDK handler of its era,
// with what the front knows of it (arrival, principal, deadline) registered
// with the MCP server under the key its wire.HeaderInbound carries, and
// corrects the SDK's answer on the way out (wire.FixWriter).
func (h *Handler) handOff(w http.ResponseWriter, q *mcpRequest) {
	r := q.r
	// Streams are not resumable here, so a Last-Event-ID on a POST means
	// nothing; the SDK would refuse the POST over it.
	r.Header.Del(wire.HeaderLastEventID)
	in := mcpadapter.Inbound{Arrival: q.arrived, Timeout: h.opts.CallTimeout, Abort: h.abort}
	if q.p != nil {
		in.Caller = principal.Caller{Auth: h.auth, Name: q.p.Name}
		if q.p.FromToken() {
			in.Caller.Token = q.p
		}
	}
	key, done := h.srv.Admit(in)
	defer done()
	r.Header.Set(wire.HeaderInbound, key)
	modern := q.era == wire.Modern
	if modern {
		if body := h.overflowToolError(q); body != nil {
			wire.WriteJSONBody(w, http.StatusOK, body)
			return
		}
		if h.directToolCall(w, q) {
			return
		}
	}
	fw := wire.NewFixWriter(w, modern)
	if modern {
		h.stateless.ServeHTTP(fw, r)
	} else {
		h.stateful.ServeHTTP(fw, r)
	}
	fw.Finish()
}

// directToolCall serves a 2026-07-28 tools/call in its ordinary form
// without the SDK's Streamable HTTP handler (mcpadapter.DirectToolCall,
// wire.DirectToolCall), writing what the SDK would have written: its
// headers, its body, with the corrections of wire.FixWriter (WriteFixed).
// It reports false, having written nothing, for any other request.
func (h *Handler) directToolCall(w http.ResponseWriter, q *mcpRequest) bool {
	if h.sdkOnly || !wire.SDKHostAllowed(q.r) {
		return false
	}
	params, ok := wire.DirectToolCall(q.r.Header, q.msg)
	if !ok {
		return false
	}
	body, ok := h.srv.DirectToolCall(q.r.Context(), q.r.Header, q.msg.ID, params)
	if !ok {
		return false
	}
	wire.SDKResponseHeader(w.Header())
	wire.WriteFixed(w, body, http.StatusOK, true)
	return true
}

// overflowToolError answers, as the tool error the call would get on stdio,
// a 2026-07-28 tools/call whose arguments the validator refuses and that
// hold a number beyond float64 range: the SDK would answer it with a
// misleading -32020 before any tool runs (see wire.ModernResultBody). It
// returns nil for any other request.
func (h *Handler) overflowToolError(q *mcpRequest) []byte {
	if !q.msg.IsCall() {
		return nil
	}
	name, args, ok := q.msg.ToolCall()
	if !ok || len(args) == 0 {
		return nil
	}
	if _, ok := taskgraph.OverflowingNumber(args); !ok {
		return nil
	}
	res, ok := h.srv.ArgumentError(q.r.Context(), name, args)
	if !ok {
		return nil
	}
	body, err := wire.ModernResultBody(q.msg.ID, res, mcpadapter.ServerName, h.srv.Version())
	if err != nil {
		return nil
	}
	return body
}

// busy refuses a short request that found no concurrency slot.
func (h *Handler) busy(w http.ResponseWriter, m *wire.Message) {
	if h.metrics != nil {
		h.metrics.reject("busy")
	}
	wait := h.opts.AdmissionWait
	if m != nil && admissionOf(m) == admitHolder {
		wait = h.opts.CallTimeout
	}
	w.Header().Set("Retry-After", retryAfterSeconds)
	wire.WriteError(w, wire.Failf(http.StatusServiceUnavailable, m, jsonrpc.CodeInvalidRequest,
		"server busy: %d short requests are in progress, the most it serves at once, and none finished within %s; retry after %s s",
		h.opts.MaxConcurrent, max(wait, 0), retryAfterSeconds))
}

// tooLarge is the answer to a body beyond MaxBodyBytes.
func (h *Handler) tooLarge(w http.ResponseWriter) *wire.Failure {
	if h.metrics != nil {
		h.metrics.reject("too_large")
	}
	// The rest of the body is not read; the connection cannot be reused.
	w.Header().Set("Connection", "close")
	return &wire.Failure{Status: http.StatusRequestEntityTooLarge, Code: jsonrpc.CodeInvalidRequest,
		Msg: fmt.Sprintf("request too large: a POST body may hold at most %d bytes", h.opts.MaxBodyBytes)}
}
