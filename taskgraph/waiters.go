package taskgraph

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// DefaultMaxWaiters is Options.MaxWaiters' default.
const DefaultMaxWaiters = 4096

// ErrWaitLimit is returned, with ok false, by a claim-next with a wait when
// no task is ready and the store already holds Options.MaxWaiters parked
// claim-next calls. It is not a fault of the caller: nothing was claimed, and
// it may retry after a moment.
var ErrWaitLimit = errors.New("the server holds its maximum of parked claims")

// waitQueue holds the parked claim-next calls, oldest first. Wake-ups match
// work: a task that becomes ready wakes one waiter that may claim it (one
// waiting on any workflow or on the task's, whose capabilities include every
// tag the task requires), the oldest first; a waiter that leaves with a wake
// it did not use passes it on.
type waitQueue struct {
	mu  sync.Mutex
	max int
	l   list.List // of *waiter
}

// readyRef is a task made claimable, as wake-ups see it: its workflow and
// its stored requires ("" for none).
type readyRef struct {
	workflow string
	requires string
	// key, when set, is the waiter kind (see wakeKey) the wake is for,
	// instead of a task's workflow and requires.
	key string
}

// waiter is one parked claim-next call.
type waiter struct {
	workflow string        // "" waits for any workflow
	caps     []string      // canonical capabilities
	key      string        // workflow and capabilities, for grouping
	ch       chan readyRef // holds at most one wake: the task made ready
	el       *list.Element
}

// takes reports whether w may claim a task ref.
func (w *waiter) takes(ref readyRef) bool {
	return (w.workflow == "" || w.workflow == ref.workflow) && subsetOf(ref.requires, w.caps)
}

func (q *waitQueue) init(max int) { q.max = max }

// add registers a waiter for workflow ("" for any) with capabilities caps
// (canonical); nil when the queue is full.
func (q *waitQueue) add(workflow string, caps []string) *waiter {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.l.Len() >= q.max {
		return nil
	}
	w := &waiter{workflow: workflow, caps: caps, key: workflow + "\x00" + strings.Join(caps, " "), ch: make(chan readyRef, 1)}
	w.el = q.l.PushBack(w)
	return w
}

// remove unregisters w. A wake it received and did not take is passed on to
// another waiter that may use it.
func (q *waitQueue) remove(w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.l.Remove(w.el)
	select {
	case ref := <-w.ch:
		q.wakeLocked(ref)
	default:
	}
}

// len returns the number of registered waiters.
func (q *waitQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.l.Len()
}

// wakeLocked wakes the oldest waiter that may claim ref and holds no wake
// yet (each claims one task); none when no waiter may.
func (q *waitQueue) wakeLocked(ref readyRef) {
	for e := q.l.Front(); e != nil; e = e.Next() {
		w := e.Value.(*waiter)
		if ref.key != "" && w.key != ref.key || ref.key == "" && !w.takes(ref) {
			continue
		}
		select {
		case w.ch <- ref:
			return
		default: // already woken
		}
	}
}

// wakeAll wakes one waiter per entry of ready, each task made ready by a
// commit.
func (q *waitQueue) wakeAll(ready []readyRef) {
	if len(ready) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, ref := range ready {
		q.wakeLocked(ref)
	}
}

// filter is one kind of parked claim: its workflow ("" for any) and
// capabilities, with how many wait so.
type filter struct {
	workflow string
	caps     []string
	n        int
}

// filters groups the waiters by workflow and capabilities.
func (q *waitQueue) filters() []filter {
	q.mu.Lock()
	defer q.mu.Unlock()
	idx := map[string]int{}
	var out []filter
	for e := q.l.Front(); e != nil; e = e.Next() {
		w := e.Value.(*waiter)
		i, ok := idx[w.key]
		if !ok {
			i = len(out)
			idx[w.key] = i
			out = append(out, filter{workflow: w.workflow, caps: w.caps})
		}
		out[i].n++
	}
	return out
}

// wakeKey wakes up to n waiters of filter f (exactly that workflow and
// those capabilities) that hold no wake yet, oldest first.
func (q *waitQueue) wakeKey(f filter, n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := f.workflow + "\x00" + strings.Join(f.caps, " ")
	for e := q.l.Front(); e != nil && n > 0; e = e.Next() {
		w := e.Value.(*waiter)
		if w.key != key {
			continue
		}
		select {
		case w.ch <- readyRef{key: key}:
			n--
		default:
		}
	}
}

// wakeForPending wakes, after a write by another process, at most as many
// waiters of each kind (workflow and capabilities) as there are claimable
// tasks they may claim. There is one lookup per kind, each bounded by the
// number of waiters of that kind.
func (s *Store) wakeForPending(ctx context.Context) error {
	rd := s.drv.Reads()
	for _, f := range s.notify.filters() {
		n, err := rd.CountClaimable(ctx, f.workflow, f.caps, f.n)
		if err != nil {
			return fmt.Errorf("count claimable tasks: %w", err)
		}
		if n > 0 {
			s.notify.wakeKey(f, n)
		}
	}
	return nil
}
