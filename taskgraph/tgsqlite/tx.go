package tgsqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// wtx is the tgdriver.Tx of the writer: every statement runs on the
// writer's connection, inside the batch transaction, through stmtCache.
// There is one wtx per writer goroutine, reused by every operation. Its
// statements ignore the caller's ctx (see the package doc): an operation the
// writer reached runs to its end, and no statement starts a goroutine to
// watch a context.
type wtx struct {
	reads
	d     *Driver
	stmts *stmtCache
}

var _ tgdriver.Tx = (*wtx)(nil)

// bg is the context of every statement of the writer.
var bg = context.Background()

const (
	sqlWorkflowExists   = `SELECT 1 FROM workflows WHERE workflow_id = ?`
	sqlWorkflowCount    = `SELECT task_count FROM workflows WHERE workflow_id = ?`
	sqlInsertWorkflow   = `INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms) VALUES (?, ?, ?)`
	sqlAddWorkflowTasks = `UPDATE workflows SET task_count = task_count + ? WHERE workflow_id = ?`
	sqlInsertTask       = `INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, owner, generation,
		token_hash, lease_expires_at_ms, lease_ms, attempts, max_attempts, unmet, result, error, status_message,
		cancel_cause, created_at_ms, updated_at_ms, created_by, priority, requires, due_at_ms, retry_delay_ms,
		concurrency_key, kind, gate_timeout_ms, gate_on_timeout)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlInsertEdge           = `INSERT INTO edges (dep_seq, task_seq) VALUES (?, ?)`
	sqlCountDependent       = `UPDATE tasks SET dependents = dependents + 1 WHERE seq = ?`
	sqlUnfinishedDependents = `SELECT t.seq FROM edges e JOIN tasks t ON t.seq = e.task_seq
		WHERE e.dep_seq = CAST(? AS INTEGER) AND t.state IN ('blocked', 'pending', 'claimed') ORDER BY t.seq`
	sqlCancelledBy          = `SELECT seq FROM tasks WHERE cancel_cause = CAST(? AS INTEGER) AND state = 'cancelled' ORDER BY seq`
	sqlUnfinishedInWorkflow = `SELECT seq FROM tasks WHERE workflow_id = CAST(? AS TEXT) AND state IN ('blocked', 'pending', 'claimed') ORDER BY seq`
	sqlHasDependents        = `SELECT 1 FROM edges WHERE dep_seq = ? LIMIT 1`
	sqlDecrementUnmet       = `UPDATE tasks SET unmet = unmet - 1 WHERE seq IN (SELECT task_seq FROM edges WHERE dep_seq = ?)
		AND state IN ('blocked', 'pending', 'claimed') RETURNING ` + taskColumns
	sqlShiftLeases = `UPDATE tasks SET lease_expires_at_ms = MIN(lease_expires_at_ms + ?, ? + COALESCE(lease_ms, ?))
		WHERE state = 'claimed' AND lease_expires_at_ms IS NOT NULL RETURNING seq, workflow_id, lease_expires_at_ms`
	sqlChainHead = `SELECT head_hash, event_count FROM workflows WHERE workflow_id = ?`
	// An event takes its task's seq (events_by_task_seq, migration 0020):
	// the writer's (?17, tgdriver.EventRow.TaskSeq) when it holds the
	// task's row, else read by task_id (COALESCE runs the subquery only
	// then), or 0 when no task has its task_id (none the domain writes;
	// the readers look there for such a task's events).
	sqlInsertEvent = `INSERT INTO events (workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash,
		hash_version, actor_kind, actor_name, actor_principal, task_state, content, task_seq)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
		COALESCE(NULLIF(?17, 0), (SELECT seq FROM tasks WHERE task_id = ?3), 0))`
	sqlAdvanceHead = `UPDATE workflows SET head_hash = ?, event_count = ?, updated_at_ms = MAX(updated_at_ms, ?)
		WHERE workflow_id = ? AND head_hash = ? AND event_count = ?`
	sqlJournalEvent = `INSERT INTO event_journal (workflow_id, task_id, kind, owner, generation, at_ms, detail,
		hash_version, actor_kind, actor_name, actor_principal, task_state, content)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlJournaled = `SELECT ` + journalColumns + ` FROM event_journal WHERE workflow_id IN (SELECT value FROM json_each(?))
		ORDER BY journal_id LIMIT CAST(? AS INTEGER)`
	sqlUnjournal       = `DELETE FROM event_journal WHERE journal_id = ? AND workflow_id = ?`
	sqlPruneCandidates = `SELECT w.workflow_id FROM workflows w
		WHERE w.updated_at_ms < ? AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.workflow_id = w.workflow_id
		AND t.state IN ('blocked', 'pending', 'claimed')) ORDER BY w.updated_at_ms LIMIT CAST(? AS INTEGER)`
	// The guard of a prune is in the DELETE itself: the workflow goes only if
	// it is still unchanged since before the cutoff and every task of it is
	// finished. Its tasks go with it (ON DELETE CASCADE), their edges with
	// them.
	sqlPruneWorkflow = `DELETE FROM workflows WHERE workflow_id = ? AND updated_at_ms < ?
		AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.workflow_id = ? AND t.state IN ('blocked', 'pending', 'claimed'))
		AND NOT EXISTS (SELECT 1 FROM event_journal j WHERE j.workflow_id = ?)
		RETURNING task_count, event_count, head_hash`
	sqlPruneEvents  = `DELETE FROM events WHERE workflow_id = ?`
	sqlPrunedInsert = `INSERT INTO pruned_workflows (workflow_id, pruned_at_ms, task_count, event_count, head_hash) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`
	sqlReadAlive  = `SELECT alive_at_ms FROM server_clock WHERE singleton = 1`
	sqlTouchAlive = `INSERT INTO server_clock (singleton, alive_at_ms) VALUES (1, ?)
		ON CONFLICT (singleton) DO UPDATE SET alive_at_ms = excluded.alive_at_ms`
	// sqlTryTouchAlive is sqlTouchAlive that moves a recorded time only
	// forward, by less than its second parameter (TryTouchAlive).
	sqlTryTouchAlive = `INSERT INTO server_clock (singleton, alive_at_ms) VALUES (1, ?1)
		ON CONFLICT (singleton) DO UPDATE SET alive_at_ms = excluded.alive_at_ms
		WHERE alive_at_ms < excluded.alive_at_ms AND excluded.alive_at_ms - alive_at_ms < ?2`
)

