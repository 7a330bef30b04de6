// Package accesstoken validates OAuth 2.1 access tokens that are JWTs (RFC
// 9068) for a resource server, as the MCP authorization spec describes it:
// the issuer's keys are found through its metadata (RFC 8414, or OpenID
// Connect discovery, through the Go SDK's auth.GetAuthServerMetadata) and
// its JWK Set, and the signature and claims are checked with go-jose.
//
// # Invariants
//
//   - Only the configured issuers are trusted, and a token's keys are
//     always its own issuer's: the unverified iss only picks which issuer's
//     keys to try, and the verified iss must then equal it.
//   - The signature algorithm is one of an allow-list (never "none", never
//     HMAC); a key is used only when its kty fits the algorithm and its use
//     (when given) is "sig".
//   - aud must contain the configured resource exactly (RFC 8707); exp is
//     required; exp, nbf and iat are judged with the configured skew at the
//     verifier's clock.
//   - Keys are cached per issuer; a token whose kid is unknown fetches the
//     issuer's metadata and keys again, but at most once per refetch
//     interval per issuer, so a flood of tokens with made-up kids costs at
//     most one fetch per interval. Concurrent fetches for one issuer are
//     one fetch, and a token whose key is cached never waits for one (a
//     slow provider cannot stall the tokens it already signed).
//   - Nothing of a token is in an error, a log or a metric: errors say
//     which check failed (expired, wrong audience, unknown key, ...) and
//     name configured values only.
package accesstoken
