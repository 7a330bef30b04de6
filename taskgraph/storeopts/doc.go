// Package storeopts holds Options, the configuration of a store that
// taskgraph.OpenDriver takes (taskgraph.Options is the same type).
//
// Invariants:
//   - The zero value is usable: every field's zero means its documented
//     default, which OpenDriver applies; this package applies none and
//     holds no behaviour, only the fields and what each means.
//   - What configures a database (SQLite's sync mode, PostgreSQL's pool)
//     is never here: it belongs to the driver's own options.
//   - It imports nothing of this module but lease (the clocks), and never
//     package taskgraph or a driver (taskgraph/seam_test.go keeps it so).
package storeopts
