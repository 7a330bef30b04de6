package principal

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

const oauthDoc = `{"principals": [{"name": "planner", "token_sha256": "%s", "roles": ["submit"]}],
  "oauth": {"resource": "https://tasks.example.com/mcp", "authorization_servers": ["https://idp.example.com"],
    "scopes": {"tasks:submit": ["submit"], "tasks:work": ["work"], "tasks:all": ["submit", "work", "observe"]},
    "principals": [
      {"claim": "groups", "value": "gpu-*", "name": "gpu-pool", "roles": ["work"], "owners": ["gpu-pool:*"]},
      {"claim": "client_id", "value": "*", "name_claim": "client_id", "workflows": ["ci-*"]}
    ]}}`

func parseOAuth(t *testing.T, mutate func(string) string) (*Principals, error) {
	t.Helper()
	doc := strings.Replace(oauthDoc, "%s", TokenDigest("planner-token-0123456789"), 1)
	if mutate != nil {
		doc = mutate(doc)
	}
	return ParseAuthFile([]byte(doc))
}

// Claims map to principals: the first matching rule names the principal
// (fixed or from a claim), its roles are its scopes' roles capped by the
// rule's, and its workflows and owners are the rule's.
func TestTokenPrincipalMapsClaims(t *testing.T) {
	ps, err := parseOAuth(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := ps.OAuth().ScopesFor(RoleWork); !slices.Equal(got, []string{"tasks:all", "tasks:work"}) {
		t.Fatalf("ScopesFor(work) = %v", got)
	}
	p, err := ps.TokenPrincipal(map[string]any{"groups": []any{"ops", "gpu-a"}, "client_id": "x"}, []string{"tasks:all"})
	if err != nil || p.Name != "gpu-pool" || !slices.Equal(p.Roles, []string{RoleWork}) || !p.FromToken() || !p.OwnerAllowed("gpu-pool:1") {
		t.Fatalf("group rule: %+v %v", p, err)
	}
	p, err = ps.TokenPrincipal(map[string]any{"client_id": "ci-bot"}, []string{"tasks:submit", "unknown"})
	if err != nil || p.Name != "ci-bot" || !slices.Equal(p.Roles, []string{RoleSubmit}) || p.WorkflowAllowed("release-1") || !p.WorkflowAllowed("ci-1") {
		t.Fatalf("client rule: %+v %v", p, err)
	}
	for name, claims := range map[string]map[string]any{
		"no rule":           {"sub": "someone"},
		"name not an id":    {"client_id": "a b"},
		"static name":       {"client_id": "planner"},
		"name not a string": {"client_id": 7.0},
	} {
		if _, err := ps.TokenPrincipal(claims, []string{"tasks:work"}); !errors.Is(err, ErrForbidden) {
			t.Errorf("%s: got %v, want ErrForbidden", name, err)
		}
	}
}

func TestParseAuthFileRefusesBadOAuth(t *testing.T) {
	cases := map[string]struct{ from, to, want string }{
		"http resource":     {`"https://tasks.example.com/mcp"`, `"http://tasks.example.com/mcp"`, "must be an https URL"},
		"no issuer":         {`["https://idp.example.com"]`, `[]`, "authorization_servers must list"},
		"alg none":          {`"scopes"`, `"algorithms": ["none"], "scopes"`, `algorithm "none" is not allowed`},
		"alg HS256":         {`"scopes"`, `"algorithms": ["HS256"], "scopes"`, `algorithm "HS256" is not allowed`},
		"unknown role":      {`"tasks:work": ["work"]`, `"tasks:work": ["admin"]`, `unknown role "admin"`},
		"name and claim":    {`"name": "gpu-pool"`, `"name": "gpu-pool", "name_claim": "sub"`, "exactly one of name and name_claim"},
		"static name taken": {`"name": "gpu-pool"`, `"name": "planner"`, `auth-file principal's`},
		"skew too large":    {`"scopes"`, `"clock_skew_seconds": 3600, "scopes"`, "clock_skew_seconds must be"},
		"unknown key":       {`"scopes"`, `"audience": "x", "scopes"`, `unknown field "audience"`},
	}
	for name, c := range cases {
		if !strings.Contains(oauthDoc, c.from) {
			t.Fatalf("%s: the document has no %s", name, c.from)
		}
		_, err := parseOAuth(t, func(s string) string { return strings.Replace(s, c.from, c.to, 1) })
		if !errors.Is(err, ErrInvalidAuthFile) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want ErrInvalidAuthFile containing %q", name, err, c.want)
		}
	}
}

// An OAuth scope may grant the approve role (approval gates over HTTP),
// and a rule's roles cap it as any other; approve grants no tool.
func TestTokenPrincipalApproveScope(t *testing.T) {
	ps, err := parseOAuth(t, func(s string) string {
		return strings.Replace(s, `"tasks:work": ["work"]`, `"tasks:work": ["work"], "tasks:approve": ["approve"]`, 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := ps.OAuth().ScopesFor(RoleApprove); !slices.Equal(got, []string{"tasks:approve"}) {
		t.Fatalf("ScopesFor(approve) = %v", got)
	}
	p, err := ps.TokenPrincipal(map[string]any{"client_id": "ci-lead"}, []string{"tasks:approve"})
	if err != nil || !slices.Equal(p.Roles, []string{RoleApprove}) || !p.HasRole(RoleApprove) || !p.WorkflowAllowed("ci-1") {
		t.Fatalf("approve scope: %+v %v", p, err)
	}
	if prof := Profile(p); len(prof.AllowedTools) != 0 {
		t.Fatalf("the approve role allows tools %v", prof.AllowedTools)
	}
	for tool, roles := range ToolRoles {
		if slices.Contains(roles, RoleApprove) {
			t.Errorf("tool %s may be called with the approve role", tool)
		}
	}
	// The gpu-pool rule caps its roles to work: an approve scope grants it nothing.
	p, err = ps.TokenPrincipal(map[string]any{"groups": []any{"gpu-a"}}, []string{"tasks:approve", "tasks:work"})
	if err != nil || p.HasRole(RoleApprove) {
		t.Fatalf("capped rule: %+v %v", p, err)
	}
}
