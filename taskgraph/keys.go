package taskgraph

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/audit"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/keyrate"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/limits"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// Concurrency keys and rate limits per key (issue 27, items 1 and 2). A
// task may name a concurrency key (NodeSpec.ConcurrencyKey); the key's
// limit (KeyLimit: set at create, changed by an operator with SetKeyLimit)
// caps how many of its tasks are claimed at once and how many claims it
// grants per interval of server time. A claim takes a slot of its key in
// its own transaction by a guarded update of the key's row (takeKeySlot);
// whatever ends the claim gives it back in its own transaction (a trigger
// of the schema, migration 0012). Claim-next's scan passes over the tasks
// of a closed key (full, or rate-limited at the scan's time).

// Bounds of concurrency keys (see package limits).
const (
	MaxKeyClaimed      = limits.MaxKeyClaimed
	MaxKeyRate         = limits.MaxKeyRate
	MaxKeyRateInterval = limits.MaxKeyRateInterval
)

// AuditLimit is the audit chain entry of an operator's change of a
// concurrency key's limit (SetKeyLimit), with the operator and reason.
const AuditLimit = audit.EntryLimit

// MaxKeysListed bounds the keys one Keys call returns.
const MaxKeysListed = 1000

// KeyLimit is the limit of a concurrency key (package keyrate). The zero
// KeyLimit limits nothing.
type KeyLimit = keyrate.Limit

// Key is a concurrency key as stored: its limit and its claims now.
type Key = keyrate.Key

// checkKey validates a concurrency key name: an identifier, as workflow_id.
func checkKey(field, key string) error { return checkIdentifier(field, key) }

// takeKeySlot takes a slot of concurrency key key for a claim in this
// transaction, at the transaction's server time (the time its history
// records): the key's row is locked, then updated under a guard that it
// still holds what was read. refused is set when the key is full or
// rate-limited (it says why: keyrate.Refusal); nothing was written then.
func (w *wtx) takeKeySlot(key string) (refused string, err error) {
	k, err := w.lockKeyRow(key)
	if err != nil {
		return "", err
	}
	nk, ok, openAt := keyrate.TakeSlot(k, w.nowMS)
	if !ok {
		return keyrate.Refusal(k, openAt), nil
	}
	if nk == k {
		// No limit: nothing to write, and the row is only share-locked
		// (LockKey), so claims of the key do not wait for one another.
		w.keyTaken = nil
		return "", nil
	}
	if err := w.writeKey(k, nk); err != nil {
		return "", fmt.Errorf("take a slot of concurrency key %s: %w", key, err)
	}
	w.keyTaken = &keyTake{before: k, after: nk}
	w.heldKey(nk)
	return "", nil
}

// lockKeyRow returns the row of concurrency key key, locked for the rest
// of the transaction, making it first when it has none: a key without a
// row has no limit and no claim (rows are made by a create that names the
// key, and pruned when idle without a limit: keysFreed), so the row made is
// what was missing. A prune that commits between the make and the lock
// is met by making it again; the row this transaction made no other can
// see, so the second make holds. A row in keyRows is locked already.
func (w *wtx) lockKeyRow(key string) (tgdriver.KeyRow, error) {
	if k, ok := w.keyRows[key]; ok {
		return k, nil
	}
	k, _, err := w.lockKey(key, false)
	return k, err
}

// lockKey is lockKeyRow, or with forLimit the row locked for a change of
// its limit (tgdriver's LockKeyForLimit: it waits for the key's claims in
// flight) and the key's claimed tasks counted after the lock.
func (w *wtx) lockKey(key string, forLimit bool) (k tgdriver.KeyRow, claimed int, err error) {
	for try := 0; ; try++ {
		var found bool
		if forLimit {
			k, found, claimed, err = w.tx.LockKeyForLimit(w.ctx, key)
		} else {
			k, found, err = w.tx.LockKey(w.ctx, key)
		}
		if err != nil {
			return tgdriver.KeyRow{}, 0, fmt.Errorf("lock concurrency key %s: %w", key, err)
		}
		if found {
			w.heldKey(k)
			return k, claimed, nil
		}
		if try == 2 {
			return tgdriver.KeyRow{}, 0, fmt.Errorf("%w: concurrency key %s has no row after it was made twice", errInternal, key)
		}
		if err := w.tx.EnsureKey(w.ctx, key, w.nowMS); err != nil {
			return tgdriver.KeyRow{}, 0, err
		}
	}
}

