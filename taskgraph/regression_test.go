package taskgraph

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// Regression: Close held the submit mutex while it waited for the background
// loops, so a loop that submitted a write after Close began (the sweeper
// expiring a lapsed lease at shutdown) blocked on that mutex and Close waited
// for it forever. A write submitted during Close must get ErrClosed instead.
func TestCloseDoesNotDeadlockWithBackgroundWrite(t *testing.T) {
	b := setup(t)
	got := make(chan error, 1)
	// Stand in for the sweeper: a background loop tracked by the store's
	// WaitGroup that submits a write once shutdown has begun.
	b.s.wg.Add(1)
	go func() {
		defer b.s.wg.Done()
		<-b.s.quit
		got <- b.s.do(b.ctx, func(*wtx) error { return nil })
	}()
	closed := make(chan error, 1)
	go func() { closed <- b.s.Close() }()
	if err := testwait.Recv(t, "Close to return with a background loop that submitted a write (a deadlock)", closed); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Fatalf("write submitted during Close: %v, want ErrClosed", err)
	}
}

// Regression: a prune whose operation failed reported the tasks and events
// of the workflows it had removed before the failure, although the failure
// rolled those removals back. The result now counts committed removals only.
func TestFailedPruneReportsNothingRemoved(t *testing.T) {
	b := setup(t)
	for _, wf := range []string{"wf1", "wf2"} {
		b.create(t, wf, "a")
		if _, err := b.s.AbortWorkflow(b.ctx, wf, alice); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Second)
	}
	// Make the removal of wf2's history fail, after wf1's has been done.
	mustExec(t, rawDB(t, b.path), `CREATE TRIGGER keep_wf2 BEFORE DELETE ON events WHEN OLD.workflow_id = 'wf2'
		BEGIN SELECT RAISE(ABORT, 'wf2 is under legal hold'); END`)
	before := fingerprint(t, b.path)
	res, err := b.s.Prune(b.ctx, b.clock.Now())
	if err == nil || !strings.Contains(err.Error(), "legal hold") {
		t.Fatalf("prune: %v", err)
	}
	if len(res.Workflows) != 0 || res.Tasks != 0 || res.Events != 0 {
		t.Fatalf("a failed prune reported removals: %+v", res)
	}
	if fingerprint(t, b.path) != before {
		t.Fatal("a failed prune changed the database")
	}
}
