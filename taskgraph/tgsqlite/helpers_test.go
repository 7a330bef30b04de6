package tgsqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver/drivertest"
)

// openTest opens a driver on a new file in t.TempDir() and starts it with h.
func openTest(t *testing.T, opts Options, h tgdriver.Hooks) *Driver {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.db")
	d, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.Start(h); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return d
}

// write runs fn through d.Write and fails the test on an error.
func write(t *testing.T, d *Driver, fn func(tgdriver.Tx) error) {
	t.Helper()
	if err := d.Write(context.Background(), fn); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

// newTask is a pending task row of workflow wf with node id node.
func newTask(wf, node string) tgdriver.TaskRow {
	return tgdriver.TaskRow{TaskID: wf + "-" + node, WorkflowID: wf, NodeID: node, Payload: `{}`, DependsOn: `[]`,
		State: "pending", MaxAttempts: 3, StatusMessage: "ready to claim", CreatedAtMS: 1000, UpdatedAtMS: 1000}
}

// addTask creates workflow wf if needed and inserts t, returning its seq.
func addTask(t *testing.T, tx tgdriver.Tx, r tgdriver.TaskRow) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := tx.EnsureWorkflow(ctx, r.WorkflowID, 1000); err != nil {
		t.Fatalf("EnsureWorkflow: %v", err)
	}
	seq, err := drivertest.InsertTask(ctx, tx, r)
	if err != nil {
		t.Fatalf("InsertTask: %v", err)
	}
	if err := tx.AddWorkflowTasks(ctx, r.WorkflowID, 1); err != nil {
		t.Fatalf("AddWorkflowTasks: %v", err)
	}
	return seq
}

// blockWriter submits a write that holds the writer until the returned
// release is called, and returns once the writer runs it: operations
// submitted meanwhile queue and form the next batch together.
func blockWriter(t *testing.T, d *Driver) (release func(), done <-chan error) {
	t.Helper()
	started, gate := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- d.Write(context.Background(), func(tgdriver.Tx) error {
			close(started)
			<-gate
			return nil
		})
	}()
	testwait.Recv(t, "the blocking write to start", started)
	return func() { close(gate) }, errc
}

// waitQueued waits until n operations wait in d's queue.
func waitQueued(t *testing.T, d *Driver, n int) {
	t.Helper()
	testwait.For(t, fmt.Sprintf("%d operations to queue", n), func() bool { return len(d.ops) >= n })
}
