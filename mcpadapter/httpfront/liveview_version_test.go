package httpfront

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/liveview"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// An unchanged poll of a workflow is answered 304 from the workflow's
// version (one row) without building the answer, whatever the time; a
// change builds it once; a finished workflow asks the page to poll less.
func TestUIUnchangedPollBuildsNothing(t *testing.T) {
	t.Parallel()
	f := newUIFixture(t, Options{})
	specs := make([]taskgraph.NodeSpec, 200)
	for i := range specs {
		specs[i] = taskgraph.NodeSpec{NodeID: fmt.Sprintf("n%03d", i)}
	}
	out, err := f.store.CreateWorkflow(f.ctx, "big", specs)
	if err != nil {
		t.Fatal(err)
	}
	const path = "/ui/api/workflows/big"
	status, hdr, body := f.get(t, http.MethodGet, path, nil)
	etag := hdr.Get("ETag")
	if status != http.StatusOK || etag == "" || f.h.ui.WorkflowBuilds() != 1 {
		t.Fatalf("first read: %d, ETag %q, %d builds", status, etag, f.h.ui.WorkflowBuilds())
	}
	var wf liveview.Workflow
	if err := json.Unmarshal([]byte(body), &wf); err != nil || wf.Finished || wf.PollMS != 1000 {
		t.Fatalf("an open workflow: finished %v, poll_ms %d (%v)", wf.Finished, wf.PollMS, err)
	}
	for range 5 {
		f.clock.Advance(time.Second)
		if status, hdr, _ := f.get(t, http.MethodGet, path, map[string]string{"If-None-Match": etag}); status != http.StatusNotModified || hdr.Get("ETag") != etag {
			t.Fatalf("unchanged poll: %d, ETag %q; want 304 with %q", status, hdr.Get("ETag"), etag)
		}
	}
	if n := f.h.ui.WorkflowBuilds(); n != 1 {
		t.Fatalf("%d answers built, want 1: unchanged polls must not build the answer", n)
	}
	// Finish every task: the poll after it is a new answer, built once.
	for _, c := range out {
		cl, ok, err := f.store.Claim(f.ctx, taskgraph.ClaimRequest{Owner: "w", TaskID: c.Task.TaskID})
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if _, err := f.store.Complete(f.ctx, lease.Holder{TaskID: cl.Task.TaskID, Owner: "w", Generation: cl.Task.Generation, Token: cl.Lease.Token}, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	status, hdr, body = f.get(t, http.MethodGet, path, map[string]string{"If-None-Match": etag})
	if status != http.StatusOK || hdr.Get("ETag") == etag || f.h.ui.WorkflowBuilds() != 2 {
		t.Fatalf("after the workflow changed: %d, ETag %q (was %q), %d builds; want 200, a new ETag, 2 builds", status, hdr.Get("ETag"), etag, f.h.ui.WorkflowBuilds())
	}
	if err := json.Unmarshal([]byte(body), &wf); err != nil || !wf.Finished || wf.PollMS <= 1000 {
		t.Fatalf("a finished workflow: finished %v, poll_ms %d; want a longer interval (%v)", wf.Finished, wf.PollMS, err)
	}
}
