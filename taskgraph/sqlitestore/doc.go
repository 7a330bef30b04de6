// Package sqlitestore starts a taskgraph.Store on a SQLite file: the
// composition of the tgsqlite driver and the domain, for callers that want a
// store on a file in one call (tests, examples, embedding programs).
//
// # Invariants
//
//   - It adds no behaviour: Open is tgsqlite.Open then taskgraph.OpenDriver,
//     OpenReadOnly is tgsqlite.OpenReadOnly then taskgraph.OpenDriver, and
//     every error is theirs. The domain (package taskgraph) imports no
//     driver; this package and the CLI are where SQLite meets it.
//   - The driver's Logger defaults to the store's, so one logger sees both.
//   - What only a SQLite file has (Backup, Check, Checkpoint) is a method or
//     function of tgsqlite, called on the driver: OpenDriver returns the
//     driver for that, owned by the store (the store's Close closes it).
package sqlitestore
