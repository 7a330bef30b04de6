// Package faults checks that the task store's lease rules hold, as seen by
// its clients over HTTP, while servers, replicas and the database fail: it
// records the histories of concurrent workers and checks each against a
// model of the rules with porcupine, a linearizability checker, in the
// pattern of etcd's robustness tests. Its tests build the real server
// binary, run it (SQLite, or PostgreSQL replicas), inject one kind of fault
// at a time and check every history; scripts/faults runs them longer.
//
// # What is recorded
//
// Workers call graph_task_claim (by task_id, and claim-next),
// graph_task_heartbeat, graph_task_complete, graph_task_fail (retryable,
// retry_after_ms 0) and graph_task_cancel with release, as plain JSON-RPC
// requests of the stateless protocol era sent to a random live replica
// (Client): each request and answer is kept as it went over the wire, with
// the test's monotonic time at which it was sent and answered (Op). Each
// claim uses an owner name of its own, so that the task a claim-next with a
// lost answer took, if any, can be found from the server's history
// afterwards (the store writes a claim's event in the claim's own
// transaction); one that took nothing is left out. A claim-next answered
// "nothing claimable" says nothing about any one task and is not recorded.
//
// An answer is one of three outcomes (Outcome). Applied: a result. Refused:
// a tool error saying nothing happened: stale_claim, conflict, invalid,
// not_found, forbidden, or unavailable with a reason whose documented
// advice (MCP.md §4) says nothing was written (busy, disk_full, read_only,
// unreachable). Unknown: anything else (a transport error once the request
// may have been sent, a timeout, an HTTP error status, a JSON-RPC error, or
// unavailable with unknown_outcome or files_replaced): the operation may or
// may not have taken effect, at any time after it was sent, so its return
// time is after every other operation's, and the worker's later operations
// are a new porcupine client (stream). The checker thereby holds the server
// to its own word: an answer that promises nothing was written while the
// write committed makes the history non-linearizable. As etcd's robustness
// tests drop a failed request that was never persisted, an unknown outcome
// that the server's own history shows had no effect (a claim whose owner
// claimed nothing, a complete, fail or release its claim never recorded,
// heartbeats beyond those recorded) is left out (BuildRecorded): it cannot
// change the verdict, and each one kept widens the search.
//
// # The model
//
// The history is partitioned by task (the rules of one task never depend on
// another's), and each task starts pending at generation 0 with no attempt
// (the tests create them before the workers start, claimable at once). The
// model is nondeterministic (porcupine's NondeterministicModel): a set of
// states, one per way the past could have gone. Per task:
//
//   - A claim (by id or claim-next) takes effect only on a pending task and
//     grants generation g+1 and attempt a+1 to exactly its caller; an
//     answered claim names that generation and its token, so no generation
//     can be granted twice. A claim by id is refused (conflict) only when
//     the task may not have been claimable.
//   - Heartbeat, complete, fail and release take effect only from the live
//     claim: claimed, the same generation and token, and a lease not lapsed
//     at the request's arrival. Complete ends the task, so it happens at most
//     once; fail returns it to pending (failed on its last attempt); release
//     returns it with the attempt given back. Such a write is refused
//     (stale_claim) only when its claim may not have been the live one.
//   - An unknown outcome forks the state: it took effect (with whatever a
//     claim's token and lease turned out to be: a token nobody presents) or
//     it did not.
//
// # Time
//
// Whether a lease lapsed depends on the server's clock, which the clients
// do not share: with PostgreSQL it is the database's, read by each replica
// through a calibrated offset; a restarted server gives leases back the
// time it was away. The model never uses the test's clock as server time.
// It treats expiry as a step the server takes on its own, nondeterministically,
// once the lease could have lapsed, and decides "could" from the server's
// own clock as its answers report it: every applied claim and heartbeat
// answers its lease expiry (server time at the write plus the lease asked
// for) and every applied holder write its updated_at. So each operation
// gets an interval of server time (Input.Lo, Input.Hi): it arrived after
// every server time answered by an operation that returned before it was
// sent, and took effect before every server time answered by an operation
// sent after it returned; replicas' clocks may disagree by a calibration
// error, so the interval is widened by a slack (250 ms with PostgreSQL). The
// lease's expiry is known exactly once an answer states it, and as bounds
// after an unknown outcome. Then:
//
//   - the server may expire a lease before an operation only if the
//     operation's Hi is not before the earliest possible expiry (a claim of
//     a claimed task, a stale_claim refusal of the holder's write);
//   - a holder write may be accepted only if its Lo is before the latest
//     possible expiry (no write is accepted once the lease certainly
//     lapsed), and refused only if its claim was not certainly live;
//   - a claim by id may be refused only if the task was not certainly
//     claimable (pending, or its lease certainly lapsed at the claim's
//     arrival with an attempt left).
//
// Recording the server's times, rather than letting every lease lapse at
// any moment, keeps the checks on both sides of the lease: a lease taken
// away early and a write accepted late are both violations, not just
// double grants. A lease shift (the time a restarted server gives back) is
// a step the server may take too, but only as its history records it: the
// lease_shift events are read after the run, and the model may move the
// live lease's expiry to a recorded shift of its generation once the shift
// had happened (its server time is not after the operation's Hi).
//
// # Faults
//
// The fault kinds (Kind values of the tests): SQLite server SIGKILLed and
// restarted; PostgreSQL replicas SIGKILLed and restarted one at a time,
// SIGSTOPped (in the middle of whatever they do) and SIGCONTed, and the
// PostgreSQL server stopped with pg_ctl -m immediate and started again
// (its own cluster). Workers take short leases and sometimes pause past
// them, abandon a claim, fail retryably, release, and repeat a write whose
// outcome was unknown.
//
// When a task's history is not linearizable, Check keeps the whole history
// (history.jsonl), porcupine's visualization of each such task and a
// summary in a folder it names in its report.
//
// Request ids (issue 24, to come): Op.RequestID marks the attempts of one
// request, which the server will answer alike and apply at most once. Build
// merges them into one operation, sent with the first attempt and answered
// by the last attempt whose answer is known, so a lost answer followed by a
// retry with the same id is checked as the one operation it is; the
// workers then retry unknown outcomes with the same id instead of blindly.
package faults
