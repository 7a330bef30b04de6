// Package gate holds what an approval gate is, apart from the store that
// keeps it: the vocabulary of gates (what the server decides at a timeout,
// how a gate was decided, the events and errors of gates), the checks of a
// node's gate fields (CheckNode) and of a person's decision
// (CheckDecision), and the texts and values a decision leaves on the gate
// (its status while it awaits a decision, the result an approval records,
// the error a rejection records, the summary of how a decided gate ended).
//
// It is a leaf (rules, limits, tgdriver's kinds and the standard library):
// package taskgraph re-exports its names under their old ones, decides a
// gate under its workflow's lock with the state guard in the update
// (DecideGate, the sweeper's timeouts) and records what this package
// computes.
//
// Invariants: every function is pure; a node of kind task carries no gate
// field; a gate requires no capability and has no not-before time (it is
// never claimed); a gate's timeout is 0 (none) or whole milliseconds
// between 1 s and MaxTimeout, and comes with OnTimeoutApprove or
// OnTimeoutReject; a decision names who decided and how (DecidedByOperator
// or DecidedByPrincipal; DecidedByTimeout is the server's alone); every
// error a check returns is a *rules.ValidationError naming the field.
package gate
