package tgpostgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// notifyChannel is the LISTEN/NOTIFY channel on which replicas announce that
// a task became claimable; the payload is "<replica id> <workflow id>".
const notifyChannel = "graph_engineering_ready"

// nextPendingTries bounds NextPending's attempts to find a task whose
// workflow it can lock (see doc.go, "Claim-next").
const nextPendingTries = 8

// wtx implements tgdriver.Tx on one pgx transaction.
type wtx struct {
	reads
	tx pgx.Tx
	// locked counts the workflow rows this transaction holds: NextPending
	// waits for a busy workflow only while it holds none, so that no
	// transaction waits for a second workflow while holding a first.
	locked int
}

var _ tgdriver.Tx = (*wtx)(nil)

func nullStr(s string) any {
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

// LockWorkflow takes the row lock of workflowID (FOR UPDATE).
func (w *wtx) LockWorkflow(ctx context.Context, workflowID string) (bool, error) {
	var one int
	err := w.tx.QueryRow(ctx, `SELECT 1 FROM workflows WHERE workflow_id = $1 FOR UPDATE`, workflowID).Scan(&one)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, w.fail(ctx, "lock workflow "+workflowID, err)
	}
	w.locked++
	return true, nil
}

// EnsureWorkflow creates workflowID if needed, locks it and returns its task count.
func (w *wtx) EnsureWorkflow(ctx context.Context, workflowID string, nowMS int64) (int, error) {
	if _, err := w.tx.Exec(ctx, `INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms) VALUES ($1, $2, $2)
		ON CONFLICT (workflow_id) DO NOTHING`, workflowID, nowMS); err != nil {
		return 0, w.fail(ctx, "create workflow "+workflowID, err)
	}
	var n int
	if err := w.tx.QueryRow(ctx, `SELECT task_count FROM workflows WHERE workflow_id = $1 FOR UPDATE`, workflowID).Scan(&n); err != nil {
		return 0, w.fail(ctx, "lock workflow "+workflowID, err)
	}
	w.locked++
	return n, nil
}

// AddWorkflowTasks adds n to the task count of workflowID.
func (w *wtx) AddWorkflowTasks(ctx context.Context, workflowID string, n int) error {
	if _, err := w.tx.Exec(ctx, `UPDATE workflows SET task_count = task_count + $1 WHERE workflow_id = $2`, n, workflowID); err != nil {
		return w.fail(ctx, "count the tasks of "+workflowID, err)
	}
	return nil
}

// LockDependency returns node nodeID of workflowID locked FOR SHARE: a
// concurrent completion's UPDATE of it waits for this transaction, and then
// sees the edges it added.
func (w *wtx) LockDependency(ctx context.Context, workflowID, nodeID string) (tgdriver.TaskRow, error) {
	return w.oneTask(ctx, "lock dependency "+workflowID+"/"+nodeID,
		`SELECT `+taskColumns+` FROM tasks WHERE workflow_id = $1 AND node_id = $2 FOR SHARE`, workflowID, nodeID)
}

// InsertTask inserts t and returns its seq.
func (w *wtx) InsertTask(ctx context.Context, t tgdriver.TaskRow) (int64, error) {
	var result any
	if t.HasResult || t.Result != "" {
		result = t.Result
	}
	var token any
	if t.TokenHash != nil {
		token = t.TokenHash
	}
	var seq int64
	err := w.tx.QueryRow(ctx, `INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, owner, generation,
		token_hash, lease_expires_at_ms, lease_ms, attempts, max_attempts, unmet, result, error, status_message,
		cancel_cause, created_at_ms, updated_at_ms, created_by, priority, requires, due_at_ms, retry_delay_ms)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25) RETURNING seq`,
		t.TaskID, t.WorkflowID, t.NodeID, t.Payload, t.DependsOn, t.State, nullStr(t.Owner), t.Generation,
		token, nullInt(t.LeaseExpiresAtMS), nullInt(t.LeaseMS), t.Attempts, t.MaxAttempts, t.Unmet, result, nullStr(t.Error), t.StatusMessage,
		nullInt(t.CancelCause), t.CreatedAtMS, t.UpdatedAtMS, nullStr(t.CreatedBy), t.Priority, t.Requires, t.DueAtMS, t.RetryDelayMS).Scan(&seq)
	if err != nil {
		return 0, w.fail(ctx, "insert task "+t.WorkflowID+"/"+t.NodeID, err)
	}
	return seq, nil
}

