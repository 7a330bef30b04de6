package statusmsg

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/taskview"
)

// A long error is cut to at most 200 bytes plus the ellipsis, never inside
// a UTF-8 sequence; a short one is kept whole.
func TestErrorSummaryCutsOnRuneBoundary(t *testing.T) {
	t.Parallel()
	if got := ErrorSummary("boom"); got != "boom" {
		t.Fatalf("short error changed: %q", got)
	}
	long := strings.Repeat("a", 199) + strings.Repeat("é", 10) // é is 2 bytes: byte 200 is inside one
	got := ErrorSummary(long)
	if !strings.HasSuffix(got, "…") || !utf8.ValidString(got) {
		t.Fatalf("summary %q is not valid UTF-8 ending in an ellipsis", got)
	}
	if body := strings.TrimSuffix(got, "…"); len(body) > 200 || !strings.HasPrefix(long, body) {
		t.Fatalf("summary body %q is not a prefix of at most 200 bytes", body)
	}
}

// The not-claimable detail names what the claimant needs for each state.
func TestNotClaimableNamesTheState(t *testing.T) {
	t.Parallel()
	exp := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		task taskview.Task
		want string
	}{
		{taskview.Task{State: taskview.StateBlocked, StatusMessage: Blocked([]string{"a", "b"})}, "not claimable yet: waiting on a, b"},
		{taskview.Task{State: taskview.StateClaimed, Owner: "w1", Generation: 3, LeaseExpiresAt: exp}, "already claimed by w1 at generation 3 until 2026-01-02T03:04:05Z"},
		{taskview.Task{State: taskview.StateCompleted}, "the task is completed and can no longer be claimed"},
		{taskview.Task{State: taskview.StatePending, DueAt: exp, StatusMessage: Waiting(exp, "not_before")}, "not claimable until 2026-01-02T03:04:05Z: waiting until 2026-01-02T03:04:05Z (not_before)"},
	} {
		if got := NotClaimable(c.task); !strings.HasPrefix(got, c.want) {
			t.Errorf("NotClaimable(%s) = %q, want it to start with %q", c.task.State, got, c.want)
		}
	}
}
