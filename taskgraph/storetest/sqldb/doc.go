// Package sqldb is the raw access to a database that the behaviour suite
// (package storetest) needs beside the store, for a database with a
// database/sql driver: DB runs the suite's tampering statements and
// queries with ? placeholders (rewritten by Rebind, DollarPlaceholders for
// PostgreSQL) and renders the whole database as text for "nothing was
// written" assertions. Each driver's test runner embeds a DB in its
// storetest.Database.
//
// Invariants: it never goes through the store; two snapshots are equal
// exactly when no row of a listed table was inserted, changed or deleted in
// between; a value is rendered the same way by Query and Snapshot (integers
// in decimal, text and byte strings as their bytes, times in RFC 3339 UTC,
// NULL as ""), so a secret stored in clear appears in a snapshot.
package sqldb
