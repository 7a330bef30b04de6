package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// VerifyHistory reads rows in batches of a few hundred on one goroutine
// and checks them on another. Chains and task lists longer than a batch
// verify whole, and a broken item deep in them (past the batches the
// reader may run ahead) is the one reported, the first in order, with the
// counts up to it.
func testTamperInLongChainsDetected(t *testing.T, h Harness) {
	fixture := func(t *testing.T) *env {
		t.Helper()
		e := setup(t, h)
		for _, wf := range []struct {
			id string
			n  int
		}{{"big", 1100}, {"zz", 700}} {
			nodes := make([]tg.NodeSpec, wf.n)
			for i := range nodes {
				nodes[i] = tg.NodeSpec{NodeID: fmt.Sprintf("n%04d", i), Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))}
			}
			if _, err := e.S.CreateWorkflow(e.Ctx, wf.id, nodes); err != nil {
				t.Fatal(err)
			}
		}
		return e
	}
	e := fixture(t)
	rep := e.Verify(t)
	if rep.Workflows != 2 || rep.Tasks != 1800 || rep.Events != 1800 {
		t.Fatalf("report %+v, want 2 workflows, 1800 tasks and events", rep)
	}
	for _, tc := range []struct {
		name, sql     string
		wf, node      string // the task named, "" for an event
		seq, events   int64
		reason, where string
	}{
		{"an event deep in the first chain", `UPDATE events SET detail = '{"x":1}' WHERE workflow_id = 'big' AND wseq = 1050`,
			"big", "", 1050, 1050, "the event was edited", "workflow big event 1050"},
		{"the first of two edits", `UPDATE events SET owner = 'mallory' WHERE (workflow_id = 'big' AND wseq = 900) OR (workflow_id = 'zz' AND wseq = 3)`,
			"big", "", 900, 900, "the event was edited", "workflow big event 900"},
		{"a task row deep in the second workflow", `UPDATE tasks SET state = 'completed' WHERE workflow_id = 'zz' AND node_id = 'n0650'`,
			"zz", "n0650", 651, 1800, "stored state differs", "workflow zz event 651 task"},
		{"a payload in the last batch", `UPDATE tasks SET payload = '{"i":-1}' WHERE workflow_id = 'zz' AND node_id = 'n0699'`,
			"zz", "n0699", 700, 1800, "stored payload does not match", "workflow zz event 700 task"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := fixture(t)
			id := ""
			if tc.node != "" {
				id = e.taskID(t, tc.wf, tc.node)
			}
			e.DB.Exec(t, tc.sql)
			rep, err := e.S.VerifyHistory(e.Ctx)
			if !errors.Is(err, tg.ErrBrokenChain) {
				t.Fatalf("VerifyHistory after tampering: %v", err)
			}
			b := rep.Broken
			if b == nil || b.WorkflowID != tc.wf || b.TaskID != id || b.Seq != tc.seq || !strings.Contains(b.Reason, tc.reason) {
				t.Fatalf("broken %+v, want workflow %s task %q at %d saying %q", b, tc.wf, id, tc.seq, tc.reason)
			}
			if !strings.Contains(err.Error(), tc.where) {
				t.Errorf("error %q does not say %q", err, tc.where)
			}
			if rep.Events != tc.events {
				t.Errorf("report counts %d events checked, want %d (every event up to the broken item)", rep.Events, tc.events)
			}
		})
	}
}
