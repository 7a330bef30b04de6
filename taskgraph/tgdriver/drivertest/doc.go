// Package drivertest is the contract test of the seam between the task
// graph's domain and its databases: every method of tgdriver.Driver,
// tgdriver.Tx and tgdriver.Reads, exercised directly (never through
// taskgraph.Store), with one shared test body that each driver's tests run
// unchanged (tgsqlite on a file in t.TempDir(), tgpostgres on a database of
// pgtest). The behaviour suite (package storetest) tests the Store; this
// package pins the seam itself, so that a promise of a doc comment that the
// domain happens not to stress is still held, and so that the drivers mean
// the same by each method.
//
// # Invariants
//
//   - Each subtest opens its own fresh database through the Harness and runs
//     in parallel with the others; it opens at most a few drivers.
//   - The suite asserts only what tgdriver's doc comments promise (results,
//     ordering, limits, ErrNoRows, guards, Opt's NULL and zero values, the
//     chains' compare and set, rollback), plus where two drivers must agree
//     for the domain to behave alike. Where a promise depends on the driver's
//     kind it branches on Info and the capabilities (SharedClock,
//     ReplicaCounter, Connections, JournalEvents), never on the driver's
//     name.
//   - Raw SQL (Database.Exec, Database.Query) is portable (? placeholders,
//     no dialect) and is used only where the contract is about the stored
//     value itself (is a column NULL or the zero value?) or where setup
//     needs a row no driver method writes (an orphan event).
//   - Functions run inside Driver.Write report mismatches with t.Errorf or
//     an error, never t.Fatal: they may run on the driver's own goroutine
//     (SQLite's writer).
//   - Nothing is timed: "waits for a lock" and "never waits" are told apart
//     by asking the database who waits (LockWatcher), retry loops back off,
//     and every wait (a change on Changes, a lock wait) goes through package
//     testwait, which gives up only at the test binary's deadline: a failure
//     in place of a hang, never a wall-clock bound on progress.
//
// # Running it
//
// A driver package's test implements Harness and calls Run:
//
//	func TestDriverContract(t *testing.T) { drivertest.Run(t, harness{}) }
//
// A harness whose database has a collation of its own gives databases that
// do not sort text bytewise (PostgreSQL: pgtest.CollatedURL), so that the
// orders by id are held to byte order on the collations users have.
//
// Drivers that run several write transactions at once
// (tgdriver.Info.Connections > 0) must give databases that implement
// LockWatcher; the concurrency clauses that need two open transactions are
// skipped for a driver of one writer. Drivers that are a
// tgdriver.SharedClock must give databases that implement ServerClock (the
// server's own clock, read outside the driver): the clock clauses hold
// every replica's Clock to it, within clockSlack (an accuracy bound on
// the offset the driver measures, not a bound on progress), and are
// skipped for a driver without a shared clock, which must instead call
// Hooks.BatchStart in every write transaction. The replica clauses hold a
// tgdriver.ReplicaCounter's count to the drivers started on one database,
// waiting for the count (the driver's background look) rather than for a
// time, and are skipped for a driver without the capability.
package drivertest
