package taskgraph

import (
	"container/list"
	"context"
	"errors"
	"fmt"
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
// work: a task that becomes ready in a workflow wakes one waiter that may
// claim it (one waiting on any workflow or on that one), the oldest first; a
// waiter that leaves with a wake it did not use passes it on.
type waitQueue struct {
	mu  sync.Mutex
	max int
	l   list.List // of *waiter
}

// waiter is one parked claim-next call.
type waiter struct {
	workflow string      // "" waits for any workflow
	ch       chan string // holds at most one wake: the workflow of the ready task
	el       *list.Element
}

func (q *waitQueue) init(max int) { q.max = max }

// add registers a waiter for workflow ("" for any); nil when the queue is full.
func (q *waitQueue) add(workflow string) *waiter {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.l.Len() >= q.max {
		return nil
	}
	w := &waiter{workflow: workflow, ch: make(chan string, 1)}
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
	case wf := <-w.ch:
		q.wakeLocked(wf, 1)
	default:
	}
}

// len returns the number of registered waiters.
func (q *waitQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.l.Len()
}

// wake wakes up to n waiters that may claim a task of workflow, oldest first;
// waiters that already hold a wake are skipped (each claims one task).
func (q *waitQueue) wake(workflow string, n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.wakeLocked(workflow, n)
}

func (q *waitQueue) wakeLocked(workflow string, n int) {
	for e := q.l.Front(); e != nil && n > 0; e = e.Next() {
		w := e.Value.(*waiter)
		if w.workflow != "" && w.workflow != workflow {
			continue
		}
		select {
		case w.ch <- workflow:
			n--
		default: // already woken
		}
	}
}

// wakeAll wakes one waiter per entry of ready, the workflow of each task made
// ready by a commit.
func (q *waitQueue) wakeAll(ready []string) {
	if len(ready) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, wf := range ready {
		q.wakeLocked(wf, 1)
	}
}

// filters returns the number of waiters on any workflow and the number per
// workflow of the others.
func (q *waitQueue) filters() (anyWF int, byWF map[string]int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for e := q.l.Front(); e != nil; e = e.Next() {
		w := e.Value.(*waiter)
		if w.workflow == "" {
			anyWF++
			continue
		}
		if byWF == nil {
			byWF = make(map[string]int)
		}
		byWF[w.workflow]++
	}
	return anyWF, byWF
}

// wakeForPending wakes, after a write by another process, at most as many
// waiters as there are pending tasks they may claim. Every lookup is bounded
// by the number of waiters.
func (s *Store) wakeForPending(ctx context.Context) error {
	anyWF, byWF := s.notify.filters()
	rd := s.drv.Reads()
	if anyWF > 0 {
		ready, err := rd.PendingWorkflows(ctx, anyWF)
		if err != nil {
			return fmt.Errorf("find pending tasks: %w", err)
		}
		s.notify.wakeAll(ready)
	}
	for wf, k := range byWF {
		n, err := rd.PendingInWorkflow(ctx, wf, k)
		if err != nil {
			return fmt.Errorf("count pending tasks of workflow %s: %w", wf, err)
		}
		s.notify.wake(wf, n)
	}
	return nil
}
