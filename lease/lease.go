package lease

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Lease duration bounds. A request for zero means DefaultDuration.
const (
	MinDuration     = time.Second
	MaxDuration     = 15 * time.Minute
	DefaultDuration = 30 * time.Second
)

// TokenBytes is the number of random bytes in a claim token (192 bits).
const TokenBytes = 24

// ErrDurationOutOfRange reports a lease duration outside [MinDuration, MaxDuration].
var ErrDurationOutOfRange = errors.New("lease duration out of range")

// ErrStaleClaim matches every *StaleClaimError: the presented claim is not the
// live claim on the task, so the write was rejected and nothing changed.
var ErrStaleClaim = errors.New("stale claim")

// Duration validates a requested lease duration and returns the one to use:
// zero selects DefaultDuration; anything outside [MinDuration, MaxDuration]
// is an error matching ErrDurationOutOfRange.
func Duration(requested time.Duration) (time.Duration, error) {
	if requested == 0 {
		return DefaultDuration, nil
	}
	if requested < MinDuration || requested > MaxDuration {
		return 0, fmt.Errorf("%w: %d ms is not between %d and %d ms",
			ErrDurationOutOfRange, requested.Milliseconds(), MinDuration.Milliseconds(), MaxDuration.Milliseconds())
	}
	return requested, nil
}

// Clock tells server time. The store reads time only through a Clock.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock, in UTC.
type SystemClock struct{}

// Now returns the current time in UTC.
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// Monotonic measures how long the process has been running, unaffected by
// steps of the wall clock. The store compares it with its Clock to notice
// pauses of the process and steps of the wall clock.
type Monotonic interface {
	// Elapsed returns the time since a fixed origin; it never decreases.
	Elapsed() time.Duration
}

// SystemMonotonic is Go's monotonic clock.
type SystemMonotonic struct{ origin time.Time }

// NewSystemMonotonic returns a SystemMonotonic whose origin is now.
func NewSystemMonotonic() *SystemMonotonic { return &SystemMonotonic{origin: time.Now()} }

// Elapsed returns the monotonic time since the origin.
func (m *SystemMonotonic) Elapsed() time.Duration { return time.Since(m.origin) }

// ManualClock is a Clock and a Monotonic that move only when told to: Advance
// moves both (time passing), Step moves only the wall reading (a clock step).
// It is safe for concurrent use and is meant for tests.
type ManualClock struct {
	mu   sync.Mutex
	now  time.Time
	mono time.Duration
}

// NewManualClock returns a ManualClock reading start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start.UTC()} }

// Now returns the clock's current reading.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d, wall and monotonic readings alike,
// and returns the new wall reading.
func (c *ManualClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	if d > 0 {
		c.mono += d
	}
	return c.now
}

// Step moves only the wall reading by d (forward or backward), as a clock
// step by an operator or NTP does, and returns the new wall reading.
func (c *ManualClock) Step(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Elapsed returns the monotonic reading: the sum of every Advance.
func (c *ManualClock) Elapsed() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mono
}

// NewToken returns a fresh claim token: TokenBytes random bytes from
// crypto/rand, base64url-encoded without padding.
func NewToken() (string, error) {
	b := make([]byte, TokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate claim token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// HashToken returns the SHA-256 digest of a claim token, the only form in
// which tokens are stored.
func HashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// Grant is a lease as handed to its claimant. Token is secret: it is
// returned once, by the claim, and never by any read.
type Grant struct {
	Owner      string
	Generation int64
	Token      string
	ExpiresAt  time.Time
}

// Holder is a claim as presented by a worker on a write.
type Holder struct {
	TaskID     string
	Owner      string
	Generation int64
	Token      string
}

// Current is the live lease state of a task as stored, for Check.
type Current struct {
	// State is the task's state name, used in messages.
	State string
	// Held is true when the task is claimed (whether or not the lease expired).
	Held bool
	// Terminal is true when the task has finished (completed, failed or cancelled).
	Terminal   bool
	Owner      string
	Generation int64
	TokenHash  []byte
	ExpiresAt  time.Time
}

// Reason says why a presented claim is not the live one.
type Reason string

// The reasons a holder write is rejected, in the order Check tests them.
const (
	ReasonTerminal     Reason = "task already finished"
	ReasonSuperseded   Reason = "superseded generation"
	ReasonUnknownGen   Reason = "unknown generation"
	ReasonNotHeld      Reason = "claim no longer held"
	ReasonWrongOwner   Reason = "wrong owner"
	ReasonWrongToken   Reason = "wrong claim token"
	ReasonLeaseExpired Reason = "lease expired"
)

// StaleClaimError describes a rejected holder write. It matches ErrStaleClaim.
type StaleClaimError struct {
	TaskID string
	Reason Reason
	// Detail is a sentence for the caller saying what is true now and what to do.
	Detail string
}

// Error implements error.
func (e *StaleClaimError) Error() string {
	return fmt.Sprintf("stale claim on task %s: %s: %s", e.TaskID, e.Reason, e.Detail)
}

// Is reports whether target is ErrStaleClaim.
func (e *StaleClaimError) Is(target error) bool { return target == ErrStaleClaim }

// Check decides whether the presented claim p is the live claim described by
// cur at server time now. It returns nil when a holder write may proceed, and
// otherwise a *StaleClaimError naming the first rule that failed.
func Check(cur Current, p Holder, now time.Time) error {
	stale := func(r Reason, format string, args ...any) error {
		return &StaleClaimError{TaskID: p.TaskID, Reason: r, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case cur.Terminal:
		return stale(ReasonTerminal, "the task is %s; it accepts no more writes", cur.State)
	case p.Generation < cur.Generation:
		return stale(ReasonSuperseded, "generation %d was superseded by generation %d; stop work on this task", p.Generation, cur.Generation)
	case p.Generation > cur.Generation:
		return stale(ReasonUnknownGen, "generation %d was never granted; the current generation is %d", p.Generation, cur.Generation)
	case !cur.Held:
		return stale(ReasonNotHeld, "the task is %s; claim it again to work on it", cur.State)
	case p.Owner != cur.Owner:
		return stale(ReasonWrongOwner, "generation %d is held by a different owner", cur.Generation)
	case subtle.ConstantTimeCompare(HashToken(p.Token), cur.TokenHash) != 1:
		return stale(ReasonWrongToken, "the claim token does not match generation %d; pass the token returned by the claim", cur.Generation)
	case !now.Before(cur.ExpiresAt):
		return stale(ReasonLeaseExpired, "the lease expired at %s; claim the task again", cur.ExpiresAt.UTC().Format(time.RFC3339Nano))
	}
	return nil
}
