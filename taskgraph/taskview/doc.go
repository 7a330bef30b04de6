// Package taskview holds the store's views of tasks and workflows as
// package taskgraph returns them (Task, Claimed, WorkflowView and the
// listings, the reports of Prune and RequeueFailed, the store's Stats),
// the requests that select them (ClaimRequest, ListFilter), the task
// states, the not-found errors, and the conflict errors a claim, create
// or gate decision answers with.
// Package taskgraph re-exports every name here as an alias, so callers use
// taskgraph.Task and never need this package.
//
// Invariants:
//   - Values only: nothing here reads or writes a store, holds a clock or
//     imports package taskgraph or a driver (taskgraph/seam_test.go keeps it
//     so). The store fills these values in; this package only defines them.
//   - A Task never carries a claim token: the token of a claim is shown only
//     in Claimed.Lease, once, to the claimant.
//   - States lists every State in lifecycle order; completed, failed and
//     cancelled are terminal (State.Terminal) and leave that set only
//     through an operator operation of the store.
//   - NotFoundError and NodeNotFoundError match ErrNotFound under
//     errors.Is.
//   - ConflictError and MissingCapabilitiesError match ErrConflict under
//     errors.Is; MissingCapabilitiesError also matches
//     ErrMissingCapabilities; GateError matches its Sentinel and
//     ErrConflict (rules.ErrInvalid instead for gate.ErrNotGate). Their messages say what clashed and what the
//     caller may do instead; nothing was written when they are returned.
package taskview
