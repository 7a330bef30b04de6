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
