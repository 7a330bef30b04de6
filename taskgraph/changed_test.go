package taskgraph

import (
	"context"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// Changed is closed by this store's next commit, and by a commit of
// another process on the same database (reported by the driver); a channel
// taken after a commit waits for the next one.
func TestChangedWakesOnEveryCommit(t *testing.T) {
	b := setup(t)
	ch := b.s.Changed()
	select {
	case <-ch:
		t.Fatal("Changed closed before any commit")
	default:
	}
	first := b.create(t, "wf", "a")
	testwait.Recv(t, "Changed after this store's commit", ch)
	ch = b.s.Changed()
	select {
	case <-ch:
		t.Fatal("a new Changed channel closed without a commit")
	default:
	}
	// Another process (a second store on the file) commits.
	other, err := openSQLite(context.Background(), b.path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, _, err := other.CancelTask(context.Background(), first.TaskID, "from the other process"); err != nil {
		t.Fatal(err)
	}
	testwait.Recv(t, "Changed after another process's commit", ch)
}
