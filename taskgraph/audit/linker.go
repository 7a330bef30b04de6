package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// linkBatch bounds the journaled events one linking transaction moves into
// their chains.
const linkBatch = 1024

// linkScan bounds the workflows one pass of the linker looks at.
const linkScan = 256

// linkEvery is how often the linker looks for journaled events it was not
// told about (another process's, or one that stopped before linking its
// own).
const linkEvery = time.Second

// linkDelay is how long the linker lets the kicks of commits gather before
// a pass, so that one linking transaction serves many of them. Linking is
// off the writers' path (readers of the history link first), so the delay
// costs no caller anything; a short one made linking a third of the
// database's transactions under load (issue 23).
const linkDelay = 50 * time.Millisecond

// maxLinkDelay bounds how far the linker stretches linkDelay while its
// passes find few events (linkFew).
const maxLinkDelay = 400 * time.Millisecond

// linkFew is how many events a pass must link for the linker to keep its
// delay: a pass that links fewer doubles the delay before the next (up to
// maxLinkDelay), one that links more than 4*linkFew halves it (down to
// linkDelay). A pass costs a transaction and a commit (a WAL flush: the
// row locks alone give it an xid) whatever it carries. With several
// replicas, every replica's linker is kicked by its own commits, and each
// pass links what all of them journaled: at 50 ms each, two replicas'
// linkers passed 3.4 times as often as one replica's, and each pass linked
// 16 events where one replica's linked 67 (bench, PostgreSQL, N=5000,
// W=8). Passes that find few events are also those that meet the other
// linkers' passes on the workflows' rows.
const linkFew = 64

// linkSoon is how many kicked events make the linker start its pass before
// linkDelay is over, so that a pass stays within one linking transaction.
const linkSoon = linkBatch / 2

// linkBodies bounds the bodies of kicked events a linker keeps for its
// passes (Linker.Kick): some four passes' worth at the rate that makes a
// pass start early (linkSoon). A body it no longer holds is read back.
const linkBodies = 4 * linkBatch

// Linker links journaled events into their workflows' chains (see
// tgdriver.Info.JournalEvents). A write journals its events and, once it
// commits, kicks the linker with the workflows it journaled for; the
// linker gathers kicks for linkDelay (longer while its passes find few
// events: linkFew) and links them in one transaction. It
// also looks for journaled events every linkEvery, so that the events of a
// process that stopped before linking them are linked by another. Any
// number of linkers (one per store, on any number of replicas) may run at
// once: linking locks the workflows' rows, so one at a time links a
// workflow, and each moves what the journal holds, in journal order. A
// linker's own passes wait for no row (see linkWorkflows): a workflow held
// by another (most often another replica's linker) joins the next pass.
type Linker struct {
	drv  tgdriver.Driver
	log  *slog.Logger
	wake chan struct{} // holds at most one kick
	soon chan struct{} // holds a signal once linkSoon events were kicked

	mu      sync.Mutex
	wfs     map[string]struct{} // kicked for, not yet linked
	pending int                 // events kicked for, not yet taken by a pass
	bodies  bodyCache           // the bodies of the events kicked with, by id

	fromKicks, fromDatabase atomic.Int64 // bodies linked, by where they came from
}

// bodyCache holds the bodies of up to linkBodies events by id; a new one
// pushes out the oldest (ring).
type bodyCache struct {
	byID map[int64]tgdriver.EventRow
	ring []int64
	next int
}

func (c *bodyCache) put(e tgdriver.EventRow) {
	if c.byID == nil {
		c.byID, c.ring = make(map[int64]tgdriver.EventRow, linkBodies), make([]int64, linkBodies)
	}
	delete(c.byID, c.ring[c.next])
	c.ring[c.next] = e.EventID
	c.next = (c.next + 1) % len(c.ring)
	c.byID[e.EventID] = e
}

// NewLinker returns a linker of the events drv journals; it logs the
// failures of its passes to log.
func NewLinker(drv tgdriver.Driver, log *slog.Logger) *Linker {
	return &Linker{drv: drv, log: log, wake: make(chan struct{}, 1), soon: make(chan struct{}, 1), wfs: map[string]struct{}{}}
}

// Kick asks for a pass soon for the workflows of evs (events just
// journaled and committed). It never blocks.
//
// The events it keeps (bodyCache): those with an EventID, which a driver
// that is a tgdriver.JournalIDReader sets when it journals them. A pass
// takes their bodies from here and reads back only the others (another
// process's, or pushed out): the bodies are what the writer sent, the
// database holds them as sent (text columns), and what a pass links is
// verified against the database by every reader of the chain.
func (l *Linker) Kick(evs []tgdriver.EventRow) {
	l.mu.Lock()
	for _, e := range evs {
		l.wfs[e.WorkflowID] = struct{}{}
		if e.EventID != 0 && e.Seq == 0 && e.Hash == "" {
			if e.HashVersion == 0 {
				e.HashVersion = HashV1 // as the driver records it
			}
			l.bodies.put(e)
		}
	}
	l.pending += len(evs)
	full := l.pending >= linkSoon
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	if full {
		select {
		case l.soon <- struct{}{}:
		default:
		}
	}
}

