// Package httpfront is the HTTP front of the MCP server: the listener and
// its limits, the Host, Origin and bearer-token checks, admission to
// concurrency slots, legacy sessions and their cap, metrics, the health and
// readiness probes, and the live view (package liveview), with MCP mounted
// as one route, /mcp, over the Streamable HTTP transport of both protocol
// eras. It is a router plus handlers: every route passes the same Host and
// Origin checks, /mcp and /metrics the same authentication, and then its
// own handler.
//
// # Invariants
//
//   - A body is read once, bounded (MaxBodyBytes) and within a deadline,
//     and decoded once (wire.ParseBody); the SDK's own handlers get the same
//     bytes only after every check has passed. Every refusal on /mcp is a
//     JSON-RPC error body.
//   - Direct tool calls: a 2026-07-28 tools/call in its ordinary form
//     (wire.DirectToolCall) is served, after exactly the same checks,
//     admission and Inbound registration, by the MCP server's own
//     middleware chain and tool handler (mcpadapter.Server.DirectToolCall)
//     from the message decoded once, and answered with the SDK's headers,
//     result rules and encoding, with the corrections of wire.FixWriter
//     (wire.WriteFixed); the SDK's
//     handler would decode the body about a dozen times and allocate about
//     0.45 MB doing so. Whatever is not that ordinary form, every other
//     method, and every legacy-session request still go to the SDK. The
//     answers are the same byte for byte (TestDirectToolCallsAnswerAsTheSDK
//     replays both paths); the only difference is that the SDK's Debug log
//     lines about its per-request session are not written for them.
//   - The arrival of a request is taken before its body is read or a slot
//     is waited for, and reaches its call as an explicit input: the front
//     registers it with the MCP server (mcpadapter.Server.Admit) with the
//     request's principal and deadline, and the SDK carries only the key
//     (wire.HeaderInbound), which the front sets over anything the client
//     sent. So time a request spends queued here never costs a lease, in
//     either era.
//   - Admission: waiting never holds what a lease holder needs. A request
//     takes a concurrency slot only once authorized and fully read; a
//     claim-next long poll takes none; a holder write (heartbeat, complete,
//     fail, cancel) waiting for a slot goes ahead of every other short call
//     and is never refused for one; at the connection cap the oldest
//     connection that never carried an authorized request is closed for the
//     new one; at the session cap the oldest never-initialized, else the
//     longest idle legacy session without a request in flight is closed.
//   - Authentication: with a token or principals, every route but the
//     probes needs a bearer token (or, for /ui/, a login cookie); tokens are
//     compared by digest in constant time and never logged or echoed. A
//     legacy session is bound to the principal that opened it: another
//     principal naming it gets 404, as for an unknown session. With an
//     oauth section in the auth file the front is also an OAuth 2.1
//     resource server: Protected Resource Metadata (RFC 9728) is public at
//     /.well-known/oauth-protected-resource (and its path-suffixed form),
//     every 401 and 403 challenge names it (resource_metadata), a token
//     that matches no static digest and has a JWT's shape is validated by
//     package accesstoken and mapped to its principal on every request,
//     and an access-token principal lacking the role a tool needs gets 403
//     insufficient_scope naming the scopes that grant it, unless its token
//     carries such a scope and its auth-file rule's roles take the role
//     away (no token could step up to it: the tool refuses). Without
//     authentication the front serves only a loopback listener, and the Host
//     of every request must then name a loopback host (no DNS rebinding).
//   - Health: /healthz is liveness (the database answers a read); /readyz
//     is readiness (a probe write commits), 503 with the reason otherwise.
//     Both answer by their deadline even when the store never does (reason
//     timeout), and at most one probe of each kind runs against the store
//     at once (probeGate). Neither needs a token; answers are never cached.
//   - Shutdown: no new connections; parked claim-next calls answer
//     claimed: false at once (taskgraph.Store.Drain); the other in-flight
//     calls get ShutdownTimeout, then whatever still runs is cancelled and
//     legacy sessions end.
package httpfront
