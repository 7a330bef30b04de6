package principal

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/input"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// Roles a principal may hold.
const (
	// RoleSubmit may create tasks, inspect them, and use tasks/get,
	// tasks/update and tasks/cancel on the tasks it created.
	RoleSubmit = "submit"
	// RoleWork may claim, heartbeat, complete, fail, cancel (its own claim)
	// and inspect.
	RoleWork = "work"
	// RoleObserve may inspect and read resources (the manifest, skills).
	RoleObserve = "observe"
	// RoleApprove may decide approval gates (approve or reject them) of
	// its workflows over HTTP (package httpfront, /gates/). It grants no
	// tool: no model tool decides a gate.
	RoleApprove = "approve"
)

// AllRoles lists the roles, ascending. Do not modify it.
var AllRoles = []string{RoleApprove, RoleObserve, RoleSubmit, RoleWork}

// MCPRoles lists the roles that grant some of the MCP surface (every role
// but approve), ascending. Do not modify it.
var MCPRoles = []string{RoleObserve, RoleSubmit, RoleWork}

// Bounds of an auth file.
const (
	// MaxAuthFileBytes bounds an auth file.
	MaxAuthFileBytes = 1 << 20
	// MaxPrincipals bounds the principals of one auth file.
	MaxPrincipals = 1024
	// MaxPrincipalPatterns bounds the workflows or owners patterns of one
	// principal.
	MaxPrincipalPatterns = 64
	// MaxPatternLen bounds one pattern.
	MaxPatternLen = 128
)

// ErrInvalidAuthFile reports an auth file that ParseAuthFile refused; the
// wrapping error names the principal, the key and the rule, never a token.
var ErrInvalidAuthFile = errors.New("invalid auth file")

// ErrForbidden reports a call outside the caller's roles or scopes. The
// wrapping error names the missing role or scope.
var ErrForbidden = errors.New("forbidden")

// Principal is a named caller with its roles and scopes, as written in an
// auth file.
type Principal struct {
	// Name identifies the principal (taskgraph.IdentifierPattern); it is
	// the actor the store records.
	Name string `json:"name"`
	// TokenSHA256 is the lowercase hex SHA-256 of the principal's bearer
	// token; the token itself is never stored.
	TokenSHA256 string `json:"token_sha256"`
	// Roles are some of submit, work, observe and approve.
	Roles []string `json:"roles"`
	// Workflows are glob patterns of the workflows the principal may
	// touch; empty means every workflow.
	Workflows []string `json:"workflows,omitempty"`
	// Owners are glob patterns a worker's owner must match; empty means
	// the principal's name, name/* or name:*.
	Owners []string `json:"owners,omitempty"`

	digest [sha256.Size]byte
	// everything marks the single-token principal: every role, workflow,
	// owner and task, as one shared token always meant.
	everything bool
	// token marks a principal that a validated access token stands for
	// (Principals.TokenPrincipal): it is in no table.
	token bool
	// capped are the roles the token's scopes grant that its auth-file
	// rule's roles take away (TokenPrincipal).
	capped []string
}

// AuthFile is the JSON document of --auth-file.
type AuthFile struct {
	Principals []Principal `json:"principals"`
	// OAuth, when set, also accepts JWT access tokens that an
	// authorization server issued for this server (OAuthConfig).
	OAuth *OAuthConfig `json:"oauth,omitempty"`
}

// HasRole reports whether p holds role.
func (p *Principal) HasRole(role string) bool { return slices.Contains(p.Roles, role) }

// WorkflowAllowed reports whether p may touch workflow id.
func (p *Principal) WorkflowAllowed(id string) bool {
	if len(p.Workflows) == 0 {
		return true
	}
	for _, pat := range p.Workflows {
		if globMatch(pat, id) {
			return true
		}
	}
	return false
}

// Everything reports whether p is the single-token principal (SingleToken):
// every role, workflow, owner and task, as one shared token always meant.
func (p *Principal) Everything() bool { return p.everything }

// AllWorkflows reports whether p's workflow scope is unrestricted.
func (p *Principal) AllWorkflows() bool {
	return len(p.Workflows) == 0 || slices.Contains(p.Workflows, "*")
}

