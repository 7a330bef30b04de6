package tgsqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// sqlWorkflowTaskStates reads the audited columns of a workflow's tasks.
const sqlWorkflowTaskStates = `SELECT seq, task_id, payload, state, owner, generation, attempts, result, error,
	node_id, depends_on, max_attempts, priority, requires, retry_delay_ms, kind, gate_timeout_ms, gate_on_timeout
	FROM tasks WHERE workflow_id = CAST(? AS TEXT) ORDER BY seq`

// WorkflowTaskStates calls fn with the audited columns of each task of
// workflowID in seq order.
func (r *reads) WorkflowTaskStates(ctx context.Context, workflowID string, fn func(tgdriver.TaskStateRow) error) error {
	rows, err := r.q.query(ctx, sqlWorkflowTaskStates, workflowID)
	if err != nil {
		return fmt.Errorf("read the tasks of %s: %w", workflowID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var t tgdriver.TaskStateRow
		var owner, result, errText sql.NullString
		if err := rows.Scan(&t.Seq, &t.TaskID, &t.Payload, &t.State, &owner, &t.Generation, &t.Attempts, &result, &errText,
			&t.NodeID, &t.DependsOn, &t.MaxAttempts, &t.Priority, &t.Requires, &t.RetryDelayMS, &t.Kind, &t.GateTimeoutMS, &t.GateOnTimeout); err != nil {
			return fmt.Errorf("read the tasks of %s: %w", workflowID, err)
		}
		t.Owner, t.Error = owner.String, errText.String
		t.Result, t.HasResult = result.String, result.Valid
		if err := fn(t); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the tasks of %s: %w", workflowID, err)
	}
	return nil
}

// EventHashAt returns the hash of event seq of workflowID's chain.
func (r *reads) EventHashAt(ctx context.Context, workflowID string, seq int64) (string, bool, error) {
	var h string
	switch err := r.q.queryRow(ctx, `SELECT hash FROM events WHERE workflow_id = ? AND wseq = ?`, workflowID, seq).Scan(&h); {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("read event %d of %s: %w", seq, workflowID, err)
	}
	return h, true, nil
}
