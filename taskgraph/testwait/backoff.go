package testwait

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff paces a retry loop: each Wait pauses about twice as long as the
// one before, from Min up to Max, and Reset starts again from Min (after a
// success). The zero value is ready to use, with Min 1 ms and Max 100 ms.
// A Backoff belongs to one goroutine.
type Backoff struct {
	Min, Max time.Duration
	next     time.Duration
}

// Wait pauses, then doubles the next pause. It returns false, at once, when
// ctx ends first.
func (b *Backoff) Wait(ctx context.Context) bool {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = time.Millisecond
	}
	if hi < lo {
		hi = max(lo, 100*time.Millisecond)
	}
	if b.next < lo {
		b.next = lo
	}
	// Jitter: between half and all of the pause, so that retrying
	// goroutines spread out instead of waking together.
	d := b.next/2 + rand.N(b.next/2+1)
	b.next = min(2*b.next, hi)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Reset makes the next Wait pause Min again.
func (b *Backoff) Reset() { b.next = 0 }
