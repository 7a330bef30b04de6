package httpfront

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/accesstoken"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
)

// insufficientScope answers a request whose principal lacks the role the
// route needs: 403 with the RFC 6750 challenge error="insufficient_scope".
func (h *Handler) insufficientScope(w http.ResponseWriter, route string, p *principal.Principal, what, role string) {
	scope := []string{role}
	if c := h.oauthConfig(); c != nil && p.FromToken() {
		scope = c.ScopesFor(role)
	}
	w.Header().Set("WWW-Authenticate", h.challenge(`error="insufficient_scope"`, scope))
	h.refuse(w, route, http.StatusForbidden, "insufficient_scope", principal.MissingRole(p, what, []string{role}).Error())
}

// sessionOwners binds each legacy session to the principal whose
// initialize opened it: a legacy session's calls run in the context of its
// initialize request, so a request naming the session must come from the
// same principal, or it is answered as if the session did not exist.
type sessionOwners struct {
	mu sync.Mutex
	m  map[string]string
}

func (o *sessionOwners) set(id, name string, bound int, live func() map[string]bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string]string{}
	}
	o.m[id] = name
	if len(o.m) > bound {
		alive := live()
		for k := range o.m {
			if !alive[k] {
				delete(o.m, k)
			}
		}
	}
}

// owns reports whether the session id was opened by the principal name.
func (o *sessionOwners) owns(id, name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	got, ok := o.m[id]
	return ok && got == name
}

func (o *sessionOwners) forget(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, id)
}

// foreignSession reports whether q names a legacy session that another
// principal opened (or, with authentication, that none is known to own),
// and if so answers it like an unknown session: 404.
func (h *Handler) foreignSession(w http.ResponseWriter, q *mcpRequest) bool {
	if q.p == nil || q.sid == "" || h.owners.owns(q.sid, q.p.Name) {
		return false
	}
	wire.WriteError(w, &wire.Failure{Status: http.StatusNotFound, Code: jsonrpc.CodeInvalidRequest,
		Msg: "session not found: this Mcp-Session-Id is unknown or has ended; send initialize without Mcp-Session-Id to start a new session"})
	return true
}

// WellKnownResourcePath is where Protected Resource Metadata (RFC 9728) is
// served when the auth file has an oauth section; the path-suffixed form
// (this path followed by the resource's path, e.g.
// /.well-known/oauth-protected-resource/mcp) serves the same document.
const WellKnownResourcePath = "/.well-known/oauth-protected-resource"

// wellKnownRoute is the route label of the metadata paths.
const wellKnownRoute = WellKnownResourcePath

// tokenState is the access-token verifier of one oauth section: a reload
// that brings a new section brings a new verifier (and a new key cache).
type tokenState struct {
	cfg *principal.OAuthConfig
	v   *accesstoken.Verifier
}

// verifier returns the verifier of c, building it on the first use of c.
func (h *Handler) verifier(c *principal.OAuthConfig) (*accesstoken.Verifier, error) {
	if st := h.tokens.Load(); st != nil && st.cfg == c {
		return st.v, nil
	}
	v, err := accesstoken.New(accesstoken.Config{
		Resource: c.Resource, Issuers: c.AuthorizationServers, Algorithms: c.AllowedAlgorithms(),
		Skew:       time.Duration(c.ClockSkew()) * time.Second,
		Refetch:    time.Duration(c.KeyRefetch()) * time.Second,
		HTTPClient: h.opts.OAuthHTTPClient, Now: h.opts.TokenClock,
	})
	if err != nil {
		return nil, err
	}
	h.tokens.Store(&tokenState{cfg: c, v: v})
	return v, nil
}

// oauthConfig returns the live table's oauth section, or nil.
func (h *Handler) oauthConfig() *principal.OAuthConfig {
	if h.auth == nil {
		return nil
	}
	return h.auth.Current().OAuth()
}

// resourceMetadataURL is where the metadata of c's resource is (RFC 9728
// §3.1: the well-known path inserted between the host and the resource's
// path).
func resourceMetadataURL(c *principal.OAuthConfig) string {
	u, err := url.Parse(c.Resource)
	if err != nil {
		return ""
	}
	u.Path = WellKnownResourcePath + strings.TrimSuffix(u.Path, "/")
	u.RawPath, u.RawQuery = "", ""
	return u.String()
}

// isWellKnownResource reports whether path is a metadata path.
func isWellKnownResource(path string) bool {
	return path == WellKnownResourcePath || strings.HasPrefix(path, WellKnownResourcePath+"/")
}

