package keys

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest/stenv"
)

// The lock-order tests of the paths that take several rows at once
// (package taskgraph, "Lock order"; tgpostgres's doc says which rows each
// path takes in which order). Each drives a path against the others at
// once, through several stores on one database (as replicas do), so that
// the hot lane batches operations of both; every operation must succeed
// (a deadlock that reached a caller fails the test), and the PostgreSQL
// driver's retries of deadlocked transactions, which a caller never sees,
// are counted from the store's log: none where the paths take their locks
// in one order, and logged where a gap of "Lock order" remains (a retry
// costs the server's deadlock_timeout, never a wrong answer).

// lockEnv is env with more stores on its database, all logging to one
// RetryLog.
type lockEnv struct {
	*env
	stores []*tg.Store
	log    *stenv.RetryLog
}

func setupLocks(t *testing.T, h Harness, replicas int) *lockEnv {
	t.Helper()
	log := &stenv.RetryLog{}
	e := setupWith(t, h, tg.Options{Logger: log.Logger()})
	le := &lockEnv{env: e, stores: []*tg.Store{e.S}, log: log}
	for range replicas - 1 {
		le.stores = append(le.stores, e.DB.Open(t, tg.Options{Clock: e.Clock, Logger: log.Logger()}))
	}
	return le
}

// store returns the store the i-th operation of a fan-out runs on.
func (e *lockEnv) store(i int) *tg.Store { return e.stores[i%len(e.stores)] }

// logDeadlocks logs how many transactions deadlocked (and were retried):
// the cost of a gap that package taskgraph's "Lock order" names.
func (e *lockEnv) logDeadlocks(t *testing.T, what string) {
	t.Helper()
	t.Logf("%d transactions deadlocked (and were retried) while %s", len(e.log.Deadlocks()), what)
}

// wantRoundPending fails t unless nodes r<r>-n00 .. n<n-1> of workflow w
// are pending: their dependencies completed while they were created.
func (e *lockEnv) wantRoundPending(t *testing.T, r, n int) {
	t.Helper()
	for i := range n {
		tk, err := e.S.TaskByNode(e.Ctx, "w", fmt.Sprintf("r%d-n%02d", r, i))
		if err != nil || tk.State != tg.StatePending {
			t.Fatalf("round %d: n%02d after its dependencies completed: %v, %v; want pending", r, i, tk.State, err)
		}
	}
}

