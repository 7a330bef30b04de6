package drivertest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// keyTests: concurrency keys (migration 0012): the key rows (EnsureKey,
// LockKey, LockKeys, UpdateKey, Key, Keys, KeyHead), the claim scans passing over
// closed keys, and the schema giving a slot back when a claim ends.
var keyTests = []test{
	{"Rows", testKeyRows},
	{"LockKeysReturnsThoseWithRows", testLockKeys},
	{"RoundsWriteKeysFirstGuarded", testRoundKeys},
	{"ScansPassOverClosedKeys", testKeyScans},
	{"ClaimEndGivesSlotBack", testKeySlotBack},
	{"FreeWakesCappedPrunesIdle", testFreeKeys},
	{"PruneIdleKeysWalksEveryKeyOnce", testPruneIdleKeys},
	{"RateHeldKeysInOpeningOrder", testRateHeldKeys},
}

// setKeys writes each of ks over its key's row (made first).
func (e *env) setKeys(ks ...tgdriver.KeyRow) {
	e.t.Helper()
	e.write(func(tx tgdriver.Tx) error {
		for _, k := range ks {
			if err := tx.EnsureKey(e.ctx, k.Key, 1); err != nil {
				return err
			}
			old, _, err := tx.LockKey(e.ctx, k.Key)
			if err != nil {
				return err
			}
			k.UpdatedAtMS = 1
			if ok, err := tx.UpdateKey(e.ctx, old, k); err != nil || !ok {
				e.t.Errorf("UpdateKey %s: ok=%v err=%v", k.Key, ok, err)
			}
		}
		return nil
	})
}

// testLockKeys: LockKeys returns, in key order and once each, the rows of
// the keys asked that have one, whatever their limits, as Key reads them,
// and with no other transaction none busy, whatever the key it is told the
// transaction holds; nothing for no keys.
func testLockKeys(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.setKeys(tgdriver.KeyRow{Key: "b", MaxClaimed: 2, Claimed: 1}, tgdriver.KeyRow{Key: "a"},
		tgdriver.KeyRow{Key: "c", RateCount: 1, RateIntervalMS: 10, RecentMS: "5", RateOpenAtMS: 15}, tgdriver.KeyRow{Key: "d"})
	want := []tgdriver.KeyRow{e.wantKey("a", 0), e.wantKey("b", 1), e.wantKey("c", 0)}
	e.write(func(tx tgdriver.Tx) error {
		if got, busy, err := tx.LockKeys(e.ctx, nil, ""); err != nil || len(got) != 0 || len(busy) != 0 {
			t.Errorf("LockKeys(nil) = %+v, busy %v, %v; want none", got, busy, err)
		}
		// Waiting (held ""), then again taking only what is free (held
		// after every key): with no other transaction, both lock the same
		// rows (rows the transaction holds are never busy).
		for _, held := range []string{"", "z"} {
			got, busy, err := tx.LockKeys(e.ctx, []string{"c", "missing", "a", "b", "a"}, held)
			if err != nil || !slices.Equal(got, want) || len(busy) != 0 {
				t.Errorf("LockKeys(c, missing, a, b, a; held %q) = %+v, busy %v, %v; want %+v, none busy", held, got, busy, err, want)
			}
		}
		return nil
	})
}

// testFreeKeys: FreeKeys answers, for each entry, a capped key's first
// claimable task (a claim may wait for its slot), in the entries' order
// and as often as a key repeats, and nothing for a key without a cap; it
// deletes a row only when it holds no claim and no limit and the key has
// no claimable task.
func testFreeKeys(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.setKeys(tgdriver.KeyRow{Key: "idle"}, tgdriver.KeyRow{Key: "queued"}, tgdriver.KeyRow{Key: "held", Claimed: 1},
		tgdriver.KeyRow{Key: "capped", MaxClaimed: 2}, tgdriver.KeyRow{Key: "cappedempty", MaxClaimed: 2},
		tgdriver.KeyRow{Key: "rated", RateCount: 1, RateIntervalMS: 10}, tgdriver.KeyRow{Key: "capped2", MaxClaimed: 1})
	rows := e.inserted(keyed("wf", "q", "queued", 0), keyed("wf", "low", "capped", 0), keyed("wf", "high", "capped", 5),
		keyed("wf", "other", "capped2", 0))
	keys := []string{"capped", "idle", "queued", "held", "cappedempty", "rated", "missing", "capped2", "capped"}
	want := []int64{rows[2].Seq, rows[3].Seq, rows[2].Seq}
	e.write(func(tx tgdriver.Tx) error {
		if heads, err := tx.FreeKeys(e.ctx, nil); err != nil || len(heads) != 0 {
			t.Errorf("FreeKeys(nil) = %d heads, %v; want none", len(heads), err)
		}
		heads, err := tx.FreeKeys(e.ctx, keys)
		var got []int64
		for _, h := range heads {
			got = append(got, h.Seq)
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("FreeKeys(%v) = seqs %v, %v; want %v: the capped keys' heads in the entries' order", keys, got, err, want)
		}
		return nil
	})
	stays := map[string]bool{"queued": true, "held": true, "capped": true, "cappedempty": true, "rated": true, "capped2": true}
	for _, k := range keys {
		if _, ok, err := e.d.Reads().Key(e.ctx, k); err != nil || ok != stays[k] {
			t.Errorf("after FreeKeys: row of %s there %v (err %v), want %v", k, ok, err, stays[k])
		}
	}
}

