package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// anchorTests: a head kept outside the database catches truncation that
// leaves every chain consistent.
var anchorTests = []test{
	{"AnchorExtendedByNormalWork", testAnchorExtendedByNormalWork},
	{"AnchorCatchesDroppedTail", testAnchorCatchesDroppedTail},
	{"AnchorCatchesRewrittenAuditChain", testAnchorCatchesRewrittenAuditChain},
	{"WorkflowAnchorNamesTheWorkflow", testWorkflowAnchorNamesTheWorkflow},
}

func (e *env) head(t *testing.T) tg.AuditHead {
	t.Helper()
	h, err := e.S.AuditHead(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := tg.ParseAuditHead(h.At.Format(time.RFC3339Nano) + " " + h.String())
	if err != nil || p.String() != h.String() || !p.At.Equal(h.At) {
		t.Fatalf("head %v does not round-trip: %+v %v", h, p, err)
	}
	return h
}

func (e *env) wantNotExtended(t *testing.T, h tg.AuditHead, reason string) {
	t.Helper()
	err := e.S.CheckAnchor(e.Ctx, h)
	if !errors.Is(err, tg.ErrAnchorNotExtended) || !strings.Contains(err.Error(), reason) {
		t.Fatalf("CheckAnchor(%v): %v, want it to say %q", h, err, reason)
	}
}

// Every head taken along normal work, prunes included, is extended by the
// database later.
func testAnchorExtendedByNormalWork(t *testing.T, h Harness) {
	e := setup(t, h)
	var heads []tg.AuditHead
	heads = append(heads, e.head(t))
	e.Create(t, "a", "x")
	heads = append(heads, e.head(t))
	e.Create(t, "a", "y")
	if _, err := e.S.AbortWorkflow(e.Ctx, "a", alice); err != nil {
		t.Fatal(err)
	}
	heads = append(heads, e.head(t))
	e.Create(t, "b", "x")
	e.Clock.Advance(48 * time.Hour)
	if res, err := e.S.Prune(e.Ctx, e.Clock.Now().Add(-time.Hour)); err != nil || len(res.Workflows) != 1 {
		t.Fatalf("prune: %+v %v", res, err)
	}
	heads = append(heads, e.head(t))
	for _, hd := range heads {
		if err := e.S.CheckAnchor(e.Ctx, hd); err != nil {
			t.Fatalf("head %v: %v", hd, err)
		}
	}
	if last := heads[len(heads)-1]; last.Events != 1 || last.Entries != 4 {
		t.Fatalf("last head %+v, want 1 event and 4 entries (switch, a, b, prune a)", last)
	}
	e.Verify(t)
}

// The last events of a chain dropped with the workflow's head moved back
// (and the task row put back as it was) verify, but not against an anchor.
func testAnchorCatchesDroppedTail(t *testing.T, h Harness) {
	e := historyFixture(t, h)
	e.Clock.Advance(time.Second)
	anchor := e.head(t)
	if anchor.Events != 10 {
		t.Fatalf("anchor %+v", anchor)
	}
	// Drop b's fail (event 8): the head goes back to event 7, the row back
	// to what event 7 left.
	st := e.DB.Query(t, `SELECT task_state FROM events WHERE workflow_id = 'wf' AND wseq = 7`)[0][0]
	e.DB.Exec(t, `DELETE FROM events WHERE workflow_id = 'wf' AND wseq = 8`)
	e.DB.Exec(t, `UPDATE workflows SET event_count = 7, head_hash = (SELECT hash FROM events WHERE workflow_id = 'wf' AND wseq = 7) WHERE workflow_id = 'wf'`)
	if !strings.Contains(st, `"state":"claimed"`) {
		t.Fatalf("event 7 left %s", st)
	}
	e.DB.Exec(t, `UPDATE tasks SET state = 'claimed', error = NULL WHERE workflow_id = 'wf' AND node_id = 'b'`)
	if rep, err := e.S.VerifyHistory(e.Ctx); err != nil {
		t.Fatalf("the consistent truncation should verify without an anchor: %v %+v", err, rep.Broken)
	}
	e.wantNotExtended(t, anchor, "1 events are gone")
}

// An audit chain cut back to an earlier entry, with its head rewritten,
// verifies but does not extend an anchor taken before.
func testAnchorCatchesRewrittenAuditChain(t *testing.T, h Harness) {
	e := historyFixture(t, h)
	anchor := e.head(t) // 3 entries: switch, aa, wf
	e.DB.Exec(t, `DELETE FROM events WHERE workflow_id = 'wf'`)
	e.DB.Exec(t, `DELETE FROM edges WHERE task_seq IN (SELECT seq FROM tasks WHERE workflow_id = 'wf')`)
	e.DB.Exec(t, `DELETE FROM tasks WHERE workflow_id = 'wf'`)
	e.DB.Exec(t, `DELETE FROM workflows WHERE workflow_id = 'wf'`)
	e.DB.Exec(t, `DELETE FROM audit_chain WHERE seq = 3`)
	e.DB.Exec(t, `UPDATE audit_head SET entry_count = 2, head_hash = (SELECT hash FROM audit_chain WHERE seq = 2)`)
	e.Verify(t)
	e.wantNotExtended(t, anchor, "the audit chain has 2 entries, the anchor names entry 3")
	// A forged entry 3 in its place has another hash.
	e.Create(t, "other", "x")
	e.wantNotExtended(t, anchor, "audit entry 3 has hash")
}
