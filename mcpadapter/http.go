package mcpadapter

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
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
	// DefaultMaxConcurrent bounds the MCP requests served at once.
	DefaultMaxConcurrent = 64
	// DefaultMaxConnections bounds open TCP connections.
	DefaultMaxConnections = 256
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
	retryAfterSeconds = "1"
)

// HTTPOptions configure the Streamable HTTP transport. Zero values take the
// defaults above.
type HTTPOptions struct {
	// AuthToken, when set, must arrive on every request except the health
	// check as "Authorization: Bearer <token>". It is compared in constant
	// time and never logged.
	AuthToken string
	// AllowedOrigins are the browser origins (scheme://host[:port]) allowed
	// besides same-origin requests. A request whose Origin is present and
	// neither same-origin nor listed is refused with 403.
	AllowedOrigins []string
	// MaxBodyBytes bounds a POST body (413 beyond it).
	MaxBodyBytes int64
	// MaxConcurrent bounds MCP requests served at once (503 beyond it).
	MaxConcurrent int
	// MaxConnections bounds open TCP connections; further ones wait to be
	// accepted. Used by ServeStreamableHTTP.
	MaxConnections int
	// CallTimeout is the deadline of every call; it must exceed the longest
	// claim wait.
	CallTimeout time.Duration
	// SessionIdleTimeout ends a legacy session that has had no request for
	// this long.
	SessionIdleTimeout time.Duration
	// MaxSessions bounds live legacy sessions (503 on initialize beyond it).
	MaxSessions int
	// ShutdownTimeout bounds the drain of in-flight calls on shutdown; after
	// it, remaining calls are cancelled. Used by ServeStreamableHTTP.
	ShutdownTimeout time.Duration
	// Metrics, when set, are served at /metrics and record HTTP latency.
	Metrics *Metrics
	// Logger receives request and lifecycle logs; nil uses the server's.
	Logger *slog.Logger
}

func (o *HTTPOptions) setDefaults(s *Server) error {
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxConcurrent == 0 {
		o.MaxConcurrent = DefaultMaxConcurrent
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
	case o.SessionIdleTimeout < 0:
		return fmt.Errorf("http: SessionIdleTimeout must be positive (got %s)", o.SessionIdleTimeout)
	case o.ShutdownTimeout < 0:
		return fmt.Errorf("http: ShutdownTimeout must be positive (got %s)", o.ShutdownTimeout)
	}
	if o.AuthToken != "" {
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
	srv       *Server
	opts      HTTPOptions
	log       *slog.Logger
	metrics   *Metrics
	tokenHash [sha256.Size]byte
	origins   map[string]bool

	stateless   *mcp.StreamableHTTPHandler
	stateful    *mcp.StreamableHTTPHandler
	metricsHTTP http.Handler
	sem         chan struct{}
	policy      *callPolicy
	abort       context.CancelFunc
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
		origins: map[string]bool{},
		sem:     make(chan struct{}, opts.MaxConcurrent),
	}
	for _, o := range opts.AllowedOrigins {
		n, err := NormalizeOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("http: allowed origin: %w", err)
		}
		h.origins[n] = true
	}
	if opts.AuthToken != "" {
		h.tokenHash = sha256.Sum256([]byte(opts.AuthToken))
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
	if h.metrics != nil {
		h.metrics.registerSessions(h.legacySessions)
		h.metricsHTTP = h.metrics.Handler()
	}
	return h, nil
}