// InsertEdge records that task must wait for dep.
func (w *wtx) InsertEdge(ctx context.Context, depSeq, taskSeq int64) error {
	if _, err := w.tx.Exec(ctx, `INSERT INTO edges (dep_seq, task_seq) VALUES ($1, $2)`, depSeq, taskSeq); err != nil {
		return w.fail(ctx, "insert edge", err)
	}
	return nil
}

const (
	// pendingCandidatesSQL: the first claimable tasks (pending, due now) by
	// (priority DESC, seq) that require nothing, read without locking,
	// skipping the workflows found busy ($1), served by tasks_ready_plain.
	// The variants: with capabilities ($2), tasks whose requires are all
	// among them, served by tasks_ready_by_priority and filtered in the
	// scan; within one workflow ($2, capabilities $3), served by
	// tasks_ready_by_workflow_priority. Separate statements, not one with
	// ($2 = '' OR workflow_id = $2): a generic plan of that one (pgx
	// prepares statements) reads the wrong index and sorts.
	pendingCandidatesSQL = `SELECT seq, workflow_id FROM tasks WHERE state = 'pending' AND due_at_ms = 0 AND requires = ''
		AND workflow_id <> ALL($1::text[]) ORDER BY priority DESC, seq LIMIT 16`
	pendingCandidatesCapsSQL = `SELECT seq, workflow_id FROM tasks WHERE state = 'pending' AND due_at_ms = 0
		AND (requires = '' OR string_to_array(requires, ' ') <@ $2::text[])
		AND workflow_id <> ALL($1::text[]) ORDER BY priority DESC, seq LIMIT 16`
	pendingCandidatesInWorkflowSQL = `SELECT seq, workflow_id FROM tasks WHERE workflow_id = $2 AND state = 'pending' AND due_at_ms = 0
		AND requires = '' AND workflow_id <> ALL($1::text[]) ORDER BY priority DESC, seq LIMIT 16`
	pendingCandidatesInWorkflowCapsSQL = `SELECT seq, workflow_id FROM tasks WHERE workflow_id = $2 AND state = 'pending' AND due_at_ms = 0
		AND (requires = '' OR string_to_array(requires, ' ') <@ $3::text[])
		AND workflow_id <> ALL($1::text[]) ORDER BY priority DESC, seq LIMIT 16`
	// takePendingSQL locks one candidate if it is still claimable and no
	// other transaction holds it.
	takePendingSQL           = `SELECT ` + taskColumns + ` FROM tasks WHERE seq = $1 AND state = 'pending' AND due_at_ms = 0 FOR UPDATE SKIP LOCKED`
	nextPendingInWorkflowSQL = `SELECT ` + taskColumns + ` FROM tasks WHERE workflow_id = $1 AND state = 'pending' AND due_at_ms = 0
		AND requires = '' ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED`
	nextPendingInWorkflowCapsSQL = `SELECT ` + taskColumns + ` FROM tasks WHERE workflow_id = $1 AND state = 'pending' AND due_at_ms = 0
		AND (requires = '' OR string_to_array(requires, ' ') <@ $2::text[]) ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED`
	tryLockWorkflowSQL = `SELECT 1 FROM workflows WHERE workflow_id = $1 FOR UPDATE SKIP LOCKED`
	dueTasksSQL        = `SELECT seq, workflow_id FROM tasks WHERE state = 'pending' AND due_at_ms > 0 AND due_at_ms <= $1
		ORDER BY due_at_ms LIMIT $2`
)