// testPruneIdleKeys: PruneIdleKeys, walked two keys at a time, deletes
// exactly the keys that hold no claim, no limit and no claimable task
// (a task due later, blocked or finished is not claimable), and each key
// is looked at once.
func testPruneIdleKeys(t *testing.T, h Harness) {
	e := newEnv(t, h)
	due, blocked, done := keyed("wf", "due", "k7due", 0), keyed("wf", "blocked", "k8blocked", 0), keyed("wf", "done", "k6done", 0)
	due.DueAtMS = 5000
	blocked.State, blocked.Unmet = "blocked", 1
	done.State = "completed"
	e.inserted(keyed("wf", "ready", "k2ready", 0), due, blocked, done, keyed("wf", "other", "", 0))
	e.setKeys(tgdriver.KeyRow{Key: "k1idle"}, tgdriver.KeyRow{Key: "k2ready"}, tgdriver.KeyRow{Key: "k3held", Claimed: 1},
		tgdriver.KeyRow{Key: "k4capped", MaxClaimed: 2}, tgdriver.KeyRow{Key: "k5rated", RateCount: 1, RateIntervalMS: 10},
		tgdriver.KeyRow{Key: "k6done"}, tgdriver.KeyRow{Key: "k7due"}, tgdriver.KeyRow{Key: "k8blocked"})
	total, after, walks := 0, "", 0
	var looked []string
	for {
		var n int
		var last string
		e.write(func(tx tgdriver.Tx) error {
			var err error
			n, last, err = tx.PruneIdleKeys(e.ctx, after, 2)
			return err
		})
		if last == "" {
			break
		}
		if walks++; walks > 8 || last <= after {
			t.Fatalf("PruneIdleKeys after %q returned last %q on walk %d: it does not move on", after, last, walks)
		}
		total, after = total+n, last
		looked = append(looked, last)
	}
	if want := []string{"k2ready", "k4capped", "k6done", "k8blocked"}; fmt.Sprint(looked) != fmt.Sprint(want) {
		t.Errorf("PruneIdleKeys walked to %v, want %v (two keys a step)", looked, want)
	}
	if total != 4 {
		t.Errorf("PruneIdleKeys deleted %d rows, want 4 (k1idle, k6done, k7due, k8blocked)", total)
	}
	keys, err := e.d.Reads().Keys(e.ctx, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, k := range keys {
		left = append(left, k.Key)
	}
	if want := []string{"k2ready", "k3held", "k4capped", "k5rated"}; fmt.Sprint(left) != fmt.Sprint(want) {
		t.Errorf("keys left %v, want %v", left, want)
	}
}

// testRateHeldKeys: RateHeldKeys lists the keys whose rate opens after
// the time given and that are not full, in opening order, each with
// whether it has a claimable task of the workflow and capabilities asked.
func testRateHeldKeys(t *testing.T, h Harness) {
	e := newEnv(t, h)
	gpu := keyed("wf", "gpu", "k3", 0)
	gpu.Requires = "gpu"
	e.inserted(keyed("wf", "a", "k1", 0), keyed("other", "b", "k2", 0), gpu, keyed("wf", "d", "k4", 0))
	e.setKeys(
		tgdriver.KeyRow{Key: "k1", RateCount: 1, RateIntervalMS: 100, RecentMS: "2900", RateOpenAtMS: 3000},
		tgdriver.KeyRow{Key: "k2", RateCount: 1, RateIntervalMS: 100, RecentMS: "1900", RateOpenAtMS: 2000},
		tgdriver.KeyRow{Key: "k3", RateCount: 1, RateIntervalMS: 100, RecentMS: "2400", RateOpenAtMS: 2500},
		// Full: its cap, not its rate, holds it back.
		tgdriver.KeyRow{Key: "k4", MaxClaimed: 1, Claimed: 1, RateCount: 1, RateIntervalMS: 100, RecentMS: "1000", RateOpenAtMS: 1100},
		// Open by the time asked.
		tgdriver.KeyRow{Key: "k5", RateCount: 1, RateIntervalMS: 100, RecentMS: "400", RateOpenAtMS: 500},
	)
	type got struct {
		key       string
		claimable bool
	}
	list := func(wf string, caps []string, limit int) []got {
		ks, err := e.d.Reads().RateHeldKeys(e.ctx, wf, caps, 1000, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []got
		for _, k := range ks {
			out = append(out, got{k.Key, k.Claimable})
		}
		return out
	}
	for _, c := range []struct {
		wf    string
		caps  []string
		limit int
		want  []got
	}{
		{"", nil, 10, []got{{"k2", true}, {"k3", false}, {"k1", true}}},
		{"wf", nil, 10, []got{{"k2", false}, {"k3", false}, {"k1", true}}},
		{"wf", []string{"gpu"}, 10, []got{{"k2", false}, {"k3", true}, {"k1", true}}},
		{"", nil, 2, []got{{"k2", true}, {"k3", false}}},
	} {
		if g := list(c.wf, c.caps, c.limit); fmt.Sprint(g) != fmt.Sprint(c.want) {
			t.Errorf("RateHeldKeys(%q, %v, limit %d) = %v, want %v", c.wf, c.caps, c.limit, g, c.want)
		}
	}
}

func keyed(wf, node, key string, priority int) tgdriver.TaskRow {
	r := task(wf, node)
	r.ConcurrencyKey, r.Priority = key, priority
	return r
}

// wantKey reads key and fails t unless it holds claimed.
func (e *env) wantKey(key string, claimed int) tgdriver.KeyRow {
	e.t.Helper()
	k, ok, err := e.d.Reads().Key(e.ctx, key)
	if err != nil || !ok || k.Claimed != claimed {
		e.t.Fatalf("Key(%s) = %+v, %v, %v; want claimed %d", key, k, ok, err, claimed)
	}
	return k
}

// testKeyRows: EnsureKey creates a key once, without limits; UpdateKey
// writes only over the row it was given (compare-and-set); Keys pages in
// key order; KeyHead is the key's first claimable task in claim-next order.
func testKeyRows(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.write(func(tx tgdriver.Tx) error {
		for _, k := range []string{"b", "a", "b"} {
			if err := tx.EnsureKey(e.ctx, k, 500); err != nil {
				return err
			}
		}
		return nil
	})
	a := e.wantKey("a", 0)
	if a.MaxClaimed != 0 || a.RateCount != 0 || a.RecentMS != "" || a.RateOpenAtMS != 0 || a.UpdatedAtMS != 500 {
		t.Fatalf("a new key: %+v", a)
	}
	if _, ok, err := e.d.Reads().Key(e.ctx, "none"); ok || err != nil {
		t.Fatalf("Key(none): ok=%v err=%v", ok, err)
	}
	want := a
	want.MaxClaimed, want.Claimed, want.RateCount, want.RateIntervalMS, want.RecentMS, want.RateOpenAtMS, want.UpdatedBy = 2, 1, 3, 1000, "10 20", 0, "bob"
	e.write(func(tx tgdriver.Tx) error {
		locked, ok, err := tx.LockKey(e.ctx, "a")
		if err != nil || !ok || locked != a {
			t.Errorf("LockKey(a) = %+v %v %v, want %+v", locked, ok, err, a)
		}
		if ok, err := tx.UpdateKey(e.ctx, a, want); err != nil || !ok {
			t.Errorf("UpdateKey over the row read: ok=%v err=%v", ok, err)
		}
		// The row read before no longer holds: nothing is written.
		stale := want
		stale.Claimed = 2
		if ok, err := tx.UpdateKey(e.ctx, a, stale); err != nil || ok {
			t.Errorf("UpdateKey over a stale row: ok=%v err=%v, want false", ok, err)
		}
		return nil
	})
	if got := e.wantKey("a", 1); got != want {
		t.Fatalf("after UpdateKey: %+v, want %+v", got, want)
	}
	ks, err := e.d.Reads().Keys(e.ctx, "", 10)
	if err != nil || len(ks) != 2 || ks[0].Key != "a" || ks[1].Key != "b" {
		t.Fatalf("Keys: %+v %v", ks, err)
	}
	if ks, err := e.d.Reads().Keys(e.ctx, "a", 10); err != nil || len(ks) != 1 || ks[0].Key != "b" {
		t.Fatalf("Keys after a: %+v %v", ks, err)
	}
	rows := e.inserted(keyed("wf", "low", "a", 0), keyed("wf", "high", "a", 5), keyed("wf", "other", "b", 9), task("wf", "plain"))
	if h, ok, err := e.d.Reads().KeyHead(e.ctx, "a"); err != nil || !ok || h.Seq != rows[1].Seq || h.ConcurrencyKey != "a" {
		t.Fatalf("KeyHead(a) = seq %d %v %v, want the higher priority task %d", h.Seq, ok, err, rows[1].Seq)
	}
	e.set(rows[1].Seq, tgdriver.TaskSet{State: tgdriver.Val("claimed")})
	e.set(rows[0].Seq, tgdriver.TaskSet{State: tgdriver.Val("claimed")})
	if _, ok, err := e.d.Reads().KeyHead(e.ctx, "a"); ok || err != nil {
		t.Fatalf("KeyHead of a key without claimable tasks: ok=%v err=%v", ok, err)
	}
}

// testKeyScans: a claim scan passes over the tasks of a full key and of a
// key whose rate opens after the scan's time; NextPending and
// CountClaimable over those of a full key. Tasks without a key are never
// passed over.
func testKeyScans(t *testing.T, h Harness) {
	e := newEnv(t, h)
	rows := e.inserted(keyed("wf", "full", "full", 9), keyed("wf", "rate", "rate", 8), keyed("wf", "open", "open", 7), task("wf", "plain"))
	e.write(func(tx tgdriver.Tx) error {
		for _, k := range []tgdriver.KeyRow{
			{Key: "full", MaxClaimed: 1, Claimed: 1},
			{Key: "rate", RateCount: 1, RateIntervalMS: 1000, RecentMS: "4000", RateOpenAtMS: 5000},
			{Key: "open", MaxClaimed: 2, Claimed: 1},
		} {
			if err := tx.EnsureKey(e.ctx, k.Key, 1); err != nil {
				return err
			}
			old, _, err := tx.LockKey(e.ctx, k.Key)
			if err != nil {
				return err
			}
			k.UpdatedAtMS = 1
			if ok, err := tx.UpdateKey(e.ctx, old, k); err != nil || !ok {
				t.Errorf("UpdateKey %s: ok=%v err=%v", k.Key, ok, err)
			}
		}
		return nil
	})
	scan := func(atMS int64) []int64 {
		var f tgdriver.Fetched
		e.write(func(tx tgdriver.Tx) error {
			var err error
			f, err = tx.Fetch(e.ctx, tgdriver.Fetch{Claims: []tgdriver.ClaimScan{{N: 10, AtMS: atMS}}})
			return err
		})
		return seqsOf(f.Claimable[0])
	}
	if got, want := scan(4999), []int64{rows[2].Seq, rows[3].Seq}; !equalSeqs(got, want) {
		t.Fatalf("scan before the rate opens: %v, want %v (open key, then no key)", got, want)
	}
	if got, want := scan(5000), []int64{rows[1].Seq, rows[2].Seq, rows[3].Seq}; !equalSeqs(got, want) {
		t.Fatalf("scan once the rate opens: %v, want %v", got, want)
	}
	e.write(func(tx tgdriver.Tx) error {
		r, ok, err := tx.NextPending(e.ctx, "", nil)
		if err != nil || !ok || r.Seq != rows[1].Seq {
			t.Errorf("NextPending: seq %d ok=%v err=%v, want %d (full keys only are passed over)", r.Seq, ok, err, rows[1].Seq)
		}
		return nil
	})
	if n, err := e.d.Reads().CountClaimable(e.ctx, "", nil, 10); err != nil || n != 3 {
		t.Fatalf("CountClaimable: %d %v, want 3", n, err)
	}
}

func equalSeqs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// testKeySlotBack: a keyed task leaving claimed gives its capped key's
// slot back in the same transaction, whatever it becomes; entering
// claimed, or a task without a key, changes no key; a key without a cap
// keeps no count, so its claims' ends change nothing (KeyRow.Claimed).
func testKeySlotBack(t *testing.T, h Harness) {
	e := newEnv(t, h)
	rows := e.inserted(keyed("wf", "a", "k", 0), keyed("wf", "b", "k", 0), task("wf", "plain"), keyed("wf", "f", "free", 0))
	e.write(func(tx tgdriver.Tx) error {
		if err := tx.EnsureKey(e.ctx, "free", 1); err != nil {
			return err
		}
		if err := tx.EnsureKey(e.ctx, "k", 1); err != nil {
			return err
		}
		old, _, err := tx.LockKey(e.ctx, "k")
		if err != nil {
			return err
		}
		nk := old
		nk.MaxClaimed, nk.Claimed = 5, 2
		_, err = tx.UpdateKey(e.ctx, old, nk)
		return err
	})
	for _, s := range []int64{rows[0].Seq, rows[1].Seq, rows[2].Seq} {
		e.set(s, tgdriver.TaskSet{State: tgdriver.Val("claimed")})
	}
	e.wantKey("k", 2)
	e.set(rows[0].Seq, tgdriver.TaskSet{State: tgdriver.Val("completed")})
	e.wantKey("k", 1)
	e.set(rows[2].Seq, tgdriver.TaskSet{State: tgdriver.Val("pending")})
	e.set(rows[1].Seq, tgdriver.TaskSet{StatusMessage: tgdriver.Val("still claimed")})
	e.wantKey("k", 1)
	e.set(rows[1].Seq, tgdriver.TaskSet{State: tgdriver.Val("pending")})
	e.wantKey("k", 0)
	e.set(rows[3].Seq, tgdriver.TaskSet{State: tgdriver.Val("claimed")})
	e.set(rows[3].Seq, tgdriver.TaskSet{State: tgdriver.Val("completed")})
	e.wantKey("free", 0)
}

// testRoundKeys: Fetch and Apply write their Keys first, under UpdateKey's
// guard: a Fetch's scan sees a key filled by its own Keys, an Apply's
// writes commit with it, and a guard that does not hold fails the round
// with ErrGuardFailed and rolls the whole transaction back.
func testRoundKeys(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.setKeys(tgdriver.KeyRow{Key: "a", MaxClaimed: 1}, tgdriver.KeyRow{Key: "b", MaxClaimed: 3, Claimed: 1})
	rows := e.inserted(keyed("wf", "ta", "a", 0), task("wf", "plain"))
	a, b := e.wantKey("a", 0), e.wantKey("b", 1)
	fullA, moreB := a, b
	fullA.Claimed, fullA.UpdatedAtMS = 1, 7
	moreB.Claimed, moreB.UpdatedAtMS, moreB.UpdatedBy = 2, 7, "op"
	e.write(func(tx tgdriver.Tx) error {
		f, err := tx.Fetch(e.ctx, tgdriver.Fetch{Keys: []tgdriver.KeyUpdate{{Old: a, New: fullA}},
			Claims: []tgdriver.ClaimScan{{N: 10, AtMS: 1}}})
		if err != nil {
			return err
		}
		if got, want := seqsOf(f.Claimable[0]), []int64{rows[1].Seq}; !equalSeqs(got, want) {
			t.Errorf("scan after the round's Keys filled key a: %v, want %v (a's task passed over)", got, want)
		}
		err = tx.Apply(e.ctx, tgdriver.Apply{Keys: []tgdriver.KeyUpdate{{Old: b, New: moreB}}, Commit: true})
		return err
	})
	if got := e.wantKey("a", 1); got != fullA {
		t.Errorf("key a after Fetch's Keys committed: %+v, want %+v", got, fullA)
	}
	if got := e.wantKey("b", 2); got != moreB {
		t.Errorf("key b after Apply's Keys committed: %+v, want %+v", got, moreB)
	}
	before := e.dump()
	for _, round := range []string{"Fetch", "Apply"} {
		err := e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
			if err := tx.TouchAlive(e.ctx, 4242); err != nil {
				return err
			}
			// b still holds moreB: that write holds; a no longer holds a.
			keys := []tgdriver.KeyUpdate{{Old: moreB, New: b}, {Old: a, New: fullA}}
			if round == "Fetch" {
				_, err := tx.Fetch(e.ctx, tgdriver.Fetch{Keys: keys})
				return err
			}
			err := tx.Apply(e.ctx, tgdriver.Apply{Keys: keys, Commit: true})
			return err
		})
		if !errors.Is(err, tgdriver.ErrGuardFailed) {
			t.Errorf("%s with a key whose guard does not hold: %v, want ErrGuardFailed", round, err)
		}
	}
	e.unchanged(before, "rounds whose Keys failed their guard")
	if got := e.wantKey("b", 2); got != moreB {
		t.Errorf("key b after rounds that failed: %+v, want %+v", got, moreB)
	}
}