// callDeadlineMiddleware bounds every call that carries a callPolicy, and
// cancels it when the policy's abort context ends.
func callDeadlineMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
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
	default:
		http.NotFound(sw, r)
		return
	}
	if !h.authorized(r) {
		value := `Bearer realm="graph-engineering-mcp"`
		if r.Header.Get("Authorization") != "" {
			value += `, error="invalid_token"`
		}
		sw.Header().Set("WWW-Authenticate", value)
		h.refuse(sw, route, http.StatusUnauthorized, "unauthorized", "unauthorized: send the server's token as Authorization: Bearer <token>")
		return
	}
	if route == MetricsPath {
		if h.metrics == nil {
			http.NotFound(sw, r)
			return
		}
		h.metricsHTTP.ServeHTTP(sw, r)
		return
	}
	select {
	case h.sem <- struct{}{}:
	default:
		sw.Header().Set("Retry-After", retryAfterSeconds)
		h.refuse(sw, route, http.StatusServiceUnavailable, "busy", fmt.Sprintf("server busy: %d requests are in progress, the most it serves at once; retry after %s s", h.opts.MaxConcurrent, retryAfterSeconds))
		return
	}
	if h.metrics != nil {
		h.metrics.inFlight.Inc()
	}
	defer func() {
		<-h.sem
		if h.metrics != nil {
			h.metrics.inFlight.Dec()
		}
	}()
	h.serveMCP(sw, r)
}

func routeOf(path string) string {
	switch path {
	case MCPPath, HealthPath, ReadyPath, MetricsPath:
		return path
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

// authorized checks the bearer token in constant time.
func (h *HTTPHandler) authorized(r *http.Request) bool {
	if h.opts.AuthToken == "" {
		return true
	}
	values := r.Header.Values("Authorization")
	if len(values) != 1 {
		return false
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(got[:], h.tokenHash[:]) == 1
}

func (h *HTTPHandler) serveHealth(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: use GET", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
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
		if r.Header.Get(headerSessionID) != "" {
			h.stateful.ServeHTTP(w, r)
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
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			h.tooLarge(w)
			return
		}
		writeRPCError(w, &rpcFailure{status: http.StatusBadRequest, code: jsonrpc.CodeInvalidRequest, msg: "invalid request: the request body could not be read"})
		return
	}
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
	if sid := r.Header.Get(headerSessionID); e == eraLegacy && msg.method == "initialize" && sid != "" && h.hasSession(sid) {
		// Every live session began with initialize; the SDK would answer a
		// second one with error code 0.
		writeRPCError(w, failure(http.StatusOK, msg, jsonrpc.CodeInvalidRequest, "invalid request: this session is already initialized; to start over, end it with DELETE and send initialize without Mcp-Session-Id"))
		return
	}
	if e == eraLegacy && msg.method == "initialize" && r.Header.Get(headerSessionID) == "" && h.legacySessions() >= h.opts.MaxSessions {
		if h.metrics != nil {
			h.metrics.reject("too_many_sessions")
		}
		w.Header().Set("Retry-After", retryAfterSeconds)
		writeRPCError(w, failure(http.StatusServiceUnavailable, msg, jsonrpc.CodeInternalError,
			"too many sessions: %d legacy sessions are open, the most this server keeps; end one with DELETE, or use protocol 2026-07-28, which needs none", h.opts.MaxSessions))
		return
	}
	// Streams are not resumable here, so a Last-Event-ID on a POST means
	// nothing; the SDK would refuse the POST over it (checklist B18).
	r.Header.Del(headerLastEventID)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r = r.WithContext(context.WithValue(r.Context(), callPolicyKey{}, h.policy))
	fw := newFixWriter(w, e == eraModern)
	if e == eraModern {
		h.stateless.ServeHTTP(fw, r)
	} else {
		h.stateful.ServeHTTP(fw, r)
	}
	fw.finish()
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
	if opts.AuthToken == "" && !IsLoopbackAddr(ln.Addr().String()) {
		return fmt.Errorf("serve http on %s: refusing a non-loopback address without an auth token", ln.Addr())
	}
	h, err := NewHTTPHandler(s, opts)
	if err != nil {
		return err
	}
	opts = h.opts
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		// A call may take CallTimeout; its response must still be writable.
		WriteTimeout:   opts.CallTimeout + readTimeout,
		IdleTimeout:    idleTimeout,
		MaxHeaderBytes: MaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(h.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(newLimitListener(ln, opts.MaxConnections)) }()
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

// limitListener accepts at most n connections at a time; further ones wait
// in the kernel's backlog until one closes.
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

// Accept implements net.Listener.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

// Close implements net.Listener.
func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
