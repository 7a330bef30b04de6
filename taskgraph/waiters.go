package taskgraph

import (
	"context"
	"errors"
	"fmt"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/waitq"
)

// DefaultMaxWaiters is Options.MaxWaiters' default.
const DefaultMaxWaiters = 4096

// ErrWaitLimit is returned, with ok false, by a claim-next with a wait when
// no task is ready and the store already holds Options.MaxWaiters parked
// claim-next calls. It is not a fault of the caller: nothing was claimed, and
// it may retry after a moment.
var ErrWaitLimit = errors.New("the server holds its maximum of parked claims")

// waitQueue holds the parked claim-next calls (package waitq).
type waitQueue = waitq.Queue

// readyRef is a task made claimable, as wake-ups see it.
type readyRef = waitq.Ref

// waiter is one parked claim-next call.
type waiter = waitq.Waiter

// wakeForPending wakes, after a write by another process, at most as many
// waiters of each kind (workflow and capabilities) as there are claimable
// tasks they may claim. There is one lookup per kind, each bounded by the
// number of waiters of that kind.
func (s *Store) wakeForPending(ctx context.Context) error {
	rd := s.drv.Reads()
	for _, f := range s.notify.Filters() {
		n, err := rd.CountClaimable(ctx, f.Workflow, f.Caps, f.N)
		if err != nil {
			return fmt.Errorf("count claimable tasks: %w", err)
		}
		if n > 0 {
			s.notify.WakeKey(f, n)
		}
	}
	return nil
}
