package taskgraph

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// The hot path. Claim-next, heartbeat and complete are most of a store's
// writes; they go through the hot lane, which runs the operations waiting
// at a moment as one batch in one transaction, in two driver rounds
// (Tx.Fetch, then Tx.Apply) whatever their number: the fenced updates of
// the heartbeats and completions, the claim scans and the reads of the
// kept answers of request ids in the first, the claims' updates, every
// event, the notifications and the kept answers in the second, with the
// commit (tgdriver.Apply.Commit; the claims' answers too, since a claim
// answers with its task as granted). With PostgreSQL each round is one
// round trip and the operations of a batch share statements (one per kind
// of update) and the commit; with SQLite they share the writer's commit.
// What a batch does is what each operation alone does (the same updates,
// guards, events and answers, in the order the operations joined the
// batch); the dependents
// of the batch's completions are settled together after them (one driver
// call lowers every unmet count, and their updates go to the second
// round: completeDependents), and anything else out of the ordinary (a
// stale claim to explain, a gate or a dependent due later to make ready,
// leases to expire or due tasks to promote first) runs the operation's
// ordinary code in the same transaction.

// hotKind is what a hot operation does.
type hotKind int

const (
	hotClaim hotKind = iota
	hotHeartbeat
	hotComplete
)

// hotOp is one operation waiting in, or run by, the hot lane.
type hotOp struct {
	ctx     context.Context
	kind    hotKind
	arrived time.Time
	// claim-next
	owner      string
	workflowID string
	caps       []string
	lease      time.Duration
	// heartbeat and complete
	h      lease.Holder
	dur    time.Duration
	result []byte
	// rep is the holder's report (WithReport), nil when none.
	rep *Report
	// rq is the operation's request id, nil when none.
	rq *request
	// after, for a claim, is the completion it was submitted with
	// (CompleteAndClaim): the claim is granted only if that completion
	// was accepted.
	after *hotOp

	// done is closed once ans, the answer, is set: that of the run of
	// the batch that committed, or the error that ended the batch. ans
	// points into the batch's answers rather than being copied into every
	// operation (an answer holds two task views: most of an operation's
	// size).
	done chan struct{}
	ans  *hotAnswer
}

// Done is closed once op is answered (hotlane.Op).
func (op *hotOp) Done() <-chan struct{} { return op.done }

// Rides reports whether op is a claim that rides with the completion it
// was submitted with (hotlane.Op).
func (op *hotOp) Rides() bool { return op.after != nil }

// runHotOps submits ops to the store's hot lane, which runs them in one batch,
// and returns once each was answered.
func (s *Store) runHotOps(ops ...*hotOp) {
	for _, op := range ops {
		op.done = make(chan struct{})
	}
	s.hot.Run(ops...)
}

// hotAnswer is what one run of a batch's transaction gave an operation;
// it becomes the operation's answer only if that run committed.
type hotAnswer struct {
	claimed Claimed
	ok      bool
	task    Task
	err     error
}

// defaultHotBatches is how many batches run at once on a driver of many
// writers; a single-writer driver (SQLite) commits one transaction at a
// time anyway, and runs one.
const defaultHotBatches = 2

// maxKeyRescans bounds the claim scans a batch runs again for claims
// whose candidates' concurrency keys closed under them.
const maxKeyRescans = 8

// defaultHotBatchSize bounds the operations of one batch.
const defaultHotBatchSize = 256

// runHot runs batch in one transaction and answers its operations.
func (s *Store) runHot(batch []*hotOp) {
	live := batch[:0:0]
	for _, op := range batch {
		if err := op.ctx.Err(); err != nil {
			op.ans = &hotAnswer{err: err}
			close(op.done)
			continue
		}
		live = append(live, op)
	}
	if len(live) == 0 {
		return
	}
	answers := make([]hotAnswer, len(live))
	err := s.hotWrite(live, answers)
	if err != nil && !errors.Is(err, tgdriver.ErrUnavailable) && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrReadOnlyStore) && len(live) > 1 {
		// Not the database's environment: an operation the batch could
		// not run (a fault of ours). Run each alone, so that one cannot
		// fail the others.
		s.log.Warn("a batch of operations failed; running them one by one", "ops", len(live), "err", err)
		for _, op := range live {
			one := make([]hotAnswer, 1)
			if err := s.hotWrite([]*hotOp{op}, one); err != nil {
				one[0] = hotAnswer{err: err}
			}
			s.answer(op, &one[0])
		}
		return
	}
	for i, op := range live {
		if err != nil {
			answers[i] = hotAnswer{err: err}
		}
		s.answer(op, &answers[i])
	}
}

