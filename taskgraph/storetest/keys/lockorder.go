package keys

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest/stenv"
)

// A create of a keyed task that depends on a task whose claim of the same
// key is ending at that moment waits in the one lock order (tasks, then
// keys: package taskgraph, "Lock order"): the completion holds the task's
// row when the schema locks the key's row to give the slot back, so the
// create locks its dependency before the key's row. Run many times at
// once, no transaction deadlocks (no 40P01 retry in the store's log on
// PostgreSQL), and every new task counts its completed dependency.
func testKeyCreateBesideEndingClaim(t *testing.T, h Harness) {
	e := setupLocks(t, h, 1)
	const n, rounds = 16, 3
	lim := &tg.KeyLimit{MaxClaimed: 1000}
	for r := range rounds {
		claims := make([]tg.Claimed, n)
		for i := range n {
			d := e.createKeyed(t, "w", fmt.Sprintf("r%d-d%02d", r, i), "k", lim)
			claims[i] = e.Claim(t, "w", d.TaskID, time.Minute)
		}
		stenv.Concurrently(t, 2*n, func(j int) error {
			i := j / 2
			if j%2 == 0 {
				_, err := e.S.Complete(e.Ctx, holder(claims[i]), json.RawMessage(`1`))
				return err
			}
			_, err := e.S.CreateTask(e.Ctx, "w", tg.NodeSpec{NodeID: fmt.Sprintf("r%d-n%02d", r, i), Payload: json.RawMessage(`{}`),
				ConcurrencyKey: "k", DependsOn: []string{fmt.Sprintf("r%d-d%02d", r, i)}})
			return err
		})
		e.wantRoundPending(t, r, n)
	}
	e.wantClaimedOfKey(t, "k", 0)
	e.wantNoDeadlock(t, "creates counted dependencies whose claims were ending")
	e.Verify(t)
}
