package principal

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseAuthFileRefusesWhatItDoesNotKnow(t *testing.T) {
	d := TokenDigest("some-token-0123456789")
	cases := map[string]struct{ doc, want string }{
		"unknown top key":   {`{"principals": [], "extra": 1}`, `unknown field "extra"`},
		"unknown key":       {`{"principals": [{"name": "a", "token_sha256": "` + d + `", "roles": ["work"], "token": "x"}]}`, `unknown field "token"`},
		"unknown role":      {`{"principals": [{"name": "a", "token_sha256": "` + d + `", "roles": ["admin"]}]}`, `principal "a": unknown role "admin"`},
		"no roles":          {`{"principals": [{"name": "a", "token_sha256": "` + d + `", "roles": []}]}`, `principal "a": roles must list`},
		"bad pattern":       {`{"principals": [{"name": "a", "token_sha256": "` + d + `", "roles": ["work"], "owners": ["a b"]}]}`, `principal "a": owners pattern "a b"`},
		"bad workflow glob": {`{"principals": [{"name": "a", "token_sha256": "` + d + `", "roles": ["work"], "workflows": ["[x]"]}]}`, `workflows pattern "[x]"`},
		"plain token":       {`{"principals": [{"name": "a", "token_sha256": "some-token-0123456789", "roles": ["work"]}]}`, `principal "a": token_sha256 must be the 64 lowercase hex digits`},
		"duplicate name":    {`{"principals": [{"name": "a", "token_sha256": "` + d + `", "roles": ["work"]}, {"name": "a", "token_sha256": "` + TokenDigest("x-token-0123456789") + `", "roles": ["work"]}]}`, `principal "a": the name is used twice`},
		"shared token":      {`{"principals": [{"name": "a", "token_sha256": "` + d + `", "roles": ["work"]}, {"name": "b", "token_sha256": "` + d + `", "roles": ["work"]}]}`, `principal "b": token_sha256 is the same as principal "a"'s`},
		"bad name":          {`{"principals": [{"name": "a b", "token_sha256": "` + d + `", "roles": ["work"]}]}`, `principals[0]: name must match`},
		"no principals":     {`{}`, `"principals" (an array) is required`},
		"trailing":          {`{"principals": []} {}`, `trailing data`},
	}
	for name, c := range cases {
		_, err := ParseAuthFile([]byte(c.doc))
		if !errors.Is(err, ErrInvalidAuthFile) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want ErrInvalidAuthFile containing %q", name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "some-token-0123456789") && name != "plain token" {
			t.Errorf("%s: error repeats a token: %v", name, err)
		}
	}
	// A plain token pasted where its digest belongs is not echoed back.
	_, err := ParseAuthFile([]byte(cases["plain token"].doc))
	if strings.Contains(err.Error(), "some-token-0123456789") {
		t.Errorf("error repeats the token: %v", err)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		pat, s string
		want   bool
	}{
		{"release-*", "release-1", true}, {"release-*", "release-", true}, {"release-*", "prerelease-1", false},
		{"*", "", true}, {"a?c", "abc", true}, {"a?c", "ac", false}, {"gpu-pool:*", "gpu-pool:7", true},
		{"gpu-pool:*", "gpu-pool", false}, {"*-x-*", "a-x-b", true}, {"*-x-*", "a-y-b", false}, {"abc", "abc", true}, {"abc", "abcd", false},
	} {
		if got := globMatch(c.pat, c.s); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", c.pat, c.s, got, c.want)
		}
	}
}

// A Caller resolves against the live table at each use: a reload that
// removes its principal leaves one with no roles.
func TestCallerResolvesAtEachUse(t *testing.T) {
	if p, ok := (Caller{}).Resolve(); ok || p != nil {
		t.Fatalf("the zero Caller resolved to %v, %v; want no principal", p, ok)
	}
	ps, err := ParseAuthFile([]byte(`{"principals": [{"name": "a", "token_sha256": "` + TokenDigest("token-a-0123456789") + `", "roles": ["work"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	auth := NewAuthenticator(ps)
	c := Caller{Auth: auth, Name: "a"}
	if p, ok := c.Resolve(); !ok || !p.HasRole(RoleWork) {
		t.Fatalf("got %+v, %v; want principal a with the work role", p, ok)
	}
	if auth.Current().Authenticate("token-a-0123456789") == nil || auth.Current().Authenticate("token-b-0123456789") != nil {
		t.Fatal("Authenticate does not tell the right token from a wrong one")
	}
	empty, err := ParseAuthFile([]byte(`{"principals": []}`))
	if err != nil {
		t.Fatal(err)
	}
	auth.Replace(empty)
	p, ok := c.Resolve()
	if !ok || len(p.Roles) != 0 || slices.ContainsFunc(AllRoles, p.HasRole) {
		t.Fatalf("after the reload got %+v, %v; want a principal with no roles", p, ok)
	}
}