// NextPending returns the oldest pending task this transaction can take,
// locked with its workflow. See doc.go, "Claim-next", for why it is shaped so.
//
// Candidates are read without a lock and each is then locked by its key
// inside a savepoint that is rolled back unless it is taken. A locking scan
// (ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED) would not do: under READ
// COMMITTED a row claimed and committed by another transaction after the
// scan's snapshot is locked in its new version, fails the recheck and is
// skipped, but stays locked until this transaction ends; the holder's
// complete then waits for this claimer, which waits for the holder's
// workflow: a deadlock. Rolling back the savepoint drops such a lock.
func (w *wtx) NextPending(ctx context.Context, workflowID string, caps []string) (tgdriver.TaskRow, bool, error) {
	// First, without ever waiting: tasks of workflows another transaction
	// holds are given back and their workflows skipped.
	busy := []string{}
	isBusy := map[string]bool{}
	for range nextPendingTries {
		cands, err := w.pendingCandidates(ctx, workflowID, caps, busy)
		if err != nil {
			return tgdriver.TaskRow{}, false, err
		}
		if len(cands) == 0 {
			break // nothing pending outside the busy workflows
		}
		for _, c := range cands {
			if isBusy[c.WorkflowID] {
				continue
			}
			t, ok, wfBusy, err := w.tryTake(ctx, c)
			if err != nil || ok {
				return t, ok, err
			}
			if wfBusy {
				isBusy[c.WorkflowID] = true
				busy = append(busy, c.WorkflowID)
			}
		}
	}
	// Then, in lock order: wait for one busy workflow, and take its oldest
	// pending task if one is left once it is ours. With the workflow's lock
	// held no other writer changes its tasks, so this scan meets no task
	// claimed behind its snapshot. Only a transaction that holds no
	// workflow yet waits (a claim-next that expired a lease on its way
	// holds that one), and for one workflow only: no transaction ever waits
	// for a workflow while holding another, so they cannot deadlock.
	if w.locked > 0 && len(busy) > 0 {
		return tgdriver.TaskRow{}, false, nil
	}
	for _, wf := range busy[:min(1, len(busy))] {
		exists, err := w.LockWorkflow(ctx, wf)
		if err != nil {
			return tgdriver.TaskRow{}, false, err
		}
		if !exists {
			continue // pruned meanwhile
		}
		var row pgx.Row
		if len(caps) > 0 {
			row = w.tx.QueryRow(ctx, nextPendingInWorkflowCapsSQL, wf, caps)
		} else {
			row = w.tx.QueryRow(ctx, nextPendingInWorkflowSQL, wf)
		}
		t, err := scanTask(row)
		switch {
		case err == nil:
			return t, true, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return tgdriver.TaskRow{}, false, w.fail(ctx, "claim-next: find a pending task", err)
		}
	}
	return tgdriver.TaskRow{}, false, nil
}

