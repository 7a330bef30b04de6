package tgpostgres

import (
	"context"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// WorkflowTaskStates calls fn with the audited columns of each task of
// workflowID in seq order.
func (r reads) WorkflowTaskStates(ctx context.Context, workflowID string, fn func(tgdriver.TaskStateRow) error) error {
	what := "read the tasks of " + workflowID
	rows, err := r.q.Query(ctx, `SELECT seq, task_id, payload, state, owner, generation, attempts, result, error
		FROM tasks WHERE workflow_id = $1 ORDER BY seq`, workflowID)
	if err != nil {
		return r.fail(ctx, what, err)
	}
	defer rows.Close()
	for rows.Next() {
		var t tgdriver.TaskStateRow
		var owner, result, errText *string
		if err := rows.Scan(&t.Seq, &t.TaskID, &t.Payload, &t.State, &owner, &t.Generation, &t.Attempts, &result, &errText); err != nil {
			return r.fail(ctx, what, err)
		}
		if owner != nil {
			t.Owner = *owner
		}
		if result != nil {
			t.Result, t.HasResult = *result, true
		}
		if errText != nil {
			t.Error = *errText
		}
		if err := fn(t); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return r.fail(ctx, what, err)
	}
	return nil
}
