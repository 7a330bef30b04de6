package tgsqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// An UpdateTask's shape is which columns it sets (to a value or to NULL) and
// which guards it tests; its SQL text depends on nothing else. The shape is
// a bitmask, so the text is built once per shape (Driver.updates) and its
// prepared statement is cached by that text in stmtCache.
//
// Bits: column i of setColumns at 2i (value) and 2i+1 (NULL); AddAttempt at
// bitAddAttempt; guard j of guardColumns at guardBase+2j (value) and
// guardBase+2j+1 (NULL); NoUnmet at bitNoUnmet; the number of States from
// statesShift (8 bits).
const (
	bitAddAttempt = 24
	guardBase     = 25
	bitNoUnmet    = 35
	statesShift   = 36
	maxStates     = 255
	// bitDueAt: due_at_ms is set (never NULL); bitDueBy: the guard
	// due_at_ms <= ?. Above the 8 bits of the States count.
	bitDueAt = 44
	bitDueBy = 45
)

// setColumns are the columns of TaskSet, in the order of their bits, SQL
// text and arguments.
var setColumns = [12]string{"state", "owner", "generation", "token_hash", "lease_expires_at_ms", "lease_ms",
	"attempts", "unmet", "result", "error", "status_message", "cancel_cause"}

// guardTests are the tests of TaskGuard besides States and NoUnmet, in
// the order of their bits, SQL text and arguments; value forms.
var guardTests = [5]string{"generation = ?", "owner = ?", "token_hash = ?", "lease_expires_at_ms > ?", "lease_expires_at_ms <= ?"}

// guardNull are the NULL forms of guardTests.
var guardNull = [5]string{"generation IS NULL", "owner IS NULL", "token_hash IS NULL", "lease_expires_at_ms IS NULL", "lease_expires_at_ms IS NULL"}

// errBadUpdate marks an UpdateTask the domain built wrong.
var errBadUpdate = errors.New("invalid task update")

// shape collects an UpdateTask's key and arguments in one pass.
type shape struct {
	key  uint64
	args []any
}

// col records column bit i: unset, NULL, or value v.
func (s *shape) col(i uint, set, null bool, v any) {
	switch {
	case !set:
	case null:
		s.key |= 2 << (2 * i)
	default:
		s.key |= 1 << (2 * i)
		s.args = append(s.args, v)
	}
}

