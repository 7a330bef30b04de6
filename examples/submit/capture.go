package main

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Why this file exists: with the Tasks extension declared, graph_task_create
// answers tools/call with a CreateTaskResult ({resultType: "task", taskId,
// status, ...}, MCP.md §7). The SDK client decodes every tools/call answer
// into *mcp.CallToolResult, which has no field for taskId, and a tools/call
// cannot be sent through mcp.CallCustomMethod (standard method names are
// refused). So the raw result is recorded one layer down, at the
// mcp.Connection: a call made with a context from withRawResult gets the
// exact JSON of its answer, matched by JSON-RPC id, while the SDK goes on
// decoding it as usual. Nothing is rewritten.
//
// One limit: the wrapper hides the SDK's unexported per-connection hooks,
// which only legacy-era Streamable HTTP sessions use (for the
// MCP-Protocol-Version header and the standalone SSE stream). The Tasks
// extension exists only in the 2026-07-28 era, where every request carries its
// own version, so submit wraps the transport only when it may use the
// extension.

// rawResult receives the raw JSON result of one call.
type rawResult struct {
	mu   sync.Mutex
	data []byte
}

// Bytes returns the recorded result, or nil when none arrived (an error
// response, or a call that never reached the connection).
func (r *rawResult) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.data
}

type rawResultKey struct{}

// withRawResult returns a context whose next call records its raw result.
func withRawResult(ctx context.Context) (context.Context, *rawResult) {
	r := &rawResult{}
	return context.WithValue(ctx, rawResultKey{}, r), r
}

// recordingTransport wraps a transport so calls can record raw results.
type recordingTransport struct{ inner mcp.Transport }

// Connect implements mcp.Transport.
func (t recordingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Connection: conn, waiting: map[jsonrpc.ID]*rawResult{}}, nil
}

// recordingConn matches responses to the calls that asked for their raw
// result.
type recordingConn struct {
	mcp.Connection
	mu      sync.Mutex
	waiting map[jsonrpc.ID]*rawResult
}

// Write implements mcp.Connection. The SDK writes a call with the caller's
// context, which is how a rawResult finds its request id.
func (c *recordingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	req, ok := msg.(*jsonrpc.Request)
	r, want := ctx.Value(rawResultKey{}).(*rawResult)
	if !ok || !want || !req.IsCall() {
		return c.Connection.Write(ctx, msg)
	}
	c.mu.Lock()
	c.waiting[req.ID] = r
	c.mu.Unlock()
	err := c.Connection.Write(ctx, msg)
	if err != nil {
		c.mu.Lock()
		delete(c.waiting, req.ID)
		c.mu.Unlock()
	}
	return err
}

// Read implements mcp.Connection. The result is recorded before the SDK sees
// the response, so it is there when the call returns.
func (c *recordingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil {
		c.mu.Lock()
		r := c.waiting[resp.ID]
		delete(c.waiting, resp.ID)
		c.mu.Unlock()
		if r != nil && resp.Error == nil {
			r.mu.Lock()
			r.data = append([]byte(nil), resp.Result...)
			r.mu.Unlock()
		}
	}
	return msg, err
}