// answer gives op its answer and wakes its caller.
func (s *Store) answer(op *hotOp, a *hotAnswer) {
	op.ans = a
	if a.err != nil && errors.Is(a.err, ErrStaleClaim) {
		s.stats.staleRejections.Add(1)
	}
	close(op.done)
}

// hotWrite runs ops in one transaction and fills answers from the run that
// committed.
func (s *Store) hotWrite(ops []*hotOp, answers []hotAnswer) error {
	if s.readOnly {
		return s.errReadOnly()
	}
	if s.closed.Load() {
		return ErrClosed
	}
	// The batch's own context: an operation whose caller gives up once
	// the batch has started still runs, as with a single operation.
	ctx := context.WithoutCancel(ops[0].ctx)
	shared := s.lc != nil && s.lc.shared
	if err := s.stepIfDue(ctx); err != nil {
		return err
	}
	var last *outbox
	write := func(lookupFirst bool) error {
		return s.drv.Write(ctx, func(tx tgdriver.Tx) error {
			last = nil
			clear(answers)
			out, err := s.hotTx(ctx, tx, ops, answers, shared, lookupFirst)
			if err != nil {
				return err
			}
			last = out
			return nil
		})
	}
	err := write(false)
	if errors.Is(err, errReplayWrote) {
		// The transaction rolled back: nothing of it was written. The
		// batch runs again, reading its kept answers first.
		err = write(true)
	}
	if err != nil {
		if errors.Is(err, tgdriver.ErrReadOnlyStore) {
			return s.errReadOnly()
		}
		return err
	}
	if last != nil {
		s.committed(last)
	}
	return nil
}

// errReplayWrote is hotTx's error when an operation its first round found
// to be a replay (its request id's answer kept, or refused) had its
// update applied in that round: the transaction must not commit, and
// hotWrite runs the batch again, reading the kept answers first.
var errReplayWrote = errors.New("taskgraph: an update of a replayed operation was applied in the batch's first round")

