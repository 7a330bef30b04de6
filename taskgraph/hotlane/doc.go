// Package hotlane runs a store's hot operations (claim-next, heartbeat,
// complete: taskgraph/hot.go) in batches: each batch is the operations
// waiting when it starts, run by one call of the lane's function (one
// transaction and one commit), and a caller waits until its operations are
// answered.
//
// # Invariants
//
//   - Every operation submitted is run by exactly one batch, and Run
//     returns only once each of its operations is done (Op.Done closed by
//     the lane's function).
//   - At most the pacer's Max batches run at once; a batch takes at most
//     the lane's maxBatch operations, and never parts an operation that
//     rides with the one before it (Op.Rides: a claim submitted with its
//     completion) from that one.
//   - When a batch runs beside another, and when a loop goes on after a
//     batch, is decided by package hotpace (Pacer.Start, Hold, Gather):
//     the lane only keeps the queue, counts its callers (operations that
//     do not ride) and waits on the pacer's timers. No operation waits
//     longer than the pacer's Hold for a batch to take it while the lane
//     has room.
package hotlane
