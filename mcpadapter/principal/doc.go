// Package principal is who may call the MCP server: named principals with
// roles (submit, work, observe) and workflow and owner scopes, read from an
// auth file (serve --auth-file) or standing for the single bearer token
// (SingleToken), and the live table a reload swaps (Authenticator).
//
// It knows nothing of transports: the HTTP front authenticates a bearer
// token against the table (Principals.Authenticate), stdio names a local
// principal (serve --principal), and both hand the MCP server a Caller,
// which the tool surface resolves and checks.
//
// # Invariants
//
//   - Tokens are never stored, logged or echoed: an auth file holds the
//     SHA-256 of each token (token_sha256), Authenticate compares the
//     digest of the token it is given with every principal's in constant
//     time, and no error of this package contains a token.
//   - An auth file is read strictly (ParseAuthFile): an unknown key, a
//     missing or malformed field, an unknown role, a malformed pattern, a
//     duplicate name or token digest, or trailing data is an error matching
//     ErrInvalidAuthFile naming the principal and the rule.
//   - Roles only narrow: Profile is the profile a principal's roles allow,
//     and a principal's surface is the server's narrowed by it, never
//     widened.
//   - A Caller is resolved by name at each use (Caller.Resolve): a reload
//     applies to open sessions at once, and a principal the reload removed
//     may do nothing.
//   - A call outside a principal's roles or scopes is an error matching
//     ErrForbidden that names the missing role or scope (ForbiddenError).
package principal
