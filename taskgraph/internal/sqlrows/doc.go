// Package sqlrows is the raw SQL access the test suites (drivertest,
// storetest/sqldb) share: reading rows outside the drivers as text, and
// rewriting the suites' ? placeholders for PostgreSQL.
//
// # Invariants
//
//   - Query never interprets a value: the caller's render decides how NULL,
//     bytes and times read, so a suite that must tell NULL from the empty
//     string can.
//   - Dollar numbers only placeholders outside quoted strings and quoted
//     identifiers.
package sqlrows
