package tgpostgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// A cancel reads its task after locking the workflow, but hot batches lock
// task rows only: a batch may end the task between the cancel's read and
// its guarded update. The update then changes no row, and the cancel runs
// again and answers from what it reads then (the task already ended:
// unchanged), never an internal error. Here a raw transaction holds the
// task's row, lets the cancel read it and wait on its update, and cancels
// the task itself first.
func TestCancelRacingAnotherWriterRunsAgain(t *testing.T) {
	t.Parallel()
	ctx := testwait.Context(t)
	url := pgtest.URL(t)
	// No lock timeout: the cancel waits on the row for as long as the test
	// holds it, however slow the machine.
	drv, err := tgpostgres.Open(ctx, url, tgpostgres.Options{MaxConns: 4, LockTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := tg.OpenDriver(ctx, drv, tg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.CreateTask(ctx, "wf", tg.NodeSpec{NodeID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	id := c.Task.TaskID
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT 1 FROM tasks WHERE task_id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		t       tg.Task
		changed bool
		err     error
	}
	// The wait is watched from a connection of its own: inside tx,
	// pg_stat_activity is a snapshot taken at its first read, so a count
	// read there before the cancel waited stays 0 (the test hung on a
	// loaded machine, where the cancel came second).
	watch, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(context.Background())
	done := make(chan answer, 1)
	go func() {
		t, changed, err := s.CancelTask(ctx, id, "racing")
		done <- answer{t, changed, err}
	}()
	// The store's only transaction is the cancel: a lock wait is its update.
	testwait.For(t, "the cancel's update to wait for the task's row", func() bool {
		var n int
		if err := watch.QueryRow(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 && len(done) > 0 {
			a := <-done
			t.Fatalf("the cancel answered before it waited for the row: %+v changed=%v err=%v", a.t, a.changed, a.err)
		}
		return n > 0
	})
	if _, err := tx.Exec(ctx, `UPDATE tasks SET state = 'cancelled', status_message = 'the other writer' WHERE task_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil || a.changed || a.t.State != tg.StateCancelled || a.t.StatusMessage != "the other writer" {
		t.Fatalf("cancel after another writer ended the task: %+v changed=%v err=%v; want the other writer's cancellation, unchanged", a.t, a.changed, a.err)
	}
}
