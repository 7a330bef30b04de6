package httpfront

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// BenchmarkServeToolCall measures the server's side of one tools/call
// alone: the front's Handler serves a prepared request in process, with no
// client and no socket, so ns/op, B/op and allocs/op are the server's. It
// also reports the process's CPU time per call (cpu-µs/op, from getrusage),
// which the load of a shared machine changes far less than wall time.
// graph_task_inspect is a read: the store's part is small, so the figures
// are mostly the transport's. modern is served by the direct path,
// modern-sdk by the SDK's handler (the path every 2026-07-28 call took
// before it), legacy within a session.
func BenchmarkServeToolCall(b *testing.B) {
	for _, era := range []string{"modern", "modern-sdk", "legacy"} {
		b.Run(era, func(b *testing.B) {
			f := newQuietFixture(b)
			f.h.sdkOnly = era == "modern-sdk" // the SDK's handler, as before the direct path
			c, err := f.store.CreateTask(f.ctx, "wf", taskgraph.NodeSpec{NodeID: "a"})
			if err != nil {
				b.Fatal(err)
			}
			args := map[string]any{"name": manifest.ToolInspect, "arguments": map[string]any{"task_id": c.Task.TaskID}}
			var body string
			hdr := http.Header{}
			hdr.Set("Content-Type", "application/json")
			hdr.Set("Accept", "application/json, text/event-stream")
			if era != "legacy" {
				body = modernBody(7, "tools/call", args, nil)
				for k, v := range modernHeaders("tools/call", wire.HeaderName, manifest.ToolInspect) {
					hdr.Set(k, v)
				}
			} else {
				cs := f.client("2025-11-25", "", nil)
				hdr.Set(wire.HeaderSessionID, cs.ID())
				hdr.Set(wire.HeaderProtocolVersion, "2025-11-25")
				body = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + manifest.ToolInspect + `","arguments":{"task_id":"` + c.Task.TaskID + `"}}}`
			}
			serve := func() *httptest.ResponseRecorder {
				r := httptest.NewRequestWithContext(f.ctx, http.MethodPost, MCPPath, strings.NewReader(body))
				r.Header = hdr.Clone()
				w := httptest.NewRecorder()
				f.h.ServeHTTP(w, r)
				return w
			}
			if w := serve(); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"result"`) || strings.Contains(w.Body.String(), `"isError":true`) {
				b.Fatalf("HTTP %d %s", w.Code, clipBody(w.Body.Bytes()))
			}
			b.ReportAllocs()
			cpu0 := processCPU(b)
			b.ResetTimer()
			for b.Loop() {
				serve()
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// newQuietFixture is newHTTPFixture with the logging of the bench and of a
// production server (Warn, the SDK's routine messages demoted), so that
// benchmarks do not measure a debug log.
func newQuietFixture(b *testing.B) *httpFixture {
	logger := slog.New(mcpadapter.QuietSDKLogs(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})))
	f, _ := newHTTPStore(b, func(c *mcpadapter.Config) { c.Logger = logger })
	h, err := New(f.srv, Options{Logger: logger, Metrics: f.metrics})
	if err != nil {
		b.Fatal(err)
	}
	f.h = h
	f.ts = httptest.NewServer(h)
	f.url = f.ts.URL + MCPPath
	b.Cleanup(func() {
		f.ts.Close()
		h.AbortCalls()
		h.CloseSessions()
	})
	return f
}
