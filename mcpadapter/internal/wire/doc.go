// Package wire is the MCP adapter's wire layer: every correction of what
// the official Go SDK (v1.8.0) does on the wire that the protocol or this
// server's contract does not allow. Each workaround sits here beside a canary
// test (canary_test.go) that sends the same input to the SDK alone and fails
// once the SDK stops doing it, and names the upstream issue it waits for, so
// that it can be deleted when the SDK is fixed. The MCP server (stdio, the
// era router) and the HTTP front call into it; it knows neither.
//
// # Invariants
//
//   - One envelope: Parse checks every message as every transport receives
//     it (an HTTP body, a stdio line), with one id rule (ReadID), so stdio
//     and HTTP cannot drift apart; a body is decoded once, into a Message
//     whose parts later readers use.
//   - One set of per-request _meta rules (MetaVersion, CheckModernMeta,
//     MissingMeta) and one answer to an unknown method (UnknownMethod) for
//     both transports.
//   - No error leaves with code 0, and no error response about an unknown id
//     lacks "id": null.
//   - Nothing here changes a request the SDK would have handled correctly:
//     each workaround acts only on the input its canary describes.
//
// # Workarounds, canaries and upstream issues
//
// Envelope and ids:
//
//   - A body or line that is not JSON-RPC: the SDK answers plain text
//     (HTTP) or ends the session (stdio). Parse, ParseBody, DecodeLine and
//     LineReader answer a JSON-RPC error and keep serving. Canaries:
//     TestSDKCanaryNonJSONBodyIsPlainText, TestSDKCanaryNonJSONLineEndsTheSession.
//     Upstream: modelcontextprotocol/go-sdk#1209 (stdio, open; fix proposed
//     in #1210); none filed for the plain-text HTTP answer.
//   - Numeric ids go through float64 and are truncated (1.5 answered as 1,
//     9007199254740993 as 9007199254740992). ReadID refuses them. Canary:
//     TestSDKCanaryNumericIDsAreTruncated. Upstream: go-sdk PRs #1178 and
//     #1253 (open).
//   - An error whose request id is unknown is encoded without "id".
//     EncodeMessage writes "id": null. Canary:
//     TestSDKCanaryErrorWithoutIDOmitsIt. Upstream: none filed (MCP's own
//     schema makes the id optional; JSON-RPC 2.0 requires null).
//
// Errors and statuses:
//
//   - A handler's plain Go error leaves with code 0 (and, in 2026-07-28 over
//     HTTP, status 200). NormalizeError (stdio) and FixWriter (HTTP) send
//     -32603 with status 500; FixWriter also gives every 2026-07-28 error the
//     status its code calls for. Canary: TestSDKCanaryPlainErrorsGetCodeZero.
//     Upstream: go-sdk#976 (closed; its code-0 follow-up is in the thread).
//   - A wrapped JSON-RPC error ("method not found: \"x\"") is reported by
//     its inner error on stdio but whole over HTTP. NormalizeError keeps the
//     whole message; the golden conversations show both agree. Upstream:
//     none filed.
//   - An unknown method gets a different answer per transport (code 0 "JSON
//     RPC not handled" on stdio, a plain-text 400 or a 404 over HTTP).
//     UnknownMethod gives both the same -32601. Upstream: go-sdk#976.
//
// Streamable HTTP headers:
//
//   - A bad Accept header gets a plain-text 400. AcceptFailure answers a
//     JSON-RPC error. Canary: TestSDKCanaryBadAcceptIsPlainText. Upstream:
//     none filed (go-sdk#290 concerned which values to accept).
//   - Mcp-Name is checked only on tools/call, resources/read and
//     prompts/get, and compared literally when =?base64?…?= encoded.
//     CheckModernHeaders checks it on tasks/* too and decodes it first.
//     Canaries: TestSDKCanaryMcpNameUncheckedOnTasks,
//     TestSDKCanaryEncodedMcpNameIsComparedLiterally. Upstream: go-sdk#1234
//     (encoding, closed after v1.8.0: drop the decoding on upgrade); none
//     filed for tasks/* (the TypeScript SDK fixed it in its #2613).
//   - Arguments holding a number beyond float64 range fail the SDK's
//     Mcp-Name check with a misleading -32020. The HTTP front answers the
//     tool error stdio gives, framed by ModernResultBody. Canary:
//     TestSDKCanaryOverflowingArgumentsFailTheNameCheck. Upstream: none filed.
//   - A POST carrying Last-Event-ID is refused with a plain-text 400;
//     streams are not resumable here, so the front removes the header.
//     Canary: TestSDKCanaryLastEventIDOnPostIsRefused. Upstream: go-sdk#1233
//     (closed without a change).
//   - A legacy session's calls run in the session's context, so per-request
//     inputs (arrival, principal, deadline) cannot ride the request's
//     context: the front registers them and sends their key in
//     HeaderInbound. Canary: TestSDKCanaryLegacyCallsRunInTheSessionContext.
//     Upstream: none filed.
//
// Direct tool calls (a cost, not a correctness, workaround):
//
//   - The SDK's Streamable HTTP handler decodes a 2026-07-28 request about
//     a dozen times (reading the batch twice, the _meta triple, the Mcp-Name
//     check, the tool's schema for x-mcp-header annotations, the params),
//     each with a segmentio decoder that allocates a 32 KiB buffer, and
//     builds a session per request: about 0.45 MB and most of a call's
//     CPU before any tool runs. DirectToolCall picks the tools/call
//     requests the SDK would decode exactly as Parse did and serve through
//     its tool path (plain envelope, params and _meta members it decodes
//     without error, valid UTF-8, shallow, routing headers its own check
//     compares equal; SDKHostAllowed repeats its DNS-rebinding check) and
//     decodes their params once; the HTTP front runs them through the MCP
//     server's own middleware chain (mcpadapter.Server.DirectToolCall) and
//     answers with EncodeToolCallResponse (the SDK's result rules:
//     resultType, content never null, serverInfo in _meta; its encoders,
//     or for a result of the plain shape every tool of ours returns the
//     same bytes appended by hand, TestPlainToolCallResultIsTheSDKs) and
//     SDKResponseHeader, with the corrections of FixWriter (WriteFixed,
//     without its buffer: the body is whole already). Every other
//     request goes to the SDK as before. Canary: the byte-for-byte
//     comparison of both paths, TestDirectToolCallsAnswerAsTheSDK (package
//     httpfront), fails once the SDK answers differently. Upstream: none
//     filed (the decoder's buffer and the repeated decodes are the SDK's
//     design; drop this when a release decodes once).
//
// Subscriptions:
//
//   - subscriptions/listen: the SDK's filter has no notifications.taskIds
//     (decoding drops them) and the SDK has no notifications/tasks, so it can
//     neither acknowledge, refuse (-32021) nor serve a Tasks listener.
//     ParseListen, DeclaresExtension, NewNote, StartSSE and WriteSSE let the
//     MCP server and the HTTP front own that stream. Canary:
//     TestSDKCanaryListenDropsTaskIDs. Upstream: go-sdk#1146 (open).
//
// Logs:
//
//   - The SDK logs session bookkeeping at Info once per stateless HTTP
//     request and per stdio era session, and client mistakes (already
//     answered) at Error. QuietSDKLogs and SDKLogger log them at Debug.
//     Test: TestQuietSDKLogsDemotesRoutineMessages. Upstream: go-sdk#1204
//     (open).
//
// Workarounds that live with the MCP server (package mcpadapter), because
// they are SDK middleware or session plumbing, and are listed in its doc.go:
// the legacy initialize result that advertises every extension
// (TestSDKCanaryLegacyInitializeAdvertisesExtensions here, upstream none
// filed), the answer to a request the client cancelled (go-sdk#1235, open;
// fix proposed in #1267), the unknown tool's -32602 that names only the
// tool (none filed), and the era router that serves both eras on one stdio
// connection (none filed).
package wire
