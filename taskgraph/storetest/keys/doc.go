// Package keys is the behaviour suite's group of concurrency keys and rate
// limits per key (issue 27, items 1 and 2), in a package of its own beside
// storetest so that the suite stays within its size. storetest.Run runs
// Tests on every driver's Harness, as every other group; the environment
// (a store on a fresh database on a manual clock) is storetest/stenv's.
//
// # Invariants
//
//   - Every test runs on both drivers through storetest.Run: a test here
//     is never run by a driver's package directly.
//   - A test asserts what the store promises (its doc comments, MCP.md),
//     reading raw SQL (stenv.Env.Count, Database.Query) only to check
//     what the schema stores, never to bypass the store.
package keys
