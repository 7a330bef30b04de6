// Package lease holds the rules of exclusive, fenced task leases: the bounds
// of a lease, the claim token, the clock, and the check that decides whether a
// presented claim is still the live one. It contains no SQL; the store applies
// these rules inside its own transactions.
//
// # State model
//
// A task is claimable when it is pending, or when it is claimed and its lease
// has expired. Claiming it grants a new lease: the generation is incremented,
// a fresh random claim token is issued to the claimant only, and the lease
// expires at server time now + duration. A heartbeat moves the expiry to
// now + duration and never changes the generation.
//
// # Who may write when
//
// A holder write (heartbeat, complete, fail, cancel) is accepted only when all
// of these hold at server time, checked in the same transaction as the write:
// the task is claimed, the presented owner, generation and token equal the
// current ones, and now is strictly before the lease expiry. Check reports the
// first rule that fails, as a *StaleClaimError matching ErrStaleClaim.
//
// # What a generation fences
//
// Generations only grow. Once a task is reclaimed, every write presenting an
// older generation is rejected as superseded, so a worker that wakes up after
// its lease expired can never commit, even if its token leaked. Tokens are
// compared by their SHA-256 digest in constant time; the store keeps only the
// digest, so a database reader cannot impersonate a holder.
//
// # Time
//
// Time is a parameter: every function takes now explicitly, and the store
// reads it from a Clock, so tests advance a ManualClock instead of sleeping.
// Clients' clocks are never consulted. A Monotonic source (ManualClock is
// one too) lets the store tell time passing from the process being paused or
// the wall clock being stepped.
package lease