// LockWorkflow reports whether workflowID exists. The single writer
// serialises every write transaction, so there is nothing to lock.
func (t *wtx) LockWorkflow(_ context.Context, workflowID string) (bool, error) {
	var one int
	switch err := t.queryRow(bg, sqlWorkflowExists, workflowID).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read workflow %s: %w", workflowID, err)
	}
	return true, nil
}

// EnsureWorkflow creates workflowID if missing and returns its task count.
func (t *wtx) EnsureWorkflow(_ context.Context, workflowID string, nowMS int64) (int, error) {
	var n int
	switch err := t.queryRow(bg, sqlWorkflowCount, workflowID).Scan(&n); {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := t.exec(sqlInsertWorkflow, workflowID, nowMS, nowMS); err != nil {
			return 0, fmt.Errorf("create workflow %s: %w", workflowID, err)
		}
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read workflow %s: %w", workflowID, err)
	}
	return n, nil
}

// AddWorkflowTasks adds n to the task count of workflowID.
func (t *wtx) AddWorkflowTasks(_ context.Context, workflowID string, n int) error {
	if _, err := t.exec(sqlAddWorkflowTasks, n, workflowID); err != nil {
		return fmt.Errorf("count the tasks of workflow %s: %w", workflowID, err)
	}
	return nil
}

// LockDependencies returns the nodes nodeIDs of workflowID that exist:
// the single writer keeps them from changing until the transaction ends.
func (t *wtx) LockDependencies(ctx context.Context, workflowID string, nodeIDs []string) ([]tgdriver.TaskRow, error) {
	return t.TasksByNodes(ctx, workflowID, nodeIDs)
}

