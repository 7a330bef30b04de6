package accesstoken

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

// ErrInvalidToken reports an access token that failed a check; the
// wrapping error says which, never what the token held.
var ErrInvalidToken = errors.New("invalid access token")

// ErrKeysUnavailable reports that the issuer's metadata or keys could not
// be fetched: the token was neither accepted nor judged, and a retry may
// succeed.
var ErrKeysUnavailable = errors.New("authorization server keys unavailable")

// maxJWKSBytes bounds a JWK Set document.
const maxJWKSBytes = 1 << 20

// maxTokenBytes bounds an access token: far beyond any real one.
const maxTokenBytes = 16 << 10

// Config configures a Verifier.
type Config struct {
	// Resource is this server's resource identifier; aud must contain it.
	Resource string
	// Issuers are the trusted issuer identifiers.
	Issuers []string
	// Algorithms are the allowed JWS algorithms (non-empty; no none, no
	// HMAC).
	Algorithms []string
	// Skew is the tolerance on exp, nbf and iat.
	Skew time.Duration
	// Refetch is the shortest time between two key fetches of one issuer.
	Refetch time.Duration
	// HTTPClient fetches metadata and keys (nil: a client with a 10 s
	// timeout).
	HTTPClient *http.Client
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Token is a validated access token.
type Token struct {
	// Issuer is the verified iss.
	Issuer string
	// Expiry is the verified exp.
	Expiry time.Time
	// Scopes are the token's scopes (scope, space-separated, or scp).
	Scopes []string
	// Claims are all of the token's verified claims.
	Claims map[string]any
}

// Verifier validates access tokens against the configured issuers' keys.
// It is safe for concurrent use.
type Verifier struct {
	cfg     Config
	algs    []jose.SignatureAlgorithm
	issuers map[string]*issuerKeys
}

// issuerKeys caches one issuer's keys.
type issuerKeys struct {
	issuer string
	// fetchMu is held across a fetch: concurrent fetches are one. A token
	// whose key is cached never waits for it.
	fetchMu sync.Mutex
	mu      sync.Mutex // guards the fields below; never held across a fetch
	keys    *jose.JSONWebKeySet
	last    time.Time // when the last fetch (successful or not) started
	err     error     // the last fetch's failure, until one succeeds
}

// cached returns the cached keys that fit kid and alg.
func (ik *issuerKeys) cached(kid, alg string) []jose.JSONWebKey {
	ik.mu.Lock()
	defer ik.mu.Unlock()
	if ik.keys == nil {
		return nil
	}
	return usable(ik.keys, kid, alg)
}

// New returns a Verifier for cfg.
func New(cfg Config) (*Verifier, error) {
	if cfg.Resource == "" || len(cfg.Issuers) == 0 || len(cfg.Algorithms) == 0 {
		return nil, errors.New("accesstoken: resource, issuers and algorithms are required")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	v := &Verifier{cfg: cfg, issuers: map[string]*issuerKeys{}}
	for _, a := range cfg.Algorithms {
		alg := jose.SignatureAlgorithm(a)
		if a == "none" || strings.HasPrefix(a, "HS") {
			return nil, fmt.Errorf("accesstoken: algorithm %s is not allowed", a)
		}
		v.algs = append(v.algs, alg)
	}
	for _, iss := range cfg.Issuers {
		v.issuers[iss] = &issuerKeys{issuer: iss}
	}
	return v, nil
}

// LooksLikeJWT reports whether s has the shape of a JWS compact
// serialization (three dot-separated parts), without judging it.
func LooksLikeJWT(s string) bool {
	return strings.Count(s, ".") == 2 && len(s) <= maxTokenBytes
}

// Verify validates raw and returns its claims. A token that fails a check
// is an error matching ErrInvalidToken saying which; an issuer whose keys
// cannot be fetched is ErrKeysUnavailable.
func (v *Verifier) Verify(ctx context.Context, raw string) (*Token, error) {
	if len(raw) > maxTokenBytes {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrInvalidToken, maxTokenBytes)
	}
	tok, err := jwt.ParseSigned(raw, v.algs)
	if err != nil {
		// go-jose's parse errors name the algorithm or the part that is
		// malformed, never the token's content.
		return nil, fmt.Errorf("%w: not a JWS signed with one of the allowed algorithms (%s)", ErrInvalidToken, strings.Join(v.cfg.Algorithms, ", "))
	}
	if len(tok.Headers) != 1 {
		return nil, fmt.Errorf("%w: exactly one signature is required", ErrInvalidToken)
	}
	hdr := tok.Headers[0]
	var unverified struct {
		Issuer string `json:"iss"`
	}
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return nil, fmt.Errorf("%w: the claims are not a JSON object", ErrInvalidToken)
	}
	ik := v.issuers[unverified.Issuer]
	if ik == nil {
		return nil, fmt.Errorf("%w: the issuer is not one this server trusts (%s)", ErrInvalidToken, strings.Join(v.cfg.Issuers, ", "))
	}
	keys, err := v.keysFor(ctx, ik, hdr.KeyID, hdr.Algorithm)
	if err != nil {
		return nil, err
	}
	var std jwt.Claims
	var all map[string]any
	verified := false
	for _, k := range keys {
		if err := tok.Claims(k.Key, &std, &all); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return nil, fmt.Errorf("%w: the signature does not verify with the issuer's key", ErrInvalidToken)
	}
	if std.Expiry == nil {
		return nil, fmt.Errorf("%w: the token has no exp", ErrInvalidToken)
	}
	err = std.ValidateWithLeeway(jwt.Expected{
		Issuer:      ik.issuer,
		AnyAudience: jwt.Audience{v.cfg.Resource},
		Time:        v.cfg.Now(),
	}, v.cfg.Skew)
	switch {
	case errors.Is(err, jwt.ErrExpired):
		return nil, fmt.Errorf("%w: the token has expired", ErrInvalidToken)
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return nil, fmt.Errorf("%w: the token is not valid yet (nbf or iat is in the future)", ErrInvalidToken)
	case errors.Is(err, jwt.ErrInvalidAudience):
		return nil, fmt.Errorf("%w: the token's audience (aud) does not include this server's resource %s; request the token with resource=%s (RFC 8707)", ErrInvalidToken, v.cfg.Resource, v.cfg.Resource)
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return nil, fmt.Errorf("%w: the issuer is not one this server trusts", ErrInvalidToken)
	case err != nil:
		return nil, fmt.Errorf("%w: the claims are invalid", ErrInvalidToken)
	}
	return &Token{Issuer: ik.issuer, Expiry: std.Expiry.Time(), Scopes: scopesOf(all), Claims: all}, nil
}

