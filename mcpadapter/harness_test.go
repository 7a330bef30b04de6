package mcpadapter

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/mcptest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

const modern = manifest.ModernVersion

type fixture struct {
	t     *testing.T
	ctx   context.Context
	store *taskgraph.Store
	srv   *Server
	clock *lease.ManualClock
}

type fixtureOpt func(*Config)

func newFixture(t *testing.T, opts ...fixtureOpt) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	clock := lease.NewManualClock(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "tasks.db"), taskgraph.Options{Clock: clock}, tgsqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := Config{Store: st, Version: "test", Surface: manifest.NewSurface(manifest.Options{}), ExtraLimits: map[string]int64{"maxStdioLineBytes": MaxStdioLineBytes}}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: ctx, store: st, srv: srv, clock: clock}
}

// serve starts the server on a fresh in-memory transport pair and returns
// the client end.
func (f *fixture) serve() mcp.Transport {
	f.t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- f.srv.ServeTransport(f.ctx, st) }()
	f.t.Cleanup(func() { testwait.Recv(f.t, "ServeTransport to return after its client closed", done) })
	return ct
}

// client connects the SDK client: version "" means the client's default
// (2026-07-28, no initialize).
func (f *fixture) client(version string, caps *mcp.ClientCapabilities) *mcp.ClientSession {
	f.t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, &mcp.ClientOptions{Capabilities: caps})
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := c.Connect(f.ctx, f.serve(), opts)
	if err != nil {
		f.t.Fatalf("connect (%q): %v", version, err)
	}
	f.t.Cleanup(func() { cs.Close() })
	return cs
}

// raw is a JSON-RPC connection with no client logic, for byte-level tests.
type raw struct {
	t    *testing.T
	ctx  context.Context
	conn mcp.Connection
	id   atomic.Int64
}

func (f *fixture) raw() *raw {
	f.t.Helper()
	conn, err := f.serve().Connect(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { conn.Close() })
	return &raw{t: f.t, ctx: f.ctx, conn: conn}
}

// call sends a request and returns its response.
func (r *raw) call(method string, params any) *jsonrpc.Response {
	r.t.Helper()
	id, _ := jsonrpc.MakeID(float64(r.id.Add(1)))
	var p json.RawMessage
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			r.t.Fatal(err)
		}
		p = b
	}
	if err := r.conn.Write(r.ctx, &jsonrpc.Request{ID: id, Method: method, Params: p}); err != nil {
		r.t.Fatal(err)
	}
	return r.read(id)
}

func (r *raw) notify(method string, params any) {
	r.t.Helper()
	b, _ := json.Marshal(params)
	if err := r.conn.Write(r.ctx, &jsonrpc.Request{Method: method, Params: b}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *raw) read(id jsonrpc.ID) *jsonrpc.Response {
	r.t.Helper()
	ctx, cancel := testwait.Bound(r.t, r.ctx)
	defer cancel()
	for {
		msg, err := r.conn.Read(ctx)
		if err != nil {
			r.t.Fatalf("read response: %v", err)
		}
		if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID == id {
			return resp
		}
	}
}

// modernCall sends a 2026-07-28 request with per-request _meta.
func (r *raw) modernCall(method string, params map[string]any, caps map[string]any) *jsonrpc.Response {
	r.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = modernMeta(caps)
	return r.call(method, params)
}

// initialize performs the legacy handshake.
func (r *raw) initialize(version string) map[string]any {
	r.t.Helper()
	resp := r.call("initialize", map[string]any{"protocolVersion": version, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}})
	res := mustResult(r.t, resp)
	r.notify("notifications/initialized", map[string]any{})
	return res
}

func mustResult(t *testing.T, resp *jsonrpc.Response) map[string]any {
	t.Helper()
	if resp.Error != nil {
		t.Fatalf("unexpected error: %v", resp.Error)
	}
	var m map[string]any
	if err := json.Unmarshal(resp.Result, &m); err != nil {
		t.Fatalf("result is not an object: %s", resp.Result)
	}
	return m
}

func wantCode(t *testing.T, resp *jsonrpc.Response, code int64) *jsonrpc.Error {
	t.Helper()
	je, ok := resp.Error.(*jsonrpc.Error)
	if !ok || je == nil {
		t.Fatalf("got result %s / error %v, want JSON-RPC error %d", resp.Result, resp.Error, code)
	}
	if je.Code != code {
		t.Fatalf("got error %d %q, want %d", je.Code, je.Message, code)
	}
	return je
}

// The MCP calls and answer readers shared with the other adapter packages'
// tests (package mcptest).
var (
	callTool   = mcptest.CallTool
	toolText   = mcptest.ToolText
	modernMeta = mcptest.ModernMeta
)
