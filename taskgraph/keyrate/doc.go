// Package keyrate is the arithmetic of a concurrency key's limit (issue 27,
// items 1 and 2): the limit itself (Limit: a cap on claims at once and a
// rate of claims per interval of server time), its bounds (Check), and
// what a claim does to the key's stored row (TakeSlot) or a new limit does
// to it (WithLimit); and the key as the store reports it (Key, KeyOf),
// why a claim of it was refused (Refusal) and its limit in an audit entry
// (Detail).
//
// It is a leaf (tgdriver's row type, limits, rules and the standard
// library): package taskgraph re-exports Limit as KeyLimit, locks the key's
// row and writes what TakeSlot returns under a guard that the row still
// holds what was read.
//
// Invariants: every function is pure. The rate is exact over any window: a
// claim is granted only when fewer than Rate claims of the key lie in the
// interval that ends at it; a row keeps at most Rate recent claim times,
// oldest first, and its RateOpenAtMS is when the rate allows the next
// claim (0 when it allows one now). Claim times never go back.
package keyrate
