package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/httpfront"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

func init() { benchClientFactory["http"] = newHTTPBenchClients }

// newHTTPBenchClients serves the bench's store over Streamable HTTP on a
// loopback port and returns one 2026-07-28 client per worker, so the bench
// measures the whole path a remote worker takes: HTTP, the era router, the
// SDK and the tools. The client is the Go SDK's (httpClient "sdk") or a
// plain JSON-RPC client (httpClient "wire", wireBenchClient).
func newHTTPBenchClients(ctx context.Context, s *taskgraph.Store, workers int, httpClient string, stderr io.Writer) (func(int) (benchClient, error), func() error, error) {
	logger := newLogger(stderr, slog.LevelWarn)
	srv, err := mcpadapter.New(mcpadapter.Config{
		Store: s, Version: buildVersion(), Surface: manifest.NewSurface(manifest.Options{}),
		Logger: slog.New(mcpadapter.QuietSDKLogs(logger.Handler())), ExtraLimits: serverLimits(true),
	})
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("listen on loopback: %w", err)
	}
	serveCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- httpfront.Serve(serveCtx, ln, srv, httpfront.Options{
			Logger: logger, MaxConcurrent: workers + 16, MaxConnections: 2*workers + 16,
		})
	}()
	endpoint := "http://" + ln.Addr().String() + httpfront.MCPPath
	// One kept-alive connection per worker.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers + 4, IdleConnTimeout: time.Minute}}
	newClient := func(int) (benchClient, error) {
		if httpClient == "wire" {
			wc := &wireBenchClient{hc: hc, endpoint: endpoint}
			return mcpBenchClient{call: wc.call, end: func() error { return nil }}, nil
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "graph-engineering-bench", Version: buildVersion()}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", endpoint, err)
		}
		return mcpBenchClient{call: sdkCaller{cs}.call, end: cs.Close}, nil
	}
	stop := func() error {
		cancel()
		err := <-done
		hc.CloseIdleConnections()
		return err
	}
	return newClient, stop, nil
}

// mcpBenchClient is a worker that speaks MCP through the seven tools, by
// call: it calls a tool with args and returns its result's JSON only when
// out is true (heartbeat and complete need no more than success).
type mcpBenchClient struct {
	call func(ctx context.Context, tool string, args map[string]any, out bool) (json.RawMessage, error)
	end  func() error
}

func (c mcpBenchClient) close() error { return c.end() }

// sdkCaller calls tools through the Go SDK's client.
type sdkCaller struct{ cs *mcp.ClientSession }

// benchLeaseMs is the lease the bench's workers take, as in store mode.
const benchLeaseMs = 60_000

// call calls tool and returns its result's JSON only when out is true:
// heartbeat and complete need no more than success. The JSON is read from
// the text content, which holds the same JSON as the structured content
// (every tool of ours answers so): encoding the structured content, which
// the SDK client decodes into maps, once more was the bench's own work on
// the measured path, and no part of what it measures.
func (c sdkCaller) call(ctx context.Context, tool string, args map[string]any, out bool) (json.RawMessage, error) {
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, err
	}
	if res.IsError {
		msg := "tool error"
		if len(res.Content) > 0 {
			if t, ok := res.Content[0].(*mcp.TextContent); ok {
				msg = t.Text
			}
		}
		return nil, fmt.Errorf("%s: %s", tool, msg)
	}
	if !out {
		return nil, nil
	}
	if len(res.Content) == 1 {
		if t, ok := res.Content[0].(*mcp.TextContent); ok {
			return json.RawMessage(t.Text), nil
		}
	}
	return json.Marshal(res.StructuredContent)
}

func holderArgs(h lease.Holder) map[string]any {
	return map[string]any{"task_id": h.TaskID, "owner": h.Owner, "generation": h.Generation, "claim_token": h.Token}
}

// claimAnswer is the part of graph_task_claim's answer (and of
// graph_task_complete's next) a bench worker needs.
type claimAnswer struct {
	Claimed bool `json:"claimed"`
	Task    *struct {
		TaskID string `json:"task_id"`
	} `json:"task"`
	Lease *struct {
		Owner      string `json:"owner"`
		Generation int64  `json:"generation"`
		ClaimToken string `json:"claim_token"`
	} `json:"lease"`
}

// holder is the claim's holder, or an error naming what for a claim
// without a task and a lease.
func (a *claimAnswer) holder(what string) (lease.Holder, error) {
	if a == nil || a.Task == nil || a.Lease == nil {
		return lease.Holder{}, fmt.Errorf("%s: claimed without a task and a lease", what)
	}
	return lease.Holder{TaskID: a.Task.TaskID, Owner: a.Lease.Owner, Generation: a.Lease.Generation, Token: a.Lease.ClaimToken}, nil
}