// pendingCandidates reads the oldest pending tasks without locking them.
func (w *wtx) pendingCandidates(ctx context.Context, workflowID string, caps, busy []string) ([]tgdriver.TaskRef, error) {
	var rows pgx.Rows
	var err error
	switch {
	case workflowID == "" && len(caps) == 0:
		rows, err = w.tx.Query(ctx, pendingCandidatesSQL, busy)
	case workflowID == "":
		rows, err = w.tx.Query(ctx, pendingCandidatesCapsSQL, busy, caps)
	case len(caps) == 0:
		rows, err = w.tx.Query(ctx, pendingCandidatesInWorkflowSQL, busy, workflowID)
	default:
		rows, err = w.tx.Query(ctx, pendingCandidatesInWorkflowCapsSQL, busy, workflowID, caps)
	}
	if err != nil {
		return nil, w.fail(ctx, "claim-next: find pending tasks", err)
	}
	defer rows.Close()
	var out []tgdriver.TaskRef
	for rows.Next() {
		var r tgdriver.TaskRef
		if err := rows.Scan(&r.Seq, &r.WorkflowID); err != nil {
			return nil, w.fail(ctx, "claim-next: find pending tasks", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, w.fail(ctx, "claim-next: find pending tasks", err)
	}
	return out, nil
}

// tryTake locks candidate c, inside a savepoint, if it is still pending and
// free, then its workflow FOR UPDATE SKIP LOCKED. ok: both are locked.
// wfBusy: another transaction holds the workflow. Unless ok, the savepoint
// is rolled back, releasing whatever it locked.
func (w *wtx) tryTake(ctx context.Context, c tgdriver.TaskRef) (t tgdriver.TaskRow, ok, wfBusy bool, err error) {
	if _, err := w.tx.Exec(ctx, `SAVEPOINT next_pending`); err != nil {
		return t, false, false, w.fail(ctx, "claim-next", err)
	}
	giveBack := func(busy bool) (tgdriver.TaskRow, bool, bool, error) {
		if _, err := w.tx.Exec(ctx, `ROLLBACK TO SAVEPOINT next_pending`); err != nil {
			return tgdriver.TaskRow{}, false, false, w.fail(ctx, "claim-next", err)
		}
		if _, err := w.tx.Exec(ctx, `RELEASE SAVEPOINT next_pending`); err != nil {
			return tgdriver.TaskRow{}, false, false, w.fail(ctx, "claim-next", err)
		}
		return tgdriver.TaskRow{}, false, busy, nil
	}
	t, err = scanTask(w.tx.QueryRow(ctx, takePendingSQL, c.Seq))
	if errors.Is(err, pgx.ErrNoRows) {
		return giveBack(false) // taken, or held, by another transaction
	}
	if err != nil {
		return tgdriver.TaskRow{}, false, false, w.fail(ctx, "claim-next: lock a pending task", err)
	}
	var one int
	err = w.tx.QueryRow(ctx, tryLockWorkflowSQL, t.WorkflowID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return giveBack(true)
	}
	if err != nil {
		return tgdriver.TaskRow{}, false, false, w.fail(ctx, "claim-next: lock workflow "+t.WorkflowID, err)
	}
	if _, err := w.tx.Exec(ctx, `RELEASE SAVEPOINT next_pending`); err != nil {
		return tgdriver.TaskRow{}, false, false, w.fail(ctx, "claim-next", err)
	}
	w.locked++
	return t, true, false, nil
}

// ExpiredLeases returns claimed tasks whose lease lapsed at atMS; it locks nothing.
func (w *wtx) ExpiredLeases(ctx context.Context, atMS int64, limit int) ([]tgdriver.TaskRef, error) {
	rows, err := w.tx.Query(ctx, `SELECT seq, workflow_id, lease_expires_at_ms FROM tasks
		WHERE state = 'claimed' AND lease_expires_at_ms <= $1 ORDER BY lease_expires_at_ms LIMIT $2`, atMS, limit)
	if err != nil {
		return nil, w.fail(ctx, "find expired leases", err)
	}
	out, err := collectRefs(rows)
	if err != nil {
		return nil, w.fail(ctx, "find expired leases", err)
	}
	return out, nil
}

func collectRefs(rows pgx.Rows) ([]tgdriver.TaskRef, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (tgdriver.TaskRef, error) {
		var r tgdriver.TaskRef
		err := row.Scan(&r.Seq, &r.WorkflowID, &r.ExpiresAtMS)
		return r, err
	})
}

// UnfinishedDependents returns the blocked, pending or claimed dependents of seq.
func (w *wtx) UnfinishedDependents(ctx context.Context, seq int64) ([]int64, error) {
	return w.seqs(ctx, "find dependents", `SELECT t.seq FROM edges e JOIN tasks t ON t.seq = e.task_seq
		WHERE e.dep_seq = $1 AND t.state IN ('blocked', 'pending', 'claimed') ORDER BY t.seq`, seq)
}

// CancelledBy returns the cancelled tasks whose cancel cause is causeSeq.
func (w *wtx) CancelledBy(ctx context.Context, causeSeq int64) ([]int64, error) {
	return w.seqs(ctx, "find cancelled tasks", `SELECT seq FROM tasks WHERE cancel_cause = $1 AND state = 'cancelled' ORDER BY seq`, causeSeq)
}

// UnfinishedInWorkflow returns the blocked, pending and claimed tasks of workflowID.
func (w *wtx) UnfinishedInWorkflow(ctx context.Context, workflowID string) ([]int64, error) {
	return w.seqs(ctx, "find the unfinished tasks of "+workflowID, `SELECT seq FROM tasks WHERE workflow_id = $1
		AND state IN ('blocked', 'pending', 'claimed') ORDER BY seq`, workflowID)
}

// UpdateTask applies set to task seq if guard holds, in one statement.
func (w *wtx) UpdateTask(ctx context.Context, seq int64, set tgdriver.TaskSet, guard tgdriver.TaskGuard) (tgdriver.TaskRow, bool, error) {
	q, args, err := w.d.updates.build(seq, set, guard)
	if err != nil {
		return tgdriver.TaskRow{}, false, err
	}
	t, err := scanTask(w.tx.QueryRow(ctx, q, args...))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return tgdriver.TaskRow{}, false, nil
	case err != nil:
		return tgdriver.TaskRow{}, false, w.fail(ctx, fmt.Sprintf("update task seq %d", seq), err)
	}
	return t, true, nil
}

