package httpfront

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// The scopes and clients of the OAuth tests' provider.
const (
	scopeSubmit  = "tasks:submit"
	scopeWork    = "tasks:work"
	scopeObserve = "tasks:observe"
	tokStatic    = "static-planner-token-0123456789"
)

var (
	clientWorker    = oidcClient{ID: "worker-1", Secret: "worker-1-secret-0123456789", Scope: scopeWork}
	clientSubmitter = oidcClient{ID: "submitter-1", Secret: "submitter-1-secret-0123456789", Scope: scopeSubmit + " " + scopeObserve}
	clientReader    = oidcClient{ID: "reader-1", Secret: "reader-1-secret-0123456789", Scope: scopeObserve}
	clientStranger  = oidcClient{ID: "stranger", Secret: "stranger-secret-0123456789", Scope: scopeWork}
	clientCapped    = oidcClient{ID: "capped-1", Secret: "capped-1-secret-0123456789", Scope: scopeSubmit + " " + scopeWork}
)

// oauthFixture is a server whose auth file trusts a real OpenID provider,
// beside a static-token principal.
type oauthFixture struct {
	*httpFixture
	op       *oidcProvider
	resource string
	keys     []jose.JSONWebKey // the provider's keys, signing key first
	offset   atomic.Int64      // added to the token clock (ns)
	jwks     atomic.Int64      // JWK Set fetches by the server
}

// countingRT counts the server's fetches of JWK Sets.
type countingRT struct{ n *atomic.Int64 }