// completeAndClaimAll completes each of claims on the store of its index,
// each submitted with a claim-next for the same owner (CompleteAndClaim),
// all at once and, when also is not nil, at once with also too. It records
// each task completed in done, failing t on one completed twice, and
// returns the claims granted.
func (e *lockEnv) completeAndClaimAll(t *testing.T, round int, claims []tg.Claimed, done map[string]bool, also func() error) []tg.Claimed {
	t.Helper()
	var (
		mu   sync.Mutex
		next []tg.Claimed
	)
	n := len(claims)
	if also != nil {
		n++
	}
	stenv.Concurrently(t, n, func(i int) error {
		if i == len(claims) {
			return also()
		}
		c := claims[i]
		_, nc, ok, err := e.store(i).CompleteAndClaim(e.Ctx, holder(c), json.RawMessage(`1`),
			tg.ClaimRequest{Owner: c.Lease.Owner, Lease: time.Minute})
		if err != nil {
			return fmt.Errorf("round %d: complete %s and claim: %w", round, c.Task.NodeID, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if done[c.Task.TaskID] {
			return fmt.Errorf("round %d: %s completed twice", round, c.Task.NodeID)
		}
		done[c.Task.TaskID] = true
		if ok {
			next = append(next, nc)
		}
		return nil
	})
	return next
}

// claimUpTo adds to claims the claim-nexts of workflow w granted one after
// another, until n are held or one is refused.
func (e *lockEnv) claimUpTo(t *testing.T, claims []tg.Claimed, n int) []tg.Claimed {
	t.Helper()
	for len(claims) < n {
		c, ok := e.claimNextLease(t, "w", time.Minute)
		if !ok {
			break
		}
		claims = append(claims, c)
	}
	return claims
}

// wantNoDeadlock fails t if a transaction deadlocked (and was retried).
func (e *lockEnv) wantNoDeadlock(t *testing.T, what string) {
	t.Helper()
	if d := e.log.Deadlocks(); len(d) > 0 {
		t.Fatalf("%d transactions deadlocked (and were retried) while %s:\n%s", len(d), what, strings.Join(d, "\n"))
	}
}

// Batches that end claims of several keys and claim tasks of several
// keys take several key rows each, in waves: those of the claims they end
// (the schema's trigger), then those of their candidates, then those of a
// rescan's. Here completions each submitted with a claim-next
// (CompleteAndClaim) on three stores at once, round after round, over six
// keys (two of them capped, so that claims are refused, scans run again,
// and tasks park and unpark): every operation succeeds, every task is
// done once, each key's counter matches its claimed tasks, and no
// transaction deadlocks. The keys of the claims a batch ends are taken
// first, in key order, after their tasks (tgpostgres: lockUpdatedSQL);
// its candidates' keys after them are waited for only when they come
// after every key the batch holds, and otherwise taken only when free
// (lockKeysAfter), so that no two batches wait for each other across
// those waves.
func testKeyBatchWavesLockInOrder(t *testing.T, h Harness) {
	e := setupLocks(t, h, 3)
	const nKeys, perKey, held = 6, 16, 24
	keys := make([]string, nKeys)
	for k := range keys {
		keys[k] = fmt.Sprintf("k%d", k)
		lim := &tg.KeyLimit{MaxClaimed: 1000}
		if k < 2 {
			lim = &tg.KeyLimit{MaxClaimed: 3}
		}
		if _, err := e.S.SetKeyLimit(e.Ctx, keys[k], *lim, alice); err != nil {
			t.Fatal(err)
		}
	}
	// Keys spread over the tasks so that a batch's tasks, in task id order,
	// name keys in no particular order.
	nodes := make([]tg.NodeSpec, nKeys*perKey)
	for i := range nodes {
		nodes[i] = tg.NodeSpec{NodeID: fmt.Sprintf("t%03d", i), Payload: json.RawMessage(`{}`), ConcurrencyKey: keys[(i*7+i/nKeys)%nKeys]}
	}
	if _, err := e.S.CreateWorkflow(e.Ctx, "w", nodes); err != nil {
		t.Fatal(err)
	}
	var claims []tg.Claimed
	for range held {
		if c, ok := e.claimNextLease(t, "w", time.Minute); ok {
			claims = append(claims, c)
		}
	}
	done := map[string]bool{}
	for round := 0; len(claims) > 0; round++ {
		if round > len(nodes) {
			t.Fatalf("%d rounds and %d tasks still claimed of %d", round, len(claims), len(nodes))
		}
		next := e.completeAndClaimAll(t, round, claims, done, nil)
		// Claims refused at the caps leave tasks for later rounds.
		claims = e.claimUpTo(t, next, held)
	}
	if len(done) != len(nodes) {
		t.Fatalf("%d tasks done of %d", len(done), len(nodes))
	}
	for _, k := range keys {
		e.wantClaimedOfKey(t, k, 0)
	}
	e.wantNoDeadlock(t, "batches ended and took claims of several keys")
	e.Verify(t)
}

// A create locks the dependencies it counts, and a batch the tasks it
// ends, in one order (task id): here creates of nodes that depend on many
// claimed tasks, named in shuffled orders, with a key and without, while
// batches on three stores complete those tasks. Every create and every
// completion succeeds, every node created counts its dependencies as they
// ended (pending once all of them completed), and no transaction
// deadlocks.
func testKeyCreateDepsBesideBatchLockInOrder(t *testing.T, h Harness) {
	e := setupLocks(t, h, 3)
	const deps, creates, rounds = 16, 8, 3
	for r := range rounds {
		ids := make([]string, deps)
		claims := make([]tg.Claimed, deps)
		for i := range deps {
			d := e.createKeyed(t, "w", fmt.Sprintf("r%d-d%02d", r, i), "k", nil)
			ids[i] = d.NodeID
			claims[i] = e.Claim(t, "w", d.TaskID, time.Minute)
		}
		stenv.Concurrently(t, deps+creates, func(i int) error {
			if i < deps {
				_, err := e.store(i).Complete(e.Ctx, holder(claims[i]), json.RawMessage(`1`))
				return err
			}
			c := i - deps
			order := make([]string, deps)
			for j := range deps {
				order[j] = ids[(j*(2*c+1)+c)%deps] // 2c+1 is odd: a permutation of 16
			}
			spec := tg.NodeSpec{NodeID: fmt.Sprintf("r%d-n%02d", r, c), Payload: json.RawMessage(`{}`), DependsOn: order}
			if c%2 == 0 {
				spec.ConcurrencyKey = "k"
			}
			_, err := e.store(i).CreateTask(e.Ctx, "w", spec)
			return err
		})
		e.wantRoundPending(t, r, creates)
	}
	e.wantClaimedOfKey(t, "k", 0)
	e.wantNoDeadlock(t, "creates locked dependencies that batches completed")
	e.Verify(t)
}

// A slot freed or a cap raised unparks a key's tasks after taking the
// key's row, while a claim by id of a parked task and a create that
// depends on one lock the task's row before the key's: here all of them
// at once on one full key, round after round. Every operation succeeds
// (a claim by id may find the key full: refused, as without the others),
// the parking rule holds after each round, and each key's counter matches
// its claimed tasks. A change of limit, a slot freed
// (concurrency_keys_unpark) and a claim of an unparked task
// (tasks_key_leave) all unpark after the key's row; the claims by id and
// the creates lock a parked task before it, a gap where a transaction may
// deadlock and be retried.
func testKeyUnparkBesideTaskLockers(t *testing.T, h Harness) {
	e := setupLocks(t, h, 3)
	const queued, rounds = 12, 4
	for r := range rounds {
		key := fmt.Sprintf("r%d", r)
		lim := &tg.KeyLimit{MaxClaimed: 2}
		var held []tg.Claimed
		for i := range 2 {
			d := e.createKeyed(t, "w", fmt.Sprintf("r%d-h%d", r, i), key, lim)
			held = append(held, e.Claim(t, "w", d.TaskID, time.Minute))
		}
		parked := make([]tg.Task, queued)
		for i := range parked {
			parked[i] = e.createKeyed(t, "w", fmt.Sprintf("r%d-p%02d", r, i), key, lim)
		}
		if n := e.wantParkingRule(t, key, "queued on a full key"); n != queued-1 {
			t.Fatalf("round %d: %d tasks parked on the full key, want %d", r, n, queued-1)
		}
		const claimers, creators = 4, 4
		stenv.Concurrently(t, 1+len(held)+claimers+creators, func(i int) error {
			s := e.store(i)
			switch {
			case i == 0:
				_, err := s.SetKeyLimit(e.Ctx, key, tg.KeyLimit{MaxClaimed: 2 + claimers}, bob)
				return err
			case i <= len(held):
				_, err := s.Complete(e.Ctx, holder(held[i-1]), json.RawMessage(`1`))
				return err
			case i <= len(held)+claimers:
				p := parked[queued-1-(i-1-len(held))] // the last ones: parked
				_, _, err := s.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", TaskID: p.TaskID, Lease: time.Minute})
				var ce *tg.ConflictError
				if errors.As(err, &ce) && strings.Contains(err.Error(), "has its maximum") {
					return nil // the key was full when the claim looked
				}
				return err
			default:
				c := i - 1 - len(held) - claimers
				_, err := s.CreateTask(e.Ctx, "w", tg.NodeSpec{NodeID: fmt.Sprintf("r%d-n%d", r, c), Payload: json.RawMessage(`{}`),
					ConcurrencyKey: key, DependsOn: []string{parked[1+c].NodeID, parked[queued-2-c].NodeID}})
				return err
			}
		})
		e.wantParkingRule(t, key, fmt.Sprintf("round %d", r))
		e.wantClaimedOfKey(t, key, int(e.Count(t, `SELECT COUNT(*) FROM tasks WHERE concurrency_key = ? AND state = 'claimed'`, key)))
	}
	e.logDeadlocks(t, "slots freed and caps raised beside claims by id and creates of parked tasks")
	e.Verify(t)
}

// A change of a key's limit takes the key's row first and its parked
// tasks after it (a cap raised unparks them), as a claim of the key that
// ends does: its trigger gives the slot back and unparks the next parked
// task after the key's row. Here an operator raises and lowers the cap of
// a full key with queued tasks, round after round, while the key's claims
// end on three stores, each completion submitted with the next claim.
// Every operation succeeds, each task is done once, the parking rule
// holds after each round, the key's counter matches its claimed tasks
// at the end, and no transaction deadlocks. With the change taking the
// parked tasks before the key's row, each claim that ended during a
// change closed a cycle with it, and PostgreSQL aborted the change (under
// load in CI, ten tries in a row).
func testKeyLimitChangeBesideClaimEndsLockInOrder(t *testing.T, h Harness) {
	e := setupLocks(t, h, 3)
	const tasks, limit = 96, 3
	if _, err := e.S.SetKeyLimit(e.Ctx, "k", tg.KeyLimit{MaxClaimed: limit}, alice); err != nil {
		t.Fatal(err)
	}
	nodes := make([]tg.NodeSpec, tasks)
	for i := range nodes {
		nodes[i] = tg.NodeSpec{NodeID: fmt.Sprintf("t%03d", i), Payload: json.RawMessage(`{}`), ConcurrencyKey: "k"}
	}
	if _, err := e.S.CreateWorkflow(e.Ctx, "w", nodes); err != nil {
		t.Fatal(err)
	}
	claims := e.claimUpTo(t, nil, tasks)
	if len(claims) != limit {
		t.Fatalf("%d claims of a key capped at %d", len(claims), limit)
	}
	done := map[string]bool{}
	for round := 0; len(claims) > 0; round++ {
		if round > tasks {
			t.Fatalf("%d rounds and %d tasks still claimed of %d", round, len(claims), tasks)
		}
		// Raised on even rounds (the change unparks), lowered on odd ones.
		lim := tg.KeyLimit{MaxClaimed: limit + 1 - round%2}
		next := e.completeAndClaimAll(t, round, claims, done, func() error {
			if _, err := e.store(round).SetKeyLimit(e.Ctx, "k", lim, bob); err != nil {
				return fmt.Errorf("round %d: set the limit to %d: %w", round, lim.MaxClaimed, err)
			}
			return nil
		})
		e.wantParkingRule(t, "k", fmt.Sprintf("round %d", round))
		claims = e.claimUpTo(t, next, tasks)
	}
	if len(done) != tasks {
		t.Fatalf("%d tasks done of %d", len(done), tasks)
	}
	e.wantClaimedOfKey(t, "k", 0)
	e.wantNoDeadlock(t, "a key's limit changed while its claims ended")
	e.Verify(t)
}
