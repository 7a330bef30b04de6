package tgsqlite

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// Once commits take the WAL past checkpointAt, the checkpointer copies it
// into the database file in the background: the database file grows while
// the writer goes on, and the writer's own threshold (far higher) is never
// reached. A small WAL is left alone.
func TestBackgroundCheckpointCopiesTheWAL(t *testing.T) {
	d := openTest(t, Options{}, tgdriver.Hooks{})
	size := func(p string) int64 {
		t.Helper()
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	// The setting is the writer's connection's, which the writer holds from
	// Open on (wdb has no other): read it through the writer. A read on wdb
	// itself waited for that connection forever whenever the writer had
	// taken it first.
	var autockpt int
	write(t, d, func(tx tgdriver.Tx) error {
		return tx.(*wtx).queryRow(context.Background(), `PRAGMA wal_autocheckpoint`).Scan(&autockpt)
	})
	if autockpt != writerAutoCheckpoint {
		t.Fatalf("the writer's wal_autocheckpoint is %d, want %d", autockpt, writerAutoCheckpoint)
	}
	before := size(d.path)
	// A few small commits: below the threshold, nothing is copied.
	for i := range 3 {
		write(t, d, func(tx tgdriver.Tx) error {
			addTask(t, tx, newTask("small", fmt.Sprint(i)))
			return nil
		})
	}
	if got := size(d.path); got != before {
		t.Fatalf("the database file changed from %d to %d bytes after small commits: a checkpoint ran below the threshold", before, got)
	}
	// Then commits of large payloads until the WAL passes the threshold.
	payload := `{"x":"` + strings.Repeat("y", 64<<10) + `"}`
	for i := 0; size(d.path+"-wal") < checkpointAt; i++ {
		write(t, d, func(tx tgdriver.Tx) error {
			r := newTask("big", fmt.Sprint(i))
			r.Payload = payload
			addTask(t, tx, r)
			return nil
		})
	}
	// One more commit, which sees the WAL past the threshold and kicks
	// the checkpointer; then the file grows with what it copies.
	write(t, d, func(tx tgdriver.Tx) error {
		addTask(t, tx, newTask("big", "last"))
		return nil
	})
	testwait.For(t, "the background checkpoint to copy the WAL into the database file", func() bool { return size(d.path) > before })
}