func (c mcpBenchClient) claim(ctx context.Context, owner string) (lease.Holder, bool, error) {
	raw, err := c.call(ctx, manifest.ToolClaim, map[string]any{"owner": owner, "lease_ms": benchLeaseMs, "wait_ms": 100}, true)
	if err != nil {
		return lease.Holder{}, false, err
	}
	var out claimAnswer
	if err := json.Unmarshal(raw, &out); err != nil {
		return lease.Holder{}, false, fmt.Errorf("claim result: %w", err)
	}
	if !out.Claimed {
		return lease.Holder{}, false, nil
	}
	h, err := out.holder("claim result")
	return h, err == nil, err
}

func (c mcpBenchClient) heartbeat(ctx context.Context, h lease.Holder) error {
	args := holderArgs(h)
	args["lease_ms"] = benchLeaseMs
	_, err := c.call(ctx, manifest.ToolHeartbeat, args, false)
	return err
}

func (c mcpBenchClient) complete(ctx context.Context, h lease.Holder, result json.RawMessage) error {
	args := holderArgs(h)
	args["result"] = result
	_, err := c.call(ctx, manifest.ToolComplete, args, false)
	return err
}

// completeAndClaim is graph_task_complete with claim_next: a worker's loop
// in one tool call, as the store's CompleteAndClaim is in one store call.
func (c mcpBenchClient) completeAndClaim(ctx context.Context, h lease.Holder, result json.RawMessage) (lease.Holder, bool, error) {
	args := holderArgs(h)
	args["result"] = result
	args["claim_next"] = map[string]any{"lease_ms": benchLeaseMs}
	raw, err := c.call(ctx, manifest.ToolComplete, args, true)
	if err != nil {
		return lease.Holder{}, false, err
	}
	var out struct {
		ClaimedNext bool         `json:"claimed_next"`
		Next        *claimAnswer `json:"next"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return lease.Holder{}, false, fmt.Errorf("complete result: %w", err)
	}
	if !out.ClaimedNext {
		return lease.Holder{}, false, nil
	}
	next, err := out.Next.holder("complete result's next")
	return next, err == nil, err
}

// wireBenchClient calls tools as plain 2026-07-28 JSON-RPC requests over
// net/http: the request the SDK's client sends (the same envelope, _meta,
// headers and arguments), and of the answer only what a worker needs (the
// structured content, or the error). It measures the server's HTTP path
// without the SDK client's own decoding, which in --mode http shares the
// process and its cores with the server it measures: the server does the
// same work for either client.
type wireBenchClient struct {
	hc       *http.Client
	endpoint string
	id       int64
}

func (c *wireBenchClient) call(ctx context.Context, tool string, args map[string]any, out bool) (json.RawMessage, error) {
	rawArgs, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	c.id++
	body := make([]byte, 0, len(rawArgs)+320)
	body = fmt.Appendf(body, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":`, c.id, tool)
	body = append(body, rawArgs...)
	body = fmt.Appendf(body, `,"_meta":{"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"graph-engineering-bench","version":%q}}}}`,
		manifest.ModernVersion, buildVersion())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = http.Header{
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {manifest.ModernVersion},
		"Mcp-Method":           {"tools/call"},
		"Mcp-Name":             {tool},
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: read the answer: %w", tool, err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		return nil, fmt.Errorf("%s: HTTP %d %s: %s", tool, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	var answer struct {
		Result *struct {
			IsError           bool            `json:"isError"`
			StructuredContent json.RawMessage `json:"structuredContent"`
			Content           []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, fmt.Errorf("%s: the answer is not JSON-RPC: %w", tool, err)
	}
	switch res := answer.Result; {
	case answer.Error != nil:
		return nil, fmt.Errorf("%s: error %d: %s", tool, answer.Error.Code, answer.Error.Message)
	case res == nil:
		return nil, fmt.Errorf("%s: an answer without a result: %s", tool, raw)
	case res.IsError:
		msg := "tool error"
		if len(res.Content) > 0 {
			msg = res.Content[0].Text
		}
		return nil, fmt.Errorf("%s: %s", tool, msg)
	case !out:
		return nil, nil
	case len(res.StructuredContent) == 0:
		return nil, fmt.Errorf("%s: a result without structured content: %s", tool, raw)
	}
	return answer.Result.StructuredContent, nil
}