// Run links journaled events until ctx is done (the store closes).
func (l *Linker) Run(ctx context.Context) {
	t := time.NewTicker(linkEvery)
	defer t.Stop()
	wait := linkDelay
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
			delay := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				delay.Stop()
				return
			case <-l.soon:
			case <-delay.C:
			}
			delay.Stop()
			l.mu.Lock()
			wfs := slices.Collect(maps.Keys(l.wfs))
			clear(l.wfs)
			l.pending = 0
			l.mu.Unlock()
			select { // a signal of the events this pass takes
			case <-l.soon:
			default:
			}
			var n int
			n, err = l.pass(ctx, wfs)
			switch {
			case err != nil:
			case n < linkFew:
				wait = min(2*wait, maxLinkDelay)
			case n > 4*linkFew:
				wait = max(wait/2, linkDelay)
			}
		case <-t.C:
			err = l.linkAll(ctx, true)
		}
		if err != nil && ctx.Err() == nil && !errors.Is(err, tgdriver.ErrClosed) {
			l.log.Warn("linking journaled events into their chains failed; retrying", "err", err)
		}
	}
}

// LinkAll links the journaled events of every workflow that has some.
func (l *Linker) LinkAll(ctx context.Context) error {
	return l.linkAll(ctx, false)
}

// linkAll is LinkAll; with try, a pass of the linker's own (pass).
func (l *Linker) linkAll(ctx context.Context, try bool) error {
	for {
		wfs, err := l.drv.Reads().JournaledWorkflows(ctx, linkScan)
		if err != nil {
			return fmt.Errorf("find journaled events: %w", err)
		}
		if try {
			_, err = l.pass(ctx, wfs)
		} else {
			_, _, err = l.linkWorkflows(ctx, wfs, false)
		}
		if err != nil {
			return err
		}
		if len(wfs) < linkScan {
			return nil
		}
	}
}

// pass is one of the linker's own passes over workflowIDs: it links what
// it can without waiting (try, see linkWorkflows). The workflows whose rows
// another transaction held join the next pass's, without a pass of their
// own: the holder is most often another replica's linker, which links what
// was journaled before it read the journal, and what was journaled after
// is linked by the next pass a commit kicks or, at the latest, by the
// linkEvery look at the whole journal. A pass of its own for them (a wake)
// made two replicas' linkers pass and commit 1.3-1.7 times as often, each
// linking a few events. It reports how many events it linked.
func (l *Linker) pass(ctx context.Context, workflowIDs []string) (int, error) {
	n, busy, err := l.linkWorkflows(ctx, workflowIDs, true)
	if len(busy) > 0 {
		l.mu.Lock()
		for _, wf := range busy {
			l.wfs[wf] = struct{}{}
		}
		l.mu.Unlock()
	}
	return n, err
}

// LinkWorkflows links every journaled event of the workflows of
// workflowIDs onto their chains, in journal order, a transaction of at most
// linkBatch events at a time. The history's reads after it see those
// events linked.
func (l *Linker) LinkWorkflows(ctx context.Context, workflowIDs []string) error {
	_, _, err := l.linkWorkflows(ctx, workflowIDs, false)
	return err
}

// errWaitForRows ends a reader's transaction that found a journaled
// workflow's row held (TryLockJournaled), having written nothing: it runs
// again locking every row, waiting (LockChains), so that the rows are
// taken in workflow id order as every writer takes them.
var errWaitForRows = errors.New("a journaled workflow's row is held: lock them all, waiting")

