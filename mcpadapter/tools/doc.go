// Package tools is the MCP server's tool surface: the seven graph_task_*
// tools and the Tasks extension over them, each a thin, bounded call into
// package taskgraph. It knows no transport and no SDK plumbing: every
// operation takes the Caller (whom the call acts for and when it arrived)
// as an explicit input with its arguments, and returns the protocol's result
// or JSON-RPC error. The MCP server (package mcpadapter) registers the tools
// and methods with the SDK and hands each call here.
//
// # Invariants
//
//   - Least authority: exactly the seven graph_task_* tools, narrowed by the
//     profile (package manifest); no tool forces, bypasses, approves, skips
//     or aborts.
//   - Arguments: decoded by our own validator, generated from the same field
//     table as the published JSON Schema; numbers are read exactly (never
//     through float64), unknown and duplicate keys are refused. Arguments
//     that are not an object are a protocol error (-32602); bad values and
//     everything the store rejects are tool errors (isError) naming the field
//     or the rule; a write the database cannot take now (busy beyond the
//     busy timeout, disk full, read-only, files replaced, unreachable, a
//     commit whose answer was lost: taskgraph.ErrUnavailable) is a tool
//     error of kind "unavailable" with its reason, whether a retry can help,
//     and, in the text, whether the call may have been applied (every reason
//     has advice: UnavailableAdvice); anything unexpected is -32603 and the
//     details stay in the log.
//   - Results: every successful result is the tool's declared outputSchema,
//     as structured content and as text, and carries a receipt binding the
//     operation, task and generation to the digest of the capability
//     manifest the caller is served (its principal's narrowing, For). That
//     includes the result a task handle settles with (tasks/get).
//   - Authorization: each call is checked against the caller's roles and
//     scopes before the store is called; a task, node or workflow outside
//     the principal's workflows answers exactly as a missing one, checked
//     before any read that could tell them apart. Without a principal every
//     role applies.
//   - Time: a call is judged at its Caller.Arrival, handed to the store
//     (taskgraph.WithArrival) with the principal (taskgraph.WithPrincipal)
//     right before the store is called; nothing else travels in a context.
//   - Tasks extension: a handle is created only by CreateTask, which the
//     MCP server calls for a graph_task_create that declares the extension
//     in its own request; tasks/get, tasks/update and tasks/cancel act only
//     on tasks the same principal created and need the submit role. A
//     worker's failure settles as a completed tool call with isError; the
//     extension's "failed" status is never used.
//   - Workflow outline (graph_task_inspect with workflow_id alone): one
//     snapshot (Store.WorkflowGraph), never expires a lapsed lease, carries
//     no payload, result or token, at most MaxOutlineTasks tasks and
//     MaxOutlineBytes bytes of them (truncated says so; counts cover the
//     whole workflow), texts clipped to MaxOutlineTextBytes.
//   - Whole-graph submit (graph_task_create with nodes): exactly one of
//     node_id and nodes; at most MaxCreateNodes nodes and MaxCreateBytes of
//     their JSON, each checked against the single-node fields; created by
//     one Store.CreateWorkflow, all or nothing; answered node by node with
//     a receipt that binds no task. Through the Tasks extension a graph
//     gets this ordinary result, never a handle.
//   - Reports: graph_task_heartbeat, graph_task_complete and graph_task_fail
//     take optional progress, status_message and usage, checked by their
//     own kinds (report.go) as the store checks them; a task answer carries
//     report and total_usage only when there is something to show.
//   - Claim tokens appear only in a claim's result.
package tools
