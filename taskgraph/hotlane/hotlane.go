package hotlane

import (
	"slices"
	"sync"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/hotpace"
)

// Op is an operation the lane runs.
type Op interface {
	comparable
	// Done is closed once the operation is answered (by the lane's
	// function).
	Done() <-chan struct{}
	// Rides reports whether the operation rides with the one submitted
	// just before it, in the same Run (a claim with its completion): a
	// batch never parts them, and it is not a caller of its own.
	Rides() bool
}

// Lane runs operations in batches: at most the pacer's Max batches at once
// (each one call of run), each taking every operation waiting when it
// starts, up to maxBatch. A batch beside one already running starts only
// for enough waiting callers, or for a caller held too long (hotpace).
type Lane[T Op] struct {
	run      func(batch []T)
	pace     *hotpace.Pacer
	maxBatch int

	mu      sync.Mutex
	queue   []T
	running int
	// holding counts the loops among running that hold their turn for
	// another batch to take the queue (loop), running none.
	holding int
	// callers counts the callers of queue: an operation that rides with
	// another is not one more.
	callers int
	takes   int // batches taken off the queue so far
	// changed, when not nil, is closed at the queue's next change
	// (changedLocked).
	changed chan struct{}
}

// New returns a lane that runs at most max batches at once, each of at
// most maxBatch operations, by calling run, which must close the Done of
// each operation of its batch.
func New[T Op](max, maxBatch int, run func(batch []T)) *Lane[T] {
	return &Lane[T]{run: run, pace: hotpace.New(max, 0), maxBatch: maxBatch}
}

// Run submits ops, which go into one batch, and returns once each was
// answered. A caller that does not start a batch waits for a running one
// to take it; if none has after the pacer's hold, and the lane has room,
// it starts one.
func (l *Lane[T]) Run(ops ...T) {
	l.mu.Lock()
	l.queue = append(l.queue, ops...)
	for _, op := range ops {
		if !op.Rides() {
			l.callers++
		}
	}
	l.signalLocked()
	// Only a caller the pacer held while the lane had room waits with a
	// timer; one that finds every batch running is taken by the first to
	// end.
	room := l.running < l.pace.Max()
	if !l.startLocked(false) && room {
		t := time.NewTimer(l.pace.Hold())
		select {
		case <-ops[0].Done():
		case <-t.C:
			l.mu.Lock()
			if l.queued(ops[0]) {
				l.startLocked(true)
			} else {
				l.mu.Unlock()
			}
		}
		t.Stop()
	}
	for _, op := range ops {
		<-op.Done()
	}
}

// startLocked starts a batch of the queue if the pacer says so (or, when
// force, if the lane has room), and unlocks l.mu.
func (l *Lane[T]) startLocked(force bool) bool {
	if l.running >= l.pace.Max() || !(force || l.pace.Start(l.running-l.holding, l.callers)) {
		l.mu.Unlock()
		return false
	}
	l.running++
	batch := l.takeLocked()
	l.mu.Unlock()
	go l.loop(batch)
	return true
}

// CountReplicas gives the lane's pacer the count of the replicas serving
// its database (hotpace.Pacer.CountReplicas). Call it before the first
// Run.
func (l *Lane[T]) CountReplicas(count func() int) { l.pace.CountReplicas(count) }

// Queued returns how many operations wait for a batch to take them (the
// operations riding with another included): a test stages a batch of
// chosen operations by holding every batch the lane may run while it
// submits them, and reads here that they all wait.
func (l *Lane[T]) Queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue)
}

// queued reports whether op waits in the queue. l.mu is held.
func (l *Lane[T]) queued(op T) bool {
	return slices.Contains(l.queue, op)
}

// takeLocked takes the next batch off the queue, never parting a claim
// from the completion it goes with. l.mu is held.
func (l *Lane[T]) takeLocked() []T {
	n := min(len(l.queue), l.maxBatch)
	if n < len(l.queue) && l.queue[n].Rides() {
		n++
	}
	batch := slices.Clone(l.queue[:n])
	l.queue, l.takes = slices.Delete(l.queue, 0, n), l.takes+1
	for _, op := range batch {
		if !op.Rides() {
			l.callers--
		}
	}
	l.signalLocked()
	return batch
}

// loop runs batch and then every batch waiting, until the queue is empty.
//
// After a batch, most of the callers it answered submit their next
// operation at once (a worker completes what it claimed, then claims
// again): the lane waits for as many operations as it just answered to
// join the queue, or another batch to take it, at most the pacer's Gather,
// so that they go together in the next batch rather than one by one; when
// no other batch runs, on top of those already queued (else batches settle
// into two alternating halves of the callers: 5.3 cycles a commit at W=8
// on SQLite, 7.6 now). That holds for a lane of two batches too whenever
// one runs alone: the queued callers are the other half, which this
// loop's next batch takes in any case (PostgreSQL, W=8: a run
// that fell into halves ran 2,506 batches of 4 for 10,000 cycles at 2,282
// cycles/s, against 1,256-1,268 batches and 2,688-3,195 cycles/s for the
// runs around it). A lane with nothing to do waits for nothing.
//
// Beside another running batch, the loop goes on only for enough waiting
// callers (the pacer's Start); it leaves fewer to the other batch, which
// takes them when it ends, so that two half-empty batches merge into one
// rather than each paying a commit. If the other batch has not taken them
// within the pacer's hold (a slow commit), the loop takes them itself.
func (l *Lane[T]) loop(batch []T) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		start := time.Now()
		l.run(batch)
		took := time.Since(start)
		l.pace.Took(took)
		want := len(batch)
		l.mu.Lock()
		if l.running == 1 { // alone: the next batch takes those queued too
			want = min(want+len(l.queue), l.maxBatch)
		}
		gather, takes, waited := l.pace.Gather(took), l.takes, time.Now()
		back := len(l.queue) >= want || gather > 0 && l.waitLocked(timer, gather, func() bool { return len(l.queue) >= want || l.takes != takes })
		l.pace.Back(time.Since(waited), back, gather) // how late the callers came back
		if len(l.queue) > 0 && !l.pace.Start(l.running-l.holding-1, l.callers) {
			l.holding++
			l.waitLocked(timer, l.pace.Hold(), func() bool { return len(l.queue) == 0 || l.pace.Start(l.running-l.holding, l.callers) })
			l.holding--
		}
		if len(l.queue) == 0 {
			l.running--
			l.mu.Unlock()
			return
		}
		batch = l.takeLocked()
		l.mu.Unlock()
	}
}

// waitLocked waits until cond holds or d has passed, and reports whether
// cond holds. l.mu is held, and released while it waits.
func (l *Lane[T]) waitLocked(timer *time.Timer, d time.Duration, cond func() bool) bool {
	timer.Reset(d)
	defer timer.Stop()
	for !cond() {
		ch := l.changedLocked()
		l.mu.Unlock()
		select {
		case <-ch:
			l.mu.Lock()
		case <-timer.C:
			l.mu.Lock()
			return cond()
		}
	}
	return true
}

// changedLocked returns a channel closed at the queue's next change (an
// operation joining or a batch taken). l.mu is held.
func (l *Lane[T]) changedLocked() <-chan struct{} {
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// signalLocked wakes those waiting for the queue to change. l.mu is held.
func (l *Lane[T]) signalLocked() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}
