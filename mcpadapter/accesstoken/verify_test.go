package accesstoken

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// issuer is an RFC 8414 metadata document and a JWK Set on httptest, whose
// JWK Set answers wait on gate while it is armed.
type issuer struct {
	srv     *httptest.Server
	keys    jose.JSONWebKeySet
	gate    chan struct{}
	armed   atomic.Bool
	fetches atomic.Int64
	waiting atomic.Int64
}

func newIssuer(t *testing.T, key jose.JSONWebKey) *issuer {
	is := &issuer{keys: jose.JSONWebKeySet{Keys: []jose.JSONWebKey{key.Public()}}, gate: make(chan struct{})}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			json.NewEncoder(w).Encode(map[string]any{
				"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/jwks", "authorization_endpoint": is.srv.URL + "/auth",
				"token_endpoint": is.srv.URL + "/token", "response_types_supported": []string{"code"},
				"code_challenge_methods_supported": []string{"S256"},
			})
		case "/jwks":
			is.fetches.Add(1)
			if is.armed.Load() {
				is.waiting.Add(1)
				<-is.gate
			}
			json.NewEncoder(w).Encode(is.keys)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(is.srv.Close)
	return is
}

func ecKey(t *testing.T, kid string) jose.JSONWebKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return jose.JSONWebKey{Key: k, KeyID: kid, Algorithm: "ES256", Use: "sig"}
}

func signed(t *testing.T, key jose.JSONWebKey, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// A token whose key is cached is judged while another token's unknown kid
// has a key fetch hanging at a slow provider; the fetch, once it returns,
// counts once.
func TestCachedKeysDoNotWaitForAFetch(t *testing.T) {
	t.Parallel()
	key := ecKey(t, "k1")
	is := newIssuer(t, key)
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	v, err := New(Config{Resource: "https://rs.example/mcp", Issuers: []string{is.srv.URL}, Algorithms: []string{"ES256"},
		Skew: time.Second, Refetch: time.Minute, Now: func() time.Time { return time.Unix(0, now.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]any{"iss": is.srv.URL, "aud": "https://rs.example/mcp", "sub": "w", "scope": "a b", "exp": time.Now().Add(time.Hour).Unix()}
	good := signed(t, key, claims)
	ctx := context.Background()
	tok, err := v.Verify(ctx, good)
	if err != nil || len(tok.Scopes) != 2 || tok.Claims["sub"] != "w" {
		t.Fatalf("good token: %+v %v", tok, err)
	}
	// Past the refetch interval, an unknown kid fetches again; the
	// provider hangs.
	now.Add(int64(2 * time.Minute))
	is.armed.Store(true)
	unknown := signed(t, ecKey(t, "k-unknown"), claims)
	done := make(chan error, 1)
	go func() { _, err := v.Verify(ctx, unknown); done <- err }()
	testwait.For(t, "the unknown kid's key fetch to reach the provider", func() bool { return is.waiting.Load() == 1 })
	if _, err := v.Verify(ctx, good); err != nil {
		t.Fatalf("a cached key's token while a fetch hangs: %v", err)
	}
	close(is.gate)
	select {
	case err := <-done:
		if !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("unknown kid: %v", err)
		}
	case <-testwait.Context(t).Done():
		t.Fatal("the unknown kid's verification never returned")
	}
	if got := is.fetches.Load(); got != 2 {
		t.Fatalf("%d key fetches, want 2", got)
	}
	// Within the interval another unknown kid fetches nothing.
	if _, err := v.Verify(ctx, signed(t, ecKey(t, "k-other"), claims)); !errors.Is(err, ErrInvalidToken) || is.fetches.Load() != 2 {
		t.Fatalf("second unknown kid: %v, %d fetches", err, is.fetches.Load())
	}
}
