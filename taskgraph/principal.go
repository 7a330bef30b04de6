package taskgraph

import "context"

// principalKey is the context key of the principal a request acts for.
type principalKey struct{}

// WithPrincipal returns ctx carrying name as the authenticated principal the
// request acts for (set by a transport once it has authenticated the
// caller). The store records it as the actor of what the request causes.
func WithPrincipal(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, principalKey{}, name)
}

// PrincipalFrom returns the principal ctx carries, or "" when the request
// has none (stdio's local user, an operator command, the store itself).
func PrincipalFrom(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}
