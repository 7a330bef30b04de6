package retry

import (
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/limits"
)

// Backoff is the wait before the retry that follows failed attempt n (from
// 1): base * 2^(n-1), at most limits.MaxRetryDelay; 0 when base is 0.
func Backoff(base time.Duration, n int) time.Duration {
	if base <= 0 {
		return 0
	}
	d := base
	for i := 1; i < n && d < limits.MaxRetryDelay; i++ {
		d *= 2
	}
	return min(d, limits.MaxRetryDelay)
}

// LeaseLossDelay is how long a task whose lease was just lost for the
// losses-th time waits before it is claimable again: the first loss
// (usually a worker that died) reclaims at once; from the second on the
// task's retry backoff applies, base * 2^(losses-2), at most
// limits.MaxRetryDelay, so a task that keeps killing its workers stops taking them one after the
// other (and fails at taskgraph's Options.MaxLeaseLosses).
func LeaseLossDelay(base time.Duration, losses int) time.Duration {
	if losses < 2 {
		return 0
	}
	return Backoff(base, losses-1)
}
