package wire

// HeaderInbound carries, from the HTTP front through the SDK to the MCP
// server, the key under which the front registered what it knows of one
// request and the protocol does not carry: when it arrived, whom it acts
// for, its deadline. The SDK (v1.8.0) runs the calls of a legacy session in
// the session's context, which began as its initialize request's, and hands
// a call only its request's header (RequestExtra.Header); a value of the
// request's own context never reaches the call. So the key crosses in the
// header, and the record itself never leaves the process. The front sets
// the header on every request it hands to the SDK, over anything the client
// sent, and forgets the key when the request ends.
// TestSDKCanaryLegacyCallsRunInTheSessionContext is the canary; no upstream
// issue is filed.
const HeaderInbound = "Graph-Engineering-Request"
