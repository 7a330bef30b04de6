package waitq

import (
	"container/list"
	"strings"
	"sync"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/rules"
)

// Queue holds the parked claim-next calls, oldest first. Wake-ups match
// work: a task that becomes ready wakes one waiter that may claim it (one
// waiting on any workflow or on the task's, whose capabilities include every
// tag the task requires), the oldest first; a waiter that leaves with a wake
// it did not use passes it on.
type Queue struct {
	mu  sync.Mutex
	max int
	l   list.List // of *Waiter
	// delivered counts the wakes a waiter received (Delivered).
	delivered uint64
}

// Ref is a task made claimable, as wake-ups see it: its workflow and
// its stored requires ("" for none).
type Ref struct {
	Workflow string
	Requires string
	// key, when set, is the waiter kind (see WakeKey) the wake is for,
	// instead of a task's workflow and requires.
	Key string
}

// Waiter is one parked claim-next call.
type Waiter struct {
	workflow string   // "" waits for any workflow
	caps     []string // canonical capabilities
	key      string   // workflow and capabilities, for grouping
	ch       chan Ref // holds at most one wake: the task made ready
	el       *list.Element
}

// takes reports whether w may claim a task ref.
func (w *Waiter) takes(ref Ref) bool {
	return (w.workflow == "" || w.workflow == ref.Workflow) && rules.SubsetOf(ref.Requires, w.caps)
}

// Init sets the most waiters the queue holds.
func (q *Queue) Init(max int) { q.max = max }

// Add registers a waiter for workflow ("" for any) with capabilities caps
// (canonical); nil when the queue is full.
func (q *Queue) Add(workflow string, caps []string) *Waiter {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.l.Len() >= q.max {
		return nil
	}
	w := &Waiter{workflow: workflow, caps: caps, key: workflow + "\x00" + strings.Join(caps, " "), ch: make(chan Ref, 1)}
	w.el = q.l.PushBack(w)
	return w
}

// Remove unregisters w. A wake it received and did not take is passed on to
// another waiter that may use it.
func (q *Queue) Remove(w *Waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.l.Remove(w.el)
	select {
	case ref := <-w.ch:
		q.wakeLocked(ref)
	default:
	}
}

// Len returns the number of registered waiters.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.l.Len()
}

// Delivered returns how many wakes waiters have received so far (a wake
// a leaving waiter passes on counts again when another receives it): a
// test reads here that a commit woke a parked claim, rather than timing
// how soon the claim was answered.
func (q *Queue) Delivered() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.delivered
}

// wakeLocked wakes the oldest waiter that may claim ref and holds no wake
// yet (each claims one task); none when no waiter may.
func (q *Queue) wakeLocked(ref Ref) {
	for e := q.l.Front(); e != nil; e = e.Next() {
		w := e.Value.(*Waiter)
		if ref.Key != "" && w.key != ref.Key || ref.Key == "" && !w.takes(ref) {
			continue
		}
		select {
		case w.ch <- ref:
			q.delivered++
			return
		default: // already woken
		}
	}
}

// WakeAll wakes one waiter per entry of ready, each task made ready by a
// commit.
func (q *Queue) WakeAll(ready []Ref) {
	if len(ready) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, ref := range ready {
		q.wakeLocked(ref)
	}
}

// Filter is one kind of parked claim: its workflow ("" for any) and
// capabilities, with how many wait so.
type Filter struct {
	Workflow string
	Caps     []string
	N        int
}

// Filters groups the waiters by workflow and capabilities.
func (q *Queue) Filters() []Filter {
	q.mu.Lock()
	defer q.mu.Unlock()
	idx := map[string]int{}
	var out []Filter
	for e := q.l.Front(); e != nil; e = e.Next() {
		w := e.Value.(*Waiter)
		i, ok := idx[w.key]
		if !ok {
			i = len(out)
			idx[w.key] = i
			out = append(out, Filter{Workflow: w.workflow, Caps: w.caps})
		}
		out[i].N++
	}
	return out
}

// WakeKey wakes up to n waiters of filter f (exactly that workflow and
// those capabilities) that hold no wake yet, oldest first.
func (q *Queue) WakeKey(f Filter, n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := f.Workflow + "\x00" + strings.Join(f.Caps, " ")
	for e := q.l.Front(); e != nil && n > 0; e = e.Next() {
		w := e.Value.(*Waiter)
		if w.key != key {
			continue
		}
		select {
		case w.ch <- Ref{Key: key}:
			q.delivered++
			n--
		default:
		}
	}
}

// Woken is the channel that receives w's wake: the task made ready (at
// most one is held).
func (w *Waiter) Woken() <-chan Ref { return w.ch }
