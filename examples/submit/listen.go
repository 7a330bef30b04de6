package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/graph-engineering/graph-engineering-mcp/examples/internal/mcpclient"
)

// Waiting on notifications instead of polling (MCP.md §7, "Task status
// notifications"): over Streamable HTTP, in the 2026-07-28 era with the
// Tasks extension, one subscriptions/listen request answers with an SSE
// stream that carries every change of the listed tasks as a
// notifications/tasks whose params are what tasks/get returns. The Go SDK
// cannot send this request (it drops notifications.taskIds: go-sdk#1146),
// so this is a raw HTTP client written from the specification.

// methodListen and the notification methods of a listen stream.
const (
	methodListen       = "subscriptions/listen"
	methodAcknowledged = "notifications/subscriptions/acknowledged"
	methodTaskStatus   = "notifications/tasks"
	methodCancelled    = "notifications/cancelled"
	modernVersion      = "2026-07-28"
)

// errListenRefused means the server did not open a stream: an older
// server, or one without the extension; the caller polls instead.
var errListenRefused = errors.New("subscriptions/listen refused")

// listenFunc opens one stream for taskIDs and calls on with each task
// notification until the stream ends; it returns why it ended (never nil).
// It fails with errListenRefused when no stream opened.
type listenFunc func(ctx context.Context, taskIDs []string, on func(taskResult)) error

// httpListener is listenFunc over Streamable HTTP at endpoint.
func httpListener(endpoint mcpclient.Endpoint) listenFunc {
	client := endpoint.HTTPClient()
	return func(ctx context.Context, taskIDs []string, on func(taskResult)) error {
		body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "submit-listen", "method": methodListen, "params": map[string]any{
			"_meta": map[string]any{
				"io.modelcontextprotocol/protocolVersion":    modernVersion,
				"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{mcpclient.TasksExtension: map[string]any{}}},
			},
			"notifications": map[string]any{"taskIds": taskIDs},
		}})
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint.URL, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", modernVersion)
		req.Header.Set("Mcp-Method", methodListen)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			return fmt.Errorf("%w: HTTP %d %s", errListenRefused, resp.StatusCode, strings.TrimSpace(string(b)))
		}
		acked := false
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		var data strings.Builder
		for {
			line, err := br.ReadString('\n')
			line = strings.TrimRight(line, "\r\n")
			switch {
			case strings.HasPrefix(line, "data:"):
				data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
			case line == "" && data.Len() > 0:
				var m struct {
					Method string          `json:"method"`
					Params json.RawMessage `json:"params"`
					Error  *struct {
						Message string `json:"message"`
					} `json:"error"`
				}
				if json.Unmarshal([]byte(data.String()), &m) != nil {
					return fmt.Errorf("an unreadable message on the listen stream: %.200s", data.String())
				}
				data.Reset()
				switch m.Method {
				case methodAcknowledged:
					acked = true
				case methodTaskStatus:
					var t taskResult
					if err := json.Unmarshal(m.Params, &t); err != nil {
						return fmt.Errorf("a notifications/tasks the client cannot read: %w", err)
					}
					on(t)
				case methodCancelled:
					var c struct {
						Reason string `json:"reason"`
					}
					_ = json.Unmarshal(m.Params, &c)
					return fmt.Errorf("the server ended the listen stream: %s", c.Reason)
				default:
					if m.Error != nil && !acked {
						return fmt.Errorf("%w: %s", errListenRefused, m.Error.Message)
					}
				}
			}
			if err != nil {
				if !acked {
					return fmt.Errorf("%w: the stream ended before its acknowledgement", errListenRefused)
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return errors.New("the listen stream ended")
			}
		}
	}
}