// linkWorkflows is LinkWorkflows, and reports how many events it linked.
// With a Tx that is a tgdriver.JournalTryLocker, it first looks for the
// workflows that have journaled events and locks only those, without
// waiting: when none has, it locks nothing, so its commit flushes no WAL
// (a history read that links first did at every read). With try (the
// linker's own passes) it then links those it could lock and returns the
// others (busy): several replicas' linkers are kicked by their own commits
// for the same workflows, and a pass that waited queued on the rows
// another's pass held (through that pass's commit), then found little or
// nothing left. Without try (a reader), a held row makes it lock them all
// again, waiting (errWaitForRows).
func (l *Linker) linkWorkflows(ctx context.Context, workflowIDs []string, try bool) (linked int, busy []string, err error) {
	if len(workflowIDs) == 0 {
		return 0, nil, nil
	}
	skipped := map[string]struct{}{}
	defer func() { busy = slices.Sorted(maps.Keys(skipped)) }()
	wait := false                // a reader met a held row: it locks them all, waiting
	var done []tgdriver.EventRow // what the last pass linked
	for {
		n := 0
		var held []string
		err := l.drv.Write(ctx, func(tx tgdriver.Tx) error {
			n, held = 0, nil
			ids := workflowIDs
			var heads []tgdriver.WorkflowRow
			var err error
			if t, ok := tx.(tgdriver.JournalTryLocker); ok && !wait {
				heads, held, err = t.TryLockJournaled(ctx, workflowIDs)
				if err != nil {
					return fmt.Errorf("lock workflows: %w", err)
				}
				if !try && len(held) > 0 {
					return errWaitForRows
				}
				if len(heads) == 0 {
					return nil
				}
				ids = make([]string, len(heads))
				for i, h := range heads {
					ids[i] = h.WorkflowID
				}
			} else if heads, err = tx.LockChains(ctx, workflowIDs); err != nil {
				return fmt.Errorf("lock workflows: %w", err)
			}
			evs, err := l.journaled(ctx, tx, ids)
			if err != nil {
				return fmt.Errorf("read the journal: %w", err)
			}
			if len(evs) == 0 {
				return nil
			}
			type head struct {
				hash  string
				count int64
			}
			at := make(map[string]*head, len(heads))
			for _, h := range heads {
				at[h.WorkflowID] = &head{h.HeadHash, h.EventCount}
			}
			for i := range evs {
				h := at[evs[i].WorkflowID]
				if h == nil {
					// Events journaled for a workflow that is gone: never
					// expected (a prune keeps a workflow with journaled
					// events); verify reports them.
					return fmt.Errorf("internal error: workflow %s has journaled events but no row", evs[i].WorkflowID)
				}
				h.count++
				Link(&evs[i], h.hash, h.count)
				h.hash = evs[i].Hash
			}
			if err := tx.LinkJournaled(ctx, evs); err != nil {
				return fmt.Errorf("link journaled events: %w", err)
			}
			n, done = len(evs), evs
			return nil
		})
		if err == nil && len(done) > 0 {
			l.mu.Lock()
			for _, e := range done {
				delete(l.bodies.byID, e.EventID)
			}
			l.mu.Unlock()
		}
		done = nil
		if errors.Is(err, errWaitForRows) {
			wait = true
			continue
		}
		for _, wf := range held {
			skipped[wf] = struct{}{}
		}
		if err != nil {
			return linked, nil, err
		}
		linked += n
		if n < linkBatch {
			return linked, nil, nil
		}
	}
}

// journaled returns the journaled events of the workflows of workflowIDs
// (up to linkBatch, as tx.JournaledEvents). With a Tx that is a
// tgdriver.JournalIDReader it reads the journal's ids alone, takes the
// bodies of the events it was kicked with, and reads back the others by
// id in one more statement; an event whose body is nowhere is left out,
// as JournaledEvents leaves it, and LinkJournaled then refuses the pass
// (its journal row would be linked in part).
func (l *Linker) journaled(ctx context.Context, tx tgdriver.Tx, workflowIDs []string) ([]tgdriver.EventRow, error) {
	r, ok := tx.(tgdriver.JournalIDReader)
	if !ok {
		return tx.JournaledEvents(ctx, workflowIDs, linkBatch)
	}
	refs, err := r.JournaledEventIDs(ctx, workflowIDs, linkBatch)
	if err != nil || len(refs) == 0 {
		return nil, err
	}
	evs, have := make([]tgdriver.EventRow, len(refs)), make([]bool, len(refs))
	var missing []tgdriver.EventRef
	l.mu.Lock()
	for i, ref := range refs {
		evs[i], have[i] = l.bodies.byID[ref.EventID]
		if have[i] = have[i] && evs[i].WorkflowID == ref.WorkflowID; !have[i] {
			missing = append(missing, ref)
		}
	}
	l.mu.Unlock()
	l.fromKicks.Add(int64(len(refs) - len(missing)))
	if len(missing) == 0 {
		return evs, nil
	}
	read, err := r.JournaledBodies(ctx, missing)
	if err != nil {
		return nil, err
	}
	l.fromDatabase.Add(int64(len(read)))
	byID := make(map[int64]tgdriver.EventRow, len(read))
	for _, e := range read {
		byID[e.EventID] = e
	}
	out := evs[:0]
	for i, ref := range refs {
		if !have[i] {
			e, ok := byID[ref.EventID]
			if !ok || e.WorkflowID != ref.WorkflowID {
				continue
			}
			evs[i] = e
		}
		out = append(out, evs[i])
	}
	return out, nil
}

// BodySources reports where the bodies of the events this linker linked
// came from: the events it was kicked with (fromKicks), or read back from
// the database (fromDatabase; another process's events, or a driver that
// is not a tgdriver.JournalIDReader reads them all with the journal, and
// those are not counted).
func (l *Linker) BodySources() (fromKicks, fromDatabase int64) {
	return l.fromKicks.Load(), l.fromDatabase.Load()
}