// hotTx is one run of a batch's transaction.
// With touch, it refreshes the shared alive time in passing, as every
// write does, before its last round. The kept answers of the operations
// with a request id are read in the first round (Fetch.Requests), unless
// lookupFirst or a heartbeat carries one: then in a round of their own
// before it (see hotRequests).
func (s *Store) hotTx(ctx context.Context, tx tgdriver.Tx, ops []*hotOp, answers []hotAnswer, touch, lookupFirst bool) (out *outbox, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("a batch of operations panicked", "panic", r)
			out, err = nil, fmt.Errorf("%w: internal error in a batch of operations: %v", errInternal, r)
		}
	}()
	now := s.clock.Now().UTC()
	out = &outbox{}
	// opW is the view of op's own operation: its context (principal,
	// arrival), its actor and the time it is judged at, sharing the
	// batch's transaction, time and outbox.
	opW := func(op *hotOp) *wtx {
		w := &wtx{ctx: context.WithoutCancel(op.ctx), tx: tx, now: now, nowMS: now.UnixMilli(), s: s, out: out,
			judged: judgedAt(op.arrived, now)}
		switch op.kind {
		case hotClaim:
			w.as(ActorWorker, op.owner)
		default:
			w.as(ActorWorker, op.h.Owner)
		}
		return w
	}
	ws := make([]*wtx, len(ops))
	for i, op := range ops {
		ws[i] = opW(op)
	}

	// Operations with a request id whose answer is kept get it and do
	// nothing more; one whose id an earlier operation of the batch carries
	// gets that one's answer.
	ids := hotRequests(ops, answers)
	done, dupOf := ids.done, ids.dupOf
	merged := len(ids.keys) > 0 && !lookupFirst
	for _, k := range ids.keys {
		// A replayed heartbeat's fence still holds: its update would
		// write again, and the batch would run twice.
		merged = merged && ops[ids.first[k]].kind != hotHeartbeat
	}
	if len(ids.keys) > 0 && !merged {
		w := ws[ids.first[ids.keys[0]]]
		kept, err := w.tx.Requests(w.ctx, ids.keys)
		if err != nil {
			return nil, err
		}
		if err := ids.replay(ops, ws, answers, kept); err != nil {
			return nil, err
		}
	}

	// Claims expire lapsed leases and promote due tasks first, at the
	// arrival of the earliest claim of the batch, when the store's timers
	// say one can be due.
	var probeAt time.Time
	for i, op := range ops {
		if op.kind == hotClaim && (probeAt.IsZero() || ws[i].judged.Before(probeAt)) {
			probeAt = ws[i].judged
		}
	}
	// probed: the expiries and promotions found something to write, and
	// may have taken key rows (the schema's triggers) that the batch does
	// not know of.
	probed := false
	if !probeAt.IsZero() && s.timers.due(probeAt) {
		w := &wtx{ctx: ctx, tx: tx, now: now, nowMS: now.UnixMilli(), s: s, out: out, judged: probeAt}
		w.as(ActorWorker, "")
		var err error
		if probed, err = w.expireAndPromote(sweepLimit, dueLimit); err != nil {
			return nil, err
		}
		s.timers.probed(w)
	}

	// Round one: the kept answers of the request ids (merged), the fenced
	// updates of heartbeats and completions, in task id order, and a claim
	// scan per kind of claim.
	var f tgdriver.Fetch
	if merged {
		f.Requests = ids.keys
	}
	type fenced struct {
		op  int
		exp int64 // heartbeat: the new expiry
	}
	var fencedOps []fenced
	for i, op := range ops {
		if done[i] {
			continue
		}
		w := ws[i]
		switch op.kind {
		case hotHeartbeat:
			set, exp := w.heartbeatSet(op.dur)
			if err := w.setReport(&set, op.rep, op.h.Generation); err != nil {
				return nil, err
			}
			fencedOps = append(fencedOps, fenced{op: i, exp: exp})
			f.Updates = append(f.Updates, tgdriver.TaskUpdate{TaskID: op.h.TaskID, Set: set, Guard: w.fence(op.h)})
		case hotComplete:
			set := w.completeSet(op.h, op.result)
			if err := w.setReport(&set, op.rep, op.h.Generation); err != nil {
				return nil, err
			}
			fencedOps = append(fencedOps, fenced{op: i})
			f.Updates = append(f.Updates, tgdriver.TaskUpdate{TaskID: op.h.TaskID, Set: set, Guard: w.fence(op.h)})
		}
	}
	order := make([]int, len(f.Updates))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(f.Updates[a].TaskID, f.Updates[b].TaskID) })
	sorted := make([]tgdriver.TaskUpdate, len(order))
	sortedOps := make([]fenced, len(order))
	for i, j := range order {
		sorted[i], sortedOps[i] = f.Updates[j], fencedOps[j]
	}
	f.Updates, fencedOps = sorted, sortedOps

	type scan struct {
		workflowID string
		caps       []string
		ops        []int
	}
	var scans []*scan
	byKey := map[string]*scan{}
	for i, op := range ops {
		if op.kind != hotClaim || done[i] {
			continue
		}
		key := op.workflowID + "\x00" + strings.Join(op.caps, " ")
		sc := byKey[key]
		if sc == nil {
			sc = &scan{workflowID: op.workflowID, caps: op.caps}
			byKey[key] = sc
			scans = append(scans, sc)
		}
		sc.ops = append(sc.ops, i)
	}
	// A scan may meet the tasks an earlier scan of the batch took: it asks
	// for as many more as those take.
	taken := 0
	for _, sc := range scans {
		f.Claims = append(f.Claims, tgdriver.ClaimScan{WorkflowID: sc.workflowID, Caps: sc.caps, N: taken + len(sc.ops), AtMS: now.UnixMilli()})
		taken += len(sc.ops)
	}
	fetched, err := tx.Fetch(ctx, f)
	if err != nil {
		return nil, err
	}
	if merged {
		// The replays found now did nothing more, but their updates ran
		// in the round: a completion's fence fails once it completed, so
		// one that held means the transaction must not commit (a request
		// id refused, reused for another write).
		if err := ids.replay(ops, ws, answers, fetched.Kept); err != nil {
			return nil, err
		}
		for k, fo := range fencedOps {
			if done[fo.op] && fetched.Updated[k].OK {
				return nil, errReplayWrote
			}
		}
	}

	// Between the rounds: the events of the fenced writes, in batch
	// order; the explanation of a stale claim; the dependents of the
	// completions, all at once; the claims.
	var settle []int64
	doneAt := map[int64]int{}
	for k, fo := range fencedOps {
		if u := fetched.Updated[k]; u.OK && !done[fo.op] {
			ws[fo.op].batchDone, doneAt[u.Row.Seq] = &settle, k
		}
	}
	var freed []string
	var freedBy *wtx
	for k, fo := range fencedOps {
		i := fo.op
		if done[i] {
			continue // a replay: answered by ids.replay
		}
		op, w := ops[i], ws[i]
		u := fetched.Updated[k]
		if !u.OK {
			answers[i].err = w.explainNotLive(op)
			continue
		}
		r, err := toRow(u.Row)
		if err != nil {
			return nil, err
		}
		switch op.kind {
		case hotHeartbeat:
			err = w.heartbeated(&r, op.h, fo.exp, op.rep)
		case hotComplete:
			if err = w.completed(&r, op.h, op.result, op.rep); err == nil && r.ConcurrencyKey != "" {
				// The claim ended (the fence held it): the schema gave
				// its key's slot back; a claim is woken for it below.
				freed, freedBy = append(freed, r.ConcurrencyKey), w
			}
		}
		if err != nil {
			return nil, err
		}
		answers[i].task = r.Task
	}
	// The keys of the claims ended, all in one statement (the operations
	// share the outbox its wakes go to).
	if freedBy != nil {
		if err := freedBy.keysFreed(freed...); err != nil {
			return nil, err
		}
	}
	if len(settle) > 0 {
		// What a dependent's change causes is the doing of the completion
		// of its last dependency in the batch's order.
		last := func(deps []int64) *wtx {
			k := -1
			for _, d := range deps {
				k = max(k, doneAt[d])
			}
			return ws[fencedOps[k].op]
		}
		if err := ws[fencedOps[doneAt[settle[0]]].op].completeDependents(settle, last); err != nil {
			return nil, err
		}
	}
	// Events are recorded in the order the operations happened: the fenced
	// writes above, then the claims, which were decided on after them.
	var updates []tgdriver.TaskUpdate
	var grantedOps []int
	seen := map[int64]bool{}
	// heldKey is the last, in key order, of the key rows the batch holds:
	// those of the claims it ended (lockUpdatedKeysSQL, or the schema's
	// trigger), then those its waves of candidates lock.
	heldKey := ""
	for _, k := range slices.Concat(fetched.Keys, freed) {
		heldKey = max(heldKey, k)
	}

	// grant gives the claims ops of scan sc the first of cands they may
	// take, in batch order, and returns the claims left without a task
	// while a candidate was refused for its concurrency key (full, or out
	// of rate, since the scan read it: an earlier claim of the batch took
	// the slot, or another transaction did): the scan runs again for them,
	// and passes over that key now.
	grant := func(sc *scan, opsOf []int, cands []tgdriver.TaskRow) (again []int, err error) {
		next := 0
		refused := false
		var busy map[string]bool
		if len(opsOf) > 0 {
			// The candidates' keys' rows first, in key order, not in the
			// candidates' order, which another batch's scan may see
			// otherwise; those before a key the batch holds only when
			// free (lockKeysAfter): the candidates of a key another
			// transaction holds are passed over.
			keys := make([]string, 0, len(cands))
			held := heldKey
			for _, c := range cands {
				keys = append(keys, c.ConcurrencyKey)
				if probed {
					// The expiries and promotions may hold any key:
					// every candidate's key is taken only when free.
					held = max(held, c.ConcurrencyKey)
				}
			}
			if busy, heldKey, err = ws[opsOf[0]].lockKeysAfter(keys, held); err != nil {
				return nil, err
			}
		}
		// skipped counts the claims the scan asked a task for that claim
		// nothing.
		skipped := 0
		for _, i := range opsOf {
			if done[i] {
				skipped++ // a replay found in the first round: answered
				continue
			}
			op, w := ops[i], ws[i]
			if op.after != nil && !acceptedIn(op.after, ops, answers) {
				skipped++
				continue // its completion was refused: it claims nothing
			}
			var r row
			found := false
			var passed *tgdriver.TaskRow
			for !found && next < len(cands) {
				c := cands[next]
				next++
				if seen[c.Seq] {
					continue
				}
				seen[c.Seq] = true
				if busy[c.ConcurrencyKey] {
					passed = &cands[next-1]
					continue
				}
				if c.ConcurrencyKey != "" {
					no, err := w.takeKeySlot(c.ConcurrencyKey)
					if err != nil {
						return nil, err
					}
					if no != "" {
						refused = true
						continue
					}
				}
				if r, err = toRow(c); err != nil {
					return nil, err
				}
				found = true
			}
			if !found {
				if refused {
					again = append(again, i)
				} else if passed != nil {
					// It found nothing for a key another transaction
					// held: once this commits, a parked claim that may
					// take that task looks again (this one, when it
					// waits: it registered before it tried).
					w.wakeWaitersFor(*passed)
				}
				continue // nothing left for this claim: it finds no task
			}
			g, err := w.grantFor(&r, op.owner, op.lease)
			if err != nil {
				return nil, err
			}
			cr := claimedRow(r, g, w.nowMS)
			c, err := w.granted(&cr, g)
			if err != nil {
				return nil, err
			}
			answers[i].claimed, answers[i].ok = c, true
			updates = append(updates, tgdriver.TaskUpdate{Seq: r.seq, Set: g.set, Guard: g.guard})
			grantedOps = append(grantedOps, i)
		}
		// The scan locked a task for each of those too, which nothing
		// claims: once this commits, a claim that passed over it (SKIP
		// LOCKED) and waits looks again
		// (TestUnclaimedCandidateWakesParkedClaimPostgres).
		for _, c := range cands[min(next, len(cands)):] {
			if skipped == 0 {
				break
			}
			if !seen[c.Seq] {
				ws[opsOf[0]].wakeWaitersFor(c)
				skipped--
			}
		}
		return again, nil
	}
	type rescan struct {
		sc  *scan
		ops []int
	}
	var rescans []rescan
	// While the claims are granted, nothing but takeKeySlot writes the key
	// rows the grants lock: they are read from keyRows, and the slots
	// taken are kept in keyWrites and sent with the next round.
	keyRows := map[string]tgdriver.KeyRow{}
	keyWrites := map[string]*tgdriver.KeyUpdate{}
	for _, w := range ws {
		w.keyRows, w.keyWrites = keyRows, keyWrites
	}
	for si, sc := range scans {
		again, err := grant(sc, sc.ops, fetched.Claimable[si])
		if err != nil {
			return nil, err
		}
		if len(again) > 0 {
			rescans = append(rescans, rescan{sc: sc, ops: again})
		}
	}
	// Each round closes every key it refused a claim for (the scans of
	// this transaction see its own slots taken), so rounds end; the bound
	// only caps a batch's work when keys keep closing under it.
	for round := 0; len(rescans) > 0 && round < maxKeyRescans; round++ {
		// The slots taken so far are written first: the scans see them.
		rf := tgdriver.Fetch{Keys: drainKeyWrites(keyWrites)}
		for _, rs := range rescans {
			// The scan meets the tasks the batch took (not yet updated)
			// and those it passed over: it asks for as many more.
			rf.Claims = append(rf.Claims, tgdriver.ClaimScan{WorkflowID: rs.sc.workflowID, Caps: rs.sc.caps, N: len(seen) + len(rs.ops), AtMS: now.UnixMilli()})
		}
		got, err := tx.Fetch(ctx, rf)
		if err != nil {
			return nil, err
		}
		var next []rescan
		for k, rs := range rescans {
			again, err := grant(rs.sc, rs.ops, got.Claimable[k])
			if err != nil {
				return nil, err
			}
			if len(again) > 0 {
				next = append(next, rescan{sc: rs.sc, ops: again})
			}
		}
		rescans = next
	}
	for _, w := range ws {
		w.keyRows, w.keyWrites = nil, nil
	}
	// The slots the grants took go with round two, before the claims'
	// updates, whose triggers read them.
	out.keys = drainKeyWrites(keyWrites)

	// Round two: the claims' updates, the events, the notifications, the
	// kept answers of the operations with a request id, and the commit.
	// A claim's answer holds its task as granted (claimedRow), which is
	// what its update writes on the row the batch holds locked: it is
	// known before the round, and kept in it. Those of the batch that
	// repeat an id get its answer.
	var kept []tgdriver.RequestRow
	for i, op := range ops {
		a := answers[i]
		var answer any = a.task
		switch {
		case op.rq == nil || done[i] || a.err != nil || (op.kind == hotClaim && !a.ok):
			continue
		case op.kind == hotClaim:
			answer = a.claimed
		}
		r, err := ws[i].keepRow(op.rq, answer)
		if err != nil {
			return nil, err
		}
		kept = append(kept, r)
	}
	w := &wtx{ctx: ctx, tx: tx, now: now, nowMS: now.UnixMilli(), s: s, out: out}
	if touch {
		if err := s.lc.sharedTouch(w); err != nil {
			return nil, err
		}
	}
	if err := w.flushRound(updates, kept, true); err != nil {
		return nil, err
	}
	if s.timers != nil {
		for _, i := range grantedOps {
			s.timers.leaseSet(answers[i].claimed.Lease.ExpiresAt)
		}
	}
	for i, j := range dupOf {
		if j >= 0 && answers[i].err == nil {
			answers[i] = answers[j]
		}
	}
	return out, nil
}

