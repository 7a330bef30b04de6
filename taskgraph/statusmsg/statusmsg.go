package statusmsg

import (
	"fmt"
	"strings"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/taskview"
)

// Ready is the status of a task that became claimable.
const Ready = "ready to claim"

// Waiting is the status of a pending task that is not yet due: due, and
// why it waits.
func Waiting(due time.Time, why string) string {
	return fmt.Sprintf("waiting until %s (%s)", due.UTC().Format(time.RFC3339Nano), why)
}

// Blocked is the status of a blocked task: the node ids it waits on.
func Blocked(waiting []string) string {
	return "waiting on " + strings.Join(waiting, ", ")
}

// ReadySince is the status of a task promoted once its due time (in Unix
// milliseconds) came.
func ReadySince(dueMS int64) string {
	return fmt.Sprintf("%s (due since %s)", Ready, time.UnixMilli(dueMS).UTC().Format(time.RFC3339Nano))
}

// Released is the status of a task its holder released, uncounted.
func Released(owner string, gen int64) string {
	return fmt.Sprintf("%s (released by %s at generation %d; the attempt was not counted)", Ready, owner, gen)
}

// Completed is the status of a task its holder completed.
func Completed(owner string, gen int64) string {
	return fmt.Sprintf("completed by %s (generation %d)", owner, gen)
}

// CancelledByHolder is the status of a task its holder cancelled.
func CancelledByHolder(owner string, gen int64) string {
	return fmt.Sprintf("cancelled by its holder %s (generation %d)", owner, gen)
}

// Skipped is the status of a task an operator skipped.
func Skipped(operator, reason string) string {
	return fmt.Sprintf("skipped by operator %s: %s", operator, reason)
}

// ErrorSummary shortens a worker's error text for a status message: at
// most 200 bytes and an ellipsis, never splitting a UTF-8 sequence.
func ErrorSummary(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && s[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}

// NotClaimable says why task t cannot be claimed now: the Detail of the
// conflict a claim by id answers with.
func NotClaimable(t taskview.Task) string {
	switch t.State {
	case taskview.StatePending:
		return fmt.Sprintf("not claimable until %s: %s", t.DueAt.Format(time.RFC3339Nano), t.StatusMessage)
	case taskview.StateBlocked:
		return "not claimable yet: " + t.StatusMessage
	case taskview.StateClaimed:
		return fmt.Sprintf("already claimed by %s at generation %d until %s; try another task or wait for the lease to end",
			t.Owner, t.Generation, t.LeaseExpiresAt.UTC().Format(time.RFC3339Nano))
	default:
		return fmt.Sprintf("the task is %s and can no longer be claimed", t.State)
	}
}