// UpdateTask applies set to task seq if guard holds in the same statement
// and returns the task as updated (RETURNING); ok is false when no row
// matched.
func (t *wtx) UpdateTask(_ context.Context, seq int64, set tgdriver.TaskSet, guard tgdriver.TaskGuard) (tgdriver.TaskRow, bool, error) {
	if set.AddAttempt && set.Attempts.Set {
		return tgdriver.TaskRow{}, false, fmt.Errorf("%w: AddAttempt and Attempts are both set; set one", errBadUpdate)
	}
	if len(guard.States) > maxStates {
		return tgdriver.TaskRow{}, false, fmt.Errorf("%w: %d guard states, at most %d", errBadUpdate, len(guard.States), maxStates)
	}
	s := shape{args: make([]any, 0, 24)}
	// The nullable columns take their zero value as NULL, as
	// tgdriver.TaskRow reads them.
	s.col(0, set.State.Set, set.State.Null, set.State.V)
	s.col(1, set.Owner.Set, set.Owner.Null || set.Owner.V == "", set.Owner.V)
	s.col(2, set.Generation.Set, set.Generation.Null, set.Generation.V)
	s.col(3, set.TokenHash.Set, set.TokenHash.Null || set.TokenHash.V == nil, set.TokenHash.V)
	s.col(4, set.LeaseExpiresAtMS.Set, set.LeaseExpiresAtMS.Null || set.LeaseExpiresAtMS.V == 0, set.LeaseExpiresAtMS.V)
	s.col(5, set.LeaseMS.Set, set.LeaseMS.Null || set.LeaseMS.V == 0, set.LeaseMS.V)
	s.col(6, set.Attempts.Set, set.Attempts.Null, set.Attempts.V)
	s.col(7, set.Unmet.Set, set.Unmet.Null, set.Unmet.V)
	s.col(8, set.Result.Set, set.Result.Null || set.Result.V == "", set.Result.V)
	s.col(9, set.Error.Set, set.Error.Null || set.Error.V == "", set.Error.V)
	s.col(10, set.StatusMessage.Set, set.StatusMessage.Null, set.StatusMessage.V)
	s.col(11, set.CancelCause.Set, set.CancelCause.Null || set.CancelCause.V == 0, set.CancelCause.V)
	if set.AddAttempt {
		s.key |= 1 << bitAddAttempt
	}
	if set.DueAtMS.Set {
		if set.DueAtMS.Null {
			return tgdriver.TaskRow{}, false, fmt.Errorf("%w: due_at_ms cannot be NULL (0 means due now)", errBadUpdate)
		}
		s.key |= 1 << bitDueAt
		s.args = append(s.args, set.DueAtMS.V)
	}
	s.args = append(s.args, set.UpdatedAtMS, seq)
	for _, st := range guard.States {
		s.args = append(s.args, st)
	}
	s.key |= uint64(len(guard.States)) << statesShift
	s.guard(0, guard.Generation.Set, guard.Generation.Null, guard.Generation.V)
	s.guard(1, guard.Owner.Set, guard.Owner.Null, guard.Owner.V)
	s.guard(2, guard.TokenHash.Set, guard.TokenHash.Null || guard.TokenHash.V == nil, guard.TokenHash.V)
	s.guard(3, guard.LeaseLiveAtMS.Set, guard.LeaseLiveAtMS.Null, guard.LeaseLiveAtMS.V)
	s.guard(4, guard.LeaseLapsedAtMS.Set, guard.LeaseLapsedAtMS.Null, guard.LeaseLapsedAtMS.V)
	if guard.NoUnmet {
		s.key |= 1 << bitNoUnmet
	}
	if guard.DueByMS.Set {
		s.key |= 1 << bitDueBy
		s.args = append(s.args, guard.DueByMS.V)
	}
	q, ok := t.d.updates[s.key]
	if !ok {
		q = updateSQL(s.key)
		t.d.updates[s.key] = q
	}
	r, err := scanTask(t.queryRow(bg, q, s.args...))
	switch {
	case errors.Is(err, tgdriver.ErrNoRows):
		return tgdriver.TaskRow{}, false, nil
	case err != nil:
		return tgdriver.TaskRow{}, false, fmt.Errorf("update task %d: %w", seq, err)
	}
	return r, true, nil
}

// guard records guard test j: unset, NULL, or value v.
func (s *shape) guard(j uint, set, null bool, v any) {
	switch {
	case !set:
	case null:
		s.key |= 2 << (guardBase + 2*j)
	default:
		s.key |= 1 << (guardBase + 2*j)
		s.args = append(s.args, v)
	}
}

// updateSQL builds the UPDATE of shape key.
func updateSQL(key uint64) string {
	var b strings.Builder
	b.WriteString("UPDATE tasks SET ")
	for i, c := range setColumns {
		switch (key >> (2 * i)) & 3 {
		case 1:
			b.WriteString(c + " = ?, ")
		case 2:
			b.WriteString(c + " = NULL, ")
		}
		if i == 6 && key&(1<<bitAddAttempt) != 0 {
			b.WriteString("attempts = attempts + 1, ")
		}
	}
	if key&(1<<bitDueAt) != 0 {
		b.WriteString("due_at_ms = ?, ")
	}
	b.WriteString("updated_at_ms = ? WHERE seq = ?")
	switch n := int(key >> statesShift & maxStates); {
	case n == 1:
		b.WriteString(" AND state = ?")
	case n > 1:
		b.WriteString(" AND state IN (?" + strings.Repeat(", ?", n-1) + ")")
	}
	for j := range guardTests {
		switch (key >> (guardBase + 2*j)) & 3 {
		case 1:
			b.WriteString(" AND " + guardTests[j])
		case 2:
			b.WriteString(" AND " + guardNull[j])
		}
	}
	if key&(1<<bitNoUnmet) != 0 {
		b.WriteString(" AND unmet = 0")
	}
	if key&(1<<bitDueBy) != 0 {
		b.WriteString(" AND due_at_ms <= ?")
	}
	b.WriteString(" RETURNING " + taskColumns)
	return b.String()
}
