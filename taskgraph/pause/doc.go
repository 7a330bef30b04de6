// Package pause is a pause of claiming as the store reports it: what is
// paused (one workflow, or all claiming on the database), since when, by
// which operator and why (Pause, Of a driver's row), how a claim answer
// or a probe says so (String), and which pause holds a claim-next
// (Holding).
//
// It is a leaf (tgdriver's row type and the standard library): package
// taskgraph sets and clears pauses in the driver's claim_pauses under the
// workflow's lock, records them in the audit chain, and excludes paused
// work in the claims' own statements; this package only reads what was
// stored.
//
// Invariants: every function is pure; a Pause's time is UTC; the pause of
// all claiming (WorkflowID "") holds every claim-next, a workflow's pause
// only one that names that workflow.
package pause
