package tgpostgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// querier is what reads run on: the pool, a write transaction or a snapshot.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// taskColumns are the columns of a TaskRow, in scanTask's order.
const taskColumns = `seq, task_id, workflow_id, node_id, payload, depends_on, state, owner, generation,
	token_hash, lease_expires_at_ms, lease_ms, attempts, max_attempts, unmet, result, error, status_message,
	cancel_cause, created_at_ms, updated_at_ms, created_by, priority, requires, due_at_ms, retry_delay_ms, dependents,
	report, usage_input_tokens, usage_output_tokens, usage_cost_usd, prior_input_tokens, prior_output_tokens, prior_cost_usd, lease_losses,
	concurrency_key, kind, gate_timeout_ms, gate_on_timeout`

// taskColumnsNoBodies is taskColumns with the payload read as JSON null
// and the result as NULL (ListFilter.NoBodies): neither is fetched or
// detoasted.
var taskColumnsNoBodies = tgdriver.NoBodiesColumns(taskColumns)

const eventColumns = `event_id, workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash,
	hash_version, actor_kind, actor_name, actor_principal, task_state, content`

// bodyColumns reads the row of events e as eventColumns do, with its
// link (position, prev_hash, hash) read from the expressions given.
func bodyColumns(seq, prev, hash string) string {
	return `e.event_id, e.workflow_id, ` + seq + `, e.task_id, e.kind, e.owner, e.generation, e.at_ms, e.detail, ` + prev + `, ` + hash + `,
	e.hash_version, e.actor_kind, e.actor_name, e.actor_principal, e.task_state, e.content`
}

// An event's link is in its own row (linked before migration 0016, or by
// AppendEvents) or in a run of event_links l (linked since: linkOf); an
// event with neither is journaled, not yet linked: position 0, no hashes.
var (
	linkedColumns   = bodyColumns(`COALESCE(l.wseq, e.wseq, 0)`, `COALESCE(l.prev_hash, e.prev_hash)`, `COALESCE(l.hash, e.hash)`)
	unlinkedColumns = bodyColumns(`0::bigint`, `''::text`, `''::text`)
)

// linkOf joins to each event e its link l (wseq, prev_hash, hash) from
// the run of event_links that holds it, or NULLs (linked in its own row, or
// journaled). The run is found through event_links_by_event: the last run
// of the workflow that starts at or before the event's id and holds it
// (runs are in id order within, and a run linked later may hold lower ids
// than one before it, hence the check of the array). Each of the run's
// arrays is read once: its hashes zipped with themselves after its
// prev_hash give each event's prev_hash.
const linkOf = ` LEFT JOIN LATERAL (SELECT r.wseq + u.o - 1 AS wseq, u.prev_hash, u.hash
	FROM (SELECT r.wseq, r.prev_hash, r.hashes, r.event_ids FROM event_links r
		WHERE e.wseq IS NULL AND r.workflow_id = e.workflow_id AND r.min_event_id <= e.event_id AND r.max_event_id >= e.event_id
			AND e.event_id = ANY(r.event_ids)
		ORDER BY r.min_event_id DESC LIMIT 1) r,
	unnest(r.event_ids, r.hashes, r.prev_hash || r.hashes) WITH ORDINALITY AS u(id, hash, prev_hash, o)
	WHERE u.id = e.event_id) l ON true`

// rowBodyColumns are the columns of a body in events e (packedBodies'
// columns, in their order).
const rowBodyColumns = `e.event_id, e.workflow_id, e.wseq, e.task_id, e.kind, e.owner, e.generation, e.at_ms, e.detail,
	e.prev_hash, e.hash, e.hash_version, e.actor_kind, e.actor_name, e.actor_principal, e.task_state, e.content, e.task_seq`

// packedBodies reads the bodies in the packs p of from (event_packs,
// migration 0029) that where selects, one row per event e, under the
// names and in the order of rowBodyColumns: a packed body has no link of
// its own (wseq NULL, no hashes; its link is in event_links, or it is
// journaled). where may filter the events (e) as well as the packs (p).
func packedBodies(from, where string) string {
	return `SELECT e.event_id, p.workflow_id, NULL::bigint AS wseq, e.task_id, e.kind, e.owner, e.generation, e.at_ms, e.detail,
		''::text AS prev_hash, ''::text AS hash, e.hash_version, e.actor_kind, e.actor_name, e.actor_principal, e.task_state, e.content, e.task_seq
		FROM ` + from + ` CROSS JOIN LATERAL unnest(p.event_ids, p.task_seqs, p.task_ids, p.kinds, p.owners, p.generations, p.ats,
			p.details, p.hash_versions, p.actor_kinds, p.actor_names, p.actor_principals, p.task_states, p.contents)
			AS e(event_id, task_seq, task_id, kind, owner, generation, at_ms, detail, hash_version, actor_kind, actor_name,
				actor_principal, task_state, content)
		WHERE ` + where
}

