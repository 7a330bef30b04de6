package principal

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/input"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// Bounds and defaults of an auth file's oauth section.
const (
	// MaxOAuthIssuers bounds the authorization servers of an oauth section.
	MaxOAuthIssuers = 16
	// MaxOAuthRules bounds the claim rules of an oauth section.
	MaxOAuthRules = 1024
	// MaxOAuthScopes bounds the scopes of an oauth section.
	MaxOAuthScopes = 64
	// MaxClockSkewSeconds bounds clock_skew_seconds.
	MaxClockSkewSeconds = 300
	// DefaultClockSkewSeconds is the skew exp, nbf and iat are judged with
	// when the file names none.
	DefaultClockSkewSeconds = 30
	// DefaultKeyRefetchSeconds is the shortest time between two fetches of
	// one issuer's keys when the file names none.
	DefaultKeyRefetchSeconds = 30
)

// DefaultAlgorithms are the JWS algorithms an access token may be signed
// with when the file names none: asymmetric only, so that a key published
// for verification can never sign.
var DefaultAlgorithms = []string{"ES256", "ES384", "EdDSA", "PS256", "PS384", "RS256", "RS384", "RS512"}

// allowedAlgorithms are the algorithms an oauth section may list: the
// asymmetric JWS algorithms. "none" and the HMAC algorithms are refused: a
// resource server verifies with published keys, and an HMAC "key" taken
// from a JWKS would let anyone who can read it sign.
var allowedAlgorithms = []string{"ES256", "ES384", "ES512", "EdDSA", "PS256", "PS384", "PS512", "RS256", "RS384", "RS512"}

// OAuthConfig is the oauth section of an auth file: this server as an
// OAuth 2.1 resource server (the MCP authorization spec). Access tokens are
// JWTs that one of AuthorizationServers issued for Resource; their scopes
// map to roles (Scopes), and their claims to a principal (Principals).
type OAuthConfig struct {
	// Resource is this server's resource identifier (RFC 8707, RFC 9728):
	// the URL of its /mcp endpoint, e.g. https://tasks.example.com/mcp. A
	// token's aud must contain it exactly.
	Resource string `json:"resource"`
	// AuthorizationServers are the issuer identifiers whose tokens are
	// accepted; each one's keys are found through its metadata (RFC 8414
	// or OpenID Connect discovery).
	AuthorizationServers []string `json:"authorization_servers"`
	// Algorithms are the JWS algorithms a token may be signed with
	// (default DefaultAlgorithms); never "none" or HMAC.
	Algorithms []string `json:"algorithms,omitempty"`
	// ClockSkewSeconds is the tolerance on exp, nbf and iat (default
	// DefaultClockSkewSeconds, at most MaxClockSkewSeconds).
	ClockSkewSeconds *int `json:"clock_skew_seconds,omitempty"`
	// KeyRefetchSeconds is the shortest time between two fetches of one
	// issuer's keys (a token with an unknown kid fetches them again, at
	// most this often); default DefaultKeyRefetchSeconds.
	KeyRefetchSeconds *int `json:"key_refetch_seconds,omitempty"`
	// Scopes maps each OAuth scope to the roles it grants.
	Scopes map[string][]string `json:"scopes"`
	// Principals are the rules that map a token's claims to a principal;
	// the first that matches wins, and a token no rule matches is refused.
	Principals []ClaimRule `json:"principals"`
}

// ClaimRule maps the tokens whose claim Claim matches Value to a principal.
type ClaimRule struct {
	// Claim names the claim to match: sub, client_id, azp, groups, ... A
	// claim that is an array matches when one of its strings does.
	Claim string `json:"claim"`
	// Value is a glob pattern ('*', '?') the claim must match.
	Value string `json:"value"`
	// Name is the principal's name; exactly one of Name and NameClaim.
	Name string `json:"name,omitempty"`
	// NameClaim names the claim whose value (an identifier) is the
	// principal's name, e.g. sub or client_id.
	NameClaim string `json:"name_claim,omitempty"`
	// Roles, when set, caps the roles the token's scopes grant: a token
	// holds the roles of its scopes that are also listed here.
	Roles []string `json:"roles,omitempty"`
	// Workflows and Owners are the principal's scopes, as for an auth-file
	// principal.
	Workflows []string `json:"workflows,omitempty"`
	Owners    []string `json:"owners,omitempty"`
}

// ClockSkew returns the tolerance on exp, nbf and iat, in seconds.
func (c *OAuthConfig) ClockSkew() int {
	if c.ClockSkewSeconds == nil {
		return DefaultClockSkewSeconds
	}
	return *c.ClockSkewSeconds
}

// KeyRefetch returns the shortest time between two key fetches of one
// issuer, in seconds.
func (c *OAuthConfig) KeyRefetch() int {
	if c.KeyRefetchSeconds == nil {
		return DefaultKeyRefetchSeconds
	}
	return *c.KeyRefetchSeconds
}

