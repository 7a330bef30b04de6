package tgpostgres

import (
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// TestNotifyCarriesRequires: a ready task's requires reach the other
// replica with its workflow, so that its wake goes to a waiter that can take
// the task.
func TestNotifyCarriesRequires(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	a := open(t, url, Options{ReplicaID: "replica-a"})
	b := open(t, url, Options{ReplicaID: "replica-b"})
	if err := a.Write(ctx, func(tx tgdriver.Tx) error {
		if err := tx.NotifyReady(ctx, "wf", "cuda gpu"); err != nil {
			return err
		}
		return tx.NotifyReady(ctx, "plain", "")
	}); err != nil {
		t.Fatal(err)
	}
	var wfs, reqs []string
	for len(wfs) < 2 {
		select {
		case c := <-b.Changes():
			if c.Unknown || len(c.Requires) != len(c.Workflows) {
				t.Fatalf("b got %+v", c)
			}
			wfs, reqs = append(wfs, c.Workflows...), append(reqs, c.Requires...)
		case <-ctx.Done():
			t.Fatal("b never heard a's notifications")
		}
	}
	if len(wfs) != 2 || wfs[0] != "wf" || reqs[0] != "cuda gpu" || wfs[1] != "plain" || reqs[1] != "" {
		t.Fatalf("b heard %v requiring %q", wfs, reqs)
	}
}

// TestCountClaimableAndNextDue: the wake-up and sweeper lookups see only
// due tasks, and a claim's capabilities.
func TestCountClaimableAndNextDue(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	d := open(t, url, Options{})
	c := raw(t, url)
	if _, err := c.Exec(ctx, `INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms) VALUES ('wf', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet,
		created_at_ms, updated_at_ms, requires, due_at_ms) VALUES
		('t1', 'wf', 'plain', '{}', '[]', 'pending', 3, 0, 1, 1, '', 0),
		('t2', 'wf', 'gpu', '{}', '[]', 'pending', 3, 0, 1, 1, 'gpu', 0),
		('t3', 'wf', 'later', '{}', '[]', 'pending', 3, 0, 1, 1, '', 9000)`); err != nil {
		t.Fatal(err)
	}
	r := d.Reads()
	for _, tc := range []struct {
		wf   string
		caps []string
		want int
	}{{"", nil, 1}, {"", []string{"gpu"}, 2}, {"wf", []string{"cuda"}, 1}, {"other", []string{"gpu"}, 0}} {
		if n, err := r.CountClaimable(ctx, tc.wf, tc.caps, 10); err != nil || n != tc.want {
			t.Errorf("CountClaimable(%q, %v) = %d, %v; want %d", tc.wf, tc.caps, n, err, tc.want)
		}
	}
	if ms, ok, err := r.NextDue(ctx); err != nil || !ok || ms != 9000 {
		t.Fatalf("NextDue = %d %v %v", ms, ok, err)
	}
	err := d.Write(ctx, func(tx tgdriver.Tx) error {
		refs, err := tx.DueTasks(ctx, 8999, 10)
		if err != nil || len(refs) != 0 {
			t.Errorf("DueTasks(8999) = %+v %v", refs, err)
		}
		refs, err = tx.DueTasks(ctx, 9000, 10)
		if err != nil || len(refs) != 1 || refs[0].WorkflowID != "wf" {
			t.Errorf("DueTasks(9000) = %+v %v", refs, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
