package httpfront

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// BenchmarkServeCompleteAndClaim measures the server's side of a worker's
// cycle over the direct 2026-07-28 path: graph_task_complete with
// claim_next (a completion and the next claim, as bench --mode http runs
// them), served by the front's Handler in process with no client and no
// socket. allocs/op and B/op are the server's: reading the next holder
// out of each answer runs with the timer stopped. The store commits one
// operation per call (no other caller), so the figures are the request
// path's plus one commit's.
func BenchmarkServeCompleteAndClaim(b *testing.B) {
	f := newQuietFixture(b)
	for made, wf := 0, 0; made < b.N+1; wf++ {
		n := min(b.N+1-made, 1000)
		nodes := make([]taskgraph.NodeSpec, n)
		for i := range nodes {
			nodes[i] = taskgraph.NodeSpec{NodeID: fmt.Sprintf("n%04d", i)}
		}
		if _, err := f.store.CreateWorkflow(f.ctx, fmt.Sprintf("wf%03d", wf), nodes); err != nil {
			b.Fatal(err)
		}
		made += n
	}
	c, ok, err := f.store.Claim(f.ctx, taskgraph.ClaimRequest{Owner: "w"})
	if err != nil || !ok {
		b.Fatal(ok, err)
	}
	h := lease.Holder{TaskID: c.Task.TaskID, Owner: c.Lease.Owner, Generation: c.Lease.Generation, Token: c.Lease.Token}
	hdr := http.Header{}
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Accept", "application/json, text/event-stream")
	for k, v := range modernHeaders("tools/call", wire.HeaderName, manifest.ToolComplete) {
		hdr.Set(k, v)
	}
	body := func(h lease.Holder) string {
		return modernBody(7, "tools/call", map[string]any{"name": manifest.ToolComplete, "arguments": map[string]any{
			"task_id": h.TaskID, "owner": h.Owner, "generation": h.Generation, "claim_token": h.Token,
			"result": map[string]any{"ok": true}, "claim_next": map[string]any{"lease_ms": 60000},
		}}, nil)
	}
	next := func(w *httptest.ResponseRecorder) lease.Holder {
		var answer struct {
			Result struct {
				IsError           bool `json:"isError"`
				StructuredContent struct {
					ClaimedNext bool `json:"claimed_next"`
					Next        struct {
						Task struct {
							TaskID string `json:"task_id"`
						} `json:"task"`
						Lease struct {
							Owner      string `json:"owner"`
							Generation int64  `json:"generation"`
							ClaimToken string `json:"claim_token"`
						} `json:"lease"`
					} `json:"next"`
				} `json:"structuredContent"`
			} `json:"result"`
		}
		if w.Code != http.StatusOK {
			b.Fatalf("HTTP %d %s", w.Code, clipBody(w.Body.Bytes()))
		}
		if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil || answer.Result.IsError || !answer.Result.StructuredContent.ClaimedNext {
			b.Fatalf("%v: %s", err, clipBody(w.Body.Bytes()))
		}
		n := answer.Result.StructuredContent.Next
		return lease.Holder{TaskID: n.Task.TaskID, Owner: n.Lease.Owner, Generation: n.Lease.Generation, Token: n.Lease.ClaimToken}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		r := httptest.NewRequestWithContext(f.ctx, http.MethodPost, MCPPath, strings.NewReader(body(h)))
		r.Header = hdr.Clone()
		w := httptest.NewRecorder()
		b.StartTimer()
		f.h.ServeHTTP(w, r)
		b.StopTimer()
		h = next(w)
		b.StartTimer()
	}
}