// seqOfTask is the seq task $1's events are filed under (events.task_seq,
// event_packs.task_seqs): its task's, found through tasks' unique index on
// task_id, or 0 when no task has that id (see taskSeqOf).
const seqOfTask = `COALESCE((SELECT t.seq FROM tasks t WHERE t.task_id = $1), 0)`

// taskBodies are the bodies of task $1's events (and also those of extra,
// a condition on e), in events through events_by_task_seq (migration
// 0021) and in packs through event_packs_by_task_seq (0029): the packs
// that hold an event at the task's seq, and of those the task's events.
func taskBodies(extra string) string {
	return `SELECT ` + rowBodyColumns + ` FROM events e WHERE e.task_seq = ` + seqOfTask + ` AND e.task_id = $1` + extra + `
		UNION ALL ` + packedBodies(`event_packs p`, `p.task_seqs @> ARRAY[`+seqOfTask+`] AND e.task_seq = `+seqOfTask+` AND e.task_id = $1`+extra)
}

// A task's or workflow's events in chain order, then its journaled ones in
// journal order (the events of its journal rows, by id, as the linker
// links them), in one statement (one snapshot: an event the linker
// links meanwhile is read once). A body is in events or in a pack
// (packedBodies). A workflow's runs are read whole: each event's
// prev_hash is the hash before it in its run, the run's prev_hash for the
// first (the run's hashes zipped with themselves after its prev_hash: one
// more element, with no event, which is dropped). The workflow's packs
// are read whole too (event_packs_by_workflow), and a body not in them is
// read from events by id.
var (
	sqlTaskEvents = `SELECT ` + linkedColumns + ` FROM (` + taskBodies(``) + `) e` + linkOf + `
		ORDER BY COALESCE(l.wseq, e.wseq) IS NULL, COALESCE(l.wseq, e.wseq), e.event_id`
	sqlWorkflowEvents = `WITH l AS MATERIALIZED (SELECT r.wseq + u.o - 1 AS wseq, u.id, u.hash, u.prev_hash
			FROM event_links r, unnest(r.event_ids, r.hashes, r.prev_hash || r.hashes) WITH ORDINALITY AS u(id, hash, prev_hash, o)
			WHERE r.workflow_id = $1 AND u.id IS NOT NULL),
		pk AS MATERIALIZED (` + packedBodies(`event_packs p`, `p.workflow_id = $1`) + `),
		j AS MATERIALIZED (SELECT u.id FROM event_journal j CROSS JOIN LATERAL unnest(j.event_ids) AS u(id) WHERE j.workflow_id = $1)
	SELECT ` + eventColumns + ` FROM (
		SELECT ` + bodyColumns(`e.wseq`, `e.prev_hash`, `e.hash`) + `, 0 AS src, e.wseq AS ord FROM events e
			WHERE e.workflow_id = $1 AND e.wseq IS NOT NULL
		UNION ALL SELECT ` + bodyColumns(`l.wseq`, `l.prev_hash`, `l.hash`) + `, 0, l.wseq FROM l JOIN pk e ON e.event_id = l.id
		UNION ALL SELECT ` + bodyColumns(`l.wseq`, `l.prev_hash`, `l.hash`) + `, 0, l.wseq FROM l JOIN events e ON e.event_id = l.id
			WHERE NOT EXISTS (SELECT 1 FROM pk WHERE pk.event_id = l.id)
		UNION ALL SELECT ` + unlinkedColumns + `, 1, j.id FROM j JOIN pk e ON e.event_id = j.id
		UNION ALL SELECT ` + unlinkedColumns + `, 1, j.id FROM j JOIN events e ON e.event_id = j.id
			WHERE NOT EXISTS (SELECT 1 FROM pk WHERE pk.event_id = j.id)) e ORDER BY src, ord`
)

// sqlLastEventOfGen reads the newest event of task $1 at generation $2: a
// journaled one is newer than any linked one.
var sqlLastEventOfGen = `SELECT e.kind, e.at_ms FROM (` + taskBodies(` AND e.generation = $2`) + `) e` + linkOf + `
		ORDER BY COALESCE(l.wseq, e.wseq) IS NULL DESC, COALESCE(l.wseq, e.wseq) DESC, e.event_id DESC LIMIT 1`

