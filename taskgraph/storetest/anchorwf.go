package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// workflowHeads returns the heads of the workflows changed since sinceMS,
// checking that each round-trips through its anchor line.
func (e *env) workflowHeads(t *testing.T, sinceMS int64) []tg.WorkflowHead {
	t.Helper()
	hs, err := e.S.RecentWorkflowHeads(e.Ctx, sinceMS)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		line := h.At.Format(time.RFC3339Nano) + " " + h.String()
		p, err := tg.ParseWorkflowHead(line)
		if !tg.IsWorkflowHeadLine(line) || err != nil || p != h {
			t.Fatalf("workflow head %+v does not round-trip through %q: %+v %v", h, line, p, err)
		}
	}
	return hs
}

func (e *env) wantWorkflowNotExtended(t *testing.T, h tg.WorkflowHead, reason string) {
	t.Helper()
	err := e.S.CheckWorkflowAnchor(e.Ctx, h)
	if !errors.Is(err, tg.ErrAnchorNotExtended) || !strings.Contains(err.Error(), reason) {
		t.Fatalf("CheckWorkflowAnchor(%v): %v, want it to say %q", h, err, reason)
	}
}

// A workflow head (an anchor line naming a workflow) is extended by later
// work and by a prune, and names the workflow when its tail was dropped,
// its chain rewritten or it was deleted whole. RecentWorkflowHeads returns
// the most recently changed first, those changed since the time given, at
// most MaxAnchorWorkflows.
func testWorkflowAnchorNamesTheWorkflow(t *testing.T, h Harness) {
	e := historyFixture(t, h) // aa: 2 events, wf: 8 events
	e.Clock.Advance(time.Second)
	e.Create(t, "cc", "x")
	hs := e.workflowHeads(t, 0)
	if len(hs) != 3 || hs[0].WorkflowID != "cc" || hs[0].Events != 1 {
		t.Fatalf("heads %+v, want cc (1 event) first of 3", hs)
	}
	if later := e.workflowHeads(t, e.Clock.Now().UnixMilli()); len(later) != 1 || later[0].WorkflowID != "cc" {
		t.Fatalf("heads changed since cc's creation: %+v", later)
	}
	byID := map[string]tg.WorkflowHead{}
	for _, w := range hs {
		byID[w.WorkflowID] = w
		if err := e.S.CheckWorkflowAnchor(e.Ctx, w); err != nil {
			t.Fatalf("a database does not extend its own workflow head %v: %v", w, err)
		}
	}
	// More work, and a prune of aa once finished, still extend them.
	e.Create(t, "wf", "c")
	if _, err := e.S.AbortWorkflow(e.Ctx, "aa", alice); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(48 * time.Hour)
	e.Create(t, "wf", "d")
	e.Create(t, "cc", "y")
	if res, err := e.S.Prune(e.Ctx, e.Clock.Now().Add(-time.Hour)); err != nil || len(res.Workflows) != 1 || res.Workflows[0] != "aa" {
		t.Fatalf("prune: %+v %v", res, err)
	}
	for _, w := range hs {
		if err := e.S.CheckWorkflowAnchor(e.Ctx, w); err != nil {
			t.Fatalf("head %v after more work and a prune: %v", w, err)
		}
	}
	e.Verify(t)
	// A head the pruned workflow never reached is not extended.
	forged := byID["aa"]
	forged.Events = 40
	e.wantWorkflowNotExtended(t, forged, "workflow aa is gone (no events, no prune), the anchor recorded 40 events")

	// wf's tail dropped with its head moved back: wf is named.
	now := e.workflowHeads(t, 0)
	var wfHead tg.WorkflowHead
	for _, w := range now {
		if w.WorkflowID == "wf" {
			wfHead = w
		}
	}
	if wfHead.Events != 10 {
		t.Fatalf("wf head %+v, want 10 events", wfHead)
	}
	e.DB.Exec(t, `DELETE FROM events WHERE workflow_id = 'wf' AND wseq > 8`)
	e.DB.Exec(t, `DELETE FROM tasks WHERE workflow_id = 'wf' AND node_id IN ('c', 'd')`)
	e.DB.Exec(t, `UPDATE workflows SET event_count = 8, task_count = 2, head_hash = (SELECT hash FROM events WHERE workflow_id = 'wf' AND wseq = 8) WHERE workflow_id = 'wf'`)
	e.Verify(t) // consistent on its own
	e.wantWorkflowNotExtended(t, wfHead, "workflow wf holds 8 events, the anchor recorded 10: events 9 to 10 of workflow wf are gone")
	if err := e.S.CheckWorkflowAnchor(e.Ctx, byID["wf"]); err != nil {
		t.Fatalf("the older head of wf (8 events) is still extended: %v", err)
	}
	// cc's anchored event rewritten.
	e.DB.Exec(t, `UPDATE events SET hash = '`+strings.Repeat("0", 64)+`' WHERE workflow_id = 'cc' AND wseq = 1`)
	e.wantWorkflowNotExtended(t, byID["cc"], "event 1 of workflow cc has hash "+strings.Repeat("0", 64))

	// Bounded: of many workflows changed, the most recent MaxAnchorWorkflows.
	for i := 0; i < tg.MaxAnchorWorkflows+5; i++ {
		e.Clock.Advance(time.Millisecond)
		e.Create(t, fmt.Sprintf("many-%03d", i), "x")
	}
	many := e.workflowHeads(t, 0)
	if len(many) != tg.MaxAnchorWorkflows || many[0].WorkflowID != fmt.Sprintf("many-%03d", tg.MaxAnchorWorkflows+4) {
		t.Fatalf("%d heads, first %+v; want %d, the newest first", len(many), many[0], tg.MaxAnchorWorkflows)
	}
}