// scopesOf returns a token's scopes: scope (space-separated, RFC 9068) or
// scp (an array or a string, as some providers send).
func scopesOf(claims map[string]any) []string {
	var out []string
	add := func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, strings.Fields(v)...)
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	add(claims["scope"])
	add(claims["scp"])
	slices.Sort(out)
	return slices.Compact(out)
}

// keysFor returns the issuer's keys that may verify a token with kid and
// alg, fetching the keys when none are cached or, at most once per refetch
// interval, when none has the kid.
func (v *Verifier) keysFor(ctx context.Context, ik *issuerKeys, kid, alg string) ([]jose.JSONWebKey, error) {
	if ks := ik.cached(kid, alg); len(ks) > 0 {
		return ks, nil
	}
	ik.fetchMu.Lock()
	defer ik.fetchMu.Unlock()
	// A fetch that finished while this one waited may have brought the key.
	if ks := ik.cached(kid, alg); len(ks) > 0 {
		return ks, nil
	}
	now := v.cfg.Now()
	ik.mu.Lock()
	recent := !ik.last.IsZero() && now.Sub(ik.last) < v.cfg.Refetch
	have, lastErr := ik.keys != nil, ik.err
	if !recent {
		ik.last = now
	}
	ik.mu.Unlock()
	if recent {
		if !have {
			return nil, fmt.Errorf("%w: issuer %s: %v (retried at most every %s)", ErrKeysUnavailable, ik.issuer, lastErr, v.cfg.Refetch)
		}
		return nil, fmt.Errorf("%w: no key of the issuer matches the token's key id and algorithm", ErrInvalidToken)
	}
	// The fetch outlives the request that started it (it has its own
	// timeout): a client hanging up must not count as a failed fetch.
	set, err := v.fetch(context.WithoutCancel(ctx), ik.issuer)
	ik.mu.Lock()
	if err != nil {
		// Keep the keys we had: a provider briefly down must not lock
		// out the tokens its current keys signed.
		ik.err = err
	} else {
		ik.keys, ik.err = set, nil
	}
	have = ik.keys != nil
	ik.mu.Unlock()
	if !have {
		return nil, fmt.Errorf("%w: issuer %s: %v", ErrKeysUnavailable, ik.issuer, err)
	}
	if ks := ik.cached(kid, alg); len(ks) > 0 {
		return ks, nil
	}
	return nil, fmt.Errorf("%w: no key of the issuer matches the token's key id and algorithm", ErrInvalidToken)
}

// usable returns the public signing keys of set with kid (any key when
// kid is empty) whose type fits alg.
func usable(set *jose.JSONWebKeySet, kid, alg string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, k := range set.Keys {
		if (kid != "" && k.KeyID != kid) || (k.Use != "" && k.Use != "sig") || (k.Algorithm != "" && k.Algorithm != alg) {
			continue
		}
		if !k.IsPublic() || !kindFits(k.Key, alg) {
			continue
		}
		out = append(out, k)
	}
	return out
}

// kindFits reports whether key is of the type alg needs.
func kindFits(key any, alg string) bool {
	switch key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		return strings.HasPrefix(alg, "ES")
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// fetch finds the issuer's jwks_uri through its metadata and fetches the
// key set.
func (v *Verifier) fetch(ctx context.Context, issuer string) (*jose.JSONWebKeySet, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	meta, err := auth.GetAuthServerMetadata(ctx, issuer, v.cfg.HTTPClient)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	if meta == nil {
		return nil, errors.New("metadata: no RFC 8414 or OpenID Connect discovery document was found")
	}
	if meta.JWKSURI == "" {
		return nil, errors.New("metadata: no jwks_uri")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, meta.JWKSURI, nil)
	if err != nil {
		return nil, fmt.Errorf("jwks_uri: %w", err)
	}
	req.Header.Set("Accept", "application/json, application/jwk-set+json")
	res, err := v.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jwks: status %d", res.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "application/json" && mt != "application/jwk-set+json" {
		return nil, fmt.Errorf("jwks: content type %q is not JSON", res.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("jwks: larger than %d bytes", maxJWKSBytes)
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("jwks: not a JWK Set: %w", err)
	}
	// A key this library cannot read (an unknown kty, an encryption key
	// of a kind it does not know) is skipped, not fatal to the others.
	set := &jose.JSONWebKeySet{}
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		if json.Unmarshal(raw, &k) == nil {
			set.Keys = append(set.Keys, k)
		}
	}
	return set, nil
}
