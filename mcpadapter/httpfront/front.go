package mcpadapter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// HTTP routes.
const (
	// MCPPath is the Streamable HTTP endpoint.
	MCPPath = "/mcp"
	// HealthPath answers "ok" after a database check; it needs no token.
	HealthPath = "/healthz"
	// MetricsPath serves Prometheus metrics behind the bearer token.
	MetricsPath = "/metrics"
)

// Defaults of HTTPOptions.
const (
	// DefaultHTTPAddr is the default listen address: loopback only.
	DefaultHTTPAddr = "127.0.0.1:7330"
	// DefaultMaxBodyBytes bounds one POST body.
	DefaultMaxBodyBytes = 512 << 10
	// DefaultMaxConcurrent bounds the short MCP requests served at once
	// (claim-next long polls are not counted).
	DefaultMaxConcurrent = 64
	// DefaultMaxConnections bounds open TCP connections. Each costs one file
	// descriptor and a goroutine; a fleet needs one per worker in a long
	// poll plus the idle connections its HTTP clients keep.
	DefaultMaxConnections = 1024
	// DefaultCallTimeout is the per-call deadline; it exceeds the longest
	// claim wait (taskgraph.MaxClaimWait).
	DefaultCallTimeout = 60 * time.Second
	// DefaultSessionIdleTimeout ends legacy sessions idle this long.
	DefaultSessionIdleTimeout = 10 * time.Minute
	// DefaultMaxSessions bounds live legacy sessions.
	DefaultMaxSessions = 256
	// DefaultShutdownTimeout bounds how long in-flight calls may finish
	// after a shutdown request.
	DefaultShutdownTimeout = 10 * time.Second
	// MaxHeaderBytes bounds the request line and headers.
	MaxHeaderBytes = 64 << 10

	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	idleTimeout       = 60 * time.Second
	healthTimeout     = 3 * time.Second
	// fdReserve is the file descriptors kept for the database, its WAL,
	// the listener and logs besides the connections.
	fdReserve         = 64
	retryAfterSeconds = "1"
)

// HTTPOptions configure the Streamable HTTP transport. Zero values take the
// defaults above.
type HTTPOptions struct {
	// AuthToken, when set, must arrive on every request except the health
	// check as "Authorization: Bearer <token>". It is compared in constant
	// time and never logged.
	AuthToken string
	// Principals, when set, authenticates requests against named
	// principals with roles (--auth-file) instead of AuthToken; at most one
	// of the two may be set. See principal.go.
	Principals *Authenticator
	// AllowedOrigins are the browser origins (scheme://host[:port]) allowed
	// besides same-origin requests. A request whose Origin is present and
	// neither same-origin nor listed is refused with 403.
	AllowedOrigins []string
	// MaxBodyBytes bounds a POST body (413 beyond it).
	MaxBodyBytes int64
	// MaxConcurrent bounds the short MCP requests served at once; a request
	// takes a slot only once it is authorized and its body is read, and a
	// claim-next long poll (graph_task_claim with a positive wait_ms) takes
	// none. A short request finding every slot taken waits up to
	// AdmissionWait for one, then gets 503; a holder write (heartbeat,
	// complete, fail, cancel) waits ahead of the others, up to CallTimeout.
	MaxConcurrent int
	// AdmissionWait is how long a short request other than a holder write
	// waits for a concurrency slot before it is refused with 503: zero takes
	// DefaultAdmissionWait, a negative value refuses at once. It may not
	// exceed CallTimeout.
	AdmissionWait time.Duration
	// MaxConnections bounds open TCP connections. At the cap, a new
	// connection is accepted and the oldest one that has never carried an
	// authorized, fully read request is closed; when there is none, the new
	// one waits. Used by ServeStreamableHTTP.
	MaxConnections int
	// CallTimeout is the deadline of every call; it must exceed the longest
	// claim wait.
	CallTimeout time.Duration
	// SessionIdleTimeout ends a legacy session that has had no request for
	// this long.
	SessionIdleTimeout time.Duration
	// MaxSessions bounds live legacy sessions. At the cap, initialize closes
	// the oldest session that never got past initialize, else the one idle
	// the longest; it gets 503 only when every session has a request in
	// flight.
	MaxSessions int
	// ShutdownTimeout bounds the drain of in-flight calls on shutdown; after
	// it, remaining calls are cancelled. Used by ServeStreamableHTTP.
	ShutdownTimeout time.Duration
	// Metrics, when set, are served at /metrics and record HTTP latency.
	Metrics *Metrics
	// Logger receives request and lifecycle logs; nil uses the server's.
	Logger *slog.Logger
	// DisableUI turns the live workflow view under /ui/ off (see ui.go).
	DisableUI bool
}

