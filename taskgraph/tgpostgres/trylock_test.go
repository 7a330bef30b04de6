package tgpostgres

import (
	"context"
	"slices"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// xidAssigned reports whether w's transaction took a transaction id: one
// that did not commits without writing (and flushing) WAL.
func xidAssigned(ctx context.Context, t *testing.T, tx tgdriver.Tx) bool {
	t.Helper()
	var yes bool
	if err := tx.(*wtx).c.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned() IS NOT NULL`).Scan(&yes); err != nil {
		t.Fatal(err)
	}
	return yes
}

// TestTryLockJournaledSkipsEmptyAndHeld: a linker's own pass
// (TryLockJournaled) locks only workflows with journaled events, and of
// those only rows no other transaction holds, without waiting for them; a
// pass that finds nothing to link locks nothing, so its transaction has
// no xid and its commit flushes no WAL (LockChains, which the readers'
// linking still uses, takes one). Before, every replica's linker locked
// every workflow it was kicked for and waited for the other replicas'
// passes on those rows, then committed what it found, often nothing, with
// a WAL flush.
func TestTryLockJournaledSkipsEmptyAndHeld(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	d := open(t, url, Options{})
	addTask(t, d, "a", "n1", "pending")
	addTask(t, d, "b", "n1", "pending")
	all := []string{"a", "b", "gone"}

	// Nothing journaled: nothing locked, no xid; LockChains takes one.
	if err := d.Write(ctx, func(tx tgdriver.Tx) error {
		locked, busy, err := tx.(tgdriver.JournalTryLocker).TryLockJournaled(ctx, all)
		if err != nil {
			return err
		}
		if len(locked) != 0 || len(busy) != 0 {
			t.Errorf("nothing journaled: locked %v, busy %v; want none", locked, busy)
		}
		if xidAssigned(ctx, t, tx) {
			t.Error("a pass that found nothing journaled took a transaction id (its commit flushes WAL)")
		}
		if _, err := tx.LockChains(ctx, all); err != nil {
			return err
		}
		if !xidAssigned(ctx, t, tx) {
			t.Error("LockChains took no transaction id: the check above proves nothing")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Journal an event of a and of b.
	if err := d.Write(ctx, func(tx tgdriver.Tx) error {
		return tx.JournalEvents(ctx, []tgdriver.EventRow{
			{WorkflowID: "a", TaskID: "a-n1", Kind: "created", AtMS: 1, Detail: "{}", HashVersion: 2},
			{WorkflowID: "b", TaskID: "b-n1", Kind: "created", AtMS: 1, Detail: "{}", HashVersion: 2},
		})
	}); err != nil {
		t.Fatal(err)
	}

	// Another transaction holds a's row (as another replica's linker
	// would): the pass locks b, reports a busy, and does not wait.
	held, release := make(chan struct{}), make(chan struct{})
	holder := make(chan error, 1)
	go func() {
		holder <- d.Write(ctx, func(tx tgdriver.Tx) error {
			if _, err := tx.LockChains(ctx, []string{"a"}); err != nil {
				return err
			}
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	if err := d.Write(ctx, func(tx tgdriver.Tx) error {
		locked, busy, err := tx.(tgdriver.JournalTryLocker).TryLockJournaled(ctx, all)
		if err != nil {
			return err
		}
		if len(locked) != 1 || locked[0].WorkflowID != "b" || !slices.Equal(busy, []string{"a"}) {
			t.Errorf("a held: locked %v, busy %v; want [b], [a]", locked, busy)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-holder; err != nil {
		t.Fatal(err)
	}
	if err := d.Write(ctx, func(tx tgdriver.Tx) error {
		locked, busy, err := tx.(tgdriver.JournalTryLocker).TryLockJournaled(ctx, []string{"b", "a", "a"})
		if err != nil {
			return err
		}
		var got []string
		for _, w := range locked {
			got = append(got, w.WorkflowID)
		}
		if !slices.Equal(got, []string{"a", "b"}) || len(busy) != 0 {
			t.Errorf("released: locked %v, busy %v; want [a b] in id order, none busy", got, busy)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
