package httpfront

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/accesstoken"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/liveview"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
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

// Defaults of Options.
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

// Options configure the HTTP front. Zero values take the defaults above.
type Options struct {
	// AuthToken, when set, must arrive on every request except the health
	// check as "Authorization: Bearer <token>". It is compared in constant
	// time and never logged.
	AuthToken string
	// Principals, when set, authenticates requests against named
	// principals with roles (--auth-file) instead of AuthToken; at most one
	// of the two may be set (package principal).
	Principals *principal.Authenticator
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
	// one waits. Used by Serve.
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
	// it, remaining calls are cancelled. Used by Serve.
	ShutdownTimeout time.Duration
	// Metrics, when set, are served at /metrics and record HTTP latency.
	Metrics *Metrics
	// Logger receives request and lifecycle logs; nil uses the server's.
	Logger *slog.Logger
	// DisableUI turns the live workflow view under /ui/ off (package
	// liveview).
	DisableUI bool
	// UIPageSize is how many workflows one page of the live view's list
	// shows (0: liveview.UIMaxWorkflows).
	UIPageSize int
	// UIMaxStreams bounds the live view's event streams open at once (0:
	// liveview.UIMaxStreams).
	UIMaxStreams int
	// OAuthHTTPClient fetches the authorization servers' metadata and keys
	// when the auth file has an oauth section (nil: a client with a 10 s
	// timeout).
	OAuthHTTPClient *http.Client
	// TokenClock is the clock access tokens' exp, nbf and iat are judged
	// at, and key refetches are spaced by (nil: time.Now).
	TokenClock func() time.Time
	// ListenWriteTimeout bounds one write of a subscriptions/listen stream
	// (0: ListenWriteTimeout).
	ListenWriteTimeout time.Duration
}

func (o *Options) setDefaults(s *mcpadapter.Server) error {
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
	if o.ListenWriteTimeout <= 0 {
		o.ListenWriteTimeout = ListenWriteTimeout
	}
	if o.Logger == nil {
		o.Logger = s.Logger()
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

// Handler is the HTTP front of an MCP server: /mcp (Streamable HTTP, both
// protocol eras), /healthz, /readyz, /metrics and the live view under /ui/.
// It is a router: every route passes the same Host and Origin checks, /mcp
// and /metrics the same authentication, and then its own handler.
//
// The SDK (v1.8.0) accepts 2026-07-28 only on a stateless handler and keeps
// legacy sessions only on a stateful one, so the MCP route holds one of
// each, both on the same SDK server, and hands every POST, once it has read
// and checked it, to the one its era needs (wire.ClassifyHTTP). In front of
// both it enforces what the SDK does not: the Origin allow-list, the bearer
// token, the body and concurrency limits, JSON-RPC error bodies for
// malformed input and version errors, Mcp-Name checks for tasks/*, and the
// HTTP status of error responses (package wire).
type Handler struct {
	srv     *mcpadapter.Server
	store   *taskgraph.Store
	opts    Options
	log     *slog.Logger
	metrics *Metrics
	// health and ready run at most one probe of each kind against the
	// store at once (probes.go).
	health, ready probeGate
	auth          *principal.Authenticator // nil: no authentication (loopback only)
	owners        sessionOwners
	origins       map[string]bool

	stateless   *mcp.StreamableHTTPHandler
	stateful    *mcp.StreamableHTTPHandler
	metricsHTTP http.Handler
	slots       *slotPool
	longPolls   atomic.Int64 // long polls being served (no slot)
	sessions    *sessionTracker
	initMu      sync.Mutex      // serialises initialize at the session cap
	abort       context.Context // cancelled when a shutdown stops waiting
	abortCalls  context.CancelFunc
	// listenStop is cancelled as a shutdown begins: subscriptions/listen
	// streams end (with a reason) rather than hold the drain.
	listenStop  context.Context
	stopListens context.CancelFunc
	ui          *liveview.Handler // nil: the live view is off
	tokens      atomic.Pointer[tokenState]
	// sdkOnly hands every request to the SDK, direct tool calls too
	// (tests compare both paths).
	sdkOnly bool
}

// New returns the HTTP front of srv.
func New(srv *mcpadapter.Server, opts Options) (*Handler, error) {
	if err := opts.setDefaults(srv); err != nil {
		return nil, err
	}
	h := &Handler{
		srv: srv, store: srv.Store(), opts: opts, log: opts.Logger, metrics: opts.Metrics,
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
		h.auth = principal.NewAuthenticator(principal.SingleToken(opts.AuthToken))
	}
	h.abort, h.abortCalls = context.WithCancel(context.Background())
	h.listenStop, h.stopListens = context.WithCancel(context.Background())
	getServer := func(*http.Request) *mcp.Server { return srv.MCP() }
	h.stateless = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, PropagateRequestCancellation: true,
		Logger: h.log, MaxRequestBodyBytes: opts.MaxBodyBytes,
	})
	h.stateful = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		JSONResponse: true, SessionTimeout: opts.SessionIdleTimeout,
		Logger: h.log, MaxRequestBodyBytes: opts.MaxBodyBytes,
	})
	if !opts.DisableUI {
		ui := liveview.Config{Store: h.store, Auth: h.auth, Authenticate: h.authenticate, Logger: h.log, PageSize: opts.UIPageSize,
			Stop: h.listenStop.Done(), MaxStreams: opts.UIMaxStreams}
		if h.metrics != nil {
			ui.OnRefuse = h.metrics.reject
		}
		h.ui = liveview.New(ui)
	}
	if h.metrics != nil {
		h.metrics.registerSessions(h.legacySessions)
		h.metrics.registerListen(srv.ListenMetrics)
		if h.ui != nil {
			h.metrics.registerUIStreams(h.ui.StreamStats)
		}
		h.metrics.registerSlotWaiters(h.slots.waiting)
		h.metricsHTTP = h.metrics.Handler()
	}
	return h, nil
}