func (o *HTTPOptions) setDefaults(s *Server) error {
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxConcurrent == 0 {
		o.MaxConcurrent = DefaultMaxConcurrent
	}
	if o.AdmissionWait == 0 {
		o.AdmissionWait = DefaultAdmissionWait
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.SessionIdleTimeout == 0 {
		o.SessionIdleTimeout = DefaultSessionIdleTimeout
	}
	if o.MaxSessions == 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.Logger == nil {
		o.Logger = s.log
	}
	switch {
	case o.MaxBodyBytes < 1024:
		return fmt.Errorf("http: MaxBodyBytes must be at least 1024 (got %d)", o.MaxBodyBytes)
	case o.MaxConcurrent < 1:
		return fmt.Errorf("http: MaxConcurrent must be at least 1 (got %d)", o.MaxConcurrent)
	case o.MaxConnections < 1:
		return fmt.Errorf("http: MaxConnections must be at least 1 (got %d)", o.MaxConnections)
	case o.MaxSessions < 1:
		return fmt.Errorf("http: MaxSessions must be at least 1 (got %d)", o.MaxSessions)
	case o.CallTimeout <= taskgraph.MaxClaimWait:
		return fmt.Errorf("http: CallTimeout must exceed the longest claim wait of %s (got %s)", taskgraph.MaxClaimWait, o.CallTimeout)
	case o.AdmissionWait > o.CallTimeout:
		return fmt.Errorf("http: AdmissionWait must not exceed CallTimeout %s (got %s)", o.CallTimeout, o.AdmissionWait)
	case o.SessionIdleTimeout < 0:
		return fmt.Errorf("http: SessionIdleTimeout must be positive (got %s)", o.SessionIdleTimeout)
	case o.ShutdownTimeout < 0:
		return fmt.Errorf("http: ShutdownTimeout must be positive (got %s)", o.ShutdownTimeout)
	}
	if o.AuthToken != "" {
		if o.Principals != nil {
			return errors.New("http: set AuthToken or Principals, not both")
		}
		if err := ValidateAuthToken(o.AuthToken); err != nil {
			return fmt.Errorf("http: %w", err)
		}
	}
	return nil
}

// MinAuthTokenLen is the shortest bearer token accepted.
const MinAuthTokenLen = 16

// ValidateAuthToken checks that token can serve as a bearer token: at least
// MinAuthTokenLen characters of visible ASCII. The error never contains the
// token.
func ValidateAuthToken(token string) error {
	if len(token) < MinAuthTokenLen {
		return fmt.Errorf("the auth token must be at least %d characters (got %d)", MinAuthTokenLen, len(token))
	}
	for i := 0; i < len(token); i++ {
		if c := token[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("the auth token may contain only visible ASCII characters (no spaces or control characters); character %d is not", i+1)
		}
	}
	return nil
}

// NormalizeOrigin returns origin as scheme://host[:port] in lower case, or
// an error saying what is wrong with it.
func NormalizeOrigin(origin string) (string, error) {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("origin %q must be scheme://host[:port] with scheme http or https and nothing after the host", origin)
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

// HTTPHandler serves MCP over Streamable HTTP at /mcp for both protocol
// eras, plus /healthz, /readyz and /metrics.
//
// The SDK (v1.8.0) accepts 2026-07-28 only on a stateless handler and keeps
// legacy sessions only on a stateful one, so HTTPHandler holds one of each,
// both on the same *mcp.Server, and routes every POST after reading and
// checking its body: requests that carry their protocol version in _meta go
// to the stateless handler, the initialize handshake and session traffic to
// the stateful one (see classify). In front of both it enforces what the
// SDK does not: the Origin allow-list, the bearer token, the body and
// concurrency limits, JSON-RPC error bodies for malformed input and version
// errors, Mcp-Name checks for tasks/*, and the HTTP status of error
// responses (see fixWriter).
type HTTPHandler struct {
	srv     *Server
	opts    HTTPOptions
	log     *slog.Logger
	metrics *Metrics
	auth    *Authenticator // nil: no authentication (loopback only)
	owners  sessionOwners
	origins map[string]bool

	stateless   *mcp.StreamableHTTPHandler
	stateful    *mcp.StreamableHTTPHandler
	metricsHTTP http.Handler
	slots       *slotPool
	longPolls   atomic.Int64 // long polls being served (no slot)
	sessions    *sessionTracker
	initMu      sync.Mutex // serialises initialize at the session cap
	policy      *callPolicy
	abort       context.CancelFunc
	ui          *uiHandler // nil: the live view is off
}

// callPolicy is what the call-deadline middleware applies to calls that
// arrive through an HTTPHandler; it travels in the request context, which
// legacy sessions inherit from their initialize request.
type callPolicy struct {
	timeout time.Duration
	abort   context.Context // cancelled when a shutdown stops waiting
}

type callPolicyKey struct{}
type deadlineAppliedKey struct{}

// NewHTTPHandler returns the HTTP handler of s. It adds a receiving
// middleware to s that gives every call arriving through the handler its
// deadline (HTTPOptions.CallTimeout).
func NewHTTPHandler(s *Server, opts HTTPOptions) (*HTTPHandler, error) {
	if err := opts.setDefaults(s); err != nil {
		return nil, err
	}
	h := &HTTPHandler{
		srv: s, opts: opts, log: opts.Logger, metrics: opts.Metrics,
		origins:  map[string]bool{},
		slots:    newSlotPool(opts.MaxConcurrent),
		sessions: newSessionTracker(),
	}
	for _, o := range opts.AllowedOrigins {
		n, err := NormalizeOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("http: allowed origin: %w", err)
		}
		h.origins[n] = true
	}
	h.auth = opts.Principals
	if opts.AuthToken != "" {
		h.auth = NewAuthenticator(SingleToken(opts.AuthToken))
	}
	abortCtx, abort := context.WithCancel(context.Background())
	h.policy, h.abort = &callPolicy{timeout: opts.CallTimeout, abort: abortCtx}, abort
	getServer := func(*http.Request) *mcp.Server { return s.mcp }
	h.stateless = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, PropagateRequestCancellation: true,
		Logger: h.log, MaxRequestBodyBytes: opts.MaxBodyBytes,
	})
	h.stateful = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		JSONResponse: true, SessionTimeout: opts.SessionIdleTimeout,
		Logger: h.log, MaxRequestBodyBytes: opts.MaxBodyBytes,
	})
	s.mcp.AddReceivingMiddleware(callDeadlineMiddleware)
	if !opts.DisableUI {
		h.ui = newUIHandler(h)
	}
	if h.metrics != nil {
		h.metrics.registerSessions(h.legacySessions)
		h.metrics.registerSlotWaiters(h.slots.waiting)
		h.metricsHTTP = h.metrics.Handler()
	}
	return h, nil
}

