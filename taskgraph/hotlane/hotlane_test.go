package hotlane

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

type op struct {
	id    int
	rides bool
	done  chan struct{}
}

func (o *op) Done() <-chan struct{} { return o.done }
func (o *op) Rides() bool           { return o.rides }

// TestEveryOperationRunsOnceInBoundedBatches: callers submitting at once,
// some with a rider, are each run by exactly one batch of at most
// maxBatch operations (a rider one more, beside the one it rides with),
// at most max batches at once, and Run returns only once its operations
// are done.
func TestEveryOperationRunsOnceInBoundedBatches(t *testing.T) {
	const callers, rounds, maxBatch = 16, 50, 4
	var mu sync.Mutex
	runs := map[int]int{}
	running, most := 0, 0
	l := New(2, maxBatch, func(batch []*op) {
		mu.Lock()
		running++
		most = max(most, running)
		if len(batch) > maxBatch+1 || len(batch) > maxBatch && !batch[len(batch)-1].rides {
			t.Errorf("a batch of %d operations; at most %d, one more only for a rider", len(batch), maxBatch)
		}
		for i, o := range batch {
			runs[o.id]++
			if o.rides && (i == 0 || batch[i-1].id != o.id-1) {
				t.Errorf("operation %d ran apart from the one it rides with", o.id)
			}
		}
		mu.Unlock()
		for _, o := range batch {
			close(o.done)
		}
		mu.Lock()
		running--
		mu.Unlock()
	})
	var wg sync.WaitGroup
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				id := (c*rounds + r) * 2
				ops := []*op{{id: id, done: make(chan struct{})}}
				if r%3 == 0 {
					ops = append(ops, &op{id: id + 1, rides: true, done: make(chan struct{})})
				}
				l.Run(ops...)
				for _, o := range ops {
					select {
					case <-o.done:
					default:
						t.Errorf("Run returned before operation %d was done", o.id)
					}
				}
			}
		}(c)
	}
	wg.Wait()
	want := 0
	for r := 0; r < rounds; r++ {
		want += 1 + map[bool]int{true: 1}[r%3 == 0]
	}
	if len(runs) != callers*want {
		t.Errorf("%d operations ran, want %d", len(runs), callers*want)
	}
	for id, n := range runs {
		if n != 1 {
			t.Errorf("operation %d ran %d times", id, n)
		}
	}
	if most > 2 {
		t.Errorf("%d batches ran at once, want at most 2", most)
	}
}

// TestLoneBatchGathersItsCallersBesideTheQueued: a loop that runs alone
// ends a batch while other callers wait in the queue (the other half of
// the workers, queued while it ran). Its next batch takes those in any
// case, so it waits for the callers it just answered on top of them, and
// the two halves merge into one batch; waiting only until the queue was
// as long as the batch it answered kept them apart for good, a batch of
// each half in turn. Each attempt builds that state in a lane of two
// batches: the answered callers come back once the loop waits for them
// (or has gone on without them), so the merge needs them back within the
// gather (a quarter of the first batch's 20 ms): one attempt of ten
// suffices, while the old target never merges.
func TestLoneBatchGathersItsCallersBesideTheQueued(t *testing.T) {
	const half = 4
	next := 0
	for attempt := 1; attempt <= 10; attempt++ {
		if next = loneBatchAfterHalves(t, half); next == 2*half {
			return
		}
		t.Logf("attempt %d: the batch after the lone one took %d operations", attempt, next)
	}
	t.Fatalf("the batch after a lone batch never took both halves (the last took %d operations); want %d: the loop must wait for the callers it answered on top of those queued", next, 2*half)
}

// loneBatchAfterHalves runs one batch of half operations alone with half
// more queued, lets its callers come back, and returns the size of the
// lane's next batch.
func loneBatchAfterHalves(t *testing.T, half int) int {
	var (
		mu    sync.Mutex
		sizes []int
	)
	l := New(2, 4*half, func(batch []*op) {
		mu.Lock()
		sizes = append(sizes, len(batch))
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			// The batch's work: its time sets the lane's gather and hold.
			time.Sleep(20 * time.Millisecond)
		}
		for _, o := range batch {
			close(o.done)
		}
	})
	newOps := func(from int) []*op {
		ops := make([]*op, half)
		for i := range ops {
			ops[i] = &op{id: from + i, done: make(chan struct{})}
		}
		return ops
	}
	answered, queued := newOps(0), newOps(half)
	l.mu.Lock()
	l.queue = append(l.queue, queued...)
	l.callers += half
	l.running = 1
	l.mu.Unlock()
	go l.loop(answered)

	for _, o := range answered {
		<-o.done
	}
	// The answered callers come back once the loop waits for the queue
	// to change, or once it ran its next batch without them.
	for {
		l.mu.Lock()
		waiting := l.changed != nil
		l.mu.Unlock()
		mu.Lock()
		ran := len(sizes) >= 2
		mu.Unlock()
		if waiting || ran {
			break
		}
		runtime.Gosched()
	}
	back := newOps(2 * half)
	var wg sync.WaitGroup
	for _, o := range back {
		wg.Go(func() { l.Run(o) })
	}
	wg.Wait()
	for _, o := range queued {
		<-o.done
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) < 2 {
		t.Fatalf("batches %v: want a batch after the first", sizes)
	}
	return sizes[1]
}

// TestQueuedCountsWhatWaitsWhileEveryBatchRuns: with every batch the lane
// may run held, operations submitted wait in the queue (riders counted),
// Queued says so, and the first batch to end takes them all in one batch.
func TestQueuedCountsWhatWaitsWhileEveryBatchRuns(t *testing.T) {
	release := make(chan struct{})
	started := make(chan int, 8)
	var (
		mu    sync.Mutex
		sizes []int
	)
	l := New(2, 16, func(batch []*op) {
		mu.Lock()
		sizes = append(sizes, len(batch))
		n := len(sizes)
		mu.Unlock()
		started <- n
		if n <= 2 {
			<-release
		}
		for _, o := range batch {
			close(o.done)
		}
	})
	var wg sync.WaitGroup
	submit := func(ops ...*op) { wg.Go(func() { l.Run(ops...) }) }
	submit(&op{id: 0, done: make(chan struct{})})
	<-started
	submit(&op{id: 1, done: make(chan struct{})})
	<-started // two batches run, each held: the lane has no room
	if got := l.Queued(); got != 0 {
		t.Fatalf("Queued = %d with nothing waiting", got)
	}
	submit(&op{id: 2, done: make(chan struct{})}, &op{id: 3, rides: true, done: make(chan struct{})})
	submit(&op{id: 4, done: make(chan struct{})})
	for l.Queued() < 3 {
		runtime.Gosched()
	}
	if got := l.Queued(); got != 3 {
		t.Fatalf("Queued = %d, want 3 (two callers, one with a rider)", got)
	}
	close(release)
	wg.Wait()
	if got := l.Queued(); got != 0 {
		t.Fatalf("Queued = %d once every operation was answered", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) != 3 || sizes[2] != 3 {
		t.Fatalf("batches %v: want the two held ones, then one of the 3 that waited", sizes)
	}
}
