// Package retry is the retry timing of a task: the backoff before the
// retry that follows a retryable failure (Backoff) and the wait after a
// lost lease (LeaseLossDelay).
//
// It is a leaf (limits and the standard library): package taskgraph sets a
// task's due time from these in the failure's or the expiry's own guarded
// update.
//
// Invariants: both are pure; a delay is never negative and never above
// limits.MaxRetryDelay; a base of 0 means no wait; the first lease loss
// costs no wait.
package retry