// callDeadlineMiddleware bounds every call that carries a callPolicy, and
// cancels it when the policy's abort context ends. It also gives the call
// the arrival time HTTPHandler stamped into its request's header.
func callDeadlineMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if req != nil {
			ctx = withHeaderArrival(ctx, req.GetExtra())
		}
		p, _ := ctx.Value(callPolicyKey{}).(*callPolicy)
		if p == nil || isNotification(method) || ctx.Value(deadlineAppliedKey{}) != nil {
			return next(ctx, method, req)
		}
		ctx, cancel := context.WithTimeout(context.WithValue(ctx, deadlineAppliedKey{}, true), p.timeout)
		defer cancel()
		stop := context.AfterFunc(p.abort, cancel)
		defer stop()
		return next(ctx, method, req)
	}
}

// AbortCalls cancels every call still running through this handler. The
// shutdown path calls it once the drain period is over.
func (h *HTTPHandler) AbortCalls() { h.abort() }

// CloseSessions ends every legacy session (on shutdown).
func (h *HTTPHandler) CloseSessions() {
	for ss := range h.srv.mcp.Sessions() {
		if ss.ID() != "" {
			ss.Close()
		}
	}
}

// hasSession reports whether a legacy session with this id is live.
func (h *HTTPHandler) hasSession(id string) bool {
	for ss := range h.srv.mcp.Sessions() {
		if ss.ID() == id {
			return true
		}
	}
	return false
}