// serveResourceMetadata serves Protected Resource Metadata (RFC 9728):
// public, for any origin, and only when the auth file has an oauth section
// whose resource this path names (the bare path, or the path-suffixed
// form).
func (h *Handler) serveResourceMetadata(w http.ResponseWriter, r *http.Request) {
	c := h.oauthConfig()
	if c == nil {
		http.NotFound(w, r)
		return
	}
	if r.URL.Path != WellKnownResourcePath {
		u, err := url.Parse(resourceMetadataURL(c))
		if err != nil || u.Path != r.URL.Path {
			http.NotFound(w, r)
			return
		}
	}
	w.Header().Set("Cache-Control", "max-age=300")
	auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               c.Resource,
		AuthorizationServers:   c.AuthorizationServers,
		ScopesSupported:        c.ScopeNames(),
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "graph-engineering-mcp",
	}).ServeHTTP(w, r)
}

// challenge returns the WWW-Authenticate value of a refusal: the realm,
// then attrs (error=..., already quoted), then, with an oauth section,
// where the metadata is, then the scopes to ask for (scopes, or with an
// oauth section every configured scope when nil).
func (h *Handler) challenge(attrs string, scopes []string) string {
	v := `Bearer realm="graph-engineering-mcp"`
	if attrs != "" {
		v += ", " + attrs
	}
	if c := h.oauthConfig(); c != nil {
		if scopes == nil {
			scopes = c.ScopeNames()
		}
		v += fmt.Sprintf(`, resource_metadata=%q`, resourceMetadataURL(c))
	}
	if len(scopes) > 0 {
		v += fmt.Sprintf(`, scope=%q`, strings.Join(scopes, " "))
	}
	return v
}

// authFailure is why a request was not authenticated: its status, the
// metrics reason, the message and the challenge attributes.
type authFailure struct {
	status int
	reason string
	msg    string
	attrs  string
}

// authenticateToken validates token as a JWT access token of the live
// oauth section and maps it to its principal.
func (h *Handler) authenticateToken(r *http.Request, ps *principal.Principals, token string) (*principal.Principal, *authFailure) {
	v, err := h.verifier(ps.OAuth())
	if err != nil {
		return nil, &authFailure{status: http.StatusInternalServerError, reason: "unauthorized", msg: "internal error: the access-token verifier could not be built"}
	}
	tok, err := v.Verify(r.Context(), token)
	switch {
	case errors.Is(err, accesstoken.ErrKeysUnavailable):
		h.log.Warn("access token not judged: the authorization server's keys are unavailable", "error", err)
		return nil, &authFailure{status: http.StatusServiceUnavailable, reason: "keys_unavailable",
			msg: "service unavailable: the authorization server's keys could not be fetched, so the access token could not be checked; retry later"}
	case err != nil:
		h.log.Debug("access token refused", "why", err)
		return nil, &authFailure{status: http.StatusUnauthorized, reason: "unauthorized", attrs: `error="invalid_token"`,
			msg: "unauthorized: " + err.Error()}
	}
	p, err := ps.TokenPrincipal(tok.Claims, tok.Scopes)
	if err != nil {
		h.log.Debug("access token maps to no principal", "why", err)
		return nil, &authFailure{status: http.StatusForbidden, reason: "insufficient_scope", msg: err.Error()}
	}
	return p, nil
}

// tokenInsufficientScope refuses, before MCP, a request of an
// access-token principal that lacks every role roles lists (the roles a
// tool needs, or any role): 403 with error="insufficient_scope" naming the
// scopes that grant them, so that an OAuth client can ask for them (step-up
// authorization). A tool whose roles the token's scopes grant but the auth
// file's rule caps is not refused here: no token could step up to it, so the
// tool refuses the call (a tool error), as it does any missing role of an
// auth-file principal. It reports whether it refused.
func (h *Handler) tokenInsufficientScope(w http.ResponseWriter, q *mcpRequest) bool {
	p := q.p
	if p == nil || !p.FromToken() {
		return false
	}
	c := h.oauthConfig()
	if c == nil {
		return false
	}
	roles := principal.MCPRoles // approve alone grants nothing of MCP
	what, tool := "this server", false
	if name, _, ok := q.msg.ToolCall(); ok {
		if rs, known := principal.ToolRoles[name]; known {
			roles, what, tool = rs, name, true
		}
	}
	for _, role := range roles {
		if p.HasRole(role) || (tool && p.RoleCapped(role)) {
			return false
		}
	}
	var scopes []string
	for _, role := range roles {
		scopes = append(scopes, c.ScopesFor(role)...)
	}
	scopes = principal.SortedUnique(scopes)
	w.Header().Set("WWW-Authenticate", h.challenge(`error="insufficient_scope"`, scopes))
	h.refuse(w, MCPPath, http.StatusForbidden, "insufficient_scope",
		fmt.Sprintf("%s; request an access token with one of the scopes: %s", principal.MissingRole(p, what, roles).Error(), strings.Join(scopes, " ")))
	return true
}
