package tgpostgres

import (
	"context"
	"fmt"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver/drivertest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// BenchmarkClaim measures claim-next transactions (NextPending, a guarded
// claim and its event) from parallel writers over 8 workflows.
func BenchmarkClaim(b *testing.B) {
	ctx := context.Background()
	d, err := Open(ctx, pgtest.URL(b), Options{MaxConns: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	const workflows = 8
	for i := 0; i < b.N; i += 500 {
		if err := d.Write(ctx, func(tx tgdriver.Tx) error {
			for j := i; j < min(i+500, b.N); j++ {
				wf := fmt.Sprintf("wf%d", j%workflows)
				if _, err := tx.EnsureWorkflow(ctx, wf, 1); err != nil {
					return err
				}
				if _, err := drivertest.InsertTask(ctx, tx, tgdriver.TaskRow{TaskID: fmt.Sprintf("t%d", j), WorkflowID: wf, NodeID: fmt.Sprintf("n%d", j),
					Payload: `{}`, DependsOn: `[]`, State: "pending", MaxAttempts: 1, CreatedAtMS: 1, UpdatedAtMS: 1}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := d.Write(ctx, func(tx tgdriver.Tx) error {
				r, ok, err := tx.NextPending(ctx, "", nil)
				if err != nil || !ok {
					return fmt.Errorf("NextPending: %v %v", ok, err)
				}
				if _, ok, err := tx.UpdateTask(ctx, r.Seq, tgdriver.TaskSet{State: tgdriver.Val("claimed"), UpdatedAtMS: 2},
					tgdriver.TaskGuard{States: []string{"pending"}}); err != nil || !ok {
					return fmt.Errorf("claim: %v %v", ok, err)
				}
				head, n, err := tx.ChainHead(ctx, r.WorkflowID)
				if err != nil {
					return err
				}
				return tx.AppendEvents(ctx, []tgdriver.EventRow{tgdriver.EventRow{WorkflowID: r.WorkflowID, Seq: n + 1, TaskID: r.TaskID, Kind: "claimed",
					AtMS: 2, Detail: `{}`, PrevHash: head, Hash: fmt.Sprintf("h%d", n+1)}})
			}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