// liveSessionIDs returns the ids of the live legacy sessions.
func (h *HTTPHandler) liveSessionIDs() map[string]bool {
	ids := map[string]bool{}
	for ss := range h.srv.mcp.Sessions() {
		if id := ss.ID(); id != "" {
			ids[id] = true
		}
	}
	return ids
}

// legacySessions counts live legacy sessions.
func (h *HTTPHandler) legacySessions() int {
	n := 0
	for ss := range h.srv.mcp.Sessions() {
		if ss.ID() != "" {
			n++
		}
	}
	return n
}

// ServeHTTP implements http.Handler.
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	route := routeOf(r.URL.Path)
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		took := time.Since(start)
		if h.metrics != nil {
			h.metrics.observeHTTP(route, httpMethodLabel(r.Method), sw.status, took)
		}
		h.log.Debug("http request", "method", r.Method, "path", route, "status", sw.status, "took", took, "remote", r.RemoteAddr)
	}()
	sw.Header().Set("X-Content-Type-Options", "nosniff")
	if !h.hostAllowed(r) {
		h.refuse(sw, route, http.StatusForbidden, "forbidden_host", "forbidden: the Host header must name a loopback host (localhost, 127.0.0.1 or [::1]) on a loopback listener")
		return
	}
	if !h.originAllowed(r) {
		h.refuse(sw, route, http.StatusForbidden, "forbidden_origin", "forbidden: the Origin is not allowed; this server accepts same-origin requests and the origins given with --allow-origin")
		return
	}
	switch route {
	case HealthPath:
		h.serveHealth(sw, r)
		return
	case ReadyPath:
		h.serveReady(sw, r)
		return
	case MCPPath, MetricsPath:
	case UIRoute:
		if h.ui == nil {
			http.NotFound(sw, r)
			return
		}
		h.ui.serve(sw, r)
		return
	default:
		http.NotFound(sw, r)
		return
	}
	p, why := h.authenticate(r)
	if why != "" {
		value := `Bearer realm="graph-engineering-mcp"`
		if r.Header.Get("Authorization") != "" {
			value += `, error="invalid_token"`
		}
		sw.Header().Set("WWW-Authenticate", value)
		h.refuse(sw, route, http.StatusUnauthorized, "unauthorized", why)
		return
	}
	if p != nil {
		r = r.WithContext(withCaller(r.Context(), h.auth, p.Name))
	}
	if route == MetricsPath {
		if p != nil && !p.HasRole(RoleObserve) {
			h.insufficientScope(sw, route, p, "/metrics", RoleObserve)
			return
		}
		trustConn(r)
		if h.metrics == nil {
			http.NotFound(sw, r)
			return
		}
		h.metricsHTTP.ServeHTTP(sw, r)
		return
	}
	h.serveMCP(sw, r)
}

