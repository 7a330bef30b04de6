package tgsqlite

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver/drivertest"
)

// cycle is the driver's share of one claim and one complete: find the next
// pending task, claim it (guarded update), append an event, complete it
// (fenced update), release its dependents, append an event.
func cycle(tx tgdriver.Tx, now int64) error {
	ctx := context.Background()
	r, ok, err := tx.NextPending(ctx, "", nil)
	if err != nil || !ok {
		return err
	}
	tok := []byte("0123456789abcdef0123456789abcdef")
	r, ok, err = tx.UpdateTask(ctx, r.Seq, tgdriver.TaskSet{State: tgdriver.Val("claimed"), Owner: tgdriver.Val("w"),
		Generation: tgdriver.Val(r.Generation + 1), TokenHash: tgdriver.Val(tok), LeaseExpiresAtMS: tgdriver.Val(now + 30000),
		LeaseMS: tgdriver.Val[int64](30000), AddAttempt: true, StatusMessage: tgdriver.Val("claimed by w"), UpdatedAtMS: now},
		tgdriver.TaskGuard{States: []string{"pending"}, Generation: tgdriver.Val(r.Generation)})
	if err != nil || !ok {
		return err
	}
	if err := appendOne(tx, r, "claim", now); err != nil {
		return err
	}
	r, ok, err = tx.UpdateTask(ctx, r.Seq, tgdriver.TaskSet{State: tgdriver.Val("completed"), TokenHash: tgdriver.Null[[]byte](),
		LeaseExpiresAtMS: tgdriver.Null[int64](), Result: tgdriver.Val(`{}`), StatusMessage: tgdriver.Val("completed"), UpdatedAtMS: now},
		tgdriver.TaskGuard{States: []string{"claimed"}, Generation: tgdriver.Val(r.Generation), Owner: tgdriver.Val("w"),
			TokenHash: tgdriver.Val(tok), LeaseLiveAtMS: tgdriver.Val(now)})
	if err != nil || !ok {
		return err
	}
	if _, err := tx.DecrementUnmet(ctx, []int64{r.Seq}); err != nil {
		return err
	}
	return appendOne(tx, r, "complete", now)
}

func appendOne(tx tgdriver.Tx, r tgdriver.TaskRow, kind string, now int64) error {
	ctx := context.Background()
	head, n, err := tx.ChainHead(ctx, r.WorkflowID)
	if err != nil {
		return err
	}
	return tx.AppendEvents(ctx, []tgdriver.EventRow{tgdriver.EventRow{WorkflowID: r.WorkflowID, Seq: n + 1, TaskID: r.TaskID, Kind: kind,
		Owner: "w", Generation: r.Generation, AtMS: now, Detail: `{}`, PrevHash: head, Hash: head + "x"[:1] + strconv.FormatInt(n, 10)}})
}

func benchDriver(b *testing.B, tasks int) *Driver {
	d := startedDriver(b)
	err := d.Write(context.Background(), func(tx tgdriver.Tx) error {
		ctx := context.Background()
		for i := range tasks {
			wf := "wf" + strconv.Itoa(i%64)
			if _, err := tx.EnsureWorkflow(ctx, wf, 1); err != nil {
				return err
			}
			r := newTask(wf, "n"+strconv.Itoa(i))
			if _, err := drivertest.InsertTask(ctx, tx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkCycle: one claim+complete per Write, one writer at a time (every
// batch has one operation: no savepoint).
func BenchmarkCycle(b *testing.B) {
	d := benchDriver(b, b.N+1)
	b.ResetTimer()
	for i := range b.N {
		if err := d.Write(context.Background(), func(tx tgdriver.Tx) error { return cycle(tx, int64(2000+i)) }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCycleParallel: many callers at once, so batches group several
// operations, each in a savepoint.
func BenchmarkCycleParallel(b *testing.B) {
	d := benchDriver(b, b.N+1)
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := d.Write(context.Background(), func(tx tgdriver.Tx) error { return cycle(tx, 2000) }); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkKeyHead: the first claimable task of one of 100 concurrency
// keys, another key each time, as a completion of a keyed task asks. Its
// statement is prepared once (KeyHead's CAST): 72 µs a call here, where a
// bare parameter made SQLite prepare it again at every call (166 µs).
func BenchmarkKeyHead(b *testing.B) {
	d := startedDriver(b)
	ctx := context.Background()
	err := d.Write(ctx, func(tx tgdriver.Tx) error {
		if _, err := tx.EnsureWorkflow(ctx, "wf", 1); err != nil {
			return err
		}
		for i := range 2000 {
			r := newTask("wf", "n"+strconv.Itoa(i))
			r.ConcurrencyKey = "k" + strconv.Itoa(i%100)
			if _, err := drivertest.InsertTask(ctx, tx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if _, ok, err := d.Reads().KeyHead(ctx, "k"+strconv.Itoa(i%100)); err != nil || !ok {
			b.Fatalf("KeyHead: %v, %v", ok, err)
		}
	}
}

// startedDriver opens a driver on a new file in b's folder and starts it.
func startedDriver(b *testing.B) *Driver {
	d, err := Open(context.Background(), filepath.Join(b.TempDir(), "tasks.db"), Options{Sync: SyncNormal})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	if err := d.Start(tgdriver.Hooks{}); err != nil {
		b.Fatal(err)
	}
	return d
}