const workflowColumns = `workflow_id, task_count, event_count, head_hash, created_at_ms, updated_at_ms`

func scanTask(row pgx.Row) (tgdriver.TaskRow, error) { return scanTaskAfter(row) }

// scanTaskAfter reads a task's columns (taskColumns) after the columns
// that lead scans.
func scanTaskAfter(row pgx.Row, lead ...any) (tgdriver.TaskRow, error) {
	var s taskScanner
	return s.scan(row, lead...)
}

// taskScanner reads task rows (taskColumns, after lead's columns) into one
// set of destinations, made once: a result set of many rows costs no
// destination list, row or NULL-able value per row (they were most of the
// allocations of a batch's reads).
type taskScanner struct {
	t                                         tgdriver.TaskRow
	owner, result, errText, createdBy, report pgtype.Text
	lease, leaseMS, cause                     pgtype.Int8
	dest                                      []any
}

// scan reads row; lead must be as many destinations as the first scan's.
func (s *taskScanner) scan(row pgx.Row, lead ...any) (tgdriver.TaskRow, error) {
	if s.dest == nil {
		t := &s.t
		s.dest = append(make([]any, 0, len(lead)+42), lead...)
		s.dest = append(s.dest, &t.Seq, &t.TaskID, &t.WorkflowID, &t.NodeID, &t.Payload, &t.DependsOn, &t.State, &s.owner, &t.Generation,
			&t.TokenHash, &s.lease, &s.leaseMS, &t.Attempts, &t.MaxAttempts, &t.Unmet, &s.result, &s.errText, &t.StatusMessage,
			&s.cause, &t.CreatedAtMS, &t.UpdatedAtMS, &s.createdBy, &t.Priority, &t.Requires, &t.DueAtMS, &t.RetryDelayMS, &t.Dependents,
			&s.report, &t.Usage.InputTokens, &t.Usage.OutputTokens, &t.Usage.CostUSD, &t.PriorUsage.InputTokens, &t.PriorUsage.OutputTokens, &t.PriorUsage.CostUSD, &t.LeaseLosses,
			&t.ConcurrencyKey, &t.Kind, &t.GateTimeoutMS, &t.GateOnTimeout)
	} else {
		copy(s.dest, lead)
	}
	// Every column is scanned into its destination (a NULL one too), so
	// nothing of the previous row remains; the row goes out by value, and
	// its strings and token hash are the scan's own.
	if err := row.Scan(s.dest...); err != nil {
		return tgdriver.TaskRow{}, err
	}
	t := s.t
	t.Owner, t.CreatedBy, t.Report, t.Error = s.owner.String, s.createdBy.String, s.report.String, s.errText.String
	t.Result, t.HasResult = s.result.String, s.result.Valid
	t.LeaseExpiresAtMS, t.LeaseMS, t.CancelCause = s.lease.Int64, s.leaseMS.Int64, s.cause.Int64
	return t, nil
}

// collectEvents reads every event of rows (scanEvent).
func collectEvents(rows pgx.Rows) ([]tgdriver.EventRow, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (tgdriver.EventRow, error) { return scanEvent(row) })
}

func scanEvent(row pgx.Row) (tgdriver.EventRow, error) {
	var e tgdriver.EventRow
	err := row.Scan(&e.EventID, &e.WorkflowID, &e.Seq, &e.TaskID, &e.Kind, &e.Owner, &e.Generation, &e.AtMS, &e.Detail, &e.PrevHash, &e.Hash,
		&e.HashVersion, &e.ActorKind, &e.ActorName, &e.ActorPrincipal, &e.TaskState, &e.Content)
	return e, err
}

func scanWorkflow(row pgx.Row) (tgdriver.WorkflowRow, error) {
	var w tgdriver.WorkflowRow
	err := row.Scan(&w.WorkflowID, &w.TaskCount, &w.EventCount, &w.HeadHash, &w.CreatedAtMS, &w.UpdatedAtMS)
	return w, err
}

// reads implements tgdriver.Reads on a querier.
type reads struct {
	d *Driver
	q querier
}

var _ tgdriver.Reads = reads{}

// fail names what failed and maps the error to the driver's sentinels.
func (r reads) fail(ctx context.Context, what string, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, tgdriver.ErrNoRows)
	}
	return fmt.Errorf("%s: %w", what, r.d.classify(ctx, err))
}

func (r reads) oneTask(ctx context.Context, what, q string, args ...any) (tgdriver.TaskRow, error) {
	t, err := scanTask(r.q.QueryRow(ctx, q, args...))
	if err != nil {
		return tgdriver.TaskRow{}, r.fail(ctx, what, err)
	}
	return t, nil
}

