// Package rules holds the store's rules on plain input values: the
// identifier pattern (workflow_id, node_id, owner, concurrency keys), the
// form of a task id, capability tags and their canonical form, an error
// text, and an operator's name and reason; and the error that names a
// broken rule (*ValidationError, matching ErrInvalid).
//
// It is a leaf (package limits and the standard library): package
// taskgraph re-exports ErrInvalid, ValidationError and the patterns under
// their old names and applies these checks before anything is written;
// other leaves (keyrate) report their broken rules with the same error.
//
// Invariants: every check is a pure function of its arguments; an input a
// check accepts is within the bounds of package limits; every error a
// check returns is a *ValidationError naming the field and the rule, so
// errors.Is(err, ErrInvalid) holds; a canonical tag list is sorted and
// has no duplicates, and stored requires are a canonical list joined by
// single spaces.
package rules
