// Package dag orders the nodes of one workflow creation by their
// dependencies and, when they are not acyclic, names one cycle by its path.
//
// It is a leaf (rules and the standard library): package taskgraph orders
// a create's nodes here before it writes any of them.
//
// Invariants: Order is a pure function of its arguments; only
// dependencies on nodes of the same creation (present in index) count;
// every node comes after the nodes it depends on; on a cycle nothing is
// returned but a *rules.ValidationError on depends_on whose path is a real
// cycle, stable for the same input (from the smallest id, the smallest
// dependency first) and spelled out to at most 16 nodes.
package dag
