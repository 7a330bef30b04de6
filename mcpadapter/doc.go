// Package mcpadapter is the Model Context Protocol face of the task store,
// built on the official Go SDK. It holds no SQL and no lease logic: every
// tool is a thin, bounded call into package taskgraph.
//
// # Invariants
//
//   - Least authority: exactly the seven graph_task_* tools, narrowed by the
//     profile (package manifest); no tool forces, bypasses, approves, skips or
//     aborts. Capabilities advertise only what is served, and every method the
//     SDK knows but this server does not serve answers -32601 in both eras.
//   - Eras: one server speaks the legacy handshake (2024-11-05 to 2025-11-25)
//     and the stateless 2026-07-28 revision. On stdio and in-memory transports
//     a router below the SDK sends each request to a legacy or a modern SDK
//     session on the same server, and applies the per-request _meta rules
//     (-32602, -32022) itself, so nothing is ever inferred from an earlier
//     request and no error leaves with code 0. Over Streamable HTTP
//     (HTTPHandler) each POST is checked and routed the same way, to a
//     stateless (2026-07-28) or a stateful (legacy session) SDK handler on
//     the same server; the handler also enforces the bearer token or the
//     principals, the
//     Origin and Host checks and the limits, and corrects the error codes and
//     HTTP statuses the SDK gets wrong.
//   - Admission over HTTP: waiting never holds what a lease holder needs. A
//     request takes a concurrency slot only once authorized and fully read;
//     a claim-next long poll takes none; a holder write (heartbeat,
//     complete, fail, cancel) waiting for a slot goes ahead of every other
//     short call and is never refused for one; at the connection cap the oldest
//     connection that never carried an authorized request is closed for the
//     new one; at the session cap the oldest never-initialized, else the
//     longest idle legacy session without a request in flight is closed.
//   - Arguments: decoded by our own validator, generated from the same field
//     table as the published JSON Schema; numbers are read exactly (never
//     through float64), unknown and duplicate keys are refused. Arguments that
//     are not an object are a protocol error (-32602); bad values and
//     everything the store rejects are tool errors (isError) naming the field
//     or the rule; a write the database cannot take now (busy beyond the
//     busy timeout, disk full, read-only, files replaced, unreachable, a
//     commit whose answer was lost: taskgraph.ErrUnavailable) is a tool
//     error of kind "unavailable" with its reason, whether a retry can help,
//     and, in the text, whether the call may have been applied (every reason
//     has advice: unavailableAdvice); anything unexpected is
//     -32603 and the server keeps serving.
//   - Health: /healthz is liveness (the database answers a read); /readyz
//     is readiness (a probe write commits), 503 with the reason otherwise.
//   - Receipts: every successful tool result carries a receipt binding the
//     operation, task and generation to the digest of the capability manifest
//     the caller is served (its principal's narrowing, see below).
//   - Principals (principal.go, principal_server.go, http_principal.go):
//     over HTTP every authorized request acts for a principal
//     (taskgraph.WithPrincipal), found by comparing the SHA-256 of its token
//     with every principal's digest in constant time; tokens are never
//     stored, logged or echoed. A principal sees the server's surface
//     narrowed by its roles (never widened); each tool call is checked
//     against its roles and scopes in the tool handler, before the store is
//     called, and a task outside its workflows answers exactly as a missing
//     one. tasks/* act only on tasks the same principal created. The
//     principal is resolved by name against the live table at each use, so a
//     reload (Authenticator.Replace) applies to open sessions; a legacy
//     session is bound to the principal that opened it. Without a principal
//     (stdio, loopback without a token) every role applies.
//   - Tasks extension: a task handle is returned only to a graph_task_create
//     request that declares the extension in its own _meta; tasks/* requests
//     that do not declare it get -32021; legacy sessions never see it.
//   - Live view (ui.go, ui_auth.go, ui_layout.go, assets in ui/): /ui/ on
//     the HTTP handler is read-only (GET and HEAD only), reads only through
//     the Store API, never shows a claim token or its digest, sends a
//     strict CSP and loads nothing from outside the binary. Its reads take
//     their own few slots (UIMaxConcurrent), never an MCP slot. It sits
//     behind the same authentication as /mcp: a bearer token, or a session
//     cookie (HttpOnly, SameSite=Strict, Path=/ui) got for a one-time login
//     code that only a token can mint; only digests of codes and sessions
//     are kept (POST /ui/logout forgets one), and the principal is resolved
//     at each request and needs the observe role; its workflow scope
//     filters what is shown. Its reads never expire a lapsed lease.
//   - MCP App (ui_app.go): the ui:// resource and the tools' _meta.ui links
//     are advertised only to a client that declares io.modelcontextprotocol/ui
//     (in this request's _meta in 2026-07-28, at initialize in legacy); the
//     App calls only graph_task_inspect through its host: one outline read
//     draws the whole workflow.
//   - Workflow outline (outline.go): graph_task_inspect with workflow_id
//     alone reads one snapshot (Store.Workflow), never expires a lapsed
//     lease, carries no payload, result or token, at most MaxOutlineTasks
//     tasks and MaxOutlineBytes bytes of them (truncated says so; counts
//     cover the whole workflow), texts clipped to MaxOutlineTextBytes; a
//     workflow (or a node of one) outside the principal's workflows
//     answers exactly as a missing one, checked before any read.
//   - Stdio flow control: at most MaxStdioInFlight calls are read and not
//     yet answered (intake pauses at the bound and resumes as answers are
//     written), at most MaxStdioParkedClaims of them claim-next calls that
//     wait (beyond that a long poll is tried once, without waiting). Every
//     stdout write has the deadline StdioWriteTimeout; a stalled write or a
//     broken pipe means the client is gone and the session ends as at end of
//     input. Reaching the drain bound fails the writes still waiting, so the
//     shutdown bounds hold whether or not the client reads.
//   - Output: stdout carries only protocol messages; logs go to the slog
//     logger (stderr); claim tokens appear only in the claim result. A
//     stdio client is logged once when its stream starts and once when it
//     ends, naming both eras; the SDK's per-session lifecycle lines, one set
//     per era session, are at debug.
//   - One wire: the envelope (parseMessage), the id rule (readID), the
//     per-request _meta rules (metaVersion, checkModernMeta, missingMeta),
//     the answer to an unknown method (unknownMethod) and the error mapping
//     are written once and used by stdio and HTTP alike; the golden
//     conversations in testdata/golden replay the same input over both
//     transports in both eras and must get the same answers.
//
// # SDK workarounds
//
// Where the SDK (v1.8.0) does something the protocol or this server's
// contract does not allow, we correct it in the one place named here, and a
// canary test sends the same input to the SDK alone and fails once the SDK
// stops doing it, so we know the workaround can go:
//
//   - A body or line that is not JSON-RPC: the SDK answers plain text (HTTP)
//     or ends the session (stdio). parseMessage answers a JSON-RPC error.
//     Canary: TestSDKCanaryNonJSONBodyIsPlainText.
//   - Numeric ids go through float64 and are truncated (1.5 answered as 1).
//     readID refuses them. Canary: TestSDKCanaryNumericIDsAreTruncated.
//   - An error whose request id is unknown is encoded without "id".
//     encodeMessage writes "id": null. Canary: TestSDKCanaryErrorWithoutIDOmitsIt.
//   - A handler's plain Go error leaves with code 0 (and, in 2026-07-28 over
//     HTTP, status 200). normalizeError (stdio) and fixRPCResponse (HTTP)
//     send -32603 with status 500. Canary: TestSDKCanaryPlainErrorsGetCodeZero.
//   - Mcp-Name is checked only on tools/call, resources/read and
//     prompts/get. checkModernHeaders checks it on tasks/* too. Canary:
//     TestSDKCanaryMcpNameUncheckedOnTasks.
//   - A legacy initialize result advertises every extension, though the
//     Tasks extension exists only in 2026-07-28. legacyInitializeMiddleware
//     removes it. Canary: TestSDKCanaryLegacyInitializeAdvertisesExtensions.
//   - A bad Accept header gets a plain-text 400. acceptFailure answers a
//     JSON-RPC error. Canary: TestSDKRefusesBadAcceptInPlainText.
//   - Arguments holding a number beyond float64 range fail the SDK's
//     Mcp-Name check with a misleading -32020. overflowToolError answers the
//     tool error stdio gives. Canary: in TestHTTPOverflowingNumberIsAToolError.
//   - An unknown tool's -32602 names only the unknown tool.
//     unknownToolMiddleware lists the tools offered. Canary: in
//     TestArgumentErrorsNameTheirFieldAndUnknownToolsListTheTools.
//   - A wrapped JSON-RPC error ("method not found: \"x\"") is reported by
//     its inner error on stdio but whole over HTTP. normalizeError keeps the
//     whole message; the golden conversations show both agree.
package mcpadapter
