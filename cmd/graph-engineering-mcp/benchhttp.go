package main

import (
	"context"
	"encoding/json"
	"errors"
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
// loopback port and returns one 2026-07-28 SDK client per worker, so the
// bench measures the whole path a remote worker takes: HTTP, the era
// router, the SDK and the tools.
func newHTTPBenchClients(ctx context.Context, s *taskgraph.Store, workers int, stderr io.Writer) (func(int) (benchClient, error), func() error, error) {
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
		c := mcp.NewClient(&mcp.Implementation{Name: "graph-engineering-bench", Version: buildVersion()}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", endpoint, err)
		}
		return mcpBenchClient{cs}, nil
	}
	stop := func() error {
		cancel()
		err := <-done
		hc.CloseIdleConnections()
		return err
	}
	return newClient, stop, nil
}

// mcpBenchClient is a worker that speaks MCP through the seven tools.
type mcpBenchClient struct{ cs *mcp.ClientSession }

// benchLeaseMs is the lease the bench's workers take, as in store mode.
const benchLeaseMs = 60_000

// call calls tool and returns its structured result, re-encoded, only when
// out is true: heartbeat and complete need no more than success, and
// encoding every result again was work of ours on the measured path.
func (c mcpBenchClient) call(ctx context.Context, tool string, args map[string]any, out bool) (json.RawMessage, error) {
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
	return json.Marshal(res.StructuredContent)
}

func holderArgs(h lease.Holder) map[string]any {
	return map[string]any{"task_id": h.TaskID, "owner": h.Owner, "generation": h.Generation, "claim_token": h.Token}
}

func (c mcpBenchClient) claim(ctx context.Context, owner string) (lease.Holder, bool, error) {
	raw, err := c.call(ctx, manifest.ToolClaim, map[string]any{"owner": owner, "lease_ms": benchLeaseMs, "wait_ms": 100}, true)
	if err != nil {
		return lease.Holder{}, false, err
	}
	var out struct {
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
	if err := json.Unmarshal(raw, &out); err != nil {
		return lease.Holder{}, false, fmt.Errorf("claim result: %w", err)
	}
	if !out.Claimed {
		return lease.Holder{}, false, nil
	}
	if out.Task == nil || out.Lease == nil {
		return lease.Holder{}, false, errors.New("claim result: claimed without a task and a lease")
	}
	return lease.Holder{TaskID: out.Task.TaskID, Owner: out.Lease.Owner, Generation: out.Lease.Generation, Token: out.Lease.ClaimToken}, true, nil
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
		ClaimedNext bool `json:"claimed_next"`
		Next        *struct {
			Task *struct {
				TaskID string `json:"task_id"`
			} `json:"task"`
			Lease *struct {
				Owner      string `json:"owner"`
				Generation int64  `json:"generation"`
				ClaimToken string `json:"claim_token"`
			} `json:"lease"`
		} `json:"next"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return lease.Holder{}, false, fmt.Errorf("complete result: %w", err)
	}
	if !out.ClaimedNext {
		return lease.Holder{}, false, nil
	}
	if out.Next == nil || out.Next.Task == nil || out.Next.Lease == nil {
		return lease.Holder{}, false, errors.New("complete result: claimed_next without a task and a lease")
	}
	n := out.Next
	return lease.Holder{TaskID: n.Task.TaskID, Owner: n.Lease.Owner, Generation: n.Lease.Generation, Token: n.Lease.ClaimToken}, true, nil
}

func (c mcpBenchClient) close() error { return c.cs.Close() }
