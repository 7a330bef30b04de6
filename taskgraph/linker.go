package taskgraph

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// linkBatch bounds the journaled events one linking transaction moves into
// a workflow's chain.
const linkBatch = 1024

// linkScan bounds the workflows one pass of the linker looks at.
const linkScan = 256

// linkEvery is how often the linker looks for journaled events it was not
// told about (another process's, or one that stopped before linking its
// own).
const linkEvery = time.Second

// linker links journaled events into their workflows' chains (see
// tgdriver.Info.JournalEvents). A write journals its events and, once it
// commits, kicks the linker; the linker also looks for journaled events
// every linkEvery, so that the events of a process that stopped before
// linking them are linked by another. Any number of linkers (one per
// store, on any number of replicas) may run at once: linking a workflow
// locks its row, so they take turns on a workflow, and each moves what the
// journal holds in journal order.
type linker struct {
	s    *Store
	wake chan struct{} // holds at most one kick
}

func newLinker(s *Store) *linker { return &linker{s: s, wake: make(chan struct{}, 1)} }

// kick asks for a pass soon: one that starts after this call. It never
// blocks.
func (l *linker) kick() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run links journaled events until the store closes.
func (l *linker) run() {
	defer l.s.wg.Done()
	ctx, cancel := l.s.quitContext()
	defer cancel()
	t := time.NewTicker(linkEvery)
	defer t.Stop()
	for {
		select {
		case <-l.s.quit:
			return
		case <-l.wake:
		case <-t.C:
		}
		if err := l.s.linkAll(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, ErrClosed) {
			l.s.log.Warn("linking journaled events into their chains failed; retrying", "err", err)
		}
	}
}

// linkAll links the journaled events of every workflow that has some.
func (s *Store) linkAll(ctx context.Context) error {
	if !s.journal || s.readOnly {
		return nil
	}
	for {
		wfs, err := s.drv.Reads().JournaledWorkflows(ctx, linkScan)
		if err != nil {
			return fmt.Errorf("find journaled events: %w", err)
		}
		slices.Sort(wfs)
		for _, wf := range wfs {
			if err := s.linkWorkflow(ctx, wf); err != nil {
				return err
			}
		}
		if len(wfs) < linkScan {
			return nil
		}
	}
}

// linkWorkflow links every journaled event of workflowID, in journal order,
// onto its chain. Its reads of the history see those events linked.
func (s *Store) linkWorkflow(ctx context.Context, workflowID string) error {
	if !s.journal || s.readOnly {
		return nil
	}
	for {
		n := 0
		err := s.drv.Write(ctx, func(tx tgdriver.Tx) error {
			n = 0
			exists, err := tx.LockWorkflow(ctx, workflowID)
			if err != nil {
				return fmt.Errorf("lock workflow %s: %w", workflowID, err)
			}
			evs, err := tx.JournaledEvents(ctx, workflowID, linkBatch)
			if err != nil {
				return fmt.Errorf("read the journaled events of workflow %s: %w", workflowID, err)
			}
			if len(evs) == 0 {
				return nil
			}
			if !exists {
				// Events journaled for a workflow that is gone (pruned, or
				// its creation rolled back cannot journal): nothing to link
				// them to. Never expected; verify reports them.
				return fmt.Errorf("%w: workflow %s has %d journaled events but no row", errInternal, workflowID, len(evs))
			}
			head, count, err := tx.ChainHead(ctx, workflowID)
			if err != nil {
				return fmt.Errorf("read chain head of workflow %s: %w", workflowID, err)
			}
			for i := range evs {
				count++
				linkEvent(&evs[i], head, count)
				head = evs[i].Hash
			}
			if err := tx.LinkJournaled(ctx, evs); err != nil {
				return fmt.Errorf("link the journaled events of workflow %s: %w", workflowID, err)
			}
			n = len(evs)
			return nil
		})
		if err != nil {
			return err
		}
		if n < linkBatch {
			return nil
		}
	}
}

// linkTaskWorkflow links the journaled events of taskID's workflow.
func (s *Store) linkTaskWorkflow(ctx context.Context, taskID string) error {
	if !s.journal || s.readOnly {
		return nil
	}
	tr, err := s.drv.Reads().TaskByID(ctx, taskID)
	if errors.Is(err, tgdriver.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.linkWorkflow(ctx, tr.WorkflowID)
}

// LinkHistory links every event recorded so far into its workflow's chain.
// With a driver that journals events (PostgreSQL), a server links them
// within moments of their commit; readers of the history (WorkflowEvents,
// TaskEvents, VerifyHistory, anchors) link what they read first. It is a
// no-op on other drivers and on a read-only store.
func (s *Store) LinkHistory(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.linkAll(ctx)
}
