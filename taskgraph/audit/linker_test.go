package audit

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// passDriver runs a Write's function on its one Tx.
type passDriver struct {
	tgdriver.Driver
	tx *passTx
}

func (d passDriver) Write(_ context.Context, fn func(tgdriver.Tx) error) error { return fn(d.tx) }

// passTx is a JournalTryLocker whose workflows of busy are held by
// another transaction and which has nothing else journaled.
type passTx struct {
	tgdriver.Tx
	busy       []string
	tried      [][]string
	lockChains int
}

func (t *passTx) TryLockJournaled(_ context.Context, ids []string) ([]tgdriver.WorkflowRow, []string, error) {
	t.tried = append(t.tried, slices.Clone(ids))
	return nil, t.busy, nil
}

func (t *passTx) LockChains(context.Context, []string) ([]tgdriver.WorkflowRow, error) {
	t.lockChains++
	return nil, nil
}

func (t *passTx) JournaledEvents(context.Context, []string, int) ([]tgdriver.EventRow, error) {
	return nil, nil
}

// TestLinkerPassSkipsHeldAndKeepsThem: the linker's own passes lock
// without waiting (TryLockJournaled, never LockChains), and a workflow
// whose row another transaction held joins the next pass rather than being
// dropped (or passed over at once); readers' linking (LinkWorkflows)
// locks nothing when nothing is journaled, and waits for the rows
// (LockChains) when one is held.
func TestLinkerPassSkipsHeldAndKeepsThem(t *testing.T) {
	ctx := context.Background()
	tx := &passTx{busy: []string{"a"}}
	l := NewLinker(passDriver{tx: tx}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if n, err := l.pass(ctx, []string{"a", "b"}); err != nil || n != 0 {
		t.Fatalf("pass = %d, %v", n, err)
	}
	if tx.lockChains != 0 || len(tx.tried) != 1 {
		t.Fatalf("pass: LockChains %d times, TryLockJournaled %d; want 0 and 1", tx.lockChains, len(tx.tried))
	}
	l.mu.Lock()
	_, kept := l.wfs["a"]
	_, keptB := l.wfs["b"]
	l.mu.Unlock()
	if !kept || keptB {
		t.Errorf("after a pass that found a held: next pass's workflows %v, want [a]", l.wfs)
	}
	select {
	case <-l.wake:
		t.Error("a held workflow woke the linker for a pass of its own")
	default:
	}
	if err := l.LinkWorkflows(ctx, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if tx.lockChains != 1 || len(tx.tried) != 2 {
		t.Errorf("LinkWorkflows of a held workflow: LockChains %d times, TryLockJournaled %d; want 1 and 2 (a reader looks, then waits)", tx.lockChains, len(tx.tried))
	}
	// A reader's link of workflows with nothing journaled locks nothing,
	// so its transaction writes no WAL.
	tx.busy = nil
	if err := l.LinkWorkflows(ctx, []string{"b"}); err != nil {
		t.Fatal(err)
	}
	if tx.lockChains != 1 || len(tx.tried) != 3 {
		t.Errorf("LinkWorkflows with nothing journaled: LockChains %d times in all, TryLockJournaled %d; want still 1, and 3", tx.lockChains, len(tx.tried))
	}
}
