package taskgraph

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// The explicit checkpoint beside a running store: while a reader holds its
// transaction it copies what it can and leaves the WAL, without waiting for
// the reader or stopping the store's writes; once the reader is gone it
// empties the WAL, and the store goes on.
func TestCheckpointNeverWaitsAndTruncatesWhenIdle(t *testing.T) {
	b := setupWith(t, Options{}, tgsqlite.Options{BusyTimeout: time.Hour})
	a := b.create(t, "wf", "a")
	b.create(t, "wf", "b", "a")
	release := holdReader(t, b.path)
	c := b.claim(t, "w1", a.TaskID, time.Minute) // after the reader's snapshot
	withoutWaiting(t, "Checkpoint beside a reader", func() {
		res, err := tgsqlite.Checkpoint(b.ctx, b.path)
		if err != nil || res.Truncated || res.WALFrames <= 0 || res.CopiedFrames >= res.WALFrames || res.WALBytes == 0 {
			t.Errorf("Checkpoint beside a reader: %+v %v; want frames left for the reader and the WAL kept", res, err)
		}
		if _, err := b.s.Heartbeat(b.ctx, holder(c), time.Minute); err != nil {
			t.Errorf("heartbeat after the checkpoint: %v", err)
		}
	})
	release()
	res, err := tgsqlite.Checkpoint(b.ctx, b.path)
	if err != nil || !res.Truncated || res.WALBytes != 0 || res.CopiedFrames != res.WALFrames {
		t.Fatalf("Checkpoint with no reader: %+v %v; want the WAL emptied", res, err)
	}
	if fi, err := os.Stat(b.path + "-wal"); err != nil || fi.Size() != 0 {
		t.Fatalf("WAL after the truncating checkpoint: %v %v", fi, err)
	}
	if _, err := b.s.Complete(b.ctx, holder(c), json.RawMessage(`1`)); err != nil {
		t.Fatalf("complete after the checkpoint: %v", err)
	}
	if got, err := b.s.Task(b.ctx, a.TaskID); err != nil || got.State != StateCompleted {
		t.Fatalf("after the checkpoint: %+v %v", got, err)
	}
}