// OwnerAllowed reports whether a worker of p may claim as owner.
func (p *Principal) OwnerAllowed(owner string) bool {
	for _, pat := range p.OwnerPatterns() {
		if globMatch(pat, owner) {
			return true
		}
	}
	return false
}

// OwnerPatterns returns the patterns a worker's owner must match: Owners,
// or by default the principal's name, name/* and name:*.
func (p *Principal) OwnerPatterns() []string {
	if len(p.Owners) > 0 {
		return p.Owners
	}
	// Owner identifiers have no '/', so name:* is the practical form of
	// "name/…"; both are accepted.
	return []string{p.Name, p.Name + "/*", p.Name + ":*"}
}

// TokenDigest returns the lowercase hex SHA-256 of token, the form an auth
// file stores.
func TokenDigest(token string) string {
	d := sha256.Sum256([]byte(token))
	return hex.EncodeToString(d[:])
}

// globMatch matches s against pattern, in which '*' stands for any run of
// characters (including none) and '?' for exactly one.
func globMatch(pattern, s string) bool {
	px, sx := 0, 0
	nextPx, nextSx := -1, -1
	for px < len(pattern) || sx < len(s) {
		if px < len(pattern) {
			switch c := pattern[px]; c {
			case '*':
				nextPx, nextSx = px, sx+1
				px++
				continue
			case '?':
				if sx < len(s) {
					px++
					sx++
					continue
				}
			default:
				if sx < len(s) && s[sx] == c {
					px++
					sx++
					continue
				}
			}
		}
		if nextSx > 0 && nextSx <= len(s) {
			px, sx = nextPx, nextSx
			continue
		}
		return false
	}
	return true
}

// checkPattern reports what is wrong with a workflows or owners pattern:
// 1 to MaxPatternLen characters of identifiers ([A-Za-z0-9_.:-]), '/', and
// the wildcards '*' and '?'.
func checkPattern(p string) error {
	if p == "" || len(p) > MaxPatternLen {
		return fmt.Errorf("must be 1 to %d characters (got %d)", MaxPatternLen, len(p))
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '_', c == '.', c == ':', c == '-', c == '/', c == '*', c == '?':
		default:
			return fmt.Errorf("may contain only letters, digits, _ . : - / and the wildcards * and ?; character %d (%q) is not", i+1, c)
		}
	}
	return nil
}

// ParseAuthFile decodes an auth file strictly: an unknown key, a missing or
// malformed name or token_sha256, an unknown or missing role, a malformed
// pattern, a duplicate name or token digest, or trailing data is an error
// matching ErrInvalidAuthFile that names the principal and the rule.
func ParseAuthFile(data []byte) (*Principals, error) {
	if len(data) > MaxAuthFileBytes {
		return nil, fmt.Errorf("%w: at most %d bytes (got %d)", ErrInvalidAuthFile, MaxAuthFileBytes, len(data))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f AuthFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidAuthFile, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the JSON object", ErrInvalidAuthFile)
	}
	if f.Principals == nil {
		return nil, fmt.Errorf("%w: the key \"principals\" (an array) is required", ErrInvalidAuthFile)
	}
	if len(f.Principals) > MaxPrincipals {
		return nil, fmt.Errorf("%w: at most %d principals (got %d)", ErrInvalidAuthFile, MaxPrincipals, len(f.Principals))
	}
	ps := &Principals{byName: map[string]*Principal{}}
	digests := map[[sha256.Size]byte]string{}
	for i := range f.Principals {
		p := f.Principals[i]
		where := fmt.Sprintf("principals[%d]", i)
		if !taskgraph.ValidIdentifier(p.Name) {
			return nil, fmt.Errorf("%w: %s: name must match %s", ErrInvalidAuthFile, where, taskgraph.IdentifierPattern)
		}
		where = fmt.Sprintf("principal %q", p.Name)
		if _, dup := ps.byName[p.Name]; dup {
			return nil, fmt.Errorf("%w: %s: the name is used twice", ErrInvalidAuthFile, where)
		}
		d, err := hex.DecodeString(p.TokenSHA256)
		if err != nil || len(d) != sha256.Size || strings.ToLower(p.TokenSHA256) != p.TokenSHA256 {
			return nil, fmt.Errorf("%w: %s: token_sha256 must be the 64 lowercase hex digits of the token's SHA-256 (never the token itself)", ErrInvalidAuthFile, where)
		}
		copy(p.digest[:], d)
		if other, dup := digests[p.digest]; dup {
			return nil, fmt.Errorf("%w: %s: token_sha256 is the same as principal %q's; every principal needs its own token", ErrInvalidAuthFile, where, other)
		}
		digests[p.digest] = p.Name
		if err := checkRoles(p.Roles, true); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalidAuthFile, where, err)
		}
		p.Roles = SortedUnique(p.Roles)
		if err := checkPatterns(p.Workflows, p.Owners); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalidAuthFile, where, err)
		}
		cp := p
		ps.list = append(ps.list, &cp)
		ps.byName[p.Name] = &cp
	}
	if f.OAuth != nil {
		if err := checkOAuth(f.OAuth, ps.byName); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidAuthFile, err)
		}
		ps.oauth = f.OAuth
	}
	return ps, nil
}