// acceptedIn reports whether completion c was accepted: by this batch's
// run (answers) when c is one of ops, else by the batch that answered it
// before (a batch run one operation at a time runs c first).
func acceptedIn(c *hotOp, ops []*hotOp, answers []hotAnswer) bool {
	for j, op := range ops {
		if op == c {
			return answers[j].err == nil
		}
	}
	select {
	case <-c.done:
		return c.ans.err == nil
	default:
		return false
	}
}

// requestIDs are the request ids of a batch's operations (hotRequests).
type requestIDs struct {
	// done[i] reports that operation i has its answer and does nothing
	// more: an id an earlier operation of the batch carries with other
	// arguments, refused; and, once replay has run, a replay.
	done []bool
	// dupOf[i] is the earlier operation of the batch with the same id (-1
	// when none), whose answer it gets.
	dupOf []int
	// keys are the batch's distinct request keys, first[key] the
	// operation that carries key first, whose kept answer replay looks
	// for.
	keys  []string
	first map[string]int
}

// hotRequests finds the batch's operations with a request id.
//
// The kept answers are read in the batch's first round (Fetch.Requests),
// not in a round of their own before it: a batch with request ids costs
// the round trips of one without. So the first round's updates run
// before the batch knows which operations are replays. A completion's
// update does nothing on a replay (its fence fails: the task is no longer
// claimed under that claim), nor does a claim's (claims are granted after
// the round); a heartbeat's would write again, so a batch with a
// heartbeat that carries a request id reads them in a round first, and so
// does the run after one whose replay's update held anyway (an id reused
// for another write: errReplayWrote).
func hotRequests(ops []*hotOp, answers []hotAnswer) requestIDs {
	done := make([]bool, len(ops))
	dupOf := make([]int, len(ops))
	first := map[string]int{}
	var keys []string
	for i, op := range ops {
		dupOf[i] = -1
		if op.rq == nil {
			continue
		}
		if j, ok := first[op.rq.key]; ok {
			done[i] = true
			if !op.rq.same(ops[j].rq) {
				answers[i].err = invalid("request_id", "%q is in use by a concurrent %s with different arguments; a retry must repeat the write exactly (nothing was written)", op.rq.id, ops[j].rq.op)
				continue
			}
			dupOf[i] = j
			continue
		}
		first[op.rq.key] = i
		keys = append(keys, op.rq.key)
	}
	return requestIDs{done: done, dupOf: dupOf, keys: keys, first: first}
}

