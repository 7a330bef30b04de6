package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// protocolVersion is the stateless MCP era: every request stands alone, so
// any request may go to any replica and a restarted server needs no new
// session.
const protocolVersion = "2026-07-28"

// errorMetaKey is the _meta key of a tool error's detail (MCP.md §4).
const errorMetaKey = "graph-engineering/error"

// nothingWritten lists the unavailable reasons whose advice says nothing
// was written (MCP.md §4): their answers are refusals. Every other reason
// (unknown_outcome, files_replaced, one this list does not know) is an
// unknown outcome.
var nothingWritten = map[string]bool{"busy": true, "disk_full": true, "read_only": true, "unreachable": true}

// Client sends tool calls as plain JSON-RPC over HTTP to whichever of the
// endpoints answers, and records each call exactly as sent and answered.
type Client struct {
	HTTP  *http.Client
	Token string
	// Endpoints returns the base URLs (http://host:port) to choose from, at
	// random, like a load balancer.
	Endpoints func() []string
	Rec       *Recorder
	id        atomic.Int64
}

// Do sends op (its Kind, Task, Owner, Gen, Token and LeaseMS say what) to a
// random endpoint, retrying on another after a connection refused (a
// request that was never sent is not an operation), and records it unless
// it is a claim-next that took no task. It returns the recorded operation
// and whether it was recorded; ctx ending before anything was sent returns
// false.
func (c *Client) Do(ctx context.Context, op Op, args map[string]any) (Op, bool) {
	tool := map[Kind]string{Claim: "graph_task_claim", ClaimNext: "graph_task_claim", Heartbeat: "graph_task_heartbeat",
		Complete: "graph_task_complete", Fail: "graph_task_fail", Release: "graph_task_cancel"}[op.Kind]
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id.Add(1), "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args, "_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    protocolVersion,
			"io.modelcontextprotocol/clientCapabilities": map[string]any{}}}})
	op.Request = body
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, 500*time.Millisecond) {
		eps := c.Endpoints()
		ep := eps[rand.IntN(len(eps))]
		op.Replica = ep
		op.Call = c.Rec.Now()
		status, resp, err := c.post(ctx, ep, tool, body)
		op.Return = c.Rec.Now()
		if err != nil && notSent(err) {
			select {
			case <-ctx.Done():
				return op, false
			case <-time.After(backoff):
				continue
			}
		}
		op.Response = string(resp)
		if err != nil {
			op.Response = err.Error()
			op.Out = Output{Outcome: Unknown, Detail: "transport: " + err.Error()}
		} else {
			op = parseAnswer(op, status, resp)
		}
		if op.Kind == ClaimNext && op.Out.Outcome == Applied && op.Task == "" {
			return op, false // found nothing
		}
		c.Rec.Add(op)
		return op, true
	}
}

func (c *Client) post(ctx context.Context, endpoint, tool string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/mcp", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", protocolVersion)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// notSent: the request never left, so it cannot have been applied (the
// connection was refused).
func notSent(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

type rpcAnswer struct {
	Result *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage            `json:"structuredContent"`
		IsError           bool                       `json:"isError"`
		Meta              map[string]json.RawMessage `json:"_meta"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type taskOut struct {
	TaskID         string  `json:"task_id"`
	State          string  `json:"state"`
	Generation     int64   `json:"generation"`
	Attempts       int     `json:"attempts"`
	LeaseExpiresAt *string `json:"lease_expires_at"`
	UpdatedAt      string  `json:"updated_at"`
}

type toolOut struct {
	Task    *taskOut `json:"task"`
	Claimed bool     `json:"claimed"`
	Lease   *struct {
		Generation     int64  `json:"generation"`
		ClaimToken     string `json:"claim_token"`
		LeaseExpiresAt string `json:"lease_expires_at"`
	} `json:"lease"`
}

// parseAnswer classifies the HTTP answer (see Outcome) and reads what an
// applied operation was answered, with its server time.
func parseAnswer(op Op, status int, body []byte) Op {
	var a rpcAnswer
	if err := json.Unmarshal(body, &a); err != nil || status != http.StatusOK || a.Error != nil || a.Result == nil {
		detail := fmt.Sprintf("HTTP %d", status)
		if a.Error != nil {
			detail += fmt.Sprintf(" JSON-RPC %d: %s", a.Error.Code, a.Error.Message)
		}
		op.Out = Output{Outcome: Unknown, Detail: detail}
		return op
	}
	r := a.Result
	if r.IsError {
		var d struct {
			Kind, Reason string
		}
		_ = json.Unmarshal(r.Meta[errorMetaKey], &d)
		text := ""
		if len(r.Content) > 0 {
			text = r.Content[0].Text
		}
		switch {
		case d.Kind == "unavailable" && nothingWritten[d.Reason]:
			op.Out = Output{Outcome: Refused, Refusal: "unavailable/" + d.Reason, Detail: text}
		case d.Kind == "unavailable", d.Kind == "":
			op.Out = Output{Outcome: Unknown, Refusal: "unavailable/" + d.Reason, Detail: text}
		default:
			op.Out = Output{Outcome: Refused, Refusal: d.Kind, Reason: d.Reason, Detail: text}
		}
		return op
	}
	var out toolOut
	if err := json.Unmarshal(r.StructuredContent, &out); err != nil {
		op.Out = Output{Outcome: Unknown, Detail: "unreadable result: " + err.Error()}
		return op
	}
	op.Out = Output{Outcome: Applied}
	if out.Task != nil {
		op.Out.State, op.Out.Gen, op.Out.Attempts = out.Task.State, out.Task.Generation, out.Task.Attempts
		if op.Kind == ClaimNext {
			op.Task = out.Task.TaskID
		}
	}
	switch op.Kind {
	case Claim, ClaimNext:
		if out.Lease != nil {
			op.Out.Gen, op.Out.Token = out.Lease.Generation, out.Lease.ClaimToken
			op.Out.ExpiresMS = parseMS(out.Lease.LeaseExpiresAt)
			op.ServerMS = op.Out.ExpiresMS - op.LeaseMS
		}
	case Heartbeat:
		if out.Task != nil && out.Task.LeaseExpiresAt != nil {
			op.Out.ExpiresMS = parseMS(*out.Task.LeaseExpiresAt)
			op.ServerMS = op.Out.ExpiresMS - op.LeaseMS
		}
	default:
		if out.Task != nil {
			op.ServerMS = parseMS(out.Task.UpdatedAt)
		}
	}
	return op
}

func parseMS(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0
	}
	return t.UnixMilli()
}
