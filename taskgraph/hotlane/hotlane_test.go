package hotlane

import (
	"sync"
	"testing"
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
