package sharedread

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
)

// callersOf returns how many calls the running and the queued read of key
// answer (-1 for a read that does not exist).
func (g *Group[K, V]) callersOf(key K) (running, queued int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	running, queued = -1, -1
	if k := g.keys[key]; k != nil {
		if k.running != nil {
			running = k.running.callers
		}
		if k.queued != nil {
			queued = k.queued.callers
		}
	}
	return running, queued
}

// waitFor blocks until cond holds, rechecking after each of the group's
// state changes the test makes; it never bounds the wait by time.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		// Let the goroutines under test run; they need no time, only
		// turns.
		runtime.Gosched()
	}
}

// blockingRead is a read that reports its start and returns its run's
// number once released.
type blockingRead struct {
	mu      sync.Mutex
	runs    int
	started chan int
	release chan struct{}
}

func newBlockingRead() *blockingRead {
	return &blockingRead{started: make(chan int, 16), release: make(chan struct{}, 16)}
}

func (b *blockingRead) fn(ctx context.Context) (int, error) {
	b.mu.Lock()
	b.runs++
	n := b.runs
	b.mu.Unlock()
	b.started <- n
	<-b.release
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	return n, nil
}

func TestCallersDuringARunShareTheNextRunNotThatOne(t *testing.T) {
	t.Parallel()
	var g Group[string, int]
	b := newBlockingRead()
	first := make(chan int, 1)
	go func() {
		v, err := g.Do(context.Background(), "k", b.fn)
		if err != nil {
			t.Errorf("first caller: %v", err)
		}
		first <- v
	}()
	if n := <-b.started; n != 1 {
		t.Fatalf("first run is number %d", n)
	}
	// Three callers arrive while run 1 is under way: none may be answered
	// by it (it may have read before they asked).
	const late = 3
	got := make(chan int, late)
	for range late {
		go func() {
			v, err := g.Do(context.Background(), "k", b.fn)
			if err != nil {
				t.Errorf("late caller: %v", err)
			}
			got <- v
		}()
	}
	// Wait until all four calls are in (running or queued), then check
	// where the late ones went.
	waitFor(t, func() bool { r, q := g.callersOf("k"); return r+max(q, 0) == 1+late })
	if r, q := g.callersOf("k"); r != 1 || q != late {
		t.Fatalf("the running read answers %d callers and the queued one %d, want 1 and %d (the late ones must queue)", r, q, late)
	}
	b.release <- struct{}{}
	if v := <-first; v != 1 {
		t.Fatalf("first caller got run %d, want 1", v)
	}
	// The queued read starts once run 1 ended, and is one read for all
	// three.
	if n := <-b.started; n != 2 {
		t.Fatalf("second run is number %d", n)
	}
	b.release <- struct{}{}
	for range late {
		if v := <-got; v != 2 {
			t.Fatalf("a late caller got run %d, want 2", v)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.runs != 2 {
		t.Fatalf("fn ran %d times for 4 callers, want 2", b.runs)
	}
	waitFor(t, func() bool { return g.Len() == 0 })
}

func TestACallerThatLeavesDoesNotCutTheSharedRead(t *testing.T) {
	t.Parallel()
	var g Group[string, int]
	b := newBlockingRead()
	// The caller that makes the read leaves while it runs; a second caller
	// (queued) and the read itself are unaffected.
	ctx, cancel := context.WithCancel(context.Background())
	leaderErr := make(chan error, 1)
	go func() {
		_, err := g.Do(ctx, "k", b.fn)
		leaderErr <- err
	}()
	<-b.started
	other := make(chan int, 1)
	go func() {
		v, err := g.Do(context.Background(), "k", b.fn)
		if err != nil {
			t.Errorf("other caller: %v", err)
		}
		other <- v
	}()
	waitFor(t, func() bool { r, q := g.callersOf("k"); return r+max(q, 0) == 2 })
	if r, q := g.callersOf("k"); r != 1 || q != 1 {
		t.Fatalf("the running read answers %d callers and the queued one %d, want 1 and 1", r, q)
	}
	cancel()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the leaving caller got %v, want context.Canceled", err)
	}
	// Run 1 was not cancelled with its caller: it returns its value (fn
	// returns ctx.Err() if its context ended).
	b.release <- struct{}{}
	<-b.started
	b.release <- struct{}{}
	if v := <-other; v != 2 {
		t.Fatalf("the other caller got %d, want run 2", v)
	}
	waitFor(t, func() bool { return g.Len() == 0 })
}

func TestKeysAreReadApartAndErrorsShared(t *testing.T) {
	t.Parallel()
	var g Group[string, int]
	b := newBlockingRead()
	go func() { _, _ = g.Do(context.Background(), "slow", b.fn) }()
	<-b.started
	// Key "slow" is being read; key "other" does not wait for it.
	boom := errors.New("boom")
	if _, err := g.Do(context.Background(), "other", func(context.Context) (int, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("other key: %v, want boom", err)
	}
	// Callers queued behind a read all get its error.
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := g.Do(context.Background(), "slow", func(context.Context) (int, error) { return 0, boom })
			errs <- err
		}()
	}
	waitFor(t, func() bool { r, q := g.callersOf("slow"); return r+max(q, 0) == 3 })
	if r, q := g.callersOf("slow"); r != 1 || q != 2 {
		t.Fatalf("the running read answers %d callers and the queued one %d, want 1 and 2", r, q)
	}
	b.release <- struct{}{}
	for range 2 {
		if err := <-errs; !errors.Is(err, boom) {
			t.Fatalf("queued caller: %v, want boom", err)
		}
	}
	waitFor(t, func() bool { return g.Len() == 0 })
}

func TestManyCallersNeverRunMoreThanOneReadAtATime(t *testing.T) {
	t.Parallel()
	var g Group[int, int]
	var mu sync.Mutex
	running, most, runs := 0, 0, 0
	fn := func(context.Context) (int, error) {
		mu.Lock()
		running++
		runs++
		most = max(most, running)
		mu.Unlock()
		runtime.Gosched()
		mu.Lock()
		running--
		mu.Unlock()
		return 0, nil
	}
	var wg sync.WaitGroup
	const callers = 200
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := g.Do(context.Background(), 1, fn); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if most != 1 {
		t.Fatalf("%d reads of one key ran at once, want 1", most)
	}
	if runs < 1 || runs > callers {
		t.Fatalf("%d runs for %d callers", runs, callers)
	}
	t.Logf("%d callers, %d reads", callers, runs)
}