func (r reads) tasks(ctx context.Context, what, q string, args ...any) ([]tgdriver.TaskRow, error) {
	rows, err := r.q.Query(ctx, q, args...)
	if err != nil {
		return nil, r.fail(ctx, what, err)
	}
	defer rows.Close()
	var out []tgdriver.TaskRow
	var s taskScanner
	for rows.Next() {
		t, err := s.scan(rows)
		if err != nil {
			return nil, r.fail(ctx, what, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, r.fail(ctx, what, err)
	}
	return out, nil
}

func (r reads) seqs(ctx context.Context, what, q string, args ...any) ([]int64, error) {
	rows, err := r.q.Query(ctx, q, args...)
	if err != nil {
		return nil, r.fail(ctx, what, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, r.fail(ctx, what, err)
	}
	return out, nil
}

// TaskByID returns the task with id taskID, or ErrNoRows.
func (r reads) TaskByID(ctx context.Context, taskID string) (tgdriver.TaskRow, error) {
	return r.oneTask(ctx, "read task "+taskID, `SELECT `+taskColumns+` FROM tasks WHERE task_id = $1`, taskID)
}

// TaskBySeq returns the task with seq, or ErrNoRows.
func (r reads) TaskBySeq(ctx context.Context, seq int64) (tgdriver.TaskRow, error) {
	return r.oneTask(ctx, fmt.Sprintf("read task seq %d", seq), `SELECT `+taskColumns+` FROM tasks WHERE seq = $1`, seq)
}

// inWorkflow is the predicate that the task seq in column seq is one of
// the tasks of workflow (a parameter or a column), found through
// task_nodes' primary key (migration 0031): tasks has no index that leads
// with workflow_id but the ready ones (TestWorkflowReadsUseTaskNodes).
func inWorkflow(seq, workflow string) string {
	return seq + ` IN (SELECT n.seq FROM task_nodes n WHERE n.workflow_id = ` + workflow + `)`
}

// The reads of one workflow's tasks (inWorkflow).
var (
	taskByNodeSQL     = `SELECT ` + taskColumns + ` FROM tasks WHERE seq = (SELECT n.seq FROM task_nodes n WHERE n.workflow_id = $1 AND n.node_id = $2)`
	workflowCountsSQL = `SELECT state, COUNT(*), COUNT(*) FILTER (WHERE state = 'claimed' AND lease_expires_at_ms <= $1)
		FROM tasks WHERE ` + inWorkflow("seq", "$2") + ` GROUP BY state`
	workflowEdgesSQL = `SELECT d.node_id, t.node_id FROM edges e JOIN tasks d ON d.seq = e.dep_seq
		JOIN tasks t ON t.seq = e.task_seq WHERE ` + inWorkflow("e.task_seq", "$1") + ` ORDER BY t.seq, d.seq`
)

// TaskByNode returns node nodeID of workflowID, or ErrNoRows.
func (r reads) TaskByNode(ctx context.Context, workflowID, nodeID string) (tgdriver.TaskRow, error) {
	return r.oneTask(ctx, "read task "+workflowID+"/"+nodeID,
		taskByNodeSQL, workflowID, nodeID)
}

// ListTasks returns tasks matching f in seq order.
func (r reads) ListTasks(ctx context.Context, f tgdriver.ListFilter) ([]tgdriver.TaskRow, error) {
	q, args := listTasksQuery(f)
	return r.tasks(ctx, "list tasks", q, args...)
}

// listTasksQuery is ListTasks' statement for f, and its arguments.
func listTasksQuery(f tgdriver.ListFilter) (string, []any) {
	cols := taskColumns
	if f.NoBodies {
		cols = taskColumnsNoBodies
	}
	q := `SELECT ` + cols + ` FROM tasks WHERE TRUE`
	var args []any
	if f.WorkflowID != "" {
		args = append(args, f.WorkflowID)
		q += ` AND ` + inWorkflow("seq", fmt.Sprintf(`$%d`, len(args)))
	}
	if f.State != "" {
		args = append(args, f.State)
		q += fmt.Sprintf(` AND state = $%d`, len(args))
	}
	q += ` ORDER BY seq`
	if f.Limit > 0 {
		args = append(args, f.Limit)
		q += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	return q, args
}

// CountByState counts tasks per state.
func (r reads) CountByState(ctx context.Context) (map[string]int, error) {
	rows, err := r.q.Query(ctx, `SELECT state, COUNT(*) FROM tasks GROUP BY state`)
	if err != nil {
		return nil, r.fail(ctx, "count tasks", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, r.fail(ctx, "count tasks", err)
		}
		out[st] = n
	}
	if err := rows.Err(); err != nil {
		return nil, r.fail(ctx, "count tasks", err)
	}
	return out, nil
}

// The sums of WorkflowUsage: of every task (usageSQL), of one workflow's
// (workflowUsageSQL, $1).
var (
	usageSQL = `SELECT COALESCE(SUM(usage_input_tokens + prior_input_tokens), 0)::bigint, COALESCE(SUM(usage_output_tokens + prior_output_tokens), 0)::bigint,
	COALESCE(SUM(usage_cost_usd + prior_cost_usd), 0)::float8 FROM tasks`
	workflowUsageSQL = usageSQL + ` WHERE ` + inWorkflow("seq", "$1")
)

// WorkflowUsage sums the usage of the tasks of workflowID ("" for all).
func (r reads) WorkflowUsage(ctx context.Context, workflowID string) (tgdriver.Usage, error) {
	q, args := usageSQL, []any{}
	if workflowID != "" {
		q, args = workflowUsageSQL, []any{workflowID}
	}
	var u tgdriver.Usage
	if err := r.q.QueryRow(ctx, q, args...).Scan(&u.InputTokens, &u.OutputTokens, &u.CostUSD); err != nil {
		return tgdriver.Usage{}, r.fail(ctx, "sum usage", err)
	}
	return u, nil
}

// WorkflowCounts counts the tasks of workflowID per state, and its stuck
// claims (claimed, lease expired at or before nowMS).
func (r reads) WorkflowCounts(ctx context.Context, workflowID string, nowMS int64) (map[string]int, int, error) {
	what := "count tasks of workflow " + workflowID
	rows, err := r.q.Query(ctx, workflowCountsSQL, nowMS, workflowID)
	if err != nil {
		return nil, 0, r.fail(ctx, what, err)
	}
	defer rows.Close()
	out := map[string]int{}
	stuck := 0
	for rows.Next() {
		var st string
		var n, late int
		if err := rows.Scan(&st, &n, &late); err != nil {
			return nil, 0, r.fail(ctx, what, err)
		}
		out[st] = n
		stuck += late
	}
	if err := rows.Err(); err != nil {
		return nil, 0, r.fail(ctx, what, err)
	}
	return out, stuck, nil
}

// NextLeaseExpiry returns the earliest lease expiry of a claimed task.
func (r reads) NextLeaseExpiry(ctx context.Context) (int64, bool, error) {
	var ms *int64
	if err := r.q.QueryRow(ctx, `SELECT MIN(lease_expires_at_ms) FROM tasks WHERE state = 'claimed'`).Scan(&ms); err != nil {
		return 0, false, r.fail(ctx, "read the next lease expiry", err)
	}
	if ms == nil {
		return 0, false, nil
	}
	return *ms, true, nil
}

// Dependencies returns the dependencies of task seq, in seq order.
func (r reads) Dependencies(ctx context.Context, seq int64) ([]tgdriver.DepRow, error) {
	rows, err := r.q.Query(ctx, `SELECT t.seq, t.task_id, t.node_id, t.state FROM edges e JOIN tasks t ON t.seq = e.dep_seq
		WHERE e.task_seq = $1 ORDER BY t.seq`, seq)
	if err != nil {
		return nil, r.fail(ctx, "read dependencies", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (tgdriver.DepRow, error) {
		var d tgdriver.DepRow
		err := row.Scan(&d.Seq, &d.TaskID, &d.NodeID, &d.State)
		return d, err
	})
	if err != nil {
		return nil, r.fail(ctx, "read dependencies", err)
	}
	return out, nil
}

// LastEventOfGeneration returns the newest event of taskID at generation.
func (r reads) LastEventOfGeneration(ctx context.Context, taskID string, generation int64) (string, int64, bool, error) {
	var kind string
	var at int64
	// A journaled event is newer than any linked one.
	err := r.q.QueryRow(ctx, sqlLastEventOfGen, taskID, generation).Scan(&kind, &at)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", 0, false, nil
	case err != nil:
		return "", 0, false, r.fail(ctx, "read the last event of "+taskID, err)
	}
	return kind, at, true, nil
}

// Workflow returns the chain head row of workflowID, or ErrNoRows.
func (r reads) Workflow(ctx context.Context, workflowID string) (tgdriver.WorkflowRow, error) {
	w, err := scanWorkflow(r.q.QueryRow(ctx, `SELECT `+workflowColumns+` FROM workflows WHERE workflow_id = $1`, workflowID))
	if err != nil {
		return tgdriver.WorkflowRow{}, r.fail(ctx, "read workflow "+workflowID, err)
	}
	return w, nil
}

// Workflows returns every workflow row in workflow_id order.
func (r reads) Workflows(ctx context.Context) ([]tgdriver.WorkflowRow, error) {
	rows, err := r.q.Query(ctx, `SELECT `+workflowColumns+` FROM workflows ORDER BY workflow_id COLLATE "C"`)
	if err != nil {
		return nil, r.fail(ctx, "read workflows", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (tgdriver.WorkflowRow, error) { return scanWorkflow(row) })
	if err != nil {
		return nil, r.fail(ctx, "read workflows", err)
	}
	return out, nil
}

// WorkflowEdges returns the edges among the tasks of workflowID by node id.
func (r reads) WorkflowEdges(ctx context.Context, workflowID string) ([]tgdriver.EdgeRow, error) {
	rows, err := r.q.Query(ctx, workflowEdgesSQL, workflowID)
	if err != nil {
		return nil, r.fail(ctx, "read the edges of "+workflowID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (tgdriver.EdgeRow, error) {
		var e tgdriver.EdgeRow
		err := row.Scan(&e.Dependency, &e.Task)
		return e, err
	})
	if err != nil {
		return nil, r.fail(ctx, "read the edges of "+workflowID, err)
	}
	return out, nil
}

// TaskEvents returns the events of taskID, oldest first.
func (r reads) TaskEvents(ctx context.Context, taskID string) ([]tgdriver.EventRow, error) {
	rows, err := r.q.Query(ctx, sqlTaskEvents, taskID)
	if err != nil {
		return nil, r.fail(ctx, "read the events of "+taskID, err)
	}
	out, err := collectEvents(rows)
	if err != nil {
		return nil, r.fail(ctx, "read the events of "+taskID, err)
	}
	return out, nil
}

// WorkflowEvents calls fn with each event of workflowID in chain order.
func (r reads) WorkflowEvents(ctx context.Context, workflowID string, fn func(tgdriver.EventRow) error) error {
	rows, err := r.q.Query(ctx, sqlWorkflowEvents, workflowID)
	if err != nil {
		return r.fail(ctx, "read the events of "+workflowID, err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return r.fail(ctx, "read the events of "+workflowID, err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return r.fail(ctx, "read the events of "+workflowID, err)
	}
	return nil
}

// JournaledWorkflows returns up to limit workflows with journaled events,
// oldest entry first.
func (r reads) JournaledWorkflows(ctx context.Context, limit int) ([]string, error) {
	rows, err := r.q.Query(ctx, `SELECT workflow_id FROM event_journal GROUP BY workflow_id ORDER BY MIN(journal_id) LIMIT $1`, limit)
	if err != nil {
		return nil, r.fail(ctx, "find journaled events", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, r.fail(ctx, "find journaled events", err)
	}
	return out, nil
}

// OrphanEventWorkflow names a workflow that has events but no workflow row.
func (r reads) OrphanEventWorkflow(ctx context.Context) (string, bool, error) {
	var id string
	err := r.q.QueryRow(ctx, `SELECT e.workflow_id FROM (SELECT workflow_id FROM events UNION ALL SELECT workflow_id FROM event_packs
		UNION ALL SELECT workflow_id FROM event_links UNION ALL SELECT workflow_id FROM event_journal) e
		LEFT JOIN workflows w ON w.workflow_id = e.workflow_id WHERE w.workflow_id IS NULL LIMIT 1`).Scan(&id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, r.fail(ctx, "look for orphan events", err)
	}
	return id, true, nil
}

// sqlUnheldEvent finds the lowest event body, in events or in a pack, that
// is neither linked in its own row (wseq), in a run of event_links, nor
// journaled. It reads every body and every run once, by hash anti-joins; a
// LIMIT instead of min() would lead the planner to a nested loop over the
// runs for each body.
const sqlUnheldEvent = `WITH b AS MATERIALIZED (SELECT e.event_id AS id, e.workflow_id FROM events e WHERE e.wseq IS NULL
		UNION ALL SELECT u.id, p.workflow_id FROM event_packs p CROSS JOIN LATERAL unnest(p.event_ids) AS u(id))
	SELECT workflow_id, id FROM b WHERE id = (SELECT min(b.id) FROM b
		WHERE NOT EXISTS (SELECT 1 FROM event_links r, unnest(r.event_ids) AS u(id) WHERE u.id = b.id)
			AND NOT EXISTS (SELECT 1 FROM event_journal j, unnest(j.event_ids) AS u(id) WHERE u.id = b.id))
	ORDER BY workflow_id COLLATE "C" LIMIT 1`

// UnheldEvent names the lowest event body no chain holds: not linked in
// its own row or in a run, nor journaled (one inserted behind the store's
// back, which a task's events would show unverified).
func (r reads) UnheldEvent(ctx context.Context) (string, int64, bool, error) {
	var wf string
	var id int64
	err := r.q.QueryRow(ctx, sqlUnheldEvent).Scan(&wf, &id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", 0, false, nil
	case err != nil:
		return "", 0, false, r.fail(ctx, "look for event bodies no chain holds", err)
	}
	return wf, id, true, nil
}

// PendingWorkflows returns the workflow of each of the first limit
// claimable tasks, in claim-next order (tasks_ready_by_priority).
func (r reads) PendingWorkflows(ctx context.Context, limit int) ([]string, error) {
	rows, err := r.q.Query(ctx, `SELECT workflow_id FROM tasks WHERE state = 'pending' AND due_at_ms = 0 AND NOT key_parked
		ORDER BY priority DESC, seq LIMIT $1`, limit)
	if err != nil {
		return nil, r.fail(ctx, "read pending tasks", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, r.fail(ctx, "read pending tasks", err)
	}
	return out, nil
}

// requiresAmongCaps: every tag of the task's requires (canonical, joined by
// one space) is among the capabilities bound as a text array.
func requiresAmongCaps(param string) string {
	return `(requires = '' OR string_to_array(requires, ' ') <@ ` + param + `::text[])`
}

// CountClaimable counts, up to limit, the claimable tasks a claim-next of
// workflowID ("" for any) with caps could take.
func (r reads) CountClaimable(ctx context.Context, workflowID string, caps []string, limit int) (int, error) {
	req, args := `requires = ''`, []any{workflowID, limit}
	if len(caps) > 0 {
		req, args = requiresAmongCaps("$3"), append(args, caps)
	}
	var n int
	if err := r.q.QueryRow(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM tasks WHERE state = 'pending' AND due_at_ms = 0 AND NOT key_parked
		AND ($1::text = '' OR workflow_id = $1::text) AND `+req+` AND `+notPaused+` AND `+keyOpen+` LIMIT $2) p`, args...).Scan(&n); err != nil {
		return 0, r.fail(ctx, "count claimable tasks", err)
	}
	return n, nil
}

// Pauses returns the pauses in effect: all claiming's first, then
// workflowID's, or up to limit workflows' when workflowID is "".
func (r reads) Pauses(ctx context.Context, workflowID string, limit int) ([]tgdriver.PauseRow, error) {
	q, args := `SELECT workflow_id, paused_at_ms, reason, paused_by FROM claim_pauses WHERE workflow_id IN ('', $1)
		ORDER BY workflow_id COLLATE "C"`, []any{workflowID}
	if workflowID == "" {
		q, args = `SELECT workflow_id, paused_at_ms, reason, paused_by FROM claim_pauses ORDER BY workflow_id COLLATE "C" LIMIT $1`, []any{limit + 1}
	}
	rows, err := r.q.Query(ctx, q, args...)
	if err != nil {
		return nil, r.fail(ctx, "read the pauses", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (tgdriver.PauseRow, error) {
		var p tgdriver.PauseRow
		err := row.Scan(&p.WorkflowID, &p.AtMS, &p.Reason, &p.By)
		return p, err
	})
	if err != nil {
		return nil, r.fail(ctx, "read the pauses", err)
	}
	if workflowID == "" && len(out) > 0 && out[0].WorkflowID != "" && len(out) > limit {
		out = out[:limit] // no pause of all: limit workflows only
	}
	return out, nil
}

// NextGateDue returns the earliest decision time of a gate awaiting
// approval with a timeout (index tasks_gate_due).
func (r reads) NextGateDue(ctx context.Context) (int64, bool, error) {
	var ms *int64
	if err := r.q.QueryRow(ctx, `SELECT MIN(due_at_ms) FROM tasks WHERE kind = 'gate' AND state = 'blocked' AND due_at_ms > 0`).Scan(&ms); err != nil {
		return 0, false, r.fail(ctx, "read the next gate decision time", err)
	}
	if ms == nil {
		return 0, false, nil
	}
	return *ms, true, nil
}

// NextDue returns the earliest due time of a pending task not yet promoted.
func (r reads) NextDue(ctx context.Context) (int64, bool, error) {
	var ms *int64
	if err := r.q.QueryRow(ctx, `SELECT MIN(due_at_ms) FROM tasks WHERE state = 'pending' AND due_at_ms > 0`).Scan(&ms); err != nil {
		return 0, false, r.fail(ctx, "read the next due time", err)
	}
	if ms == nil {
		return 0, false, nil
	}
	return *ms, true, nil
}

const keyColumns = `key, max_claimed, claimed, rate_count, rate_interval_ms, recent_ms, rate_open_at_ms, updated_at_ms, updated_by`

// scanKey reads a key's columns (keyColumns), then into more the columns
// that follow them.
func scanKey(row pgx.Row, more ...any) (tgdriver.KeyRow, error) {
	var k tgdriver.KeyRow
	err := row.Scan(append([]any{&k.Key, &k.MaxClaimed, &k.Claimed, &k.RateCount, &k.RateIntervalMS, &k.RecentMS, &k.RateOpenAtMS,
		&k.UpdatedAtMS, &k.UpdatedBy}, more...)...)
	return k, err
}

// Key returns concurrency key key.
func (r reads) Key(ctx context.Context, key string) (tgdriver.KeyRow, bool, error) {
	k, err := scanKey(r.q.QueryRow(ctx, `SELECT `+keyColumns+` FROM concurrency_keys WHERE key = $1`, key))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return tgdriver.KeyRow{}, false, nil
	case err != nil:
		return tgdriver.KeyRow{}, false, r.fail(ctx, "read a concurrency key", err)
	}
	return k, true, nil
}

// Keys returns up to limit concurrency keys after after, in key order.
func (r reads) Keys(ctx context.Context, after string, limit int) ([]tgdriver.KeyRow, error) {
	rows, err := r.q.Query(ctx, `SELECT `+keyColumns+` FROM concurrency_keys WHERE key > $1 COLLATE "C" ORDER BY key COLLATE "C" LIMIT $2`, after, limit)
	if err != nil {
		return nil, r.fail(ctx, "read the concurrency keys", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (tgdriver.KeyRow, error) { return scanKey(row) })
	if err != nil {
		return nil, r.fail(ctx, "read the concurrency keys", err)
	}
	return out, nil
}

// RateHeldKeys returns up to limit keys whose rate holds claims back at
// nowMS and that are not full, in the order their rates open, each with
// whether it has a claimable task of workflowID whose requires are among
// caps.
func (r reads) RateHeldKeys(ctx context.Context, workflowID string, caps []string, nowMS int64, limit int) ([]tgdriver.RateHeldKey, error) {
	req, args := `requires = ''`, []any{workflowID, nowMS, limit}
	if len(caps) > 0 {
		req, args = requiresAmongCaps("$4"), append(args, caps)
	}
	rows, err := r.q.Query(ctx, `SELECT k.key, k.rate_open_at_ms, EXISTS (SELECT 1 FROM tasks
			WHERE concurrency_key = k.key AND concurrency_key <> '' AND state = 'pending' AND due_at_ms = 0
			AND ($1::text = '' OR workflow_id = $1::text) AND `+notPaused+` AND `+req+`)
		FROM concurrency_keys AS k
		WHERE k.rate_open_at_ms > 0 AND k.rate_open_at_ms > $2::bigint AND NOT (k.max_claimed > 0 AND k.claimed >= k.max_claimed)
		ORDER BY k.rate_open_at_ms, k.key COLLATE "C" LIMIT $3`, args...)
	if err != nil {
		return nil, r.fail(ctx, "read the rate-limited concurrency keys", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (tgdriver.RateHeldKey, error) {
		var k tgdriver.RateHeldKey
		err := row.Scan(&k.Key, &k.OpenAtMS, &k.Claimable)
		return k, err
	})
	if err != nil {
		return nil, r.fail(ctx, "read the rate-limited concurrency keys", err)
	}
	return out, nil
}

// keyHeadOf is the condition and order that make a task of tasks the
// first claimable one of concurrency key $1 (KeyHead); keyHeadAt is the
// same of the key that expression key names (FreeKeys).
var keyHeadOf = keyHeadAt("$1")

func keyHeadAt(key string) string {
	return `concurrency_key = ` + key + ` AND concurrency_key <> '' AND state = 'pending' AND due_at_ms = 0 AND ` + notPaused + `
	ORDER BY priority DESC, seq LIMIT 1`
}

// KeyHead returns the first claimable task of concurrency key key.
func (r reads) KeyHead(ctx context.Context, key string) (tgdriver.TaskRow, bool, error) {
	t, err := scanTask(r.q.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks WHERE `+keyHeadOf, key))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return tgdriver.TaskRow{}, false, nil
	case err != nil:
		return tgdriver.TaskRow{}, false, r.fail(ctx, "read the first ready task of a concurrency key", err)
	}
	return t, true, nil
}
