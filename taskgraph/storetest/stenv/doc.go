// Package stenv is the environment of the store's behaviour suite
// (package storetest): the Harness a driver's tests give it, the fresh
// Database of each subtest, and Env, one store on that database on a manual
// clock, with the helpers every group of the suite uses.
//
// It is its own package so that groups of the suite can live in packages of
// their own beside storetest, each taking the same Harness.
//
// # Invariants
//
//   - Every Env is a store on a database no other subtest uses, on a
//     lease.ManualClock that starts at T0: time moves only when a test moves
//     it.
//   - Env.DB's raw reads and writes (Exec, Query, Snapshot) link the
//     journaled history first, as the store's own readers do, so that the
//     linker running in the background never changes what a test compares.
//   - A helper fails its test (t.Fatalf) on any error it does not expect;
//     none of them retries or sleeps.
package stenv