// AbortCalls cancels every call still running through this handler. The
// shutdown path calls it once the drain period is over.
func (h *Handler) AbortCalls() { h.abortCalls() }

// StopListens ends every subscriptions/listen stream, each with a
// notifications/cancelled saying the server is shutting down, and every
// live view event stream (event "shutdown"); Serve calls it as a shutdown
// begins, so that streams never hold the drain.
func (h *Handler) StopListens() { h.stopListens() }

// CloseSessions ends every legacy session (on shutdown).
func (h *Handler) CloseSessions() {
	for ss := range h.srv.MCP().Sessions() {
		if ss.ID() != "" {
			ss.Close()
		}
	}
}

// routes are the front's routes; a path that is none of them is "other".
func routeOf(path string) string {
	switch path {
	case MCPPath, HealthPath, ReadyPath, MetricsPath:
		return path
	}
	if liveview.IsRoute(path) {
		return liveview.UIRoute
	}
	if isWellKnownResource(path) {
		return wellKnownRoute
	}
	if strings.HasPrefix(path, GatesPath) {
		return GatesPath
	}
	return "other"
}

// ServeHTTP implements http.Handler: the checks every route shares, then
// the route's handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	route := routeOf(r.URL.Path)
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		took := time.Since(start)
		if h.metrics != nil {
			h.metrics.observeHTTP(route, httpMethodLabel(r.Method), sw.status, took)
		}
		// Asked first: the arguments of a disabled Debug are still boxed
		// (three allocations a request).
		if h.log.Enabled(r.Context(), slog.LevelDebug) {
			h.log.Debug("http request", "method", r.Method, "path", route, "status", sw.status, "took", took, "remote", r.RemoteAddr)
		}
	}()
	sw.Header().Set("X-Content-Type-Options", "nosniff")
	if !h.hostAllowed(r) {
		h.refuse(sw, route, http.StatusForbidden, "forbidden_host", "forbidden: the Host header must name a loopback host (localhost, 127.0.0.1 or [::1]) on a loopback listener")
		return
	}
	if route == wellKnownRoute {
		// Public metadata, for any origin (RFC 9728 §3): a browser-based
		// client discovers the authorization server through it.
		h.serveResourceMetadata(sw, r)
		return
	}
	if !h.originAllowed(r) {
		h.refuse(sw, route, http.StatusForbidden, "forbidden_origin", "forbidden: the Origin is not allowed; this server accepts same-origin requests and the origins given with --allow-origin")
		return
	}
	switch route {
	case HealthPath:
		h.serveHealth(sw, r)
	case ReadyPath:
		h.serveReady(sw, r)
	case liveview.UIRoute:
		if h.ui == nil {
			http.NotFound(sw, r)
			return
		}
		h.ui.ServeHTTP(sw, r)
	case MetricsPath:
		if p, ok := h.authorized(sw, r, route); ok {
			h.serveMetrics(sw, r, p)
		}
	case MCPPath:
		if p, ok := h.authorized(sw, r, route); ok {
			h.serveMCP(sw, r, p)
		}
	case GatesPath:
		if p, ok := h.authorized(sw, r, route); ok {
			h.serveGate(sw, r, p)
		}
	default:
		http.NotFound(sw, r)
	}
}

