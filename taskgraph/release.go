package taskgraph

import (
	"context"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/statusmsg"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// EventRelease records a holder giving its claim back (Release); detail has
// the attempts count after the release.
const EventRelease = "release"

// Release gives the holder's claim back without penalty: the task returns
// to pending for another worker, the attempt the claim took is not counted
// (attempts goes back down by one, so a release never brings a task nearer
// to failing), and nothing downstream changes. The generation stays, so the
// released claim is fenced out like any ended claim: the write is a fenced
// update (state, generation, owner, token digest and a live lease in its
// predicate) that clears the token, and the next claim takes generation + 1.
func (s *Store) Release(ctx context.Context, h lease.Holder) (Task, error) {
	return s.holderWrite(ctx, "release", h, nil, func(w *wtx, r *row) error {
		attempts := max(r.Attempts-1, 0)
		if err := w.fenced(r, h, clearClaim(tgdriver.TaskSet{
			State: tgdriver.Val(string(StatePending)), Owner: tgdriver.Null[string](), Attempts: tgdriver.Val(attempts),
			StatusMessage: tgdriver.Val(statusmsg.Released(h.Owner, h.Generation)),
		})); err != nil {
			return err
		}
		w.wakeWaiters(r)
		return w.appendEvent(r, EventRelease, h.Owner, h.Generation, w.arrived(map[string]any{"attempts": attempts}))
	})
}
