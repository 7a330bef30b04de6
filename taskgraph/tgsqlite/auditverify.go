package tgsqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// sqlWorkflowTaskStates reads the audited columns of a workflow's tasks.
const sqlWorkflowTaskStates = `SELECT seq, task_id, payload, state, owner, generation, attempts, result, error
	FROM tasks WHERE workflow_id = ? ORDER BY seq`

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
		if err := rows.Scan(&t.Seq, &t.TaskID, &t.Payload, &t.State, &owner, &t.Generation, &t.Attempts, &result, &errText); err != nil {
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