// busy refuses a short request that found no concurrency slot.
func (h *HTTPHandler) busy(w http.ResponseWriter, m *httpMessage) {
	if h.metrics != nil {
		h.metrics.reject("busy")
	}
	wait := h.opts.AdmissionWait
	if m != nil && admissionOf(m) == admitHolder {
		wait = h.opts.CallTimeout
	}
	w.Header().Set("Retry-After", retryAfterSeconds)
	writeRPCError(w, failure(http.StatusServiceUnavailable, m, jsonrpc.CodeInvalidRequest,
		"server busy: %d short requests are in progress, the most it serves at once, and none finished within %s; retry after %s s",
		h.opts.MaxConcurrent, max(wait, 0), retryAfterSeconds))
}

func routeOf(path string) string {
	switch path {
	case MCPPath, HealthPath, ReadyPath, MetricsPath:
		return path
	}
	if isUIRoute(path) {
		return UIRoute
	}
	return "other"
}

func httpMethodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodHead:
		return m
	}
	return "other"
}

// refuse answers a request refused before MCP: a JSON-RPC error body on
// /mcp (clients surface its message), plain text elsewhere.
func (h *HTTPHandler) refuse(w http.ResponseWriter, route string, status int, reason, msg string) {
	if h.metrics != nil {
		h.metrics.reject(reason)
	}
	if route == MCPPath {
		writeRPCError(w, &rpcFailure{status: status, code: jsonrpc.CodeInvalidRequest, msg: msg})
		return
	}
	http.Error(w, msg, status)
}

// hostAllowed rejects DNS rebinding: on a loopback listener the Host must be
// a loopback name. The SDK's own check covers /mcp; this covers every route.
func (h *HTTPHandler) hostAllowed(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !isLoopbackHost(hostOnly(local.String())) {
		return true
	}
	return isLoopbackHost(hostOnly(r.Host))
}

// originAllowed allows requests without Origin (non-browser clients),
// same-origin requests, and the configured origins. Same-origin stays
// allowed: such a request is not cross-origin, its Host is checked on
// loopback listeners (so it cannot be a DNS rebinding), and the official
// conformance suite (dns-rebinding-protection) requires it to be accepted.
func (h *HTTPHandler) originAllowed(r *http.Request) bool {
	values := r.Header.Values("Origin")
	if len(values) == 0 {
		return true
	}
	if len(values) > 1 {
		return false
	}
	origin, err := NormalizeOrigin(values[0])
	if err != nil {
		return false
	}
	if h.origins[origin] {
		return true
	}
	_, host, _ := strings.Cut(origin, "://")
	return r.Host != "" && strings.EqualFold(host, r.Host)
}

// authenticate checks the bearer token against the live principals (every
// digest compared in constant time) and returns the principal the request
// acts for (nil when the server has no authentication) and "", else the
// message of its 401. The message says which of the three it was (no token,
// a malformed header, a wrong token): some clients (the MCP Inspector) react
// to any 401 by starting OAuth discovery, and the message is all their user
// gets to see. It never contains what the client sent.
func (h *HTTPHandler) authenticate(r *http.Request) (*Principal, string) {
	if h.auth == nil {
		return nil, ""
	}
	values := r.Header.Values("Authorization")
	if len(values) == 0 {
		return nil, "unauthorized: no bearer token was sent; this server requires the header Authorization: Bearer <token>, with the token the server was started with (GRAPH_ENGINEERING_AUTH_TOKEN or --auth-token-file) or a principal's token from --auth-file"
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(values[0]), " ")
	if len(values) != 1 || !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return nil, "unauthorized: the Authorization header is malformed; send exactly one header of the form Authorization: Bearer <token>"
	}
	p := h.auth.Current().authenticate(strings.TrimSpace(token))
	if p == nil {
		return nil, "unauthorized: the bearer token is wrong; it does not match the token this server was started with or any principal's token"
	}
	return p, ""
}

