// Package testwait is the one set of helpers this module's tests use to wait
// for something to happen: poll a condition, wait for a channel, watch
// progress, back off between retries, read what a logger wrote from several
// goroutines, and check that a package leaves no goroutine behind.
//
// It is test support, imported only by tests and by the test-support
// packages (storetest, pgtest and the examples' e2e harness). It lives under
// taskgraph, beside those, because every package whose tests wait (taskgraph
// and its drivers, mcpadapter, the command, the examples) must be able to
// import it: an internal/ folder would admit only one of those trees, and the
// repository's top level is fixed.
//
// # Invariants
//
//   - No wait fails because a fixed amount of wall-clock time passed. A wait
//     gives up only when the test binary's own deadline (go test -timeout,
//     as t.Deadline reports it) is near, leaving a margin so that the
//     failure is reported with its message and the test's cleanups run
//     before the binary is killed; or, for Progress, when no progress at all
//     was seen for a stretch that grows with the slowest step seen so far
//     and is never shorter than StallFloor. A loaded machine makes a test
//     slower, never red.
//   - Every poll backs off: the pause doubles from a millisecond up to a
//     small cap, so that a waiting test leaves the CPU to the goroutines it
//     waits for.
//   - A failure message names what was awaited and how long it waited.
//   - For, Progress and Recv fail t with t.Fatalf, so they must be called
//     from the test's own goroutine; Context and Backoff work anywhere.
package testwait
