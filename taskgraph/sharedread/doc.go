// Package sharedread shares one read among the callers that want the same
// thing at the same moment, without ever answering a caller with a read
// that started before it arrived.
//
// A claim-next that finds nothing says why (a pause, a concurrency key's
// rate), and a claim-next that waits reads when a key's rate next opens
// before it parks. When many workers run dry at once, as at the end of a
// run of work, every one of them asked the database the same question on
// a connection of its own; with PostgreSQL a burst of such reads spread
// over the pool, planned each statement on connections that had not run
// it, and held up the completions waiting for a connection behind them.
// Group makes that burst one read per kind of question.
//
// Invariants:
//   - A caller is answered by a read that started after it called Do: it
//     never joins a read already under way. It joins the one read queued
//     behind the running one (or starts one when none runs), so at most
//     two reads of a key exist at once, one running and one waiting for
//     it, whatever the number of callers.
//   - Every caller of a read gets the same value and error; Do returns it
//     as fn returned it, so a value the callers may change must be copied
//     by them (or be a value type).
//   - A caller whose context ends stops waiting and gets ctx.Err(); the
//     read it joined still runs for the others. A read runs in a goroutine
//     of its own under the context of the caller that made it, without
//     its cancellation: a read shared by others is not cut short by one of
//     them leaving.
//   - A key is forgotten once no read of it runs or waits: the map holds
//     only keys being read.
//   - It imports nothing of this module (taskgraph/seam_test.go keeps it
//     so).
package sharedread
