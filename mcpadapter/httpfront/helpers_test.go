package httpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/mcptest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// httpFixture is a server over real HTTP on 127.0.0.1 (httptest), with its
// store, metrics and a debug log captured for inspection.
type httpFixture struct {
	t       testing.TB
	ctx     context.Context
	path    string
	store   *taskgraph.Store
	srv     *mcpadapter.Server
	h       *Handler
	ts      *httptest.Server
	url     string
	metrics *Metrics
	logs    *testwait.Buffer
	logger  *slog.Logger
	clock   *lease.ManualClock
}

// newHTTPStore opens a store with metrics wired in and a debug logger that
// writes into logs.
func newHTTPStore(t testing.TB, opts ...fixtureOpt) (*httpFixture, *taskgraph.Store) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	logs := &testwait.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	metrics := NewMetrics(logger)
	path := filepath.Join(t.TempDir(), "tasks.db")
	clock := lease.NewManualClock(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	st, err := sqlitestore.Open(ctx, path, taskgraph.Options{Clock: clock, Logger: logger, OnBatch: metrics.ObserveBatch}, tgsqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := metrics.RegisterStore(st); err != nil {
		t.Fatal(err)
	}
	cfg := mcpadapter.Config{
		Store: st, Version: "test", Surface: manifest.NewSurface(manifest.Options{}), Logger: logger,
		ExtraLimits: map[string]int64{"maxStdioLineBytes": mcpadapter.MaxStdioLineBytes},
		OnToolCall:  metrics.ObserveToolCall,
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := mcpadapter.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &httpFixture{t: t, ctx: ctx, path: path, store: st, srv: srv, metrics: metrics, logs: logs, logger: logger, clock: clock}, st
}

// fixtureOpt changes the MCP server's configuration.
type fixtureOpt func(*mcpadapter.Config)

func newHTTPFixture(t testing.TB, opts Options, cfgOpts ...fixtureOpt) *httpFixture {
	t.Helper()
	f, _ := newHTTPStore(t, cfgOpts...)
	opts.Metrics, opts.Logger = f.metrics, f.logger
	h, err := New(f.srv, opts)
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	f.ts = smallSendBufferServer(h) // a client that stops reading stalls the writes soon
	f.url = f.ts.URL + MCPPath
	t.Cleanup(func() {
		h.StopListens() // streams end rather than hold Close
		f.ts.Close()
		h.AbortCalls()
		h.CloseSessions()
	})
	return f
}

// clientRT adds the bearer token and, on tasks/* requests, the Mcp-Name
// header the SDK client does not send (checklist D14).
type clientRT struct {
	next     http.RoundTripper
	token    string
	taskName bool
}

func (c clientRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if c.token != "" {
		r.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.taskName && r.Body != nil && strings.HasPrefix(r.Header.Get(wire.HeaderMethod), "tasks/") {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Params struct {
				TaskID string `json:"taskId"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Params.TaskID != "" {
			r.Header.Set(wire.HeaderName, msg.Params.TaskID)
		}
	}
	return c.next.RoundTrip(r)
}

// client connects the SDK client over Streamable HTTP: version "" is the
// client's default (2026-07-28, stateless); "2025-11-25" is a legacy session.
func (f *httpFixture) client(version, token string, caps *mcp.ClientCapabilities) *mcp.ClientSession {
	f.t.Helper()
	cs, err := f.connect(version, token, caps)
	if err != nil {
		f.t.Fatalf("connect (%q): %v", version, err)
	}
	f.t.Cleanup(func() { cs.Close() })
	return cs
}

func (f *httpFixture) connect(version, token string, caps *mcp.ClientCapabilities) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "1"}, &mcp.ClientOptions{Capabilities: caps})
	addTaskMethods(c)
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	hc := &http.Client{Transport: clientRT{next: http.DefaultTransport, token: token, taskName: true}}
	return c.Connect(f.ctx, &mcp.StreamableClientTransport{Endpoint: f.url, HTTPClient: hc, MaxRetries: -1}, opts)
}

// addTaskMethods lets an SDK client send tasks/get.
func addTaskMethods(c *mcp.Client) {
	if err := mcp.AddSendingCustomMethod[*tools.TaskIDParams, *tools.TaskResult](c, tools.MethodTasksGet); err != nil {
		panic(err)
	}
}

// rawResponse is one raw HTTP exchange.
type rawResponse struct {
	status int
	header http.Header
	body   []byte
	rpc    struct {
		ID    any `json:"id"`
		Error *struct {
			Code    int64           `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
		Result json.RawMessage `json:"result"`
	}
}

// post sends body to the MCP endpoint with the usual headers plus extra
// ("" values delete a header).
func (f *httpFixture) post(body string, extra map[string]string) *rawResponse {
	f.t.Helper()
	return f.do(http.MethodPost, f.url, strings.NewReader(body), extra)
}

func (f *httpFixture) do(method, url string, body io.Reader, extra map[string]string) *rawResponse {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.ctx, method, url, body)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range extra {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	if h := extra["Host"]; h != "" {
		req.Host = h
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	r := &rawResponse{status: resp.StatusCode, header: resp.Header}
	if r.body, err = io.ReadAll(resp.Body); err != nil {
		f.t.Fatal(err)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(r.body, &r.rpc); err != nil {
			f.t.Fatalf("response is not JSON: %v\n%s", err, r.body)
		}
	}
	return r
}

// wantError fails unless r is an HTTP status with a JSON-RPC error code.
func (r *rawResponse) wantError(t *testing.T, status int, code int64) {
	t.Helper()
	if r.status != status || r.rpc.Error == nil || r.rpc.Error.Code != code {
		t.Fatalf("got HTTP %d %s, want HTTP %d with error %d", r.status, clipBody(r.body), status, code)
	}
}

// modern is the 2026-07-28 protocol version.
const modern = manifest.ModernVersion

// modernHeaders are the headers of a 2026-07-28 request for method.
func modernHeaders(method string, kv ...string) map[string]string {
	h := map[string]string{wire.HeaderProtocolVersion: modern, wire.HeaderMethod: method}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	return h
}

// modernBody is a 2026-07-28 request with params merged into the _meta.
func modernBody(id any, method string, params map[string]any, caps map[string]any) string {
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = modernMeta(caps)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return string(b)
}

// clipBody shortens a response body for a failure message.
func clipBody(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "…"
	}
	return string(b)
}

var modernMeta = mcptest.ModernMeta

// send makes one HTTP request of method to url with body (none when "")
// and headers hdr, and returns the status, the headers and the body read
// whole. Any failure to send or read fails the test.
func send(t testing.TB, ctx context.Context, method, url, body string, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, raw
}

// withJSON returns hdr with Content-Type application/json added, leaving
// hdr itself unchanged; a Content-Type in hdr wins.
func withJSON(hdr map[string]string) map[string]string {
	out := map[string]string{"Content-Type": "application/json"}
	for k, v := range hdr {
		out[k] = v
	}
	return out
}
