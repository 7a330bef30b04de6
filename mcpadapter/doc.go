// Package mcpadapter is the Model Context Protocol face of the task store,
// built on the official Go SDK: the MCP server. It assembles the SDK server
// from the tool surface, keeps what it serves to exactly what it
// advertises, speaks both protocol eras, and serves stdio. It holds no SQL
// and no lease logic.
//
// The adapter's rooms, each with its own invariants in its doc.go:
//
//   - mcpadapter (this package): the SDK server, its middleware, the era
//     router and the stdio transport with its flow control.
//   - mcpadapter/tools: the transport-free tool surface and the Tasks
//     extension; every call takes its Caller (principal, arrival) explicitly.
//   - mcpadapter/principal: principals, roles and the auth file.
//   - mcpadapter/httpfront: the HTTP front (listener, checks, admission,
//     limits, metrics, probes) that mounts MCP at /mcp.
//   - mcpadapter/liveview: the read-only operator view under /ui/.
//   - mcpadapter/internal/wire: every correction of the SDK's wire
//     behaviour, each beside its canary and its upstream issue.
//   - mcpadapter/internal/input: exact numbers, distinct keys and clipped
//     echoes, shared by all of them.
//
// # Invariants
//
//   - Capabilities advertise only what is served, and every method the SDK
//     knows but this server does not serve answers -32601 in both eras;
//     a method nobody knows gets the same -32601 on every transport
//     (KnownMethod, wire.UnknownMethod).
//   - Eras: one server speaks the legacy handshake (2024-11-05 to
//     2025-11-25) and the stateless 2026-07-28 revision. On stdio and
//     in-memory transports a router below the SDK sends each request to a
//     legacy or a modern SDK session on the same server, and applies the
//     per-request _meta rules (-32602, -32022) of package wire itself, so
//     nothing is ever inferred from an earlier request and no error leaves
//     with code 0. Over HTTP the front routes each POST the same way, and
//     serves an ordinary 2026-07-28 tools/call itself through
//     DirectToolCall, which runs the very middleware chain the SDK server
//     runs (one slice, built once in New) around the same tool handler.
//   - Inputs: whom a request acts for and when it arrived reach the tool
//     surface as explicit inputs (tools.Caller). A transport states them
//     once: stdio acts for Config.Local and is judged when its tool runs;
//     the HTTP front registers an Inbound per request (Admit), found by the
//     key the SDK carries in the request's header. inboundMiddleware
//     resolves the principal against the live table once per call; a call
//     whose Inbound is gone is refused rather than run as nobody.
//   - Narrowing: a principal sees the server's surface narrowed by its
//     roles (never widened): tools/list, initialize, server/discover,
//     resources and skills describe and serve only that surface.
//   - Tasks extension: a task handle is returned only to a graph_task_create
//     request that declares the extension in its own _meta; tasks/* requests
//     that do not declare it get -32021; legacy sessions never see it.
//   - MCP App (app.go): the ui:// resource and the tools' _meta.ui links are
//     advertised only to a client that declares io.modelcontextprotocol/ui
//     (in this request's _meta in 2026-07-28, at initialize in legacy).
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
//     ends, naming both eras.
//   - One wire: the envelope, the id rule, the per-request _meta rules and
//     the error mapping are package wire's, used by stdio and HTTP alike;
//     the golden conversations in testdata/golden replay the same input over
//     both transports in both eras and must get the same answers.
//
// # SDK workarounds kept here
//
// Package wire lists every workaround with its canary and upstream issue;
// these are SDK middleware or session plumbing and so live with the server:
//
//   - legacyInitializeMiddleware: a legacy initialize result advertises
//     every extension. Canary: TestSDKCanaryLegacyInitializeAdvertisesExtensions.
//     Upstream: none filed.
//   - unknownToolMiddleware: an unknown tool's -32602 names only the tool;
//     ours lists the tools offered. Canary: in
//     TestArgumentErrorsNameTheirFieldAndUnknownToolsListTheTools. Upstream:
//     none filed (an enhancement).
//   - The router drops the answer to a request the client cancelled (the
//     SDK answers -32603 "context canceled"). Upstream:
//     modelcontextprotocol/go-sdk#1235 (open; fix proposed in #1267).
//   - The router itself: the SDK serves one era per session, so one stdio
//     connection is served by two sessions. Upstream: none filed.
//   - recoverMiddleware never hands the SDK a nil result (it dereferences
//     results of 2026-07-28 requests). Upstream: none filed.
package mcpadapter
