package testwait

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(RunNoLeaks(m)) }

// fakeT records the failure of a helper run by run.
type fakeT struct {
	testing.TB
	failure  string
	cleanups []func()
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.failure = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fakeT) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

// run calls fn with a fakeT on a goroutine of its own (a failure ends it
// with runtime.Goexit) and returns the failure, "" when fn returned.
func run(fn func(t *fakeT)) string {
	f := &fakeT{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	for _, c := range f.cleanups {
		c()
	}
	return f.failure
}

func TestDeadlineLeavesAMarginBeforeTheBinarysDeadline(t *testing.T) {
	dl, ok := t.Deadline()
	end, bounded := Deadline(t)
	if ok != bounded {
		t.Fatalf("Deadline bounded=%v, t.Deadline ok=%v", bounded, ok)
	}
	if ok && (!end.Before(dl) || dl.Sub(end) > 30*time.Second) {
		t.Fatalf("Deadline %v, binary deadline %v: want a margin of at most 30 s before it", end, dl)
	}
}

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	polls := 0
	if f := run(func(ft *fakeT) { For(ft, "ten polls", func() bool { polls++; return polls == 10 }) }); f != "" {
		t.Fatalf("For failed: %s", f)
	}
	if polls != 10 {
		t.Fatalf("For polled %d times, want 10 (it returns as soon as the condition holds)", polls)
	}
}

func TestProgressWaitsWhileTheWorkMoves(t *testing.T) {
	// Progress on every poll: even a stall floor of a nanosecond is never
	// reached, however slowly the polls come.
	n := int64(0)
	f := run(func(ft *fakeT) {
		progress(ft, "fifty steps", func() (bool, int64) { n++; return n == 50, n }, time.Nanosecond)
	})
	if f != "" || n != 50 {
		t.Fatalf("Progress failed after %d steps: %q", n, f)
	}
}

func TestProgressFailsWhenTheWorkStops(t *testing.T) {
	f := run(func(ft *fakeT) {
		progress(ft, "the stuck work", func() (bool, int64) { return false, 7 }, 10*time.Millisecond)
	})
	if !strings.Contains(f, "gave up waiting for the stuck work: no progress for") || !strings.Contains(f, "progress 7") {
		t.Fatalf("failure %q, want it to name the work, the stall and the progress made", f)
	}
}

func TestRecvReturnsTheValue(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 42
	if got := Recv(t, "the answer", ch); got != 42 {
		t.Fatalf("Recv = %d, want 42", got)
	}
}

func TestContextEndsWithTheTest(t *testing.T) {
	var ctx context.Context
	run(func(ft *fakeT) { ctx = Context(ft) })
	if ctx.Err() == nil {
		t.Fatal("the context is still live after the test's cleanups ran")
	}
	if _, ok := Context(t).Deadline(); !ok {
		if _, bounded := t.Deadline(); bounded {
			t.Fatal("the context of a test with a deadline has none")
		}
	}
}

func TestBackoffDoublesUpToMaxAndResets(t *testing.T) {
	b := Backoff{Min: time.Microsecond, Max: 8 * time.Microsecond}
	var seen []time.Duration
	for range 6 {
		if !b.Wait(context.Background()) {
			t.Fatal("Wait returned false with a live context")
		}
		seen = append(seen, b.next)
	}
	want := []time.Duration{2, 4, 8, 8, 8, 8}
	for i := range want {
		if seen[i] != want[i]*time.Microsecond {
			t.Fatalf("next pauses %v, want %v µs", seen, want)
		}
	}
	b.Reset()
	b.Wait(context.Background())
	if b.next != 2*time.Microsecond {
		t.Fatalf("after Reset the next pause is %v, want 2µs", b.next)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	slow := Backoff{Min: time.Hour, Max: time.Hour}
	if slow.Wait(ctx) {
		t.Fatal("Wait with an ended context returned true")
	}
}

func TestBufferSaysWhenItGrowsAndRefusesWritesAfterClose(t *testing.T) {
	var b Buffer
	changed := b.Changed()
	select {
	case <-changed:
		t.Fatal("Changed is closed before any write")
	default:
	}
	fmt.Fprint(&b, "hello")
	<-changed // closed by the write
	if b.String() != "hello" || string(b.Bytes()) != "hello" {
		t.Fatalf("content %q", b.String())
	}
	if got := string(b.Close()); got != "hello" {
		t.Fatalf("Close returned %q", got)
	}
	if _, err := b.Write([]byte("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after Close: %v, want ErrClosed", err)
	}
	if b.String() != "hello" {
		t.Fatalf("a write after Close changed the content: %q", b.String())
	}
}

func stuckForLeakTest(release <-chan struct{}) { <-release }

func TestLeakCheckFindsAStuckGoroutineAndWaitsForAnEndingOne(t *testing.T) {
	release := make(chan struct{})
	go stuckForLeakTest(release)
	err := checkLeaks(nil, 10*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "stuckForLeakTest") {
		t.Fatalf("checkLeaks = %v, want it to name the stuck goroutine", err)
	}
	close(release)
	if err := checkLeaks(nil, time.Minute); err != nil {
		t.Fatalf("checkLeaks after the goroutine ended: %v", err)
	}
}

func TestLeakCheckAcceptsAbandonedGoroutines(t *testing.T) {
	before := Goroutines()
	release := make(chan struct{})
	go stuckForLeakTest(release)
	testwaitSettle(t, before, 1)
	Abandon(before, "this test leaves it running on purpose")
	if err := checkLeaks(nil, 10*time.Millisecond); err != nil {
		t.Fatalf("checkLeaks with only an abandoned goroutine left: %v", err)
	}
	// Another goroutine, not abandoned, is still found.
	other := make(chan struct{})
	go stuckForLeakTest(other)
	if err := checkLeaks(nil, 10*time.Millisecond); err == nil {
		t.Fatal("checkLeaks missed a goroutine that was not abandoned")
	}
	close(other)
	close(release)
}

// testwaitSettle waits until n goroutines that are not in before run. It
// counts new ids, not the total: a goroutine of before that ends meanwhile
// must not make it wait forever.
func testwaitSettle(t *testing.T, before map[int]bool, n int) {
	t.Helper()
	For(t, "the goroutine to start", func() bool {
		fresh := 0
		for id := range Goroutines() {
			if !before[id] {
				fresh++
			}
		}
		return fresh >= n
	})
}
