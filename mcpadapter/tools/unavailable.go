package tools

import (
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// UnavailableAdvice returns the text of an "unavailable" tool error (and of
// a readiness probe that failed for the same reason): the cause and what the
// caller should do. It names no file, so a client learns nothing of the
// server's layout. reason is one of taskgraph.UnavailableReason's.
func UnavailableAdvice(reason string) string { return unavailableAdvice[reason] }

var unavailableAdvice = map[string]string{
	"busy":            "database busy: locked by another process for longer than the server's busy timeout; nothing was written. Retry the same call in a few seconds.",
	"disk_full":       "database disk full: the server's disk has no space left; nothing was written. Retry later, once an operator has freed space.",
	"read_only":       "database read-only: the server cannot write its database file or folder; nothing was written. Retrying will not help until an operator makes the database writable.",
	"files_replaced":  "database files replaced: the server's database file, -wal or -shm was removed or replaced while it ran, so it refuses every write until it is restarted; this call may or may not have taken effect. After the restart, repeat it with the same request_id, or inspect the task before retrying.",
	"unreachable":     "database unreachable: the server could not reach its database, or lost the connection before the write was committed; nothing was written. Retry the same call in a few seconds.",
	"unknown_outcome": "database commit outcome unknown: the server sent the write to be committed and lost the database's answer, so this call may have been applied. Repeat it with the same request_id: it is answered as it was applied, or applied now. Without a request_id, inspect the task (graph_task_inspect) before retrying: a repeated claim could take a second lease, and a repeated complete, fail or cancel is refused as already finished if the first one was applied. A heartbeat may simply be repeated.",
}

// unavailable is the tool error for a write the store could not commit
// because of the database's environment (taskgraph.ErrUnavailable): a
// result with isError, the advice as text and
// {"kind":"unavailable","reason":…,"retryable":…} as detail. The store has
// logged what matters; the details stay in the server log.
func (s *Surface) unavailable(tool string, err error) *mcp.CallToolResult {
	reason, _, _ := taskgraph.UnavailableReason(err)
	s.observe(tool, "unavailable")
	s.log.Warn("tool call refused: database unavailable", "tool", tool, "reason", reason, "err", err)
	return &mcp.CallToolResult{
		Meta:    mcp.Meta{ErrorMetaKey: errorDetail("unavailable", err)},
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: tool + ": " + unavailableAdvice[reason]}},
	}
}

// unavailableRPC is the JSON-RPC error of a request that is not a tool call
// (tasks/cancel) and whose write the database could not take: -32603, since
// the protocol has no better code, with the advice as message and the same
// detail as the tool error in data.
func (s *Surface) unavailableRPC(what string, err error) error {
	reason, _, _ := taskgraph.UnavailableReason(err)
	s.observe(what, "unavailable")
	s.log.Warn("request refused: database unavailable", "in", what, "reason", reason, "err", err)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: what + ": " + unavailableAdvice[reason],
		Data: errorData(errorDetail("unavailable", err))}
}