// replay answers the operations whose request id has an answer in kept,
// the kept answers read, and marks them done (their answer kept, or an
// error refusing their id): they do nothing more.
func (ids requestIDs) replay(ops []*hotOp, ws []*wtx, answers []hotAnswer, kept map[string]tgdriver.RequestRow) error {
	for _, key := range ids.keys {
		i := ids.first[key]
		op := ops[i]
		r, ok := kept[key]
		var found bool
		var err error
		if op.kind == hotClaim {
			found, err = ws[i].replayKept(op.rq, r, ok, &answers[i].claimed)
			answers[i].ok = found
		} else {
			found, err = ws[i].replayKept(op.rq, r, ok, &answers[i].task)
		}
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) {
				return err
			}
			answers[i].err, found = err, true
		}
		ids.done[i] = found
	}
	return nil
}

// explainNotLive is the error of op's fenced write that matched no row:
// why the claim it presents is not live, read in the same transaction.
func (w *wtx) explainNotLive(op *hotOp) error {
	r, err := w.loadTask(op.h.TaskID)
	if err != nil {
		return err
	}
	if err := lease.Check(r.current(), op.h, w.judged); err != nil {
		return w.explainStale(r, op.h, err)
	}
	return notLive(op.h.TaskID)
}

// hotHolderWrite runs a heartbeat or completion through the hot lane.
func (s *Store) hotHolderWrite(ctx context.Context, op *hotOp, args map[string]any) (Task, error) {
	if s.readOnly {
		return Task{}, s.errReadOnly()
	}
	if s.closed.Load() {
		return Task{}, ErrClosed
	}
	verb := "heartbeat"
	if op.kind == hotComplete {
		verb = "complete"
	}
	rep, err := checkedReport(ctx)
	if err != nil {
		return Task{}, err
	}
	op.rep = rep
	rq, err := newRequest(ctx, verb, op.h.Owner, holderArgs(op.h, reportArgs(args, rep)))
	if err != nil {
		return Task{}, err
	}
	op.rq = rq
	op.ctx, op.arrived = ctx, s.arrival(ctx)
	s.runHotOps(op)
	if op.ans.err != nil {
		return Task{}, fmt.Errorf("%s task %s: %w", verb, op.h.TaskID, op.ans.err)
	}
	return op.ans.task, nil
}

// hotClaimNext runs one try of a claim-next through the hot lane.
func (s *Store) hotClaimNext(ctx context.Context, arrived time.Time, owner, workflowID string, caps []string, d time.Duration, rq *request) (Claimed, bool, error) {
	if s.readOnly {
		return Claimed{}, false, s.errReadOnly()
	}
	if s.closed.Load() {
		return Claimed{}, false, ErrClosed
	}
	op := &hotOp{ctx: ctx, kind: hotClaim, arrived: arrived, owner: owner, workflowID: workflowID, caps: caps, lease: d, rq: rq}
	s.runHotOps(op)
	if op.ans.err != nil {
		return Claimed{}, false, fmt.Errorf("claim next: %w", op.ans.err)
	}
	return op.ans.claimed, op.ans.ok, nil
}