// DecrementUnmet lowers the unmet count of every unfinished dependent of depSeq.
func (w *wtx) DecrementUnmet(ctx context.Context, depSeq int64) ([]tgdriver.UnmetRow, error) {
	rows, err := w.tx.Query(ctx, `UPDATE tasks SET unmet = unmet - 1 WHERE seq IN (SELECT task_seq FROM edges WHERE dep_seq = $1)
		AND state IN ('blocked', 'pending', 'claimed') RETURNING seq, state, unmet`, depSeq)
	if err != nil {
		return nil, w.fail(ctx, "update dependents", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (tgdriver.UnmetRow, error) {
		var u tgdriver.UnmetRow
		err := row.Scan(&u.Seq, &u.State, &u.Unmet)
		return u, err
	})
	if err != nil {
		return nil, w.fail(ctx, "update dependents", err)
	}
	return out, nil
}

// ShiftLeases moves every live lease by shiftMS, to at most nowMS + its duration.
func (w *wtx) ShiftLeases(ctx context.Context, shiftMS, nowMS, defaultLeaseMS int64) ([]tgdriver.TaskRef, error) {
	rows, err := w.tx.Query(ctx, `UPDATE tasks SET lease_expires_at_ms = LEAST(lease_expires_at_ms + $1, $2 + COALESCE(lease_ms, $3))
		WHERE state = 'claimed' AND lease_expires_at_ms IS NOT NULL RETURNING seq, workflow_id, lease_expires_at_ms`,
		shiftMS, nowMS, defaultLeaseMS)
	if err != nil {
		return nil, w.fail(ctx, "shift leases", err)
	}
	out, err := collectRefs(rows)
	if err != nil {
		return nil, w.fail(ctx, "shift leases", err)
	}
	return out, nil
}

// ChainHead returns the head hash and event count of workflowID, locking its row.
func (w *wtx) ChainHead(ctx context.Context, workflowID string) (string, int64, error) {
	var head string
	var n int64
	if err := w.tx.QueryRow(ctx, `SELECT head_hash, event_count FROM workflows WHERE workflow_id = $1 FOR UPDATE`, workflowID).Scan(&head, &n); err != nil {
		return "", 0, w.fail(ctx, "read the chain head of "+workflowID, err)
	}
	return head, n, nil
}

// AppendEvent advances the chain head by compare and set, then inserts e.
// The compare and set comes first: when the head moved nothing is inserted,
// and once it holds, the row lock it took keeps any other append out.
func (w *wtx) AppendEvent(ctx context.Context, e tgdriver.EventRow) error {
	tag, err := w.tx.Exec(ctx, `UPDATE workflows SET head_hash = $1, event_count = $2, updated_at_ms = $3
		WHERE workflow_id = $4 AND head_hash = $5 AND event_count = $6`, e.Hash, e.Seq, e.AtMS, e.WorkflowID, e.PrevHash, e.Seq-1)
	if err != nil {
		return w.fail(ctx, "advance the chain head of "+e.WorkflowID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("workflow %s, event %d: %w", e.WorkflowID, e.Seq, tgdriver.ErrChainMoved)
	}
	hv := e.HashVersion
	if hv == 0 {
		hv = 1
	}
	if _, err := w.tx.Exec(ctx, `INSERT INTO events (workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash,
		hash_version, actor_kind, actor_name, actor_principal, task_state, content)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
		e.WorkflowID, e.Seq, e.TaskID, e.Kind, e.Owner, e.Generation, e.AtMS, e.Detail, e.PrevHash, e.Hash,
		hv, e.ActorKind, e.ActorName, e.ActorPrincipal, e.TaskState, e.Content); err != nil {
		return w.fail(ctx, "record event", err)
	}
	return nil
}

// NotifyReady queues a notification, delivered by PostgreSQL at commit.
// The payload is "<replica> <workflow>", followed by " <requires>" when the
// task requires capabilities (tags are identifiers: no spaces).
func (w *wtx) NotifyReady(ctx context.Context, workflowID, requires string) error {
	if w.d.noNotify.Load() {
		return nil // the database has no NOTIFY; the other replicas poll
	}
	payload := w.d.replicaID + " " + workflowID
	if requires != "" {
		payload += " " + requires
	}
	if _, err := w.tx.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, payload); err != nil {
		return w.fail(ctx, "notify", err)
	}
	return nil
}

const unfinishedTasksOf = `EXISTS (SELECT 1 FROM tasks t WHERE t.workflow_id = w.workflow_id
	AND t.state IN ('blocked', 'pending', 'claimed'))`

// PruneCandidates returns finished workflows unchanged since before beforeMS.
func (w *wtx) PruneCandidates(ctx context.Context, beforeMS int64, limit int) ([]string, error) {
	rows, err := w.tx.Query(ctx, `SELECT w.workflow_id FROM workflows w WHERE w.updated_at_ms < $1 AND NOT `+unfinishedTasksOf+`
		ORDER BY w.updated_at_ms, w.workflow_id LIMIT $2`, beforeMS, limit)
	if err != nil {
		return nil, w.fail(ctx, "find workflows to prune", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, w.fail(ctx, "find workflows to prune", err)
	}
	return out, nil
}

// PruneWorkflow removes workflowID if it still qualifies. It locks the row
// first, so that the guarded DELETE, a new statement, judges the workflow on
// everything committed before the lock was granted.
func (w *wtx) PruneWorkflow(ctx context.Context, workflowID string, beforeMS, nowMS int64) (tgdriver.PrunedRow, bool, error) {
	exists, err := w.LockWorkflow(ctx, workflowID)
	if err != nil || !exists {
		return tgdriver.PrunedRow{}, false, err
	}
	var p tgdriver.PrunedRow
	err = w.tx.QueryRow(ctx, `DELETE FROM workflows w WHERE w.workflow_id = $1 AND w.updated_at_ms < $2 AND NOT `+unfinishedTasksOf+`
		RETURNING w.task_count, w.event_count, w.head_hash`, workflowID, beforeMS).Scan(&p.Tasks, &p.Events, &p.HeadHash)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return tgdriver.PrunedRow{}, false, nil
	case err != nil:
		return tgdriver.PrunedRow{}, false, w.fail(ctx, "prune "+workflowID, err)
	}
	// Its tasks and edges went with it (ON DELETE CASCADE); events have no
	// foreign key (a chain outlives nothing, but is checked for orphans).
	if _, err := w.tx.Exec(ctx, `DELETE FROM events WHERE workflow_id = $1`, workflowID); err != nil {
		return tgdriver.PrunedRow{}, false, w.fail(ctx, "prune the events of "+workflowID, err)
	}
	if _, err := w.tx.Exec(ctx, `INSERT INTO pruned_workflows (workflow_id, pruned_at_ms, task_count, event_count, head_hash)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, workflowID, nowMS, p.Tasks, p.Events, p.HeadHash); err != nil {
		return tgdriver.PrunedRow{}, false, w.fail(ctx, "record the pruning of "+workflowID, err)
	}
	return p, true, nil
}

// ReadAlive returns the servers' shared alive time.
func (w *wtx) ReadAlive(ctx context.Context) (int64, bool, error) {
	var ms int64
	// Locked: replicas that find the alive time stale at once give the time
	// back once, one after the other (the second reads the first's touch).
	err := w.tx.QueryRow(ctx, `SELECT alive_at_ms FROM server_clock WHERE singleton = 1 FOR UPDATE`).Scan(&ms)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, w.fail(ctx, "read the alive time", err)
	}
	return ms, true, nil
}

// TryTouchAlive records ms as the servers' alive time unless another
// transaction holds the row (SKIP LOCKED): it never waits.
func (w *wtx) TryTouchAlive(ctx context.Context, ms int64) (bool, error) {
	var one int
	err := w.tx.QueryRow(ctx, `SELECT 1 FROM server_clock WHERE singleton = 1 FOR UPDATE SKIP LOCKED`).Scan(&one)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil // held by another transaction, or never recorded (Open records it)
	case err != nil:
		return false, w.fail(ctx, "lock the alive time", err)
	}
	if _, err := w.tx.Exec(ctx, `UPDATE server_clock SET alive_at_ms = $1 WHERE singleton = 1`, ms); err != nil {
		return false, w.fail(ctx, "record the alive time", err)
	}
	return true, nil
}

// TouchAlive records ms as the servers' alive time.
func (w *wtx) TouchAlive(ctx context.Context, ms int64) error {
	if _, err := w.tx.Exec(ctx, `INSERT INTO server_clock (singleton, alive_at_ms) VALUES (1, $1)
		ON CONFLICT (singleton) DO UPDATE SET alive_at_ms = excluded.alive_at_ms`, ms); err != nil {
		return w.fail(ctx, "record the alive time", err)
	}
	return nil
}

// DueTasks returns up to limit pending tasks whose due time had come at
// atMS, earliest first (tasks_due), without locking them.
func (w *wtx) DueTasks(ctx context.Context, atMS int64, limit int) ([]tgdriver.TaskRef, error) {
	rows, err := w.tx.Query(ctx, dueTasksSQL, atMS, limit)
	if err != nil {
		return nil, w.fail(ctx, "find due tasks", err)
	}
	defer rows.Close()
	var out []tgdriver.TaskRef
	for rows.Next() {
		var r tgdriver.TaskRef
		if err := rows.Scan(&r.Seq, &r.WorkflowID); err != nil {
			return nil, w.fail(ctx, "find due tasks", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, w.fail(ctx, "find due tasks", err)
	}
	return out, nil
}
