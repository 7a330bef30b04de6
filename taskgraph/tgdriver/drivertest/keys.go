package drivertest

import (
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// keyTests: concurrency keys (migration 0012): the key rows (EnsureKey,
// LockKey, UpdateKey, Key, Keys, KeyHead), the claim scans passing over
// closed keys, and the schema giving a slot back when a claim ends.
var keyTests = []test{
	{"Rows", testKeyRows},
	{"ScansPassOverClosedKeys", testKeyScans},
	{"ClaimEndGivesSlotBack", testKeySlotBack},
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

// testKeySlotBack: a keyed task leaving claimed gives its key's slot back
// in the same transaction, whatever it becomes; entering claimed, or a
// task without a key, changes no key.
func testKeySlotBack(t *testing.T, h Harness) {
	e := newEnv(t, h)
	rows := e.inserted(keyed("wf", "a", "k", 0), keyed("wf", "b", "k", 0), task("wf", "plain"))
	e.write(func(tx tgdriver.Tx) error {
		if err := tx.EnsureKey(e.ctx, "k", 1); err != nil {
			return err
		}
		old, _, err := tx.LockKey(e.ctx, "k")
		if err != nil {
			return err
		}
		nk := old
		nk.Claimed = 2
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
}