// authorized authenticates a request to an authenticated route, answering
// 401 with its challenge when it fails. p is nil without authentication.
func (h *Handler) authorized(w http.ResponseWriter, r *http.Request, route string) (p *principal.Principal, ok bool) {
	p, fail := h.authenticateRequest(r)
	if fail == nil {
		return p, true
	}
	switch fail.status {
	case http.StatusUnauthorized, http.StatusForbidden:
		w.Header().Set("WWW-Authenticate", h.challenge(fail.attrs, nil))
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	h.refuse(w, route, fail.status, fail.reason, fail.msg)
	return nil, false
}

// serveMetrics serves /metrics to a principal with the observe role.
func (h *Handler) serveMetrics(w http.ResponseWriter, r *http.Request, p *principal.Principal) {
	if p != nil && !p.HasRole(principal.RoleObserve) {
		h.insufficientScope(w, MetricsPath, p, "/metrics", principal.RoleObserve)
		return
	}
	trustConn(r)
	if h.metrics == nil {
		http.NotFound(w, r)
		return
	}
	h.metricsHTTP.ServeHTTP(w, r)
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
func (h *Handler) refuse(w http.ResponseWriter, route string, status int, reason, msg string) {
	if h.metrics != nil {
		h.metrics.reject(reason)
	}
	if route == MCPPath {
		wire.WriteError(w, &wire.Failure{Status: status, Code: jsonrpc.CodeInvalidRequest, Msg: msg})
		return
	}
	http.Error(w, msg, status)
}

// hostAllowed rejects DNS rebinding: on a loopback listener the Host must be
// a loopback name. The SDK's own check covers /mcp; this covers every route.
func (h *Handler) hostAllowed(r *http.Request) bool {
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
func (h *Handler) originAllowed(r *http.Request) bool {
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
//
// It is the live view's form of authenticateRequest: every refusal is a
// message of its 401 or 403.
func (h *Handler) authenticate(r *http.Request) (*principal.Principal, string) {
	p, fail := h.authenticateRequest(r)
	if fail != nil {
		return nil, fail.msg
	}
	return p, ""
}

// authenticateRequest is authenticate with the status, metrics reason and
// challenge of a refusal. A token that matches no auth-file digest is, when
// the auth file has an oauth section and it has the shape of a JWT,
// validated as an access token (authenticateToken).
func (h *Handler) authenticateRequest(r *http.Request) (*principal.Principal, *authFailure) {
	if h.auth == nil {
		return nil, nil
	}
	values := r.Header.Values("Authorization")
	if len(values) == 0 {
		return nil, &authFailure{status: http.StatusUnauthorized, reason: "unauthorized",
			msg: "unauthorized: no bearer token was sent; this server requires the header Authorization: Bearer <token>, with the token the server was started with (GRAPH_ENGINEERING_AUTH_TOKEN or --auth-token-file), a principal's token from --auth-file, or an access token from an authorization server its auth file trusts"}
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(values[0]), " ")
	token = strings.TrimSpace(token)
	if len(values) != 1 || !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, &authFailure{status: http.StatusUnauthorized, reason: "unauthorized", attrs: `error="invalid_token"`,
			msg: "unauthorized: the Authorization header is malformed; send exactly one header of the form Authorization: Bearer <token>"}
	}
	ps := h.auth.Current()
	if p := ps.Authenticate(token); p != nil {
		return p, nil
	}
	if ps.OAuth() != nil && accesstoken.LooksLikeJWT(token) {
		return h.authenticateToken(r, ps, token)
	}
	return nil, &authFailure{status: http.StatusUnauthorized, reason: "unauthorized", attrs: `error="invalid_token"`,
		msg: "unauthorized: the bearer token is wrong; it does not match the token this server was started with or any principal's token"}
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

// Serve serves srv over HTTP on ln until ctx is done. It refuses a listener
// that is not loopback-only unless opts sets an auth token or principals.
// On shutdown it stops accepting, answers parked claim-next calls with
// claimed: false at once (taskgraph.Store.Drain), lets in-flight requests finish for up to
// ShutdownTimeout, cancels whatever still runs, and ends the legacy
// sessions; it then returns nil. The caller closes the store afterwards.
func Serve(ctx context.Context, ln net.Listener, srv *mcpadapter.Server, opts Options) error {
	if opts.AuthToken == "" && opts.Principals == nil && !IsLoopbackAddr(ln.Addr().String()) {
		return fmt.Errorf("serve http on %s: refusing a non-loopback address without an auth token", ln.Addr())
	}
	h, err := New(srv, opts)
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
	h.StopListens()
	// Parked claim-next calls answer claimed: false now rather than hold
	// the drain for their whole wait; every other call runs to its end.
	srv.Store().Drain()
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

// newServer returns the http.Server of Serve for h.
func (h *Handler) newServer() *http.Server {
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