// LoadAuthFile reads and parses an auth file.
func LoadAuthFile(path string) (*Principals, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidAuthFile, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxAuthFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %w", ErrInvalidAuthFile, path, err)
	}
	ps, err := ParseAuthFile(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ps, nil
}

// SortedUnique returns in sorted, without repeats (a new slice).
func SortedUnique(in []string) []string {
	out := append([]string{}, in...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Principals is a parsed, immutable table of principals.
type Principals struct {
	list   []*Principal
	byName map[string]*Principal
	oauth  *OAuthConfig // nil: no access tokens
}

// SingleTokenPrincipalName is the principal --auth-token stands for.
const SingleTokenPrincipalName = "token"

// SingleToken returns the table of one principal with every role, every
// workflow and any owner, authenticated by token: what --auth-token and
// GRAPH_ENGINEERING_AUTH_TOKEN mean.
func SingleToken(token string) *Principals {
	p := &Principal{Name: SingleTokenPrincipalName, Roles: append([]string{}, AllRoles...), Owners: []string{"*"}, everything: true}
	p.digest = sha256.Sum256([]byte(token))
	p.TokenSHA256 = hex.EncodeToString(p.digest[:])
	return &Principals{list: []*Principal{p}, byName: map[string]*Principal{p.Name: p}}
}

// Len returns the number of principals.
func (ps *Principals) Len() int { return len(ps.list) }

// Names returns the principals' names in file order.
func (ps *Principals) Names() []string {
	out := make([]string, len(ps.list))
	for i, p := range ps.list {
		out[i] = p.Name
	}
	return out
}

// Lookup returns the principal named name, or nil.
func (ps *Principals) Lookup(name string) *Principal { return ps.byName[name] }

// Authenticate returns the principal whose digest is token's, comparing
// every digest in constant time, or nil.
func (ps *Principals) Authenticate(token string) *Principal {
	got := sha256.Sum256([]byte(token))
	var found *Principal
	for _, p := range ps.list {
		if subtle.ConstantTimeCompare(got[:], p.digest[:]) == 1 {
			found = p
		}
	}
	return found
}

// Authenticator holds the live principal table; Replace swaps it (a SIGHUP
// reload) without disturbing calls in flight.
type Authenticator struct{ cur atomic.Pointer[Principals] }

// NewAuthenticator returns an Authenticator serving ps.
func NewAuthenticator(ps *Principals) *Authenticator {
	a := &Authenticator{}
	a.cur.Store(ps)
	return a
}

// Replace makes ps the live table.
func (a *Authenticator) Replace(ps *Principals) { a.cur.Store(ps) }

// Current returns the live table.
func (a *Authenticator) Current() *Principals { return a.cur.Load() }

// Profile is the profile a principal's roles allow; a principal's surface
// is the server's surface narrowed by it, so roles can never widen a
// profile.
func Profile(p *Principal) manifest.Profile {
	var tools []string
	prof := manifest.Profile{}
	if p.HasRole(RoleSubmit) {
		tools = append(tools, manifest.ToolCreate, manifest.ToolInspect)
		prof.TasksExtension = true
	}
	if p.HasRole(RoleWork) {
		tools = append(tools, manifest.ToolClaim, manifest.ToolHeartbeat, manifest.ToolComplete, manifest.ToolFail, manifest.ToolCancel, manifest.ToolInspect)
	}
	if p.HasRole(RoleObserve) {
		tools = append(tools, manifest.ToolInspect)
		prof.Resources, prof.Skills = true, true
	}
	prof.AllowedTools = tools
	return prof.Effective()
}

// ToolRoles names the roles that may call each tool. Do not modify it.
var ToolRoles = map[string][]string{
	manifest.ToolCreate:    {RoleSubmit},
	manifest.ToolInspect:   {RoleSubmit, RoleWork, RoleObserve},
	manifest.ToolClaim:     {RoleWork},
	manifest.ToolHeartbeat: {RoleWork},
	manifest.ToolComplete:  {RoleWork},
	manifest.ToolFail:      {RoleWork},
	manifest.ToolCancel:    {RoleWork},
}

// MissingRole returns the ErrForbidden error of p lacking one of roles for
// what (scope "role").
func MissingRole(p *Principal, what string, roles []string) error {
	have := strings.Join(p.Roles, ", ")
	if have == "" {
		have = "none"
	}
	return Forbidden("role", "%s needs the role %s; principal %q has roles: %s", what, strings.Join(roles, " or "), p.Name, have)
}

// ForbiddenError is a call outside the caller's roles or scopes. It matches
// ErrForbidden.
type ForbiddenError struct {
	// Scope is what the call lacked: "role", "workflows" or "owners".
	Scope string
	msg   string
}

// Forbidden returns the ForbiddenError of scope with the message format.
func Forbidden(scope, format string, args ...any) *ForbiddenError {
	return &ForbiddenError{Scope: scope, msg: fmt.Sprintf(format, args...)}
}

func (e *ForbiddenError) Error() string { return "forbidden: " + e.msg }

// Is reports whether target is ErrForbidden.
func (e *ForbiddenError) Is(target error) bool { return target == ErrForbidden }

// Caller names the principal a request acts for. It is resolved against the
// live table at each use (Resolve), so a reload (Authenticator.Replace) that
// narrows or removes a principal applies at once, to the calls of sessions
// opened before it too. The zero Caller is no principal: every role (stdio
// without serve --principal, HTTP without authentication).
type Caller struct {
	// Auth is the live table; nil for the zero Caller.
	Auth *Authenticator
	// Name is the principal's name.
	Name string
	// Token, when set, is the principal a validated access token stands
	// for (Principals.TokenPrincipal): it is in no table, so it resolves to
	// itself. The HTTP front validates the token on every request, so it
	// is as current as the request.
	Token *Principal
}

// Resolve returns the principal c names and true, or nil and false for the
// zero Caller. A principal a reload removed is returned as one with no roles,
// workflows or owners: it may do nothing.
func (c Caller) Resolve() (*Principal, bool) {
	if c.Token != nil {
		return c.Token, true
	}
	if c.Auth == nil {
		return nil, false
	}
	if p := c.Auth.Current().Lookup(c.Name); p != nil {
		return p, true
	}
	return &Principal{Name: c.Name, Workflows: []string{}, Owners: []string{}}, true
}

// Caller returns the Caller of the principal name, for a transport with no
// credentials of its own (serve --principal NAME on stdio), or an error
// matching ErrInvalidAuthFile when the table has no such principal.
func (a *Authenticator) Caller(name string) (Caller, error) {
	if a.Current().Lookup(name) == nil {
		return Caller{}, fmt.Errorf("%w: no principal %q; the file has: %s", ErrInvalidAuthFile, input.Clip(name), strings.Join(a.Current().Names(), ", "))
	}
	return Caller{Auth: a, Name: name}, nil
}