func (c countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/jwks") {
		c.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func newOAuthFixture(t *testing.T) *oauthFixture {
	t.Helper()
	of := &oauthFixture{keys: []jose.JSONWebKey{newSigningKey(t, "key-1")}}
	of.op = startOIDC(t, []oidcClient{clientWorker, clientSubmitter, clientReader, clientStranger, clientCapped},
		[]string{scopeSubmit, scopeWork, scopeObserve}, of.keys)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	of.resource = "http://" + ln.Addr().String() + MCPPath
	doc := fmt.Sprintf(`{"principals": [{"name": "static-planner", "token_sha256": %q, "roles": ["submit"]}],
	  "oauth": {"resource": %q, "authorization_servers": [%q], "key_refetch_seconds": 1,
	    "scopes": {%q: ["submit"], %q: ["work"], %q: ["observe"]},
	    "principals": [
	      {"claim": "client_id", "value": "worker-*", "name_claim": "client_id"},
	      {"claim": "client_id", "value": "submitter-*", "name_claim": "client_id", "workflows": ["oauth-*"]},
	      {"claim": "client_id", "value": "reader-1", "name": "reader"},
	      {"claim": "client_id", "value": "capped-1", "name": "capped", "roles": ["submit"]}
	    ]}}`, principal.TokenDigest(tokStatic), of.resource, of.op.issuer, scopeSubmit, scopeWork, scopeObserve)
	ps, err := principal.ParseAuthFile([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	f, _ := newHTTPStore(t)
	h, err := New(f.srv, Options{
		Principals: principal.NewAuthenticator(ps), Metrics: f.metrics, Logger: f.logger,
		OAuthHTTPClient: &http.Client{Transport: countingRT{&of.jwks}},
		TokenClock:      func() time.Time { return time.Now().Add(time.Duration(of.offset.Load())) },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	f.ts = httptest.NewUnstartedServer(h)
	f.ts.Listener.Close()
	f.ts.Listener = ln
	f.ts.Start()
	f.url = f.ts.URL + MCPPath
	t.Cleanup(func() {
		f.ts.Close()
		h.AbortCalls()
		h.CloseSessions()
	})
	of.httpFixture = f
	return of
}

// challengeOf parses r's WWW-Authenticate Bearer challenge.
func challengeOf(t *testing.T, r *rawResponse) map[string]string {
	t.Helper()
	cs, err := oauthex.ParseWWWAuthenticate(r.header.Values("WWW-Authenticate"))
	if err != nil || len(cs) != 1 || cs[0].Scheme != "bearer" {
		t.Fatalf("WWW-Authenticate %q: %v", r.header.Values("WWW-Authenticate"), err)
	}
	return cs[0].Params
}

// listTools posts a 2026-07-28 tools/list with token.
func (of *oauthFixture) listTools(token string) *rawResponse {
	of.t.Helper()
	h := modernHeaders("tools/list")
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	return of.post(modernBody(1, "tools/list", nil, nil), h)
}

// The server publishes Protected Resource Metadata (RFC 9728) at the bare
// and the path-suffixed well-known paths, which the SDK's own client
// accepts for this resource, and a request without a token gets a 401 whose
// challenge points there.
func TestOAuthProtectedResourceMetadata(t *testing.T) {
	t.Parallel()
	of := newOAuthFixture(t)
	metaURL := strings.TrimSuffix(of.ts.URL, "/") + WellKnownResourcePath + MCPPath
	for _, u := range []string{metaURL, of.ts.URL + WellKnownResourcePath} {
		m, err := oauthex.GetProtectedResourceMetadata(of.ctx, u, of.resource, http.DefaultClient)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != of.op.issuer ||
			strings.Join(m.ScopesSupported, " ") != "tasks:observe tasks:submit tasks:work" {
			t.Fatalf("%s: metadata %+v", u, m)
		}
	}
	// Public: a foreign Origin gets it too, with CORS.
	r := of.do(http.MethodGet, metaURL, nil, map[string]string{"Origin": "https://inspector.example"})
	if r.status != http.StatusOK || r.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("metadata with a foreign Origin: HTTP %d %v", r.status, r.header)
	}
	if r := of.do(http.MethodGet, of.ts.URL+WellKnownResourcePath+"/other", nil, nil); r.status != http.StatusNotFound {
		t.Fatalf("metadata of another resource path: HTTP %d, want 404", r.status)
	}

	r = of.listTools("")
	r.wantError(t, http.StatusUnauthorized, -32600)
	ch := challengeOf(t, r)
	if ch["resource_metadata"] != metaURL || ch["error"] != "" || ch["scope"] != "tasks:observe tasks:submit tasks:work" {
		t.Fatalf("401 challenge %v, want resource_metadata=%s and every scope", ch, metaURL)
	}
}

// Client-credentials tokens from the provider: a submitter creates, a
// worker claims and completes, over the SDK's client in both eras; the store
// records the principals the tokens map to; a static-token principal works
// beside them; a token missing the scope a tool needs gets 403
// insufficient_scope naming that scope.
func TestOAuthClientCredentialsWorkers(t *testing.T) {
	t.Parallel()
	of := newOAuthFixture(t)
	sub := of.op.clientToken(clientSubmitter, scopeSubmit+" "+scopeObserve, of.resource)
	work := of.op.clientToken(clientWorker, scopeWork, of.resource)
	for i, era := range []string{"", "2025-11-25"} {
		wf := fmt.Sprintf("oauth-%d", i)
		submitter := of.client(era, sub, nil)
		_, out := callTool(t, submitter, manifest.ToolCreate, map[string]any{"workflow_id": wf, "node_id": "a"})
		if task, _ := out["task"].(map[string]any); task == nil || task["state"] != "pending" {
			t.Fatalf("%q: create: %v", era, out)
		}
		worker := of.client(era, work, nil)
		_, claim := callTool(t, worker, manifest.ToolClaim, map[string]any{"owner": "worker-1:a", "workflow_id": wf})
		if claim["lease"] == nil {
			t.Fatalf("%q: claim: %v", era, claim)
		}
		args := holderArgs(claim)
		args["result"] = map[string]any{"ok": true}
		if res, out := callTool(t, worker, manifest.ToolComplete, args); res.IsError {
			t.Fatalf("%q: complete: %v", era, out)
		}
		task, err := of.store.Task(of.ctx, args["task_id"].(string))
		if err != nil {
			t.Fatal(err)
		}
		if task.CreatedBy != "submitter-1" {
			t.Fatalf("%q: created_by %q, want submitter-1", era, task.CreatedBy)
		}
		// The submitter's workflows scope (oauth-*) applies.
		if res, _ := callTool(t, submitter, manifest.ToolCreate, map[string]any{"workflow_id": "release-1", "node_id": "a"}); !res.IsError {
			t.Fatalf("%q: a create outside the submitter's workflows succeeded", era)
		}
	}
	// The static principal keeps working.
	if r := of.listTools(tokStatic); r.status != http.StatusOK {
		t.Fatalf("static token: HTTP %d %s", r.status, clipBody(r.body))
	}
	// The worker's token lacks tasks:submit: step-up 403.
	r := of.post(modernBody(2, "tools/call", map[string]any{"name": manifest.ToolCreate, "arguments": map[string]any{"workflow_id": "oauth-x", "node_id": "a"}}, nil),
		modernHeaders("tools/call", "Authorization", "Bearer "+work, "Mcp-Name", manifest.ToolCreate))
	r.wantError(t, http.StatusForbidden, -32600)
	if ch := challengeOf(t, r); ch["error"] != "insufficient_scope" || ch["scope"] != scopeSubmit || ch["resource_metadata"] == "" {
		t.Fatalf("403 challenge %v, want insufficient_scope naming %s", ch, scopeSubmit)
	}
	// The reader (observe only) may list, not claim.
	read := of.op.clientToken(clientReader, scopeObserve, of.resource)
	if r := of.listTools(read); r.status != http.StatusOK {
		t.Fatalf("reader: HTTP %d %s", r.status, clipBody(r.body))
	}
	r = of.post(modernBody(3, "tools/call", map[string]any{"name": manifest.ToolClaim, "arguments": map[string]any{"owner": "reader:a"}}, nil),
		modernHeaders("tools/call", "Authorization", "Bearer "+read, "Mcp-Name", manifest.ToolClaim))
	if ch := challengeOf(t, r); r.status != http.StatusForbidden || ch["scope"] != scopeWork {
		t.Fatalf("reader's claim: HTTP %d %v", r.status, ch)
	}
	// /metrics needs observe, named as the OAuth scope.
	r = of.do(http.MethodGet, of.ts.URL+MetricsPath, nil, map[string]string{"Authorization": "Bearer " + work})
	if ch := challengeOf(t, r); r.status != http.StatusForbidden || ch["scope"] != scopeObserve {
		t.Fatalf("/metrics with the worker's token: HTTP %d %v", r.status, ch)
	}
	// A valid token that no rule maps is refused: 403.
	stranger := of.op.clientToken(clientStranger, scopeWork, of.resource)
	if r := of.listTools(stranger); r.status != http.StatusForbidden || !strings.Contains(string(r.body), "no rule") {
		t.Fatalf("unmapped client: HTTP %d %s", r.status, clipBody(r.body))
	}
	for _, tok := range []string{sub, work, read, stranger} {
		if strings.Contains(of.logs.String(), tok) {
			t.Fatal("a token appears in the server's logs")
		}
	}
}

// A role the token's scopes grant but its rule's roles take away is no
// step-up: a token with more scopes would not get it, so the call is not
// refused with 403 insufficient_scope (on which an OAuth client starts a new
// authorization, in vain) but reaches the tool, which refuses it as a tool
// error. A role no scope of the token grants still gets the step-up 403.
func TestOAuthRoleCapIsNotStepUp(t *testing.T) {
	t.Parallel()
	of := newOAuthFixture(t)
	capped := of.op.clientToken(clientCapped, scopeSubmit+" "+scopeWork, of.resource)
	r := of.post(modernBody(2, "tools/call", map[string]any{"name": manifest.ToolClaim, "arguments": map[string]any{"owner": "capped:a"}}, nil),
		modernHeaders("tools/call", "Authorization", "Bearer "+capped, "Mcp-Name", manifest.ToolClaim))
	if r.status != http.StatusOK || len(r.header.Values("WWW-Authenticate")) != 0 {
		t.Fatalf("capped role: HTTP %d, WWW-Authenticate %q, want 200 and a tool error", r.status, r.header.Values("WWW-Authenticate"))
	}
	if body := string(r.body); !strings.Contains(body, `"isError":true`) || !strings.Contains(body, "forbidden") {
		t.Fatalf("capped role: want a forbidden tool error, got %s", clipBody(r.body))
	}
	// The role it keeps works.
	c := of.client("", capped, nil)
	if res, out := callTool(t, c, manifest.ToolCreate, map[string]any{"workflow_id": "capped-1", "node_id": "a"}); res.IsError {
		t.Fatalf("create with the kept role: %v", out)
	}
	// Without tasks:work in the token, the same call is a step-up 403.
	sub := of.op.clientToken(clientCapped, scopeSubmit, of.resource)
	r = of.post(modernBody(3, "tools/call", map[string]any{"name": manifest.ToolClaim, "arguments": map[string]any{"owner": "capped:a"}}, nil),
		modernHeaders("tools/call", "Authorization", "Bearer "+sub, "Mcp-Name", manifest.ToolClaim))
	if ch := challengeOf(t, r); r.status != http.StatusForbidden || ch["error"] != "insufficient_scope" || ch["scope"] != scopeWork {
		t.Fatalf("claim without tasks:work: HTTP %d %v", r.status, ch)
	}
}

// Tokens that must not pass: each is refused with 401 and an invalid_token
// challenge pointing to the metadata, saying what was wrong and never
// repeating the token.
func TestOAuthRefusesBadTokens(t *testing.T) {
	t.Parallel()
	of := newOAuthFixture(t)
	good := of.op.clientToken(clientWorker, scopeWork, of.resource)
	if r := of.listTools(good); r.status != http.StatusOK {
		t.Fatalf("good token: HTTP %d %s", r.status, clipBody(r.body))
	}
	parts := strings.Split(good, ".")
	var claims map[string]any
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(payload, &claims) != nil {
		t.Fatalf("the provider's token is not a JWT: %v", err)
	}
	if claims["aud"] != of.resource && !contains(claims["aud"], of.resource) {
		t.Fatalf("the provider's token has aud %v, want %s", claims["aud"], of.resource)
	}
	// sign signs claims with key (kid from key).
	sign := func(key jose.JSONWebKey, alg jose.SignatureAlgorithm, c map[string]any) string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("at+jwt"))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := jwt.Signed(s).Claims(c).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for kk, vv := range claims {
			c[kk] = vv
		}
		c[k] = v
		return c
	}
	b64 := func(v any) string { b, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(b) }
	otherIssuer := startOIDC(t, []oidcClient{clientWorker}, []string{scopeWork}, []jose.JSONWebKey{newSigningKey(t, "other-1")})
	stranger := newSigningKey(t, "key-1") // same kid as the provider's key, another key
	unknown := newSigningKey(t, "key-unknown")

	cases := []struct{ name, token, want string }{
		{"wrong audience", of.op.clientToken(clientWorker, scopeWork, "http://127.0.0.1:1/elsewhere"), "audience"},
		{"wrong issuer", otherIssuer.clientToken(clientWorker, scopeWork, of.resource), "issuer"},
		{"alg none", b64(map[string]any{"alg": "none", "kid": "key-1"}) + "." + parts[1] + ".", "allowed algorithms"},
		{"alg HS256 keyed with the kid", b64(map[string]any{"alg": "HS256", "kid": "key-1"}) + "." + parts[1] + "." + parts[2], "allowed algorithms"},
		{"re-signed with another key", sign(stranger, jose.ES256, claims), "signature"},
		{"tampered scope", parts[0] + "." + b64(with("scope", "tasks:work tasks:submit")) + "." + parts[2], "signature"},
		{"tampered subject", parts[0] + "." + b64(with("client_id", "worker-2")) + "." + parts[2], "signature"},
		{"unknown key", sign(unknown, jose.ES256, claims), "no key"},
		{"not a JWT", "a.b.c", "allowed algorithms"},
	}
	for _, c := range cases {
		r := of.listTools(c.token)
		r.wantError(t, http.StatusUnauthorized, -32600)
		ch := challengeOf(t, r)
		if ch["error"] != "invalid_token" || !strings.HasSuffix(ch["resource_metadata"], WellKnownResourcePath+MCPPath) {
			t.Errorf("%s: challenge %v", c.name, ch)
		}
		if !strings.Contains(r.rpc.Error.Message, c.want) {
			t.Errorf("%s: message %q, want it to say %q", c.name, r.rpc.Error.Message, c.want)
		}
		if strings.Contains(string(r.body), c.token) || strings.Contains(of.logs.String(), c.token) {
			t.Errorf("%s: the token is echoed in the answer or the logs", c.name)
		}
	}
	// A flood of tokens with unknown key ids costs at most one key fetch
	// per refetch interval (1 s) of the time the flood took.
	before, start := of.jwks.Load(), time.Now()
	for range 20 {
		of.listTools(sign(unknown, jose.ES256, claims)).wantError(t, http.StatusUnauthorized, -32600)
	}
	if got, bound := of.jwks.Load()-before, int64(time.Since(start)/time.Second)+1; got > bound {
		t.Fatalf("20 unknown-kid tokens fetched the keys %d times in %s; at most %d were allowed", got, time.Since(start), bound)
	}
	// Expired: the provider's good token, judged two hours later.
	of.offset.Store(int64(2 * time.Hour))
	r := of.listTools(good)
	r.wantError(t, http.StatusUnauthorized, -32600)
	if !strings.Contains(r.rpc.Error.Message, "expired") || challengeOf(t, r)["error"] != "invalid_token" {
		t.Fatalf("expired token: %s", clipBody(r.body))
	}
	// Not yet valid: a token signed by the provider's own key whose nbf is
	// an hour ahead of the server's clock.
	of.offset.Store(0)
	r = of.listTools(sign(of.keys[0], jose.ES256, with("nbf", time.Now().Add(time.Hour).Unix())))
	if r.status != http.StatusUnauthorized || !strings.Contains(r.rpc.Error.Message, "not valid yet") {
		t.Fatalf("nbf in the future: HTTP %d %s", r.status, clipBody(r.body))
	}
	// The same key and claims, nbf in the past: accepted (the check above
	// failed for nbf alone).
	if r := of.listTools(sign(of.keys[0], jose.ES256, with("nbf", time.Now().Add(-time.Minute).Unix()))); r.status != http.StatusOK {
		t.Fatalf("a token signed with the provider's key: HTTP %d %s", r.status, clipBody(r.body))
	}
}

func contains(v any, s string) bool {
	a, _ := v.([]any)
	for _, e := range a {
		if e == s {
			return true
		}
	}
	return false
}

// The provider rotates its signing key: tokens signed with the new key are
// accepted without a restart (an unknown kid refetches the keys once the
// refetch interval has passed), and tokens of the old key still pass while
// the provider publishes it.
func TestOAuthKeyRotation(t *testing.T) {
	t.Parallel()
	of := newOAuthFixture(t)
	old := of.op.clientToken(clientWorker, scopeWork, of.resource)
	if r := of.listTools(old); r.status != http.StatusOK {
		t.Fatalf("before rotation: HTTP %d %s", r.status, clipBody(r.body))
	}
	fetches := of.jwks.Load()
	of.op.rotate([]jose.JSONWebKey{newSigningKey(t, "key-2"), of.keys[0]})
	fresh := of.op.clientToken(clientWorker, scopeWork, of.resource)
	if h, _ := jwt.ParseSigned(fresh, []jose.SignatureAlgorithm{jose.ES256}); h == nil || h.Headers[0].KeyID != "key-2" {
		t.Fatal("the rotated provider did not sign with key-2")
	}
	// Past the refetch interval (1 s in the auth file) on the token clock.
	of.offset.Store(int64(2 * time.Second))
	if r := of.listTools(fresh); r.status != http.StatusOK {
		t.Fatalf("after rotation: HTTP %d %s", r.status, clipBody(r.body))
	}
	if of.jwks.Load() != fetches+1 {
		t.Fatalf("the rotation cost %d key fetches, want 1", of.jwks.Load()-fetches)
	}
	if r := of.listTools(old); r.status != http.StatusOK {
		t.Fatalf("old key's token after rotation: HTTP %d %s", r.status, clipBody(r.body))
	}
}

// Without node: an issuer whose metadata cannot be fetched leaves a token
// unjudged, 503 with Retry-After (not a 401 that would send the client
// through OAuth again); and without an oauth section there is no metadata
// and the challenge names none.
func TestOAuthIssuerDownAndNoOAuthSection(t *testing.T) {
	t.Parallel()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + dead.Addr().String()
	dead.Close() // nothing listens there now
	doc := fmt.Sprintf(`{"principals": [], "oauth": {"resource": "http://127.0.0.1:1/mcp", "authorization_servers": [%q],
	  "scopes": {"s": ["work"]}, "principals": [{"claim": "sub", "value": "*", "name_claim": "sub"}]}}`, issuer)
	ps, err := principal.ParseAuthFile([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	f := newHTTPFixture(t, Options{Principals: principal.NewAuthenticator(ps)})
	key := newSigningKey(t, "k")
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(map[string]any{"iss": issuer, "sub": "w", "aud": "http://127.0.0.1:1/mcp", "exp": time.Now().Add(time.Hour).Unix()}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	r := f.post(modernBody(1, "tools/list", nil, nil), modernHeaders("tools/list", "Authorization", "Bearer "+tok))
	r.wantError(t, http.StatusServiceUnavailable, -32600)
	if r.header.Get("Retry-After") == "" || strings.Contains(string(r.body), tok) || strings.Contains(f.logs.String(), tok) {
		t.Fatalf("issuer down: %v %s", r.header, clipBody(r.body))
	}

	plain := newHTTPFixture(t, Options{Principals: principal.NewAuthenticator(testPrincipals(t, tokPlanner))})
	if r := plain.do(http.MethodGet, plain.ts.URL+WellKnownResourcePath+MCPPath, nil, nil); r.status != http.StatusNotFound {
		t.Fatalf("metadata without an oauth section: HTTP %d", r.status)
	}
	r = plain.post(modernBody(1, "tools/list", nil, nil), modernHeaders("tools/list"))
	if got := r.header.Get("WWW-Authenticate"); r.status != http.StatusUnauthorized || got != `Bearer realm="graph-engineering-mcp"` {
		t.Fatalf("401 without an oauth section: HTTP %d %q", r.status, got)
	}
}

// The role × tool matrix with access-token principals, in both eras: each
// lists exactly its scopes' tools, calls them without a forbidden error,
// and a tool outside its scopes is refused before MCP (403
// insufficient_scope, which the SDK client surfaces as an error and which
// ends its session).
func TestOAuthRoleToolMatrix(t *testing.T) {
	t.Parallel()
	of := newOAuthFixture(t)
	seed, err := of.store.CreateTask(of.ctx, "oauth-1", taskgraph.NodeSpec{NodeID: "seed"})
	if err != nil {
		t.Fatal(err)
	}
	argsOf := map[string]map[string]any{
		manifest.ToolCreate:    {"workflow_id": "oauth-1", "node_id": "n"},
		manifest.ToolInspect:   {"task_id": seed.Task.TaskID},
		manifest.ToolClaim:     {"owner": "worker-1:1", "workflow_id": "oauth-1"},
		manifest.ToolHeartbeat: {"task_id": seed.Task.TaskID, "owner": "worker-1:1", "generation": 1, "claim_token": "x"},
		manifest.ToolComplete:  {"task_id": seed.Task.TaskID, "owner": "worker-1:1", "generation": 1, "claim_token": "x", "result": 1},
		manifest.ToolFail:      {"task_id": seed.Task.TaskID, "owner": "worker-1:1", "generation": 1, "claim_token": "x", "error": "e"},
		manifest.ToolCancel:    {"task_id": seed.Task.TaskID, "owner": "worker-1:1", "generation": 1, "claim_token": "x"},
	}
	type row struct {
		c     oidcClient
		scope string
		tools []string
	}
	rows := []row{
		{clientWorker, scopeWork, []string{manifest.ToolCancel, manifest.ToolClaim, manifest.ToolComplete, manifest.ToolFail, manifest.ToolHeartbeat, manifest.ToolInspect}},
		{clientSubmitter, scopeSubmit + " " + scopeObserve, []string{manifest.ToolCreate, manifest.ToolInspect}},
		{clientReader, scopeObserve, []string{manifest.ToolInspect}},
	}
	for _, era := range []string{"", "2025-11-25"} {
		for _, rw := range rows {
			tok := of.op.clientToken(rw.c, rw.scope, of.resource)
			cs := of.client(era, tok, nil)
			lt, err := cs.ListTools(of.ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tl := range lt.Tools {
				got = append(got, tl.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, rw.tools) {
				t.Errorf("era %q %s: tools/list = %v, want %v", era, rw.c.ID, got, rw.tools)
			}
			for _, tool := range manifest.AllTools {
				// An HTTP 403 ends the SDK client's session (an OAuth
				// client re-authorizes on it): each call gets its own.
				cs := of.client(era, tok, nil)
				res, err := cs.CallTool(of.ctx, &mcp.CallToolParams{Name: tool, Arguments: argsOf[tool]})
				cs.Close()
				if slices.Contains(rw.tools, tool) {
					if err != nil {
						t.Errorf("era %q %s: %s: %v", era, rw.c.ID, tool, err)
					} else if kind, _ := toolErrorKind(res); kind == "forbidden" {
						t.Errorf("era %q %s: %s refused: %s", era, rw.c.ID, tool, toolText(res))
					}
					continue
				}
				if err == nil {
					t.Errorf("era %q %s: %s outside its scopes was answered: %v", era, rw.c.ID, tool, toolText(res))
				}
			}
		}
	}
}
