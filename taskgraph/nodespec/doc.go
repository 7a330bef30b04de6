// Package nodespec is a node to create (Spec: taskgraph.NodeSpec) and
// its validation: Normalize checks every field against the bounds of
// package limits and the rules of packages rules, keyrate and gate, and
// returns the node as the store inserts it (Node: defaults filled in,
// requires canonical, payload compacted); Differs names the field in
// which a node created again differs from the stored one, so that a create
// is idempotent only when identical.
//
// It is a leaf (limits, rules, jsonvalue, keyrate, gate, tgdriver's kinds
// and the standard library): package taskgraph normalizes every node of a
// create before it opens the transaction, and compares a node that exists
// under its workflow's lock.
//
// Invariants: Normalize is pure and writes nothing; every error it returns
// is a *rules.ValidationError naming the field and the rule; a Node's
// payload is a compact JSON object ({} for none), its dependencies are
// distinct and never itself, its requires sorted and deduplicated, and
// its kind and gate fields are those gate.CheckNode returns; two payloads
// that differ only in key order or whitespace are the same.
package nodespec
