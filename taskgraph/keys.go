package taskgraph

import (
	"context"
	"fmt"
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

// keyRefused is why a claim of a task of key was refused.
type keyRefused struct {
	key    tgdriver.KeyRow
	openAt int64 // rate: when the next claim is allowed; 0 when full
}

func (r keyRefused) String() string { return keyrate.Refusal(r.key, r.openAt) }

// takeKeySlot takes a slot of concurrency key key for a claim in this
// transaction, at the transaction's server time (the time its history
// records): the key's row is locked, then updated under a guard that it
// still holds what was read. refused is set when the key is full or
// rate-limited; nothing was written then.
func (w *wtx) takeKeySlot(key string) (refused *keyRefused, err error) {
	k, found, err := w.tx.LockKey(w.ctx, key)
	if err != nil {
		return nil, fmt.Errorf("lock concurrency key %s: %w", key, err)
	}
	if !found { // every key a task names has a row; a fault if not
		return nil, fmt.Errorf("%w: concurrency key %s has no row", errInternal, key)
	}
	nk, ok, openAt := keyrate.TakeSlot(k, w.nowMS)
	if !ok {
		return &keyRefused{key: k, openAt: openAt}, nil
	}
	done, err := w.tx.UpdateKey(w.ctx, k, nk)
	if err != nil {
		return nil, fmt.Errorf("take a slot of concurrency key %s: %w", key, err)
	}
	if !done {
		return nil, fmt.Errorf("%w: concurrency key %s changed under its lock", errInternal, key)
	}
	w.keyTaken = &keyTake{before: k, after: nk}
	return nil, nil
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
	done, err := w.tx.UpdateKey(w.ctx, t.after, t.before)
	if err != nil {
		return fmt.Errorf("give back a slot of concurrency key %s: %w", t.before.Key, err)
	}
	if !done {
		return fmt.Errorf("%w: concurrency key %s changed under its lock", errInternal, t.before.Key)
	}
	return nil
}

// keyFreed records that a claim of a task of key ended in this
// transaction (the schema gave its slot back): once it commits, a parked
// claim-next that may take the key's next claimable task is woken, here
// and on other replicas.
func (w *wtx) keyFreed(key string) error {
	if key == "" {
		return nil
	}
	t, ok, err := w.tx.KeyHead(w.ctx, key)
	if err != nil || !ok {
		return err
	}
	w.out.ready = append(w.out.ready, readyRef{Workflow: t.WorkflowID, Requires: t.Requires})
	return nil
}

// ensureKey creates the row of concurrency key key if it is new and, when
// limit is given, sets the key's limit if none was set yet; a key whose
// limit differs is a conflict (an operator changes limits: SetKeyLimit).
func (w *wtx) ensureKey(key string, limit *KeyLimit) error {
	if err := w.tx.EnsureKey(w.ctx, key, w.nowMS); err != nil {
		return err
	}
	if limit == nil {
		return nil
	}
	k, found, err := w.tx.LockKey(w.ctx, key)
	if err != nil {
		return fmt.Errorf("lock concurrency key %s: %w", key, err)
	}
	if !found {
		return fmt.Errorf("%w: concurrency key %s has no row after its creation", errInternal, key)
	}
	cur := keyrate.KeyOf(k).Limit
	switch {
	case cur == *limit:
		return nil
	case cur != (KeyLimit{}):
		return &ConflictError{Detail: fmt.Sprintf("concurrency key %s already has a limit (%s); a create may set a key's limit only while it has none, or repeat it (an operator changes it: admin limit)", key, cur)}
	}
	nk := keyrate.WithLimit(k, *limit)
	nk.UpdatedAtMS = w.nowMS
	done, err := w.tx.UpdateKey(w.ctx, k, nk)
	if err != nil {
		return fmt.Errorf("set the limit of concurrency key %s: %w", key, err)
	}
	if !done {
		return fmt.Errorf("%w: concurrency key %s changed under its lock", errInternal, key)
	}
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
		if err := w.tx.EnsureKey(w.ctx, key, w.nowMS); err != nil {
			return err
		}
		k, found, err := w.tx.LockKey(w.ctx, key)
		if err != nil {
			return fmt.Errorf("lock concurrency key %s: %w", key, err)
		}
		if !found {
			return fmt.Errorf("%w: concurrency key %s has no row after its creation", errInternal, key)
		}
		before := keyrate.KeyOf(k).Limit
		nk := keyrate.WithLimit(k, limit)
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

// KeyInfo returns concurrency key key; ok is false when no task or
// operator named it.
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

// nextKeyOpen returns when the earliest concurrency key that holds back a
// task a claim-next of workflowID ("" for any) with caps could take allows
// its next claim by its rate; zero when no key's rate holds one back (or
// on a read error: the answer is advice). It looks at the first
// keysProbed keys, each through the first claimable task of the key.
func (s *Store) nextKeyOpen(ctx context.Context, workflowID string, caps []string) time.Time {
	rd := s.drv.Reads()
	keys, err := rd.Keys(ctx, "", keysProbed)
	if err != nil {
		return time.Time{}
	}
	now := s.clock.Now().UnixMilli()
	var best int64
	for _, k := range keys {
		if k.RateOpenAtMS <= now || k.MaxClaimed > 0 && k.Claimed >= k.MaxClaimed || best != 0 && k.RateOpenAtMS >= best {
			continue
		}
		t, ok, err := rd.KeyHead(ctx, k.Key)
		if err != nil || !ok || workflowID != "" && t.WorkflowID != workflowID || !subsetOf(t.Requires, caps) {
			continue
		}
		best = k.RateOpenAtMS
	}
	if best == 0 {
		return time.Time{}
	}
	return msTime(best)
}
