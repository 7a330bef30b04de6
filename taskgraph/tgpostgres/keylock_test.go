package tgpostgres

import (
	"context"
	"slices"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// A claim of a key without a limit takes the key's row shared (LockKey:
// FOR KEY SHARE), so a second claim's lock of it does not wait for the
// first's transaction, while a capped key's claims do wait for one
// another (FOR NO KEY UPDATE: their guarded update follows), and a change
// of the limit (LockKeyForLimit: FOR UPDATE) waits for a claim of either;
// LockKeys never waits for a key up to the one it is told the transaction
// holds, and answers such a key held for writing as busy.
// The waits are read from pg_stat_activity on a connection of its own.
func TestKeyLockModes(t *testing.T) {
	ctx := testCtx(t)
	d := open(t, pgtest.URL(t), Options{})
	if _, err := d.pool.Exec(ctx, `INSERT INTO concurrency_keys (key, max_claimed, updated_at_ms) VALUES ('free', 0, 0), ('capped', 2, 0)`); err != nil {
		t.Fatal(err)
	}
	lockWaiters := func() int {
		var n int
		if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// hold locks key in a transaction held open until the returned func
	// is called; it returns once the lock is granted.
	// holdWith runs lock in a transaction held open until the returned
	// func is called; it returns once lock has returned.
	holdWith := func(lock func(tx tgdriver.Tx)) (end func()) {
		held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			done <- d.Write(ctx, func(tx tgdriver.Tx) error {
				lock(tx)
				close(held)
				<-release
				return nil
			})
		}()
		testwait.Recv(t, "the first lock", held)
		return func() {
			close(release)
			if err := testwait.Recv(t, "the holder's commit", done); err != nil {
				t.Fatal(err)
			}
		}
	}
	hold := func(key string) (end func()) {
		return holdWith(func(tx tgdriver.Tx) {
			if _, ok, err := tx.LockKey(context.Background(), key); err != nil || !ok {
				t.Errorf("LockKey(%s): ok=%v err=%v", key, ok, err)
			}
		})
	}
	// second runs lock in a transaction of its own and says whether it
	// was granted without waiting (false: it waited, seen in
	// pg_stat_activity); a wait ends when end is called.
	second := func(what string, lock func(tx tgdriver.Tx) error, end func()) bool {
		done := make(chan error, 1)
		go func() { done <- d.Write(ctx, lock) }()
		waited := false
		testwait.For(t, what+" to be granted or to wait", func() bool {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				done <- nil
				return true
			default:
			}
			waited = lockWaiters() > 0
			return waited
		})
		end()
		if err := testwait.Recv(t, what, done); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return !waited
	}
	lockKey := func(key string) func(tx tgdriver.Tx) error {
		return func(tx tgdriver.Tx) error { _, _, err := tx.LockKey(context.Background(), key); return err }
	}
	forLimit := func(key string) func(tx tgdriver.Tx) error {
		return func(tx tgdriver.Tx) error { _, _, _, err := tx.LockKeyForLimit(context.Background(), key); return err }
	}
	if !second("a second claim's lock of an uncapped key", lockKey("free"), hold("free")) {
		t.Error("a claim's lock of an uncapped key waited for another claim's transaction; want shared")
	}
	if second("a second claim's lock of a capped key", lockKey("capped"), hold("capped")) {
		t.Error("a claim's lock of a capped key did not wait for another claim's transaction")
	}
	lockKeys := func(keys ...string) func(tx tgdriver.Tx) error {
		return func(tx tgdriver.Tx) error {
			got, _, err := tx.LockKeys(context.Background(), keys, "")
			if err == nil && len(got) != len(keys) {
				t.Errorf("LockKeys(%v) locked %d rows, want %d", keys, len(got), len(keys))
			}
			return err
		}
	}
	if !second("a batch's lock of an uncapped key beside a capped one", lockKeys("capped", "free"), hold("free")) {
		t.Error("a batch's lock of an uncapped key (LockKeys) waited for a claim's transaction; want shared")
	}
	if second("a batch's lock of a capped key beside an uncapped one", lockKeys("capped", "free"), hold("capped")) {
		t.Error("a batch's lock of a capped key (LockKeys) did not wait for a claim's transaction")
	}
	// LockKeys never waits for a key up to held: a capped key a claim
	// holds is busy, an uncapped one it holds (shared) is locked, a key
	// without a row is in neither, and a row this transaction holds is
	// never busy.
	tryLock := func(want []string, wantBusy ...string) func(tx tgdriver.Tx) error {
		return func(tx tgdriver.Tx) error {
			for try := range 2 {
				locked, busy, err := tx.LockKeys(context.Background(), []string{"missing", "free", "capped"}, "zzz")
				if err != nil {
					return err
				}
				var got []string
				for _, k := range locked {
					got = append(got, k.Key)
				}
				if !slices.Equal(got, want) || !slices.Equal(busy, wantBusy) {
					t.Errorf("LockKeys up to held (try %d) locked %v, busy %v; want %v, busy %v", try, got, busy, want, wantBusy)
				}
				want, wantBusy = []string{"capped", "free"}, nil
				if len(got) < 2 {
					return nil
				}
			}
			return nil
		}
	}
	if !second("a try of keys beside a capped key a claim holds", tryLock([]string{"free"}, "capped"), hold("capped")) {
		t.Error("LockKeys up to held waited for a claim's transaction; want it never to wait")
	}
	if !second("a try of keys beside an uncapped key a claim holds", tryLock([]string{"capped", "free"}), hold("free")) {
		t.Error("LockKeys up to held waited for a claim's transaction; want it never to wait")
	}
	if second("a claim's lock of a key a try holds", lockKey("capped"), holdWith(func(tx tgdriver.Tx) {
		if locked, busy, err := tx.LockKeys(context.Background(), []string{"capped"}, "capped"); err != nil || len(locked) != 1 || len(busy) != 0 {
			t.Errorf("LockKeys up to held(capped) = %v, busy %v, %v; want it locked", locked, busy, err)
		}
	})) {
		t.Error("a claim's lock of a capped key did not wait for the transaction that took it with LockKeys up to held")
	}
	if second("a change of an uncapped key's limit", forLimit("free"), hold("free")) {
		t.Error("a change of an uncapped key's limit did not wait for a claim in flight")
	}
	if second("a change of a capped key's limit", forLimit("capped"), hold("capped")) {
		t.Error("a change of a capped key's limit did not wait for a claim in flight")
	}
}