func (h *HTTPHandler) serveHealth(w http.ResponseWriter, r *http.Request) {
	if !probeRequest(w, r) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	if err := h.srv.store.Ping(ctx); err != nil {
		h.log.Warn("health check: database did not answer", "err", err)
		http.Error(w, "not ok", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

// serveMCP serves the MCP endpoint.
func (h *HTTPHandler) serveMCP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	// Server time at arrival, before the body is read or a slot is waited
	// for: a holder write is judged at it (taskgraph.WithArrival), so time
	// spent queued in this handler never costs a lease.
	arrived := h.srv.store.Clock().Now()
	method, eraLabel := "none", "none"
	defer func() {
		if h.metrics != nil && r.Method == http.MethodPost {
			h.metrics.observeMCP(method, eraLabel, time.Since(start))
		}
	}()
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		// Ends a legacy session (204, then 404 for that id). Without a
		// session there is nothing to end: 2026-07-28 has no sessions.
		if sid := r.Header.Get(headerSessionID); sid != "" {
			trustConn(r)
			if h.foreignSession(w, r, sid) {
				return
			}
			release, ok := h.admit(r.Context(), admitShort)
			if !ok {
				h.busy(w, nil)
				return
			}
			defer release()
			h.stateful.ServeHTTP(w, r)
			h.sessions.ended(sid)
			h.owners.forget(sid)
			return
		}
		fallthrough
	default:
		// No GET stream: this server sends nothing unsolicited (no list
		// changes, logging, subscriptions or server-to-client requests), so
		// a standalone SSE stream would stay empty; the spec allows 405.
		w.Header().Set("Allow", "POST, DELETE")
		writeRPCError(w, &rpcFailure{status: http.StatusMethodNotAllowed, code: jsonrpc.CodeInvalidRequest,
			msg: "method not allowed: POST JSON-RPC messages to this endpoint; DELETE with Mcp-Session-Id ends a session"})
		return
	}
	if r.ContentLength > h.opts.MaxBodyBytes {
		h.tooLarge(w)
		return
	}
	if ct := mediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		writeRPCError(w, &rpcFailure{status: http.StatusUnsupportedMediaType, code: jsonrpc.CodeInvalidRequest,
			msg: "unsupported media type: the request body must be Content-Type: application/json"})
		return
	}
	if fail := acceptFailure(r.Header); fail != nil {
		writeRPCError(w, fail)
		return
	}
	body, err := h.readBody(w, r)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			h.tooLarge(w)
			return
		}
		writeRPCError(w, &rpcFailure{status: http.StatusBadRequest, code: jsonrpc.CodeInvalidRequest, msg: "invalid request: the request body could not be read"})
		return
	}
	trustConn(r)
	msg, fail := parseHTTPMessage(body)
	if fail != nil {
		writeRPCError(w, fail)
		return
	}
	method = methodLabel(msg.method)
	e, fail := classify(r.Header, msg)
	if fail == nil && e == eraModern {
		fail = checkModernHeaders(r.Header, msg)
	}
	if fail != nil {
		writeRPCError(w, fail)
		return
	}
	eraLabel = e.String()
	if f := unknownMethod(msg.method); f != nil && msg.isCall() {
		if e == eraLegacy {
			f.status = http.StatusOK // errors inside a legacy session travel with 200
		}
		f.id = &msg.id
		writeRPCError(w, f)
		return
	}
	sid := r.Header.Get(headerSessionID)
	if e == eraLegacy && sid != "" && h.foreignSession(w, r, sid) {
		return
	}
	if e == eraLegacy && msg.method == "initialize" && sid != "" && h.hasSession(sid) {
		// Every live session began with initialize; the SDK would answer a
		// second one with error code 0.
		writeRPCError(w, failure(http.StatusOK, msg, jsonrpc.CodeInvalidRequest, "invalid request: this session is already initialized; to start over, end it with DELETE and send initialize without Mcp-Session-Id"))
		return
	}
	release, ok := h.admit(r.Context(), admissionOf(msg))
	if !ok {
		h.busy(w, msg)
		return
	}
	defer release()
	opening := e == eraLegacy && msg.method == "initialize" && sid == ""
	if opening {
		h.initMu.Lock()
		defer h.initMu.Unlock()
		if !h.makeRoomForSession() {
			if h.metrics != nil {
				h.metrics.reject("too_many_sessions")
			}
			w.Header().Set("Retry-After", retryAfterSeconds)
			writeRPCError(w, failure(http.StatusServiceUnavailable, msg, jsonrpc.CodeInternalError,
				"too many sessions: %d legacy sessions are open, the most this server keeps, and each has a request in progress; end one with DELETE, or use protocol 2026-07-28, which needs none", h.opts.MaxSessions))
			return
		}
	} else if e == eraLegacy && sid != "" {
		defer h.sessions.begin(sid, msg.method)()
	}
	// Streams are not resumable here, so a Last-Event-ID on a POST means
	// nothing; the SDK would refuse the POST over it (checklist B18).
	r.Header.Del(headerLastEventID)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	// The arrival reaches the call in headerArrival, set here over anything
	// the client sent: the SDK hands every call its request's header
	// (RequestExtra.Header), and callDeadlineMiddleware puts the time into
	// the call's context. The 2026-07-28 handler also runs each call in
	// this request's context. A legacy session's calls run in the session's
	// context instead, which began as its initialize request's: that one
	// must not carry an arrival, or every call of the session would be
	// judged at the time the session began.
	r.Header.Set(headerArrival, strconv.FormatInt(arrived.UnixNano(), 10))
	ctx := context.WithValue(r.Context(), callPolicyKey{}, h.policy)
	if e == eraModern {
		ctx = taskgraph.WithArrival(ctx, arrived)
	}
	r = r.WithContext(ctx)
	if e == eraModern {
		if body := h.overflowToolError(r.Context(), msg); body != nil {
			writeJSONBody(w, http.StatusOK, body)
			return
		}
	}
	fw := newFixWriter(w, e == eraModern)
	if e == eraModern {
		h.stateless.ServeHTTP(fw, r)
	} else {
		h.stateful.ServeHTTP(fw, r)
	}
	fw.finish()
	if opening {
		if id := w.Header().Get(headerSessionID); id != "" {
			h.sessions.opened(id, 2*h.opts.MaxSessions+64, h.liveSessionIDs)
			if name, ok := callerName(r.Context()); ok {
				h.owners.set(id, name, 2*h.opts.MaxSessions+64, h.liveSessionIDs)
			}
		}
	}
}

