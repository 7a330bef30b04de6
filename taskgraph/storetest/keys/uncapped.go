package keys

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest/stenv"
)

// A key without a cap keeps no count of its claims (Key.Claimed is 0), so
// that its claims do not wait for one another on its row; an operator
// who sets a cap on it while tasks of it are claimed gets them counted
// (after the lock that waits for claims in flight), so the cap holds from
// then on; a create that sets a limit on such a key counts them too; a
// cap lifted leaves no count behind.
func testKeyCapSetOnClaimedKeyCountsThem(t *testing.T, h Harness) {
	e := setup(t, h)
	for i := range 6 {
		e.createKeyed(t, "w", fmt.Sprintf("t%d", i), "k", nil)
	}
	var held []tg.Claimed
	for range 3 {
		c, ok := e.ClaimNext(t, "w", "")
		if !ok {
			t.Fatal("a claim of a key without a limit refused")
		}
		held = append(held, c)
	}
	e.wantClaimedOfKey(t, "k", 3) // counter 0: uncapped
	k, err := e.S.SetKeyLimit(e.Ctx, "k", tg.KeyLimit{MaxClaimed: 3}, alice)
	if err != nil || k.Claimed != 3 {
		t.Fatalf("cap set on a key with 3 claimed: %+v, %v; want Claimed 3", k, err)
	}
	e.wantClaimedOfKey(t, "k", 3)
	if _, ok := e.ClaimNext(t, "w", ""); ok {
		t.Fatal("a claim past a cap set on claimed tasks granted")
	}
	if _, err := e.S.Complete(e.Ctx, holder(held[0]), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	e.wantClaimedOfKey(t, "k", 2)
	c, ok := e.ClaimNext(t, "w", "")
	if !ok {
		t.Fatal("a claim under the cap after a slot freed refused")
	}
	held = append(held[1:], c)
	e.wantClaimedOfKey(t, "k", 3)
	// Lifted: the count goes; claims run on uncounted, and the next cap
	// counts them again.
	if k, err := e.S.SetKeyLimit(e.Ctx, "k", tg.KeyLimit{}, bob); err != nil || k.Claimed != 0 {
		t.Fatalf("cap lifted: %+v, %v; want Claimed 0", k, err)
	}
	if _, err := e.S.Complete(e.Ctx, holder(held[0]), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	e.wantClaimedOfKey(t, "k", 2)
	// A create that sets the first limit of the key counts its claims.
	e.createKeyed(t, "w", "t9", "k", &tg.KeyLimit{MaxClaimed: 2})
	e.wantClaimedOfKey(t, "k", 2)
	if _, ok := e.ClaimNext(t, "w", ""); ok {
		t.Fatal("a claim past a cap set by a create on claimed tasks granted")
	}
	e.Verify(t)
}

// Claims of a key racing an operator who sets and lifts its cap never
// leave its count wrong: after the race, with the cap set, the counter is
// the key's claimed tasks, and exactly the free slots are granted. Run on
// PostgreSQL, the claims take the row shared while uncapped and the
// changes wait for them (tgpostgres LockKeyForLimit); a claim that
// counted nothing ending after a cap was set, or one counted twice, would
// leave the counter off by one for good.
func testKeyClaimsRacingLimitChanges(t *testing.T, h Harness) {
	e := setup(t, h)
	const claimers, rounds, tasks = 6, 8, 200
	for i := range tasks {
		e.createKeyed(t, "w", fmt.Sprintf("t%03d", i), "k", nil)
	}
	var mu sync.Mutex
	var held []tg.Claimed
	stenv.Concurrently(t, claimers+1, func(i int) error {
		if i == claimers {
			for r := range rounds {
				lim := tg.KeyLimit{MaxClaimed: 2 + r%3}
				if r%2 == 1 {
					lim = tg.KeyLimit{}
				}
				if _, err := e.S.SetKeyLimit(e.Ctx, "k", lim, alice); err != nil {
					return err
				}
			}
			return nil
		}
		for j := range rounds {
			c, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: fmt.Sprintf("c%d", i), WorkflowID: "w"})
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if j%2 == 0 {
				if _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(`1`)); err != nil {
					return err
				}
				continue
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
		return nil
	})
	stored := int(e.Count(t, `SELECT COUNT(*) FROM tasks WHERE concurrency_key = ? AND state = 'claimed'`, "k"))
	if stored != len(held) {
		t.Fatalf("%d tasks stored claimed, %d claims held", stored, len(held))
	}
	const maxC = 40
	if stored >= maxC {
		t.Fatalf("%d claims held; the test needs fewer than %d", stored, maxC)
	}
	if _, err := e.S.SetKeyLimit(e.Ctx, "k", tg.KeyLimit{MaxClaimed: maxC}, bob); err != nil {
		t.Fatal(err)
	}
	e.wantClaimedOfKey(t, "k", stored)
	for i := 0; i < maxC-stored; i++ {
		if _, ok := e.ClaimNext(t, "w", ""); !ok {
			t.Fatalf("claim %d of %d free slots refused", i+1, maxC-stored)
		}
	}
	if _, ok := e.ClaimNext(t, "w", ""); ok {
		t.Fatalf("a claim past the cap of %d granted", maxC)
	}
	e.wantClaimedOfKey(t, "k", maxC)
	for _, c := range held {
		if _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(`1`)); err != nil {
			t.Fatal(err)
		}
	}
	e.wantClaimedOfKey(t, "k", maxC-stored)
	e.Verify(t)
}