// lockKeys locks the rows of keys (making those missing), in key order:
// a transaction that may lock several keys' rows locks them all first,
// this way, so that two such transactions never wait for each other in
// opposite orders (a deadlock on PostgreSQL). Later locks of these rows in
// the transaction are no-ops. "" (no key) and repeats are skipped. It is
// lockKeysAfter of a transaction that holds no key row yet.
func (w *wtx) lockKeys(keys []string) error {
	_, _, err := w.lockKeysAfter(keys, "")
	return err
}

// lockKeysAfter locks the rows of keys in a transaction that already holds
// key rows up to held in key order ("" when none: for a batch, the keys of
// the claims it ended and its earlier waves of candidates), and returns
// the keys whose rows another transaction holds, which it did not lock
// (busy), and the last key it now holds. Those after held it waits for,
// in key order; those up to held it takes only when free, since waiting
// for one of them, out of key order, could deadlock with a transaction
// that holds it and waits for one this transaction holds. A batch passes
// over the candidates of a busy key, as the claim scans pass over locked
// tasks. Where the transaction keeps the rows it locked (keyRows: a
// batch's grants, a creation), those it does not hold yet are locked in
// one statement (tgdriver's LockKeys); a key without a row is then made
// and locked after them, out of key order, the one exception (a deadlock
// there is detected and the transaction runs again).
func (w *wtx) lockKeysAfter(keys []string, held string) (busy map[string]bool, last string, err error) {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	keys = slices.Compact(slices.DeleteFunc(keys, func(k string) bool { return k == "" }))
	last = held
	if len(keys) > 0 {
		last = max(held, keys[len(keys)-1])
	}
	if w.keyRows != nil {
		if todo := slices.DeleteFunc(slices.Clone(keys), func(k string) bool { _, ok := w.keyRows[k]; return ok }); len(todo) > 0 {
			rows, others, err := w.tx.LockKeys(w.ctx, todo, held)
			if err != nil {
				return nil, "", fmt.Errorf("lock concurrency keys: %w", err)
			}
			for _, k := range rows {
				w.heldKey(k)
			}
			for _, k := range others {
				if busy == nil {
					busy = map[string]bool{}
				}
				busy[k] = true
			}
		}
	}
	for _, k := range keys {
		if !busy[k] {
			if _, err := w.lockKeyRow(k); err != nil {
				return nil, "", err
			}
		}
	}
	return busy, last, nil
}

// keyTake is the last slot takeKeySlot took in an operation: the key's
// row before and after.
type keyTake struct{ before, after tgdriver.KeyRow }

// untakeKeySlot gives back the slot this operation's takeKeySlot took, in
// its transaction, when the claim it was for was not granted after all.
func (w *wtx) untakeKeySlot() error {
	t := w.keyTaken
	if t == nil {
		return nil
	}
	w.keyTaken = nil
	if err := w.writeKey(t.after, t.before); err != nil {
		return fmt.Errorf("give back a slot of concurrency key %s: %w", t.before.Key, err)
	}
	w.heldKey(t.before)
	return nil
}

// writeKey writes nk over k, the row of a key this transaction holds
// locked as it is now: at once (UpdateKey, guarded), or in a batch's
// grants kept in keyWrites, to be sent with its next round.
func (w *wtx) writeKey(k, nk tgdriver.KeyRow) error {
	if w.keyWrites != nil {
		if u, ok := w.keyWrites[k.Key]; ok {
			if u.New != k {
				return fmt.Errorf("%w: concurrency key %s changed under its lock", errInternal, k.Key)
			}
			u.New = nk
		} else {
			w.keyWrites[k.Key] = &tgdriver.KeyUpdate{Old: k, New: nk}
		}
		return nil
	}
	done, err := w.tx.UpdateKey(w.ctx, k, nk)
	if err != nil {
		return err
	}
	if !done {
		return fmt.Errorf("%w: concurrency key %s changed under its lock", errInternal, k.Key)
	}
	return nil
}

// drainKeyWrites returns the key writes keyWrites holds that change a row,
// in key order, and empties it: the caller sends them with its next round,
// before anything in it reads those rows.
func drainKeyWrites(writes map[string]*tgdriver.KeyUpdate) []tgdriver.KeyUpdate {
	var out []tgdriver.KeyUpdate
	for _, u := range writes {
		if u.New != u.Old {
			out = append(out, *u)
		}
	}
	clear(writes)
	slices.SortFunc(out, func(a, b tgdriver.KeyUpdate) int { return strings.Compare(a.Old.Key, b.Old.Key) })
	return out
}

