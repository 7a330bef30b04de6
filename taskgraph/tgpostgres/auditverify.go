package tgpostgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// workflowTaskStatesSQL reads the audited columns of a workflow's tasks
// ($1), through task_nodes (inWorkflow).
var workflowTaskStatesSQL = `SELECT seq, task_id, payload, state, owner, generation, attempts, result, error,
	node_id, depends_on, max_attempts, priority, requires, retry_delay_ms, kind, gate_timeout_ms, gate_on_timeout
	FROM tasks WHERE ` + inWorkflow("seq", "$1") + ` ORDER BY seq`

// WorkflowTaskStates calls fn with the audited columns of each task of
// workflowID in seq order.
func (r reads) WorkflowTaskStates(ctx context.Context, workflowID string, fn func(tgdriver.TaskStateRow) error) error {
	what := "read the tasks of " + workflowID
	rows, err := r.q.Query(ctx, workflowTaskStatesSQL, workflowID)
	if err != nil {
		return r.fail(ctx, what, err)
	}
	defer rows.Close()
	for rows.Next() {
		var t tgdriver.TaskStateRow
		var owner, result, errText *string
		if err := rows.Scan(&t.Seq, &t.TaskID, &t.Payload, &t.State, &owner, &t.Generation, &t.Attempts, &result, &errText,
			&t.NodeID, &t.DependsOn, &t.MaxAttempts, &t.Priority, &t.Requires, &t.RetryDelayMS, &t.Kind, &t.GateTimeoutMS, &t.GateOnTimeout); err != nil {
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

// EventHashAt returns the hash of event seq of workflowID's chain.
func (r reads) EventHashAt(ctx context.Context, workflowID string, seq int64) (string, bool, error) {
	var h string
	switch err := r.q.QueryRow(ctx, `SELECT hash FROM events WHERE workflow_id = $1 AND wseq = $2
		UNION ALL SELECT h FROM (SELECT r.hashes[$2 - r.wseq + 1] AS h FROM event_links r
			WHERE r.workflow_id = $1 AND r.wseq <= $2 ORDER BY r.wseq DESC LIMIT 1) r WHERE h IS NOT NULL LIMIT 1`, workflowID, seq).Scan(&h); {
	case errors.Is(err, pgx.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, r.fail(ctx, fmt.Sprintf("read event %d of %s", seq, workflowID), err)
	}
	return h, true, nil
}