// TasksByNodes returns the nodes nodeIDs of workflowID that exist, each
// once: a lookup each (sqlite_autoindex of (workflow_id, node_id)), in
// process.
func (t *wtx) TasksByNodes(ctx context.Context, workflowID string, nodeIDs []string) ([]tgdriver.TaskRow, error) {
	var out []tgdriver.TaskRow
	seen := make(map[string]bool, len(nodeIDs))
	for _, n := range nodeIDs {
		if seen[n] {
			continue
		}
		seen[n] = true
		r, err := t.TaskByNode(ctx, workflowID, n)
		if errors.Is(err, tgdriver.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// LockParkedOfKey does nothing: the single writer waits for no row (its
// triggers park and unpark tasks as PostgreSQL's do, migration 0018).
func (t *wtx) LockParkedOfKey(context.Context, string) error { return nil }

// nullString, nullInt and nullBytes map the zero value to NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullInt(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// InsertTasks inserts rs in order, a prepared statement each, and
// returns their seqs.
func (t *wtx) InsertTasks(_ context.Context, rs []tgdriver.TaskRow) ([]int64, error) {
	seqs := make([]int64, len(rs))
	for i, r := range rs {
		var result any
		if r.HasResult || r.Result != "" {
			result = r.Result
		}
		res, err := t.exec(sqlInsertTask, r.TaskID, r.WorkflowID, r.NodeID, r.Payload, r.DependsOn, r.State,
			nullString(r.Owner), r.Generation, nullBytes(r.TokenHash), nullInt(r.LeaseExpiresAtMS), nullInt(r.LeaseMS),
			r.Attempts, r.MaxAttempts, r.Unmet, result, nullString(r.Error), r.StatusMessage, nullInt(r.CancelCause),
			r.CreatedAtMS, r.UpdatedAtMS, nullString(r.CreatedBy), r.Priority, r.Requires, r.DueAtMS, r.RetryDelayMS,
			r.ConcurrencyKey, tgdriver.KindOf(r.Kind), r.GateTimeoutMS, r.GateOnTimeout)
		if err != nil {
			return nil, fmt.Errorf("insert task %s/%s: %w", r.WorkflowID, r.NodeID, err)
		}
		if seqs[i], err = res.LastInsertId(); err != nil {
			return nil, fmt.Errorf("insert task %s/%s: %w", r.WorkflowID, r.NodeID, err)
		}
	}
	return seqs, nil
}

// InsertEdges records each edge and counts it in its dependency's
// dependents.
func (t *wtx) InsertEdges(_ context.Context, edges []tgdriver.Edge) error {
	for _, e := range edges {
		if _, err := t.exec(sqlInsertEdge, e.Dep, e.Task); err != nil {
			return fmt.Errorf("insert edge: %w", err)
		}
		if _, err := t.exec(sqlCountDependent, e.Dep); err != nil {
			return fmt.Errorf("count the dependent of task %d: %w", e.Dep, err)
		}
	}
	return nil
}

// NextPending returns the first claimable task by (priority DESC, seq), of
// workflowID when it is not empty, whose requires are among caps.
func (t *wtx) NextPending(_ context.Context, workflowID string, caps []string) (tgdriver.TaskRow, bool, error) {
	r, err := scanTask(t.queryRow(bg, claimableQuery(workflowID, caps, false), claimableArgs(workflowID, caps)...))
	switch {
	case errors.Is(err, tgdriver.ErrNoRows):
		return tgdriver.TaskRow{}, false, nil
	case err != nil:
		return tgdriver.TaskRow{}, false, fmt.Errorf("find a pending task: %w", err)
	}
	return r, true, nil
}

// ExpiredLeases returns up to limit claimed tasks whose lease had lapsed at
// atMS, earliest expiry first.
func (t *wtx) ExpiredLeases(_ context.Context, atMS int64, limit int) ([]tgdriver.TaskRef, error) {
	rows, err := t.query(bg, sqlExpiredLeases, atMS, limit)
	if err != nil {
		return nil, fmt.Errorf("find expired leases: %w", err)
	}
	return collectRefs(rows)
}

func collectRefs(rows *sql.Rows) ([]tgdriver.TaskRef, error) {
	defer rows.Close()
	var out []tgdriver.TaskRef
	for rows.Next() {
		var r tgdriver.TaskRef
		if err := rows.Scan(&r.Seq, &r.WorkflowID, &r.ExpiresAtMS); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// UnfinishedDependents returns the blocked, pending or claimed dependents
// of seq in seq order.
func (t *wtx) UnfinishedDependents(_ context.Context, seq int64) ([]int64, error) {
	out, err := t.seqs(sqlUnfinishedDependents, seq)
	if err != nil {
		return nil, fmt.Errorf("find dependents: %w", err)
	}
	return out, nil
}

// CancelledBy returns the cancelled tasks whose cancel cause is causeSeq.
func (t *wtx) CancelledBy(_ context.Context, causeSeq int64) ([]int64, error) {
	out, err := t.seqs(sqlCancelledBy, causeSeq)
	if err != nil {
		return nil, fmt.Errorf("find tasks cancelled by task %d: %w", causeSeq, err)
	}
	return out, nil
}

// UnfinishedInWorkflow returns the blocked, pending and claimed tasks of
// workflowID in seq order.
func (t *wtx) UnfinishedInWorkflow(_ context.Context, workflowID string) ([]int64, error) {
	out, err := t.seqs(sqlUnfinishedInWorkflow, workflowID)
	if err != nil {
		return nil, fmt.Errorf("find the unfinished tasks of workflow %s: %w", workflowID, err)
	}
	return out, nil
}

// DecrementUnmet lowers the unmet counts of the dependents of each of
// depSeqs in turn (the single writer: nothing waits between), then reads
// each dependent whole, and, for one still blocked, the dependencies it
// waits for.
func (t *wtx) DecrementUnmet(ctx context.Context, depSeqs []int64) ([]tgdriver.Dependent, error) {
	by := map[int64][]int64{}
	last := map[int64]tgdriver.TaskRow{} // each dependent as its last decrement left it
	var seqs []int64
	for _, depSeq := range slices.Sorted(slices.Values(depSeqs)) {
		// Most completions have no dependents: a cheap probe of the edge
		// index spares them the UPDATE, whose IN list needs a temporary
		// table.
		var one int
		switch err := t.queryRow(bg, sqlHasDependents, depSeq).Scan(&one); {
		case errors.Is(err, sql.ErrNoRows):
			continue
		case err != nil:
			return nil, fmt.Errorf("find dependents: %w", err)
		}
		rows, err := t.query(bg, sqlDecrementUnmet, depSeq)
		if err != nil {
			return nil, fmt.Errorf("update dependents: %w", err)
		}
		for rows.Next() {
			r, err := scanTask(rows)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("update dependents: %w", err)
			}
			if by[r.Seq] == nil {
				seqs = append(seqs, r.Seq)
			}
			by[r.Seq] = append(by[r.Seq], depSeq)
			last[r.Seq] = r
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("update dependents: %w", err)
		}
	}
	out := make([]tgdriver.Dependent, 0, len(seqs))
	for _, seq := range seqs {
		// No trigger fires on an update of unmet alone, so what the UPDATE
		// returned is the row.
		r := last[seq]
		d := tgdriver.Dependent{Row: r, By: by[seq]}
		if r.State == "blocked" && r.Unmet > 0 {
			deps, err := t.Dependencies(ctx, seq)
			if err != nil {
				return nil, fmt.Errorf("read the dependencies of %d: %w", seq, err)
			}
			for _, x := range deps {
				if x.State != "completed" {
					d.Waiting = append(d.Waiting, x.NodeID)
				}
			}
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b tgdriver.Dependent) int { return strings.Compare(a.Row.TaskID, b.Row.TaskID) })
	return out, nil
}

// ShiftLeases moves every live lease by shiftMS, to at most nowMS + its own
// duration (defaultLeaseMS when unknown).
func (t *wtx) ShiftLeases(_ context.Context, shiftMS, nowMS, defaultLeaseMS int64) ([]tgdriver.TaskRef, error) {
	rows, err := t.query(bg, sqlShiftLeases, shiftMS, nowMS, defaultLeaseMS)
	if err != nil {
		return nil, fmt.Errorf("shift live leases by %d ms: %w", shiftMS, err)
	}
	return collectRefs(rows)
}

// JournalEvents records evs, not linked, in the journal in order.
func (t *wtx) JournalEvents(_ context.Context, evs []tgdriver.EventRow) error {
	for i := range evs {
		e := &evs[i]
		if _, err := t.exec(sqlJournalEvent, e.WorkflowID, e.TaskID, e.Kind, e.Owner, e.Generation, e.AtMS, e.Detail,
			hashVersion(*e), e.ActorKind, e.ActorName, e.ActorPrincipal, e.TaskState, e.Content); err != nil {
			return fmt.Errorf("journal event: %w", err)
		}
	}
	return nil
}

// LockChains returns the rows of the workflows of workflowIDs that exist,
// in workflow id order. The single writer serialises every write
// transaction, so there is nothing to lock.
func (t *wtx) LockChains(ctx context.Context, workflowIDs []string) ([]tgdriver.WorkflowRow, error) {
	ids := slices.Clone(workflowIDs)
	slices.Sort(ids)
	var out []tgdriver.WorkflowRow
	for _, id := range slices.Compact(ids) {
		w, err := scanWorkflow(t.queryRow(bg, sqlWorkflow, id))
		switch {
		case errors.Is(err, tgdriver.ErrNoRows):
			continue
		case err != nil:
			return nil, fmt.Errorf("read workflow %s: %w", id, err)
		}
		out = append(out, w)
	}
	return out, nil
}

// JournaledEvents returns the first limit journaled events of the
// workflows of workflowIDs, in journal order.
func (t *wtx) JournaledEvents(_ context.Context, workflowIDs []string, limit int) ([]tgdriver.EventRow, error) {
	ids, _ := json.Marshal(workflowIDs)
	rows, err := t.query(bg, sqlJournaled, string(ids), limit)
	if err != nil {
		return nil, fmt.Errorf("read journaled events: %w", err)
	}
	defer rows.Close()
	var out []tgdriver.EventRow
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// LinkJournaled appends evs, linked, and removes their journal entries.
func (t *wtx) LinkJournaled(_ context.Context, evs []tgdriver.EventRow) error {
	for i := range evs {
		res, err := t.exec(sqlUnjournal, evs[i].EventID, evs[i].WorkflowID)
		if err != nil {
			return fmt.Errorf("remove journal entry %d: %w", evs[i].EventID, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("journal entry %d of workflow %s: %w", evs[i].EventID, evs[i].WorkflowID, tgdriver.ErrNoRows)
		}
	}
	return t.appendEvents(evs)
}

// NotifyReady does nothing: the driver's own waiters are woken by the
// domain, and other processes see the commit through PRAGMA data_version.
func (t *wtx) NotifyReady(context.Context, string, string) error { return nil }

// DueTasks returns up to limit pending tasks whose due time had come at
// atMS, earliest first.
func (t *wtx) DueTasks(_ context.Context, atMS int64, limit int) ([]tgdriver.TaskRef, error) {
	return t.dueRefs("due tasks", sqlDueTasks, atMS, limit)
}

// DueGates returns up to limit gates awaiting approval whose decision
// time had come at atMS, earliest first.
func (t *wtx) DueGates(_ context.Context, atMS int64, limit int) ([]tgdriver.TaskRef, error) {
	return t.dueRefs("due gates", sqlDueGates, atMS, limit)
}

// dueRefs runs q, a scan of what is due at atMS (sqlDueTasks,
// sqlDueGates), and returns the seq and workflow of each row.
func (t *wtx) dueRefs(what, q string, atMS int64, limit int) ([]tgdriver.TaskRef, error) {
	rows, err := t.query(bg, q, atMS, limit)
	if err != nil {
		return nil, fmt.Errorf("find %s: %w", what, err)
	}
	defer rows.Close()
	var out []tgdriver.TaskRef
	for rows.Next() {
		var r tgdriver.TaskRef
		if err := rows.Scan(&r.Seq, &r.WorkflowID); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// PruneCandidates returns up to limit finished workflows last changed
// before beforeMS, oldest first.
func (t *wtx) PruneCandidates(_ context.Context, beforeMS int64, limit int) ([]string, error) {
	rows, err := t.query(bg, sqlPruneCandidates, beforeMS, limit)
	if err != nil {
		return nil, fmt.Errorf("find workflows to prune: %w", err)
	}
	return scanColumn[string](rows)
}

// PruneWorkflow removes workflowID with its tasks, edges and events if it is
// still finished and unchanged since before beforeMS, recording its final
// chain head in pruned_workflows.
func (t *wtx) PruneWorkflow(_ context.Context, workflowID string, beforeMS, nowMS int64) (tgdriver.PrunedRow, bool, error) {
	var p tgdriver.PrunedRow
	// The DELETE of the workflow row is the guard; its tasks and their
	// edges go with it (ON DELETE CASCADE). Events reference no row and are
	// deleted by workflow.
	err := t.queryRow(bg, sqlPruneWorkflow, workflowID, beforeMS, workflowID, workflowID).Scan(&p.Tasks, &p.Events, &p.HeadHash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return tgdriver.PrunedRow{}, false, nil
	case err != nil:
		return tgdriver.PrunedRow{}, false, fmt.Errorf("prune workflow %s: %w", workflowID, err)
	}
	if _, err := t.exec(`DELETE FROM claim_pauses WHERE workflow_id = ?`, workflowID); err != nil {
		return tgdriver.PrunedRow{}, false, fmt.Errorf("prune the pause of workflow %s: %w", workflowID, err)
	}
	if _, err := t.exec(sqlPruneEvents, workflowID); err != nil {
		return tgdriver.PrunedRow{}, false, fmt.Errorf("prune the events of workflow %s: %w", workflowID, err)
	}
	if _, err := t.exec(sqlPrunedInsert, workflowID, nowMS, p.Tasks, p.Events, p.HeadHash); err != nil {
		return tgdriver.PrunedRow{}, false, fmt.Errorf("record the pruning of workflow %s: %w", workflowID, err)
	}
	return p, true, nil
}

// ReadAlive returns the servers' recorded alive time.
func (t *wtx) ReadAlive(context.Context) (int64, bool, error) {
	var ms int64
	switch err := t.queryRow(bg, sqlReadAlive).Scan(&ms); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("read the server's alive time: %w", err)
	}
	return ms, true, nil
}

// TouchAlive records ms as the servers' alive time.
func (t *wtx) TouchAlive(_ context.Context, ms int64) error {
	if _, err := t.exec(sqlTouchAlive, ms); err != nil {
		return fmt.Errorf("record the server's alive time: %w", err)
	}
	return nil
}

// TryTouchAlive is TouchAlive, over a recorded time only forward and by
// less than withinMS: the one writer never waits for another transaction
// of this process, and another process's write lock is already held by
// this batch.
func (t *wtx) TryTouchAlive(_ context.Context, ms, withinMS int64) (bool, error) {
	res, err := t.exec(sqlTryTouchAlive, ms, withinMS)
	if err != nil {
		return false, fmt.Errorf("record the server's alive time: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("record the server's alive time: %w", err)
	}
	return n == 1, nil
}

// Requests reads the requests kept under keys, a lookup each (in
// process).
func (t *wtx) Requests(_ context.Context, keys []string) (map[string]tgdriver.RequestRow, error) {
	out := map[string]tgdriver.RequestRow{}
	for _, key := range keys {
		r := tgdriver.RequestRow{Key: key}
		err := t.queryRow(bg, `SELECT principal, op, args, answer, created_at_ms FROM requests WHERE request_key = ?`, key).
			Scan(&r.Principal, &r.Op, &r.Args, &r.Answer, &r.CreatedAtMS)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			continue
		case err != nil:
			return nil, fmt.Errorf("read a kept request: %w", err)
		}
		out[key] = r
	}
	return out, nil
}

// KeepRequest inserts r.
func (t *wtx) KeepRequest(_ context.Context, r tgdriver.RequestRow) error {
	if _, err := t.exec(`INSERT INTO requests (request_key, principal, op, args, answer, created_at_ms) VALUES (?, ?, ?, ?, ?, ?)`,
		r.Key, r.Principal, r.Op, r.Args, r.Answer, r.CreatedAtMS); err != nil {
		return fmt.Errorf("keep the request's answer: %w", err)
	}
	return nil
}

// PruneRequests removes up to limit requests kept before beforeMS.
func (t *wtx) PruneRequests(_ context.Context, beforeMS int64, limit int) (int, error) {
	res, err := t.exec(`DELETE FROM requests WHERE request_key IN
		(SELECT request_key FROM requests WHERE created_at_ms < ? ORDER BY created_at_ms LIMIT CAST(? AS INTEGER))`, beforeMS, limit)
	if err != nil {
		return 0, fmt.Errorf("remove expired requests: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// RequestPrincipals returns the principals keeping more than keep requests.
func (t *wtx) RequestPrincipals(_ context.Context, keep int) (map[string]int, error) {
	rows, err := t.query(bg, `SELECT principal, COUNT(*) FROM requests GROUP BY principal HAVING COUNT(*) > ?`, keep)
	if err != nil {
		return nil, fmt.Errorf("count kept requests: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var p string
		var n int
		if err := rows.Scan(&p, &n); err != nil {
			return nil, fmt.Errorf("count kept requests: %w", err)
		}
		out[p] = n
	}
	return out, rows.Err()
}

// TrimRequests removes up to limit of principal's requests beyond its keep
// newest, oldest first.
func (t *wtx) TrimRequests(_ context.Context, principal string, keep, limit int) (int, error) {
	res, err := t.exec(`DELETE FROM requests WHERE request_key IN
		(SELECT request_key FROM requests WHERE principal = CAST(? AS TEXT) AND request_key NOT IN
			(SELECT request_key FROM requests WHERE principal = CAST(? AS TEXT) ORDER BY created_at_ms DESC, request_key DESC LIMIT CAST(? AS INTEGER))
		ORDER BY created_at_ms, request_key LIMIT CAST(? AS INTEGER))`, principal, principal, keep, limit)
	if err != nil {
		return 0, fmt.Errorf("trim the kept requests of %q: %w", principal, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// SetPause records p, replacing the pause of its scope. The single writer
// serialises it with every claim: a claim after it sees it.
func (t *wtx) SetPause(_ context.Context, p tgdriver.PauseRow) (bool, error) {
	var one int
	replaced := true
	switch err := t.queryRow(bg, `SELECT 1 FROM claim_pauses WHERE workflow_id = ?`, p.WorkflowID).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		replaced = false
	case err != nil:
		return false, fmt.Errorf("read the pause: %w", err)
	}
	if _, err := t.exec(`INSERT INTO claim_pauses (workflow_id, paused_at_ms, reason, paused_by) VALUES (?, ?, ?, ?)
		ON CONFLICT (workflow_id) DO UPDATE SET paused_at_ms = excluded.paused_at_ms, reason = excluded.reason, paused_by = excluded.paused_by`,
		p.WorkflowID, p.AtMS, p.Reason, p.By); err != nil {
		return false, fmt.Errorf("record the pause: %w", err)
	}
	return replaced, nil
}

// ClearPause removes the pause of workflowID ("" for all claiming).
func (t *wtx) ClearPause(_ context.Context, workflowID string) (tgdriver.PauseRow, bool, error) {
	p := tgdriver.PauseRow{WorkflowID: workflowID}
	err := t.queryRow(bg, `DELETE FROM claim_pauses WHERE workflow_id = ? RETURNING paused_at_ms, reason, paused_by`, workflowID).
		Scan(&p.AtMS, &p.Reason, &p.By)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return tgdriver.PauseRow{}, false, nil
	case err != nil:
		return tgdriver.PauseRow{}, false, fmt.Errorf("remove the pause: %w", err)
	}
	return p, true, nil
}

// EnsureKey creates concurrency key key, without limits, if it is new.
func (t *wtx) EnsureKey(_ context.Context, key string, nowMS int64) error {
	if _, err := t.exec(`INSERT INTO concurrency_keys (key, updated_at_ms) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`, key, nowMS); err != nil {
		return fmt.Errorf("create concurrency key %q: %w", key, err)
	}
	return nil
}

// FreeKeys implements tgdriver.Tx.FreeKeys, a key at a time (freeKey).
// SQLite's statements are calls, not round trips.
func (t *wtx) FreeKeys(ctx context.Context, keys []string) ([]tgdriver.TaskRow, error) {
	var heads []tgdriver.TaskRow
	for _, key := range keys {
		h, ok, err := t.freeKey(ctx, key)
		if err != nil {
			return nil, err
		}
		if ok {
			heads = append(heads, h)
		}
	}
	return heads, nil
}

// freeKey is FreeKeys of one key: the key's row (a primary key read),
// then KeyHead for a capped key or the guarded delete for an idle one.
func (t *wtx) freeKey(ctx context.Context, key string) (tgdriver.TaskRow, bool, error) {
	var maxClaimed, claimed, rate int
	switch err := t.queryRow(bg, `SELECT max_claimed, claimed, rate_count FROM concurrency_keys WHERE key = ?`, key).Scan(&maxClaimed, &claimed, &rate); {
	case errors.Is(err, sql.ErrNoRows):
		return tgdriver.TaskRow{}, false, nil
	case err != nil:
		return tgdriver.TaskRow{}, false, fmt.Errorf("read concurrency key %q: %w", key, err)
	case maxClaimed > 0:
		return t.KeyHead(ctx, key)
	case claimed > 0 || rate > 0:
		return tgdriver.TaskRow{}, false, nil
	}
	if _, err := t.exec(`DELETE FROM concurrency_keys WHERE key = ? AND `+idleKey, key); err != nil {
		return tgdriver.TaskRow{}, false, fmt.Errorf("prune concurrency key %q: %w", key, err)
	}
	return tgdriver.TaskRow{}, false, nil
}

// PruneIdleKeys deletes the idle keys without a limit among the limit
// keys after after.
func (t *wtx) PruneIdleKeys(_ context.Context, after string, limit int) (int, string, error) {
	var last sql.NullString
	if err := t.queryRow(bg, `SELECT MAX(key) FROM (SELECT key FROM concurrency_keys WHERE key > ? ORDER BY key LIMIT CAST(? AS INTEGER))`, after, limit).Scan(&last); err != nil {
		return 0, "", fmt.Errorf("find concurrency keys to prune: %w", err)
	}
	if !last.Valid {
		return 0, "", nil
	}
	res, err := t.exec(sqlPruneIdleKeys, after, last.String)
	if err != nil {
		return 0, "", fmt.Errorf("prune idle concurrency keys: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), last.String, err
}

// sqlPruneIdleKeys deletes the keys in ($1, $2] that hold no claim, no
// limit and no claimable task (tasks_ready_by_key).
const sqlPruneIdleKeys = `DELETE FROM concurrency_keys WHERE key > ? AND key <= ? AND ` + idleKey

// idleKey is the predicate of a row of concurrency_keys that may go
// (PruneIdleKeys, FreeKeys): it holds no claim and no limit, and no task of
// the key is claimable.
const idleKey = `claimed = 0 AND max_claimed = 0 AND rate_count = 0
	AND NOT EXISTS (SELECT 1 FROM tasks WHERE tasks.concurrency_key = concurrency_keys.key AND tasks.concurrency_key <> ''
		AND tasks.state = 'pending' AND tasks.due_at_ms = 0)`

// LockKeys returns the concurrency keys among keys that have rows, in key
// order; none is busy (the single writer holds every row), so held does
// not matter.
func (t *wtx) LockKeys(ctx context.Context, keys []string, held string) ([]tgdriver.KeyRow, []string, error) {
	var out []tgdriver.KeyRow
	for _, key := range slices.Compact(slices.Sorted(slices.Values(keys))) {
		k, ok, err := t.Key(ctx, key)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			out = append(out, k)
		}
	}
	return out, nil, nil
}

// LockKey returns concurrency key key (the single writer holds every row).
func (t *wtx) LockKey(ctx context.Context, key string) (tgdriver.KeyRow, bool, error) {
	return t.Key(ctx, key)
}

// LockKeyForLimit returns concurrency key key and its claimed tasks
// counted (the single writer holds every row).
func (t *wtx) LockKeyForLimit(ctx context.Context, key string) (tgdriver.KeyRow, bool, int, error) {
	k, ok, err := t.Key(ctx, key)
	if err != nil || !ok {
		return k, ok, 0, err
	}
	var n int
	if err := t.queryRow(bg, `SELECT count(*) FROM tasks WHERE concurrency_key = ? AND concurrency_key <> '' AND state = 'claimed'`, key).Scan(&n); err != nil {
		return tgdriver.KeyRow{}, false, 0, fmt.Errorf("count the claimed tasks of concurrency key %s: %w", key, err)
	}
	return k, true, n, nil
}

// UpdateKey writes k over old if the row still holds old.
func (t *wtx) UpdateKey(_ context.Context, old, k tgdriver.KeyRow) (bool, error) {
	res, err := t.exec(`UPDATE concurrency_keys SET max_claimed = ?, claimed = ?, rate_count = ?, rate_interval_ms = ?, recent_ms = ?,
		rate_open_at_ms = ?, updated_at_ms = ?, updated_by = ?
		WHERE key = ? AND claimed = ? AND recent_ms = ? AND max_claimed = ? AND rate_count = ? AND rate_interval_ms = ?`,
		k.MaxClaimed, k.Claimed, k.RateCount, k.RateIntervalMS, k.RecentMS, k.RateOpenAtMS, k.UpdatedAtMS, k.UpdatedBy,
		old.Key, old.Claimed, old.RecentMS, old.MaxClaimed, old.RateCount, old.RateIntervalMS)
	if err != nil {
		return false, fmt.Errorf("update concurrency key %q: %w", old.Key, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