// AllowedAlgorithms returns the JWS algorithms a token may use.
func (c *OAuthConfig) AllowedAlgorithms() []string {
	if len(c.Algorithms) == 0 {
		return DefaultAlgorithms
	}
	return c.Algorithms
}

// ScopeNames returns the configured scopes, sorted.
func (c *OAuthConfig) ScopeNames() []string {
	out := make([]string, 0, len(c.Scopes))
	for s := range c.Scopes {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// ScopesFor returns the scopes that grant role, sorted: what a token
// lacking the role should ask for.
func (c *OAuthConfig) ScopesFor(role string) []string {
	var out []string
	for _, s := range c.ScopeNames() {
		if slices.Contains(c.Scopes[s], role) {
			out = append(out, s)
		}
	}
	return out
}

// checkOAuth validates an oauth section; names are the auth-file
// principals' names, which a rule's fixed name may not take.
func checkOAuth(c *OAuthConfig, names map[string]*Principal) error {
	if err := checkResourceURL(c.Resource, false); err != nil {
		return fmt.Errorf("oauth: resource %v", err)
	}
	if len(c.AuthorizationServers) == 0 || len(c.AuthorizationServers) > MaxOAuthIssuers {
		return fmt.Errorf("oauth: authorization_servers must list 1 to %d issuer URLs (got %d)", MaxOAuthIssuers, len(c.AuthorizationServers))
	}
	for i, iss := range c.AuthorizationServers {
		if err := checkResourceURL(iss, true); err != nil {
			return fmt.Errorf("oauth: authorization_servers[%d] %v", i, err)
		}
		if slices.Contains(c.AuthorizationServers[:i], iss) {
			return fmt.Errorf("oauth: authorization_servers[%d] is listed twice", i)
		}
	}
	for _, a := range c.Algorithms {
		if !slices.Contains(allowedAlgorithms, a) {
			return fmt.Errorf("oauth: algorithm %q is not allowed; allowed are %s (never none or HMAC)", input.Clip(a), strings.Join(allowedAlgorithms, ", "))
		}
	}
	if c.ClockSkewSeconds != nil && (*c.ClockSkewSeconds < 0 || *c.ClockSkewSeconds > MaxClockSkewSeconds) {
		return fmt.Errorf("oauth: clock_skew_seconds must be 0 to %d (got %d)", MaxClockSkewSeconds, *c.ClockSkewSeconds)
	}
	if c.KeyRefetchSeconds != nil && (*c.KeyRefetchSeconds < 1 || *c.KeyRefetchSeconds > 86400) {
		return fmt.Errorf("oauth: key_refetch_seconds must be 1 to 86400 (got %d)", *c.KeyRefetchSeconds)
	}
	if len(c.Scopes) == 0 || len(c.Scopes) > MaxOAuthScopes {
		return fmt.Errorf("oauth: scopes must map 1 to %d scopes to roles (got %d)", MaxOAuthScopes, len(c.Scopes))
	}
	for s, roles := range c.Scopes {
		if s == "" || strings.ContainsAny(s, " \"\\") || len(s) > MaxPatternLen {
			return fmt.Errorf("oauth: scope %q must be 1 to %d characters without spaces, quotes or backslashes", input.Clip(s), MaxPatternLen)
		}
		if err := checkRoles(roles, true); err != nil {
			return fmt.Errorf("oauth: scope %q: %v", s, err)
		}
		c.Scopes[s] = SortedUnique(roles)
	}
	if len(c.Principals) == 0 || len(c.Principals) > MaxOAuthRules {
		return fmt.Errorf("oauth: principals must list 1 to %d claim rules (got %d)", MaxOAuthRules, len(c.Principals))
	}
	for i := range c.Principals {
		r := &c.Principals[i]
		where := fmt.Sprintf("oauth: principals[%d]", i)
		if r.Claim == "" || len(r.Claim) > MaxPatternLen {
			return fmt.Errorf("%s: claim must name a claim (1 to %d characters)", where, MaxPatternLen)
		}
		if r.Value == "" || len(r.Value) > MaxPatternLen {
			return fmt.Errorf("%s: value must be a pattern of 1 to %d characters", where, MaxPatternLen)
		}
		switch {
		case (r.Name == "") == (r.NameClaim == ""):
			return fmt.Errorf("%s: exactly one of name and name_claim is required", where)
		case r.Name != "" && !taskgraph.ValidIdentifier(r.Name):
			return fmt.Errorf("%s: name must match %s", where, taskgraph.IdentifierPattern)
		case r.Name != "" && names[r.Name] != nil:
			return fmt.Errorf("%s: name %q is an auth-file principal's; a token principal needs a name of its own", where, r.Name)
		}
		if r.Roles != nil {
			if err := checkRoles(r.Roles, true); err != nil {
				return fmt.Errorf("%s: %v", where, err)
			}
			r.Roles = SortedUnique(r.Roles)
		}
		if err := checkPatterns(r.Workflows, r.Owners); err != nil {
			return fmt.Errorf("%s: %v", where, err)
		}
	}
	return nil
}

// checkResourceURL requires an absolute https URL without fragment, or
// http on a loopback host (development and tests). issuer also forbids a
// query (RFC 8414 §2).
func checkResourceURL(s string, issuer bool) error {
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Fragment != "" || (issuer && u.RawQuery != "") {
		return fmt.Errorf("must be an absolute URL with a host and no fragment (got %q)", input.Clip(s))
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		h := u.Hostname()
		if ip := net.ParseIP(h); h == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
	}
	return fmt.Errorf("must be an https URL (http only on a loopback host) (got %q)", input.Clip(s))
}

// checkRoles checks that roles are known (and, with nonEmpty, that there
// is at least one).
func checkRoles(roles []string, nonEmpty bool) error {
	if nonEmpty && len(roles) == 0 {
		return fmt.Errorf("roles must list at least one of %s", strings.Join(AllRoles, ", "))
	}
	for _, r := range roles {
		if !slices.Contains(AllRoles, r) {
			return fmt.Errorf("unknown role %q; roles are %s", input.Clip(r), strings.Join(AllRoles, ", "))
		}
	}
	return nil
}

// checkPatterns checks workflows and owners patterns.
func checkPatterns(workflows, owners []string) error {
	for key, pats := range map[string][]string{"workflows": workflows, "owners": owners} {
		if len(pats) > MaxPrincipalPatterns {
			return fmt.Errorf("%s may list at most %d patterns (got %d)", key, MaxPrincipalPatterns, len(pats))
		}
		for _, pat := range pats {
			if err := checkPattern(pat); err != nil {
				return fmt.Errorf("%s pattern %q %v", key, input.Clip(pat), err)
			}
		}
	}
	return nil
}

// OAuth returns the table's oauth section, or nil when it has none.
func (ps *Principals) OAuth() *OAuthConfig { return ps.oauth }

// TokenPrincipal returns the principal a validated access token stands
// for: the first rule of the oauth section whose claim matches names it and
// gives its workflows and owners, and its roles are those its scopes grant
// (capped by the rule's roles). claims are the token's verified claims and
// scopes its scopes. It returns an error matching ErrForbidden when no rule
// matches, when the name claim is missing or not an identifier, or when the
// name is an auth-file principal's; the error names the rule or claim, never
// a claim's value.
func (ps *Principals) TokenPrincipal(claims map[string]any, scopes []string) (*Principal, error) {
	c := ps.oauth
	if c == nil {
		return nil, Forbidden("token", "this server accepts no access tokens")
	}
	for i, r := range c.Principals {
		if !claimMatches(claims[r.Claim], r.Value) {
			continue
		}
		name := r.Name
		if r.NameClaim != "" {
			s, _ := claims[r.NameClaim].(string)
			if !taskgraph.ValidIdentifier(s) {
				return nil, Forbidden("token", "the token matches the auth file's oauth rule %d, whose principal is named by the claim %q, but that claim is missing or not an identifier (%s)", i, input.Clip(r.NameClaim), taskgraph.IdentifierPattern)
			}
			name = s
		}
		if ps.byName[name] != nil {
			return nil, Forbidden("token", "the token maps to the principal %q, a name the auth file gives a token_sha256 principal; a token principal needs a name of its own", name)
		}
		var roles []string
		for _, s := range scopes {
			roles = append(roles, c.Scopes[s]...)
		}
		var capped []string
		if r.Roles != nil {
			roles = slices.DeleteFunc(roles, func(x string) bool {
				if slices.Contains(r.Roles, x) {
					return false
				}
				capped = append(capped, x)
				return true
			})
		}
		return &Principal{Name: name, Roles: SortedUnique(roles), Workflows: r.Workflows, Owners: r.Owners, token: true, capped: SortedUnique(capped)}, nil
	}
	return nil, Forbidden("token", "the token is valid, but no rule of the auth file's oauth section maps its claims to a principal")
}

// claimMatches reports whether a claim's value (a string, or an array
// holding strings) matches pattern.
func claimMatches(v any, pattern string) bool {
	switch v := v.(type) {
	case string:
		return globMatch(pattern, v)
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok && globMatch(pattern, s) {
				return true
			}
		}
	}
	return false
}

// FromToken reports whether p stands for a validated access token rather
// than an auth-file principal.
func (p *Principal) FromToken() bool { return p.token }

// RoleCapped reports whether p's access token carries a scope granting
// role but the auth-file rule that names p caps its roles without it: a
// token with more scopes would not get it either.
func (p *Principal) RoleCapped(role string) bool { return slices.Contains(p.capped, role) }