// makeRoomForSession reports whether a new legacy session may open: below
// MaxSessions it may; at the cap it closes the session that matters least
// (see sessionTracker) and may, unless every session has a request in
// flight. The caller holds initMu.
func (h *HTTPHandler) makeRoomForSession() bool {
	live := h.liveSessionIDs()
	for len(live) >= h.opts.MaxSessions {
		id := h.sessions.victim(live)
		if id == "" {
			return false
		}
		for ss := range h.srv.mcp.Sessions() {
			if ss.ID() == id {
				_ = ss.Close() // the session is gone either way; its close error concerns no one
			}
		}
		delete(live, id)
		if h.metrics != nil {
			h.metrics.evict("session")
		}
		h.log.Info("closed a legacy session to make room for a new one", "max_sessions", h.opts.MaxSessions)
	}
	return true
}

func (h *HTTPHandler) tooLarge(w http.ResponseWriter) {
	if h.metrics != nil {
		h.metrics.reject("too_large")
	}
	// The rest of the body is not read; the connection cannot be reused.
	w.Header().Set("Connection", "close")
	writeRPCError(w, &rpcFailure{status: http.StatusRequestEntityTooLarge, code: jsonrpc.CodeInvalidRequest,
		msg: fmt.Sprintf("request too large: a POST body may hold at most %d bytes", h.opts.MaxBodyBytes)})
}

