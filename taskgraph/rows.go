package taskgraph

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
)

// taskColumns is the column list every task read selects, in scanTask order.
const taskColumns = `seq, task_id, workflow_id, node_id, payload, depends_on, state, owner, generation,
	token_hash, lease_expires_at_ms, attempts, max_attempts, unmet, result, error, status_message,
	cancel_cause, created_at_ms, updated_at_ms`

// row is a task as stored, with the bookkeeping the public Task hides.
type row struct {
	Task
	seq         int64
	tokenHash   []byte
	unmet       int
	cancelCause sql.NullInt64
}

type scanner interface{ Scan(dest ...any) error }

func scanTask(sc scanner) (row, error) {
	var (
		r                      row
		deps, state            string
		owner, result, errText sql.NullString
		leaseMS                sql.NullInt64
		createdMS, updatedMS   int64
		payload                string
	)
	err := sc.Scan(&r.seq, &r.TaskID, &r.WorkflowID, &r.NodeID, &payload, &deps, &state, &owner, &r.Generation,
		&r.tokenHash, &leaseMS, &r.Attempts, &r.MaxAttempts, &r.unmet, &result, &errText, &r.StatusMessage,
		&r.cancelCause, &createdMS, &updatedMS)
	if err != nil {
		return row{}, err
	}
	r.Payload = json.RawMessage(payload)
	if deps != "[]" { // most tasks have no dependencies: skip the decoder
		if err := json.Unmarshal([]byte(deps), &r.DependsOn); err != nil {
			return row{}, fmt.Errorf("%w: task %s has unreadable depends_on: %v", errInternal, r.TaskID, err)
		}
	}
	r.State = State(state)
	r.Owner = owner.String
	if leaseMS.Valid {
		r.LeaseExpiresAt = time.UnixMilli(leaseMS.Int64).UTC()
	}
	if result.Valid {
		r.Result = json.RawMessage(result.String)
	}
	r.Error = errText.String
	r.CreatedAt = time.UnixMilli(createdMS).UTC()
	r.UpdatedAt = time.UnixMilli(updatedMS).UTC()
	return r, nil
}

// current is the lease view of a stored task, for lease.Check.
func (r row) current() lease.Current {
	return lease.Current{
		State:      string(r.State),
		Held:       r.State == StateClaimed,
		Terminal:   r.State.Terminal(),
		Owner:      r.Owner,
		Generation: r.Generation,
		TokenHash:  r.tokenHash,
		ExpiresAt:  r.LeaseExpiresAt,
	}
}

// expired reports whether r is claimed and its lease has lapsed at now.
func (r row) expired(now time.Time) bool {
	return r.State == StateClaimed && !now.Before(r.LeaseExpiresAt)
}

func (w *wtx) loadTask(taskID string) (row, error) {
	r, err := scanTask(w.queryRow(`SELECT `+taskColumns+` FROM tasks WHERE task_id = ?`, taskID))
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, &notFoundError{what: "task", id: taskID}
	}
	return r, err
}

func (w *wtx) loadSeq(seq int64) (row, error) {
	return scanTask(w.queryRow(`SELECT `+taskColumns+` FROM tasks WHERE seq = ?`, seq))
}

// setState moves a task to state with a status message, clearing the claim
// token (every state change ends or replaces the live claim) and, unless the
// new state is claimed, the lease expiry.
func (w *wtx) setState(seq int64, state State, status string) error {
	_, err := w.exec(`UPDATE tasks SET state = ?, status_message = ?, token_hash = NULL,
		lease_expires_at_ms = CASE WHEN ? = 'claimed' THEN lease_expires_at_ms ELSE NULL END,
		updated_at_ms = ? WHERE seq = ?`, string(state), status, string(state), w.nowMS, seq)
	return err
}

// updateTask runs update, an UPDATE of tasks whose WHERE clause selects at
// most one task, and returns that task as updated, read by the same
// statement (RETURNING) rather than a second query. ok is false when the
// WHERE clause matched no task.
func (w *wtx) updateTask(update string, args ...any) (r row, ok bool, err error) {
	r, err = scanTask(w.queryRow(update+` RETURNING `+taskColumns, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, false, nil
	}
	if err != nil {
		return row{}, false, err
	}
	return r, true, nil
}

func (w *wtx) reload(r *row) error {
	nr, err := w.loadSeq(r.seq)
	if err != nil {
		return err
	}
	*r = nr
	return nil
}

// errorSummary shortens a worker's error text for a status message.
func errorSummary(s string) string {
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
