package retry

import (
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/limits"
)

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		base time.Duration
		n    int
		want time.Duration
	}{
		{0, 5, 0}, {time.Second, 1, time.Second}, {time.Second, 3, 4 * time.Second},
		{time.Second, 1000, limits.MaxRetryDelay},
	} {
		if got := Backoff(c.base, c.n); got != c.want {
			t.Errorf("Backoff(%v, %d) = %v, want %v", c.base, c.n, got, c.want)
		}
	}
	if LeaseLossDelay(time.Second, 1) != 0 || LeaseLossDelay(time.Second, 2) != time.Second || LeaseLossDelay(time.Second, 3) != 2*time.Second {
		t.Error("LeaseLossDelay: want 0 at the first loss, then the backoff from the base")
	}
}