// statusWriter records the status for metrics and logs.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wroteHeader && code >= 200 {
		s.status, s.wroteHeader = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	s.wroteHeader = true
	return s.ResponseWriter.Write(p)
}

// Flush implements http.Flusher.
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// hostOnly returns the host part of host[:port], without brackets.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// isLoopbackHost reports whether host is "localhost" or a loopback IP.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsLoopbackAddr reports whether a listen address (host:port) binds only
// loopback: localhost or a loopback IP. An empty host (all interfaces) or
// any other name is not loopback.
func IsLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	return isLoopbackHost(host)
}

// ServeStreamableHTTP serves MCP over Streamable HTTP on ln until ctx is
// done. It refuses a listener that is not loopback-only unless
// opts.AuthToken is set. On shutdown it stops accepting, lets in-flight
// requests finish for up to ShutdownTimeout, cancels whatever still runs,
// and ends the legacy sessions; it then returns nil. The caller closes the
// store afterwards.
func (s *Server) ServeStreamableHTTP(ctx context.Context, ln net.Listener, opts HTTPOptions) error {
	if opts.AuthToken == "" && opts.Principals == nil && !IsLoopbackAddr(ln.Addr().String()) {
		return fmt.Errorf("serve http on %s: refusing a non-loopback address without an auth token", ln.Addr())
	}
	h, err := NewHTTPHandler(s, opts)
	if err != nil {
		return err
	}
	opts = h.opts
	if limit, ok := openFilesLimit(); ok && uint64(opts.MaxConnections)+fdReserve > limit {
		h.log.Warn("the connection cap exceeds the open-files limit: once descriptors run out, new connections wait in the backlog before the cap can make room for them; raise the limit (ulimit -n) or lower --max-connections",
			"max_connections", opts.MaxConnections, "open_files_limit", limit, "reserved", fdReserve)
	}
	hs := h.newServer()
	errc := make(chan error, 1)
	onEvict := func() {
		if h.metrics != nil {
			h.metrics.evict("connection")
		}
	}
	go func() { errc <- hs.Serve(newConnLimiter(ln, opts.MaxConnections, onEvict)) }()
	select {
	case err := <-errc:
		h.AbortCalls()
		h.CloseSessions()
		return fmt.Errorf("serve http on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	h.log.Info("shutting down: no new connections; waiting for in-flight requests", "bound", opts.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), opts.ShutdownTimeout)
	err = hs.Shutdown(sctx)
	cancel()
	if err != nil {
		h.log.Warn("in-flight requests did not finish in time; cancelling them", "bound", opts.ShutdownTimeout, "err", err)
		h.AbortCalls()
		_ = hs.Close()
	}
	<-errc
	h.AbortCalls()
	h.CloseSessions()
	return nil
}

// newServer returns the http.Server of ServeStreamableHTTP for h.
func (h *HTTPHandler) newServer() *http.Server {
	return &http.Server{
		Handler:           h,
		ConnContext:       connContext,
		ReadHeaderTimeout: readHeaderTimeout,
		// A whole request must arrive within it; an MCP POST body within
		// bodyReadTimeout, after which the handler lifts the deadline for
		// the call (see readBody).
		ReadTimeout: readTimeout,
		// A call may take CallTimeout; its response must still be writable.
		WriteTimeout:   h.opts.CallTimeout + readTimeout,
		IdleTimeout:    idleTimeout,
		MaxHeaderBytes: MaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(h.log.Handler(), slog.LevelWarn),
	}
}
