// Package limits holds the bounds the task store enforces on what it
// accepts: identifier and tag rules, sizes, counts and durations.
//
// It is a leaf (it imports only the standard library) so that the capability
// manifest, which publishes these bounds to clients, can name them without
// importing the store and its drivers. Package taskgraph re-exports every
// bound under the same name and is where they are enforced; a bound changes
// here, and both the store and the manifest follow.
package limits
