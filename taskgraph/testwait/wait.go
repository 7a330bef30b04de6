package testwait

import (
	"context"
	"flag"
	"testing"
	"time"
)

// StallFloor is the shortest stretch without any progress after which
// Progress gives up: long enough that a starved machine (a 2-core machine
// running the race detector beside other work) never reaches it while the
// awaited work moves at all.
const StallFloor = 2 * time.Minute

// stallFactor is how many times the slowest step seen so far a stretch
// without progress must last before Progress gives up.
const stallFactor = 10

// maxPause caps the pause between two polls.
const maxPause = 25 * time.Millisecond

// started approximates when the test binary started, for the deadline of
// the waits of a benchmark or fuzz target (only *testing.T has Deadline).
var started = time.Now()

// Deadline returns when a wait in t gives up: the test binary's deadline
// (go test -timeout) less a margin of a tenth of the whole timeout, at most
// 30 s, kept for reporting the failure and running the test's cleanups. ok
// is false when the binary has no deadline (-timeout 0): waits never give up.
func Deadline(t testing.TB) (end time.Time, ok bool) {
	timeout := timeoutFlag()
	var dl time.Time
	if d, isT := t.(interface{ Deadline() (time.Time, bool) }); isT {
		if dl, ok = d.Deadline(); !ok {
			return time.Time{}, false
		}
	} else if timeout > 0 {
		dl = started.Add(timeout)
	} else {
		return time.Time{}, false
	}
	if timeout <= 0 {
		timeout = dl.Sub(started)
	}
	return dl.Add(-min(timeout/10, 30*time.Second)), true
}

// timeoutFlag is the value of go test's -timeout flag, or 0.
func timeoutFlag() time.Duration {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return 0
	}
	if g, ok := f.Value.(flag.Getter); ok {
		if d, ok := g.Get().(time.Duration); ok {
			return d
		}
	}
	return 0
}

// For polls cond, backing off between polls, until it holds. It fails t
// only when the test's deadline is near (see Deadline). what names the
// awaited condition in the failure ("the fleet to wait for work").
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	end, bounded := Deadline(t)
	pause := time.Millisecond
	for !cond() {
		if bounded && time.Now().After(end) {
			t.Fatalf("gave up waiting for %s after %v: the test binary's deadline (go test -timeout) is near",
				what, time.Since(start).Round(time.Millisecond))
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPause)
	}
}

// Progress polls check, backing off between polls, until it reports done.
// progress is any number that changes whenever the awaited work moves
// forward (tasks completed, events written). Progress fails t only when
// that number stopped changing for a stall (the longer of StallFloor and ten
// times the slowest step seen so far), or when the test's deadline is near:
// slow progress is waited for, no progress is a failure.
func Progress(t testing.TB, what string, check func() (done bool, progress int64)) {
	t.Helper()
	progress(t, what, check, StallFloor)
}

func progress(t testing.TB, what string, check func() (bool, int64), floor time.Duration) {
	t.Helper()
	start := time.Now()
	end, bounded := Deadline(t)
	done, last := check()
	lastChange := start
	var slowest time.Duration
	pause := time.Millisecond
	for !done {
		time.Sleep(pause)
		pause = min(2*pause, maxPause)
		var p int64
		done, p = check()
		now := time.Now()
		if p != last {
			slowest = max(slowest, now.Sub(lastChange))
			last, lastChange = p, now
			continue
		}
		if done {
			return
		}
		if stall := max(floor, stallFactor*slowest); now.Sub(lastChange) > stall {
			t.Fatalf("gave up waiting for %s: no progress for %v (progress %d after %v; the slowest step took %v)",
				what, now.Sub(lastChange).Round(time.Millisecond), last, now.Sub(start).Round(time.Millisecond), slowest.Round(time.Millisecond))
		}
		if bounded && now.After(end) {
			t.Fatalf("gave up waiting for %s after %v (progress %d): the test binary's deadline (go test -timeout) is near",
				what, now.Sub(start).Round(time.Millisecond), last)
		}
	}
}

// Recv waits for a value from ch (or for ch to be closed) and returns it.
// It fails t only when the test's deadline is near (see Deadline).
func Recv[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	v, _ := RecvOK(t, what, ch)
	return v
}

// RecvOK is Recv that also reports whether the value was sent (true) or ch
// was closed (false).
func RecvOK[T any](t testing.TB, what string, ch <-chan T) (T, bool) {
	t.Helper()
	end, bounded := Deadline(t)
	if !bounded {
		v, ok := <-ch
		return v, ok
	}
	start := time.Now()
	timer := time.NewTimer(time.Until(end))
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		return v, ok
	case <-timer.C:
		t.Fatalf("gave up waiting for %s after %v: the test binary's deadline (go test -timeout) is near",
			what, time.Since(start).Round(time.Millisecond))
		panic("unreachable")
	}
}

// Context returns a context that ends when the test's deadline is near (see
// Deadline) or when t's cleanups registered before this call run, whichever
// comes first: for a call that must return, so that a hang fails the test
// with a message instead of killing the binary. Cleanups registered after
// this call still see it live.
func Context(t testing.TB) context.Context {
	end, bounded := Deadline(t)
	if !bounded {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		return ctx
	}
	ctx, cancel := context.WithDeadline(context.Background(), end)
	t.Cleanup(cancel)
	return ctx
}

// Bound returns parent bounded by the test's deadline (see Deadline), for a
// call that must return and takes a context of its own; call cancel when
// the call is done.
func Bound(t testing.TB, parent context.Context) (ctx context.Context, cancel context.CancelFunc) {
	if end, ok := Deadline(t); ok {
		return context.WithDeadline(parent, end)
	}
	return context.WithCancel(parent)
}
