// Package hotpace decides when a store's hot lane (taskgraph/hot.go) runs
// a batch beside one already running.
//
// The hot lane runs the claim-nexts, heartbeats and completions waiting at
// a moment as one batch: one transaction and one commit. On PostgreSQL a
// lane may run up to two batches at once (storeopts.Options.HotBatches),
// so that one batch's work overlaps the other's commit. But every batch
// costs the database about the same whatever it carries (two round trips,
// five statements, a commit and its WAL flush), and replicas sharing a
// database cannot batch each other's callers: with the lane starting a
// second batch for any caller that found a slot free, two replicas of four
// callers each ran four batches of one or two cycles where one replica of
// eight ran two of four, so commits and statements per cycle doubled, and
// the database's CPU and WAL flushes with them (pg_stat_statements, N=5000,
// W=8: 0.28 commits and 3.2 statements per cycle for one replica, 0.62
// and 5.0 for two; server CPU per cycle 1.0-1.3 ms against 1.7-3.1 ms).
//
// The policy (Pacer):
//
//   - A caller that finds no batch running starts one at once: an idle
//     lane adds no delay.
//   - A further batch beside a running one starts only for Enough waiting
//     callers (DefaultEnough, 8; a completion submitted with the next claim
//     counts once). Fewer wait for the running batch and go with the
//     callers it answers, in its next batch: a batch that ends while
//     another runs hands its few returning callers to it, rather than
//     running them alone, so two half-empty batches merge into one.
//   - No caller waits that way longer than Hold: twice the lane's average
//     batch time, at most MaxHold (100 ms, a tenth of the shortest lease).
//     A batch that stalls (a commit held up, a row lock waited for) does
//     not hold the callers behind it: after the hold they run in a batch
//     of their own, as before. A heartbeat is never held behind a slow
//     batch for more than MaxHold, far inside any lease.
//
// Gather. After a batch, the lane waits for the callers it answered to
// come back (a worker completes what it claimed and claims again) before
// it starts the next batch, or for another batch to take them: a quarter
// of the batch's time, at most MaxGather. The cap was 200 us: on a
// loaded machine callers come back later than that (the scheduler's
// delay), so the next batch left without them and they paid a commit of
// their own, or waited a whole batch for the one after. With two
// replicas a lane holds only its own callers (4 at W=8), every one of
// which must be back for the batch to be full, so the short cap cost two
// replicas most: at W=8, N=5000, load 19-28, base and new alternated,
// two replicas ran 2,275/2,332/2,131 hot batches (2.2-2.3 cycles a
// batch) before, 1,565/1,478 after (3.2-3.4), COMMITs 3,323/3,374/2,932
// before, 2,336/2,324 after, client CPU 1,052-1,181 us per cycle before,
// 971-979 after. A gather also ends when another batch took the queue
// (a caller that arrived during the gather and found enough callers
// waiting started one), rather than holding a slot of the lane until
// its timer. No caller waits longer for it: a caller queued during a
// gather is held at most Hold, as before, and MaxGather is far below
// MaxHold.
//
// Late callers. Over HTTP a caller comes back through its client, the
// network and the server's request path: on the shared 2-core machine
// (bench --mode http, wire client, N=5000, W=8, load 14) 382 of 500
// gathers (a quarter of an 8 ms batch, then at most 2 ms) ended before the
// callers were back, with 10.6 of 15.7 operations queued, and the batches
// committed 0.19 times per cycle against 0.127 in process. So the lane
// learns how late its callers come back (Pacer.Back: a gather's wait when
// they all came back, twice its limit when not) and waits a quarter more
// than that when it exceeds a quarter of the batch, never longer than
// twice the batch nor MaxGather (5 ms; it was 2 ms). Callers that come
// back at once change nothing (their gathers end when they are back); a
// lone caller's own return ends its gather.
//
// The bound was the batch's own time. But a caller that misses a gather
// waits for the whole next batch, or pays a commit of its own, so waiting
// up to one batch more for it costs the callers already back no more than
// missing the gather would cost that caller. The Go SDK's client comes
// back later than a batch's time often enough (its own JSON decoding is
// about half of its CPU): bench --mode http --http-client sdk on SQLite
// (N=10000, W=8, load 1.3-1.9, eighteen alternated pairs, six of them with
// this build and twelve with the bound switched by a variable) committed
// 0.153-0.179 times per cycle with the bound at one batch and 0.130-0.139
// at two (nearly eight callers a batch, as in process), at 1.06 times the
// cycles per second (median; 0.85-1.51) and less CPU a cycle, and on
// PostgreSQL (N=6000, five pairs) 1.06 (0.97-1.10). The wire client's
// batches were nearly full already (0.132-0.141 commits per cycle, 0.126
// at two batches; speed median 0.99, twelve pairs), and in --mode store
// the callers are back at once, so the bound never binds: SQLite committed
// 0.1253-0.1254 times per cycle either way, and PostgreSQL at W=8 ran
// 0.93-1.05 of its speed (median 1.00, four pairs). Where the callers do
// not come back soon (workers that work between their calls), a caller
// that arrives during a gather may now wait up to two batches' time
// instead of one, and never longer than MaxGather, as before: a
// heartbeat's worst wait is unchanged.
//
// What a batch does is unchanged: the same fenced writes with the fence in
// their predicate, the same events and answers, committed before any is
// answered; only which callers share a transaction changes. Wake-ups
// across replicas are the driver's (LISTEN/NOTIFY) and unchanged.
//
// Measured (bench --mode store, PostgreSQL 15, default durability, old and
// new binaries alternated, same settings, N=3000-5000; the shared 2-core
// machine at load 14-24, so throughput is noise and the figures are the
// database's per cycle, from pg_stat_statements): two replicas at W=8,
// COMMITs per cycle 0.79/0.76/0.78/0.76 before, 0.49/0.41/0.49/0.50 after,
// statements 5.8/5.5/5.6/5.6 before, 4.5/3.9/4.2/4.3 after, client CPU
// 1,036-1,407 us before, 754-1,007 after; one replica at W=8, commits
// 0.35-0.42 before, 0.31-0.33 after. At W=32 nothing changes (0.11-0.13
// commits per cycle for one replica, 0.23-0.27 for two): each replica's
// batches carry more than Enough callers there, so two replicas still
// commit about twice as often as one.
//
// Enough. With Enough at 4, eight callers on one replica settled into two
// batches of four running side by side, each paying the fixed cost of a
// batch (two round trips, a commit and its WAL flush): on the shared
// 2-core machine a batch of eight took about as long as one of four (2.5
// ms), so the second batch bought no throughput and cost CPU. At 8 they
// go as one batch, and a second starts beside it for eight waiting callers
// (at W=16 and more), or after the hold for any (a stalled batch). bench
// --tasks 10000 on PostgreSQL, 4 and 8 alternated, CPU per task of the
// whole run (the bench process, and the cluster's from /proc), load 1.7-2.4:
// W=8, six pairs: COMMITs per cycle 0.257 -> 0.132, client CPU 194-252 ->
// 153-220 us, server 450-507 -> 317-421 us, cycles/s 3,015-3,488 against
// 2,617-3,626 (per pair 1.02, 0.85, 1.04, 1.01, 0.98, 1.01); W=16, two
// pairs: 4,370 and 4,386 against 4,656 and 4,736 cycles/s, server CPU
// 398-403 -> 368-392 us; two replicas of W=4 (four pairs): no change,
// each replica's lane holds fewer callers than either setting.
//
// A larger Enough does not make W=32's batches larger. With two batches at
// most, each carries about the half of the callers that came back while
// the other ran, whatever Enough is. One replica, bench --tasks 20000
// --workers 32, Enough set to 8, 12 and 16 by a throwaway build, four
// rotated rounds (2026-12-05, load 0.8-1.9):
//   - commits per cycle 0.072-0.075, 0.069-0.071 and 0.067;
//   - cycles/s 5,104-5,856, 5,082-5,544 and 5,325-5,597.
//
// So a batch grew from about 14 cycles to 15, and throughput did not move.
//
// Replicas. Replicas on one database each batch only their own callers,
// and each lane starts a batch beside its running one for Enough waiting
// callers: at W=32 two replicas ran four batches of eight at once where
// one replica runs two of sixteen, and on a CPU-bound database every
// batch's fixed cost (its round trips, statements and commit) is
// throughput lost: two replicas ran a median 0.74 of one. A lane's own
// callers cannot tell it apart from one replica at W=16, where two
// overlapping batches of eight beat one of sixteen. So the pacer takes
// the number of replicas serving the database (CountReplicas: it reads
// the count of a driver that keeps one, tgdriver.ReplicaCounter, when it
// decides) and asks for Enough
// times as many waiting callers: together the replicas run about the
// batches one replica would. Alone (or on SQLite) nothing changes. The
// first batch never waits, and Hold still bounds every wait, so a wrong
// count costs only pace. Measured in package tgpostgres's doc ("The hot
// lanes of several replicas").
//
// A single-writer driver (SQLite) runs one batch at a time; the pacer
// never starts a second there.
package hotpace
