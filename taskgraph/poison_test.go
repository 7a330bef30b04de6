package taskgraph

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Options.MaxLeaseLosses beyond its bound is refused at open, naming the
// option and the rule.
func TestMaxLeaseLossesBound(t *testing.T) {
	t.Parallel()
	_, err := openSQLite(context.Background(), filepath.Join(t.TempDir(), "tasks.db"), Options{MaxLeaseLosses: MaxMaxLeaseLosses + 1})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "max_lease_losses") || !strings.Contains(err.Error(), "between 1 and 100") {
		t.Fatalf("open with MaxLeaseLosses %d: %v, want ErrInvalid naming max_lease_losses and its bounds", MaxMaxLeaseLosses+1, err)
	}
}

// The backoff after a lost lease: none after the first, then the task's
// retry backoff doubling per loss, capped; none with a zero base.
func TestLeaseLossDelay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		base   time.Duration
		losses int
		want   time.Duration
	}{
		{time.Second, 1, 0}, {time.Second, 2, time.Second}, {time.Second, 3, 2 * time.Second},
		{time.Second, 4, 4 * time.Second}, {time.Minute, 40, MaxRetryDelay}, {0, 5, 0},
	} {
		if got := leaseLossDelay(tc.base, tc.losses); got != tc.want {
			t.Errorf("leaseLossDelay(%v, %d) = %v, want %v", tc.base, tc.losses, got, tc.want)
		}
	}
}