// heldKey records k as its row now is, locked, in keyRows when set.
func (w *wtx) heldKey(k tgdriver.KeyRow) {
	if w.keyRows != nil {
		w.keyRows[k.Key] = k
	}
}

// keysFreed records that claims of tasks of keys ended in this
// transaction, an entry per claim (the schema gave their slots back):
// once it commits, for each whose key has a cap, a parked claim-next that
// may take the key's next claimable task is woken, here and on other
// replicas (tgdriver's FreeKeys: one statement for a batch's ends). A key
// without a cap held no claim back: the task a release or an expiry makes
// claimable again wakes a claim of its own (wakeWaiters). "" (no key) is
// skipped.
func (w *wtx) keysFreed(keys ...string) error {
	keys = slices.DeleteFunc(keys, func(k string) bool { return k == "" })
	if len(keys) == 0 {
		return nil
	}
	// A capped key's next task wakes a claim; an idle key's row without a
	// limit goes, so that rows of keys used once do not pile up.
	heads, err := w.tx.FreeKeys(w.ctx, keys)
	for _, t := range heads {
		w.wakeWaitersFor(t)
	}
	return err
}

// keyPruneBatch bounds the keys one transaction of PruneIdleKeys looks at.
const keyPruneBatch = 500

// PruneIdleKeys deletes the rows of concurrency keys that hold no claim,
// no limit and no claimable task: the keys whose rows keysFreed never
// prunes, because no claim of theirs ends (their tasks were cancelled
// before a claim, or their workflows pruned). Such a row is what a missing
// row means (lockKeyRow makes it again), so the pass changes nothing a
// claim or a reader can tell but the size of the keys' table. It walks the
// keys in key order, keyPruneBatch to a transaction, one pass over them
// all; the guard is in each delete's own predicate. The server's sweeper
// calls it every minute; it returns how many rows it deleted.
func (s *Store) PruneIdleKeys(ctx context.Context) (int, error) {
	total, after := 0, ""
	for {
		var n int
		var last string
		err := s.do(ctx, func(w *wtx) error {
			var err error
			n, last, err = w.tx.PruneIdleKeys(w.ctx, after, keyPruneBatch)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("prune idle concurrency keys after %q: %w", after, err)
		}
		total += n
		if last == "" {
			return total, nil
		}
		after = last
	}
}

// ensureKey creates the row of concurrency key key if it is new and, when
// limit is given, sets the key's limit if none was set yet; a key whose
// limit differs is a conflict (an operator changes limits: SetKeyLimit).
func (w *wtx) ensureKey(key string, limit *KeyLimit) error {
	k, err := w.lockKeyRow(key)
	if err != nil || limit == nil {
		return err
	}
	cur := keyrate.KeyOf(k).Limit
	switch {
	case cur == *limit:
		return nil
	case cur != (KeyLimit{}):
		return &ConflictError{Detail: fmt.Sprintf("concurrency key %s already has a limit (%s); a create may set a key's limit only while it has none, or repeat it (an operator changes it: admin limit)", key, cur)}
	}
	// The key had no limit, so its claims kept no count: count them under
	// the exclusive lock, and check again what a wait may have changed.
	k, claimed, err := w.lockKey(key, true)
	if err != nil {
		return err
	}
	if cur := keyrate.KeyOf(k).Limit; cur == *limit {
		return nil
	} else if cur != (KeyLimit{}) {
		return &ConflictError{Detail: fmt.Sprintf("concurrency key %s already has a limit (%s); a create may set a key's limit only while it has none, or repeat it (an operator changes it: admin limit)", key, cur)}
	}
	nk := keyrate.WithLimit(k, *limit, claimed)
	nk.UpdatedAtMS = w.nowMS
	done, err := w.tx.UpdateKey(w.ctx, k, nk)
	if err != nil {
		return fmt.Errorf("set the limit of concurrency key %s: %w", key, err)
	}
	if !done {
		return fmt.Errorf("%w: concurrency key %s changed under its lock", errInternal, key)
	}
	w.heldKey(nk)
	return nil
}

// SetKeyLimit is a human operator's operation: it sets the limit of
// concurrency key key (creating the key if no task named it yet). Claims
// already granted run on; a lower cap only stops new claims until enough
// end. It is recorded in the audit chain with the operator, the reason and
// the limits before and after, and wakes parked claims that may now take
// a task.
func (s *Store) SetKeyLimit(ctx context.Context, key string, limit KeyLimit, op Operator) (Key, error) {
	if err := checkOperator(op); err != nil {
		return Key{}, err
	}
	if err := checkKey("key", key); err != nil {
		return Key{}, err
	}
	if err := limit.Check(""); err != nil {
		return Key{}, err
	}
	var out Key
	err := s.do(ctx, func(w *wtx) error {
		w.as(ActorOperator, op.Name)
		// The key's row exclusively, then the key's claimed tasks counted
		// after the lock: a key without a cap keeps no count
		// (tgdriver.KeyRow.Claimed). Then its parked tasks, which a cap
		// raised unparks: after the key's row, as every other unpark
		// takes them ("Lock order").
		k, claimed, err := w.lockKey(key, true)
		if err != nil {
			return err
		}
		if err := w.tx.LockParkedOfKey(w.ctx, key); err != nil {
			return err
		}
		before := keyrate.KeyOf(k).Limit
		nk := keyrate.WithLimit(k, limit, claimed)
		nk.UpdatedAtMS, nk.UpdatedBy = w.nowMS, op.Name
		done, err := w.tx.UpdateKey(w.ctx, k, nk)
		if err != nil {
			return fmt.Errorf("set the limit of concurrency key %s: %w", key, err)
		}
		if !done {
			return fmt.Errorf("%w: concurrency key %s changed under its lock", errInternal, key)
		}
		out = keyrate.KeyOf(nk)
		if err := w.appendAudit(AuditLimit, "", map[string]any{"operator": op.Name, "reason": op.Reason, "key": key,
			"before": keyrate.Detail(before), "after": keyrate.Detail(limit)}); err != nil {
			return err
		}
		// Other servers look at their waiters' claimable tasks again.
		return w.tx.NotifyReady(w.ctx, "", "")
	})
	if err != nil {
		return Key{}, fmt.Errorf("set the limit of concurrency key %s: %w", key, err)
	}
	if err := s.wakeForPending(ctx); err != nil {
		s.log.Warn("wake claim-next waiters after a limit change", "err", err)
	}
	return out, nil
}

// KeyInfo returns concurrency key key; ok is false when it has no row (no
// limit, nothing claimed): it was pruned idle, or no task or operator
// named it.
func (s *Store) KeyInfo(ctx context.Context, key string) (k Key, ok bool, err error) {
	if err := checkKey("key", key); err != nil {
		return Key{}, false, err
	}
	row, ok, err := s.drv.Reads().Key(ctx, key)
	if err != nil || !ok {
		return Key{}, false, err
	}
	return keyrate.KeyOf(row), true, nil
}

// Keys returns up to limit (at most MaxKeysListed) concurrency keys in key
// order, after the key after ("" from the first).
func (s *Store) Keys(ctx context.Context, after string, limit int) ([]Key, error) {
	if limit <= 0 || limit > MaxKeysListed {
		return nil, invalid("limit", "must be between 1 and %d (got %d)", MaxKeysListed, limit)
	}
	rows, err := s.drv.Reads().Keys(ctx, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Key, len(rows))
	for i, r := range rows {
		out[i] = keyrate.KeyOf(r)
	}
	return out, nil
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// keysProbed bounds the keys nextKeyOpen looks at.
const keysProbed = 100

// nextKeyOpen returns when the earliest concurrency key whose rate holds
// back a task a claim-next of workflowID ("" for any) with caps could take
// allows its next claim; zero when no key's rate holds one back (or on a
// read error: the answer is advice). It reads the keys held back now in
// the order their rates open, at most keysProbed of them; when none of
// those has such a task and there may be more, it returns the last one's
// opening with lowerBound set: no key it did not read opens before it, so
// nothing is claimable by rate before then, and perhaps not then either.
func (s *Store) nextKeyOpen(ctx context.Context, workflowID string, caps []string) (at time.Time, lowerBound bool) {
	keys, err := s.drv.Reads().RateHeldKeys(ctx, workflowID, caps, s.clock.Now().UnixMilli(), keysProbed)
	if err != nil {
		s.log.Warn("read when concurrency keys' rates open", "err", err)
		return time.Time{}, false
	}
	for _, k := range keys {
		if k.Claimable {
			return msTime(k.OpenAtMS), false
		}
	}
	if len(keys) == keysProbed {
		return msTime(keys[len(keys)-1].OpenAtMS), true
	}
	return time.Time{}, false
}
