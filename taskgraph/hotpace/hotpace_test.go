package hotpace

import (
	"testing"
	"time"
)

func TestStartRunsALoneBatchAndAnotherOnlyForEnoughCallers(t *testing.T) {
	t.Parallel()
	p := New(2, 4)
	for _, c := range []struct {
		others, waiting int
		want            bool
	}{
		{0, 0, false}, // nothing waits
		{0, 1, true},  // nothing runs: the first caller starts a batch
		{1, 1, false}, // one runs: a lone caller waits for it
		{1, 3, false},
		{1, 4, true},  // enough callers pay for a commit of their own
		{2, 9, false}, // the lane is full
	} {
		if got := p.Start(c.others, c.waiting); got != c.want {
			t.Errorf("Start(%d running, %d waiting) = %v, want %v", c.others, c.waiting, got, c.want)
		}
	}
	if got := New(2, 0).Start(1, DefaultEnough); !got {
		t.Errorf("New(2, 0) should use DefaultEnough (%d)", DefaultEnough)
	}
	if got := New(1, 1).Start(1, 100); got {
		t.Errorf("a lane of one batch never runs a second")
	}
}

func TestHoldFollowsTheBatchTimeUpToMaxHold(t *testing.T) {
	t.Parallel()
	p := New(2, 0)
	if got := p.Hold(); got != minHold {
		t.Fatalf("hold before any batch = %v, want %v", got, minHold)
	}
	p.Took(3 * time.Millisecond)
	if got := p.Hold(); got != 6*time.Millisecond {
		t.Fatalf("hold after a 3ms batch = %v, want 6ms", got)
	}
	// A run of slow batches moves the average up, and the hold stops at
	// MaxHold.
	for range 100 {
		p.Took(time.Second)
	}
	if got := p.Hold(); got != MaxHold {
		t.Fatalf("hold after slow batches = %v, want MaxHold %v", got, MaxHold)
	}
	// Fast batches bring it back down.
	for range 100 {
		p.Took(time.Millisecond)
	}
	if got := p.Hold(); got > 3*time.Millisecond {
		t.Fatalf("hold after fast batches = %v, want about 2ms", got)
	}
}

func TestGatherIsAQuarterOfABatchUpToMaxGather(t *testing.T) {
	t.Parallel()
	p := New(2, 0)
	for _, c := range []struct{ took, want time.Duration }{
		{0, 0},
		{400 * time.Microsecond, 100 * time.Microsecond},
		{4 * time.Millisecond, time.Millisecond},
		{time.Second, MaxGather},
	} {
		if got := p.Gather(c.took); got != c.want {
			t.Errorf("gather after a batch of %v = %v, want %v", c.took, got, c.want)
		}
	}
	if MaxGather >= MaxHold {
		t.Fatalf("MaxGather %v must stay far below MaxHold %v: a heartbeat waits for both", MaxGather, MaxHold)
	}
}

func TestGatherWaitsLongerForCallersThatComeBackLate(t *testing.T) {
	t.Parallel()
	const d = 8 * time.Millisecond // a batch's time: a quarter is 2ms
	// Callers that come back at once (in process) leave the gather at a
	// quarter of the batch.
	quick := New(1, 0)
	for range 50 {
		quick.Back(50*time.Microsecond, true, 0)
	}
	if got := quick.Gather(d); got != d/4 {
		t.Fatalf("gather with callers back in 50us = %v, want d/4 = %v", got, d/4)
	}
	// Callers that come back after 3ms (over HTTP, a loaded machine): the
	// gathers of a quarter time out, and the lane learns to wait longer,
	// a quarter more than their return time.
	late := New(1, 0)
	for range 50 {
		if g := late.Gather(d); g >= 3*time.Millisecond {
			late.Back(3*time.Millisecond, true, g)
		} else {
			late.Back(g, false, g)
		}
	}
	if got := late.Gather(d); got < 3*time.Millisecond || got > 4*time.Millisecond {
		t.Fatalf("gather with callers back in 3ms = %v, want 3ms-4ms (their return, a quarter more)", got)
	}
	// Never longer than twice the batch, nor MaxGather.
	if got := late.Gather(time.Millisecond); got != 2*time.Millisecond {
		t.Fatalf("gather after a 1ms batch with callers back in 3ms = %v, want twice the batch's time", got)
	}
	never := New(1, 0)
	for range 100 {
		g := never.Gather(time.Second)
		never.Back(g, false, g)
	}
	if got := never.Gather(time.Second); got != MaxGather {
		t.Fatalf("gather with callers that never come back = %v, want MaxGather %v", got, MaxGather)
	}
	// Callers back quickly again bring it down.
	for range 100 {
		never.Back(0, true, 0)
	}
	if got := never.Gather(d); got != d/4 {
		t.Fatalf("gather after callers came back at once = %v, want d/4", got)
	}
}

// TestReplicasRaiseTheCallersForABatchBeside: with n replicas on the
// database a batch beside a running one needs n times enough waiting
// callers; the first batch never waits, and a count below 1 is 1.
func TestReplicasRaiseTheCallersForABatchBeside(t *testing.T) {
	t.Parallel()
	p := New(2, 8)
	if !p.Start(1, 8) {
		t.Errorf("without a count the pacer counts one replica: Start(1 running, 8 waiting) = false, want true")
	}
	replicas := 0
	p.CountReplicas(func() int { return replicas })
	for _, c := range []struct {
		replicas, others, waiting int
		want                      bool
	}{
		{1, 1, 8, true},
		{2, 1, 8, false}, // two replicas: each lane's batches side by side would double the database's
		{2, 1, 15, false},
		{2, 1, 16, true},
		{3, 1, 23, false},
		{3, 1, 24, true},
		{2, 0, 1, true}, // nothing runs: a caller starts a batch, however many replicas
		{0, 1, 8, true}, // no count yet, or a bad one: one replica
		{-1, 1, 8, true},
	} {
		replicas = c.replicas
		if got := p.Start(c.others, c.waiting); got != c.want {
			t.Errorf("%d replicas: Start(%d running, %d waiting) = %v, want %v", c.replicas, c.others, c.waiting, got, c.want)
		}
	}
}
