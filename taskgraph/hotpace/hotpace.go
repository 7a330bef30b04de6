package hotpace

import (
	"sync/atomic"
	"time"
)

// DefaultEnough is how many waiting callers justify a batch beside one
// already running (New's default): fewer wait for the running batch and
// go with the callers it answers in the next. It was 4, which at W=8 split
// the callers into two batches of four (see the package doc, "Enough").
const DefaultEnough = 8

// MaxHold bounds how long callers wait for a running batch rather than
// going in a batch of their own, however slow the database's batches are:
// a tenth of the shortest lease (lease.MinDuration).
const MaxHold = 100 * time.Millisecond

// MaxGather bounds how long a lane waits, after answering a batch, for the
// callers it answered to come back before it starts the next batch
// (Gather).
const MaxGather = 5 * time.Millisecond

// minHold is the hold before the lane has timed a batch.
const minHold = 2 * time.Millisecond

// Pacer decides when a hot lane runs a batch beside one already running.
// Its zero value is not usable: use New. It is safe for concurrent use.
type Pacer struct {
	max    int
	enough int
	// replicas, when set (CountReplicas), counts the replicas serving the
	// lane's database: a further batch starts for enough times as many.
	replicas func() int
	// took is the moving average of a batch's time, in nanoseconds.
	took atomic.Int64
	// back is the moving average of how long a batch's callers took to
	// come back (Back), in nanoseconds.
	back atomic.Int64
}

// New returns a pacer for a lane of at most max batches at once that runs
// a further batch for enough waiting callers (<= 0: DefaultEnough).
func New(max, enough int) *Pacer {
	if enough <= 0 {
		enough = DefaultEnough
	}
	return &Pacer{max: max, enough: enough}
}

// Max is the most batches the lane runs at once.
func (p *Pacer) Max() int { return p.max }

// Start reports whether the lane starts a batch for waiting callers (a
// caller submitting a completion and the next claim together is one)
// while others of its batches run: always when none runs, never when max
// run, else only for enough callers, times the replicas serving the
// database (CountReplicas).
func (p *Pacer) Start(others, waiting int) bool {
	switch {
	case waiting <= 0 || others >= p.max:
		return false
	case others == 0:
		return true
	default:
		return waiting >= p.enough*p.replicaCount()
	}
}

// CountReplicas has the pacer ask count, whenever it decides on a batch
// beside a running one, how many replicas serve the lane's database, this
// one included (below 1 counts as 1): with more than one, such a batch
// waits for that many times enough callers (see the package doc,
// "Replicas"). count must be cheap and safe for concurrent use. Call it
// before the lane runs anything; without it the pacer counts one.
func (p *Pacer) CountReplicas(count func() int) { p.replicas = count }

// replicaCount is what the pacer's count says now, at least 1.
func (p *Pacer) replicaCount() int {
	if p.replicas == nil {
		return 1
	}
	return max(p.replicas(), 1)
}

// Hold is how long callers that Start left waiting wait for a running
// batch before the lane starts one for them anyway (when it has room):
// twice a batch's average time, so that a batch that is late (a commit
// stalled) does not hold them, and at most MaxHold.
func (p *Pacer) Hold() time.Duration {
	t := time.Duration(p.took.Load())
	if t <= 0 {
		return minHold
	}
	return min(2*t, MaxHold)
}

// Took records a batch's time, from its start to its answers.
func (p *Pacer) Took(d time.Duration) {
	// A moving average over about 8 batches; an update lost between
	// concurrent batches costs one sample.
	old := p.took.Load()
	if old == 0 {
		p.took.Store(int64(d))
		return
	}
	p.took.Store(old + (int64(d)-old)/8)
}

// Gather is how long a lane waits, after answering a batch that took d, for
// the callers it answered to come back before it starts the next: a quarter
// of d, or longer when its callers have been coming back later than that
// (Back: a quarter more than their average), but never longer than twice d
// nor MaxGather. Waiting for a caller costs less than the commit of a batch
// of its own, which a caller that comes back late pays (or it waits a
// batch's time for the next batch; so waiting up to one batch more for it
// costs the callers already back no more than missing the gather would cost
// the late one: see the package doc, "Late callers"). A wait ends as soon
// as the callers are back, so callers that come back at once (in process)
// are never held longer; callers that come back later (over HTTP, through
// the client, the network and the server's request path) are waited for
// rather than left for the next batch. A lone caller never waits for a
// gather: its own return ends it.
func (p *Pacer) Gather(d time.Duration) time.Duration {
	g := d / 4
	if b := time.Duration(p.back.Load()); b+b/4 > g {
		g = min(b+b/4, 2*d)
	}
	return min(g, MaxGather)
}

// Back records a gather's outcome: the callers came back (all) after
// waited, or not all within the gather's limit, when they are taken as
// twice as late as that, so that the lane waits longer the next time
// (up to Gather's bounds).
func (p *Pacer) Back(waited time.Duration, all bool, limit time.Duration) {
	if !all {
		waited = 2 * limit
	}
	// A moving average over about 8 gathers, as Took.
	old := p.back.Load()
	p.back.Store(old + (int64(waited)-old)/8)
}
