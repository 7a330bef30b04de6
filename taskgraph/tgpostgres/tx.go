package tgpostgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// notifyChannel is the LISTEN/NOTIFY channel on which replicas announce that
// a task became claimable; the payload is "<replica id> <workflow id>".
const notifyChannel = "graph_engineering_ready"

// wtx implements tgdriver.Tx on one pgx transaction.
type wtx struct {
	reads
	c *txConn
}

var _ tgdriver.Tx = (*wtx)(nil)
var _ tgdriver.JournalTryLocker = (*wtx)(nil)

// nullStrPtr and nullIntPtr map the zero value to NULL for an element of
// an array parameter: nil is NULL.
func nullStrPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nullIntPtr(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

// LockWorkflow takes the row lock of workflowID (FOR NO KEY UPDATE: see
// the package doc, "Locks").
func (w *wtx) LockWorkflow(ctx context.Context, workflowID string) (bool, error) {
	var one int
	err := w.c.QueryRow(ctx, `SELECT 1 FROM workflows WHERE workflow_id = $1 FOR NO KEY UPDATE`, workflowID).Scan(&one)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, w.fail(ctx, "lock workflow "+workflowID, err)
	}
	return true, nil
}

// EnsureWorkflow creates workflowID if needed, locks it and returns its task count.
func (w *wtx) EnsureWorkflow(ctx context.Context, workflowID string, nowMS int64) (int, error) {
	if _, err := w.c.Exec(ctx, `INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms) VALUES ($1, $2, $2)
		ON CONFLICT (workflow_id) DO NOTHING`, workflowID, nowMS); err != nil {
		return 0, w.fail(ctx, "create workflow "+workflowID, err)
	}
	var n int
	if err := w.c.QueryRow(ctx, `SELECT task_count FROM workflows WHERE workflow_id = $1 FOR NO KEY UPDATE`, workflowID).Scan(&n); err != nil {
		return 0, w.fail(ctx, "lock workflow "+workflowID, err)
	}
	return n, nil
}

// AddWorkflowTasks adds n to the task count of workflowID.
func (w *wtx) AddWorkflowTasks(ctx context.Context, workflowID string, n int) error {
	if _, err := w.c.Exec(ctx, `UPDATE workflows SET task_count = task_count + $1 WHERE workflow_id = $2`, n, workflowID); err != nil {
		return w.fail(ctx, "count the tasks of "+workflowID, err)
	}
	return nil
}

// The statements of a writer that read a workflow's nodes or tasks, through
// task_nodes (inWorkflow).
var (
	// nodesOf picks the tasks of the nodes $2 of workflow $1.
	nodesOf                 = `seq IN (SELECT n.seq FROM task_nodes n WHERE n.workflow_id = $1 AND n.node_id = ANY($2::text[]))`
	lockDependenciesSQL     = `SELECT ` + taskColumns + ` FROM tasks WHERE ` + nodesOf + ` ORDER BY task_id COLLATE "C" FOR SHARE`
	tasksByNodesSQL         = `SELECT ` + taskColumns + ` FROM tasks WHERE ` + nodesOf
	unfinishedInWorkflowSQL = `SELECT seq FROM tasks WHERE ` + inWorkflow("seq", "$1") + ` AND state IN ('blocked', 'pending', 'claimed') ORDER BY seq`
)

// LockDependencies locks the nodes nodeIDs of workflowID FOR SHARE in
// one statement, in task id order (LockRows above the sort takes them in
// it), the order of a batch's locks and updates (Fetch), and returns them.
func (w *wtx) LockDependencies(ctx context.Context, workflowID string, nodeIDs []string) ([]tgdriver.TaskRow, error) {
	return w.tasks(ctx, "lock dependencies of "+workflowID, lockDependenciesSQL, workflowID, nodeIDs)
}

// TasksByNodes returns the nodes nodeIDs of workflowID that exist, in one
// statement (task_nodes' primary key, then tasks by seq).
func (w *wtx) TasksByNodes(ctx context.Context, workflowID string, nodeIDs []string) ([]tgdriver.TaskRow, error) {
	return w.tasks(ctx, "look up nodes of "+workflowID, tasksByNodesSQL, workflowID, nodeIDs)
}

// tasks runs a query of taskColumns.
func (w *wtx) tasks(ctx context.Context, what, sql string, args ...any) ([]tgdriver.TaskRow, error) {
	rows, err := w.c.Query(ctx, sql, args...)
	if err != nil {
		return nil, w.fail(ctx, what, err)
	}
	ts, err := collectTasks(rows)
	if err != nil {
		return nil, w.fail(ctx, what, err)
	}
	return ts, nil
}

// LockParkedOfKey locks key's parked ready tasks (index
// tasks_ready_by_key_group) in task id order, as a batch locks tasks.
func (w *wtx) LockParkedOfKey(ctx context.Context, key string) error {
	if _, err := w.c.Exec(ctx, `SELECT 1 FROM tasks WHERE concurrency_key = $1 AND concurrency_key <> '' AND key_parked
		AND state = 'pending' AND due_at_ms = 0 ORDER BY task_id COLLATE "C" FOR NO KEY UPDATE`, key); err != nil {
		return w.fail(ctx, "lock the parked tasks of concurrency key "+key, err)
	}
	return nil
}

// insertTasksSQL inserts a creation's tasks in one statement: a column
// an array, the rows in their order (WITH ORDINALITY, ORDER BY), so that
// their seqs ascend in it; the BEFORE INSERT trigger that parks a task
// behind a full key (0018) sees the rows inserted before it in the
// statement, as it saw them in statements of their own.
const insertTasksSQL = `INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, owner, generation,
		token_hash, lease_expires_at_ms, lease_ms, attempts, max_attempts, unmet, result, error, status_message,
		cancel_cause, created_at_ms, updated_at_ms, created_by, priority, requires, due_at_ms, retry_delay_ms,
		concurrency_key, kind, gate_timeout_ms, gate_on_timeout)
	SELECT task_id, workflow_id, node_id, payload, depends_on, state, owner, generation,
		token_hash, lease_expires_at_ms, lease_ms, attempts, max_attempts, unmet, result, error, status_message,
		cancel_cause, created_at_ms, updated_at_ms, created_by, priority, requires, due_at_ms, retry_delay_ms,
		concurrency_key, kind, gate_timeout_ms, gate_on_timeout
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[],
		$9::bytea[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14::bigint[], $15::text[], $16::text[], $17::text[],
		$18::bigint[], $19::bigint[], $20::bigint[], $21::text[], $22::bigint[], $23::text[], $24::bigint[], $25::bigint[],
		$26::text[], $27::text[], $28::bigint[], $29::text[])
		WITH ORDINALITY AS u(task_id, workflow_id, node_id, payload, depends_on, state, owner, generation,
		token_hash, lease_expires_at_ms, lease_ms, attempts, max_attempts, unmet, result, error, status_message,
		cancel_cause, created_at_ms, updated_at_ms, created_by, priority, requires, due_at_ms, retry_delay_ms,
		concurrency_key, kind, gate_timeout_ms, gate_on_timeout, ord)
	ORDER BY ord
	RETURNING task_id, seq`

// InsertTasks inserts ts in one statement (insertTasksSQL) and returns
// their seqs in their order.
func (w *wtx) InsertTasks(ctx context.Context, ts []tgdriver.TaskRow) ([]int64, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	n := len(ts)
	var (
		ids, wfs, nodes, payloads, deps, states         = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		owners, results, errs, createdBy                = make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
		gens, attempts, maxAttempts, unmet              = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		tokens                                          = make([][]byte, n)
		leaseExp, leaseMS, causes                       = make([]*int64, n), make([]*int64, n), make([]*int64, n)
		status, requires, keys, kinds, onTimeout        = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		created, updated, prio, due, retry, gateTimeout = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	)
	at := make(map[string]int, n)
	for i, t := range ts {
		at[t.TaskID] = i
		ids[i], wfs[i], nodes[i], payloads[i], deps[i], states[i] = t.TaskID, t.WorkflowID, t.NodeID, t.Payload, t.DependsOn, t.State
		owners[i], errs[i], createdBy[i] = nullStrPtr(t.Owner), nullStrPtr(t.Error), nullStrPtr(t.CreatedBy)
		if t.HasResult || t.Result != "" {
			r := t.Result
			results[i] = &r
		}
		gens[i], attempts[i], maxAttempts[i], unmet[i] = t.Generation, int64(t.Attempts), int64(t.MaxAttempts), int64(t.Unmet)
		tokens[i] = t.TokenHash
		leaseExp[i], leaseMS[i], causes[i] = nullIntPtr(t.LeaseExpiresAtMS), nullIntPtr(t.LeaseMS), nullIntPtr(t.CancelCause)
		status[i], requires[i], keys[i], kinds[i], onTimeout[i] = t.StatusMessage, t.Requires, t.ConcurrencyKey, tgdriver.KindOf(t.Kind), t.GateOnTimeout
		created[i], updated[i], prio[i], due[i], retry[i], gateTimeout[i] = t.CreatedAtMS, t.UpdatedAtMS, int64(t.Priority), t.DueAtMS, t.RetryDelayMS, t.GateTimeoutMS
	}
	what := fmt.Sprintf("insert %d tasks of %s", n, ts[0].WorkflowID)
	rows, err := w.c.Query(ctx, insertTasksSQL, ids, wfs, nodes, payloads, deps, states, owners, gens,
		tokens, leaseExp, leaseMS, attempts, maxAttempts, unmet, results, errs, status,
		causes, created, updated, createdBy, prio, requires, due, retry,
		keys, kinds, gateTimeout, onTimeout)
	if err != nil {
		return nil, w.fail(ctx, what, err)
	}
	seqs := make([]int64, n)
	got := 0
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			rows.Close()
			return nil, w.fail(ctx, what, err)
		}
		i, ok := at[id]
		if !ok {
			rows.Close()
			return nil, fmt.Errorf("%s: the insert returned task %s, which it was not given", what, id)
		}
		seqs[i] = seq
		got++
	}
	if err := rows.Err(); err != nil {
		return nil, w.fail(ctx, what, err)
	}
	if got != n {
		return nil, fmt.Errorf("%s: %d rows inserted", what, got)
	}
	return seqs, nil
}

// InsertEdges records the edges and counts them in their dependencies'
// dependents, in one statement. The dependencies are locked already
// (LockDependencies) or inserted by this transaction, and creations in
// one workflow take turns on the workflow's row.
func (w *wtx) InsertEdges(ctx context.Context, edges []tgdriver.Edge) error {
	if len(edges) == 0 {
		return nil
	}
	dep, task := make([]int64, len(edges)), make([]int64, len(edges))
	for i, e := range edges {
		dep[i], task[i] = e.Dep, e.Task
	}
	if _, err := w.c.Exec(ctx, `WITH e AS (INSERT INTO edges (dep_seq, task_seq) SELECT * FROM unnest($1::bigint[], $2::bigint[]))
		UPDATE tasks t SET dependents = t.dependents + c.n
		FROM (SELECT d, count(*) AS n FROM unnest($1::bigint[]) AS d GROUP BY d) c WHERE t.seq = c.d`, dep, task); err != nil {
		return w.fail(ctx, "insert edges", err)
	}
	return nil
}

// dueGatesSQL finds the gates awaiting approval whose decision time came
// (index tasks_gate_due).
const dueGatesSQL = `SELECT seq, workflow_id FROM tasks WHERE kind = 'gate' AND state = 'blocked' AND due_at_ms > 0 AND due_at_ms <= $1
	ORDER BY due_at_ms LIMIT $2`

const dueTasksSQL = `SELECT seq, workflow_id FROM tasks WHERE state = 'pending' AND due_at_ms > 0 AND due_at_ms <= $1
	ORDER BY due_at_ms LIMIT $2`

// NextPending returns the first claimable task this transaction can take,
// locked: one claim scan (see Fetch) of one task, which skips the tasks
// other transactions hold and never waits.
func (w *wtx) NextPending(ctx context.Context, workflowID string, caps []string) (tgdriver.TaskRow, bool, error) {
	b := &pgx.Batch{}
	// Keys rate-limited at some time are not passed over (no time is
	// given): only full ones, as SQLite's NextPending.
	queueScan(b, tgdriver.ClaimScan{WorkflowID: workflowID, Caps: caps, N: 1, AtMS: math.MaxInt64})
	br := w.c.SendBatch(ctx, b)
	rows, err := br.Query()
	var ts []tgdriver.TaskRow
	if err == nil {
		ts, err = collectTasks(rows)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return tgdriver.TaskRow{}, false, w.fail(ctx, "claim-next: find a pending task", err)
	}
	if len(ts) == 0 {
		return tgdriver.TaskRow{}, false, nil
	}
	return ts[0], true, nil
}

// ExpiredLeases returns claimed tasks whose lease lapsed at atMS; it locks nothing.
func (w *wtx) ExpiredLeases(ctx context.Context, atMS int64, limit int) ([]tgdriver.TaskRef, error) {
	rows, err := w.c.Query(ctx, `SELECT seq, workflow_id, lease_expires_at_ms FROM tasks
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
	return w.seqs(ctx, "find the unfinished tasks of "+workflowID, unfinishedInWorkflowSQL, workflowID)
}

// UpdateTask applies set to task seq if guard holds, in one statement.
func (w *wtx) UpdateTask(ctx context.Context, seq int64, set tgdriver.TaskSet, guard tgdriver.TaskGuard) (tgdriver.TaskRow, bool, error) {
	rows, ok, err := w.updates(ctx, []tgdriver.TaskUpdate{{Seq: seq, Set: set, Guard: guard}})
	if err != nil {
		return tgdriver.TaskRow{}, false, err
	}
	return rows[0], ok[0], nil
}

// updates applies ups, one statement per shape, in one round trip.
func (w *wtx) updates(ctx context.Context, ups []tgdriver.TaskUpdate) ([]tgdriver.TaskRow, []bool, error) {
	groups, err := groupUpdates(ups)
	if err != nil {
		return nil, nil, err
	}
	b := &pgx.Batch{}
	for _, g := range groups {
		g.queue(w.d.updates, b, false, true)
	}
	out, ok := make([]tgdriver.TaskRow, len(ups)), make([]bool, len(ups))
	br := w.c.SendBatch(ctx, b)
	for _, g := range groups {
		rows, err := br.Query()
		if err == nil {
			err = g.readUpdated(rows, out, ok)
		}
		if err != nil {
			_ = br.Close()
			return nil, nil, w.fail(ctx, "update tasks", err)
		}
	}
	if err := br.Close(); err != nil {
		return nil, nil, w.fail(ctx, "update tasks", err)
	}
	return out, ok, nil
}

// decrementUnmetSQL lowers the unmet counts of the dependents of $1 in
// one statement: each by the number of $1's tasks it depends on (d.by),
// its row locked first with the others in task id order (l: LockRows
// above the sort), as a batch locks the tasks it updates. It returns,
// for each dependent still blocked, the dependencies it waits for, read
// after this transaction's completions (an array subquery, edges_pkey and
// tasks_pkey, run only for those).
const decrementUnmetSQL = `WITH d AS (SELECT task_seq, array_agg(dep_seq ORDER BY dep_seq) AS by
		FROM edges WHERE dep_seq = ANY($1::bigint[]) GROUP BY task_seq),
	l AS MATERIALIZED (SELECT t.seq AS lseq FROM tasks t JOIN d ON d.task_seq = t.seq
		WHERE t.state IN ('blocked', 'pending', 'claimed') ORDER BY t.task_id COLLATE "C" FOR NO KEY UPDATE OF t)
	UPDATE tasks t SET unmet = t.unmet - cardinality(d.by) FROM d, l
	WHERE t.seq = d.task_seq AND t.seq = l.lseq AND t.state IN ('blocked', 'pending', 'claimed')
	RETURNING d.by, CASE WHEN t.state = 'blocked' AND t.unmet > 0 THEN ARRAY(SELECT x.node_id FROM edges e JOIN tasks x ON x.seq = e.dep_seq
		WHERE e.task_seq = t.seq AND x.state <> 'completed' ORDER BY x.seq) END, ` + taskColumns

// DecrementUnmet lowers the unmet counts of the dependents of depSeqs in
// one statement (decrementUnmetSQL).
func (w *wtx) DecrementUnmet(ctx context.Context, depSeqs []int64) ([]tgdriver.Dependent, error) {
	rows, err := w.c.Query(ctx, decrementUnmetSQL, depSeqs)
	if err != nil {
		return nil, w.fail(ctx, "update dependents", err)
	}
	var s taskScanner
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (tgdriver.Dependent, error) {
		var d tgdriver.Dependent
		var err error
		d.Row, err = s.scan(row, &d.By, &d.Waiting)
		if len(d.Waiting) == 0 {
			d.Waiting = nil // as SQLite's: none
		}
		return d, err
	})
	if err != nil {
		return nil, w.fail(ctx, "update dependents", err)
	}
	slices.SortFunc(out, func(a, b tgdriver.Dependent) int { return strings.Compare(a.Row.TaskID, b.Row.TaskID) })
	return out, nil
}

// ShiftLeases moves every live lease by shiftMS, to at most nowMS + its duration.
func (w *wtx) ShiftLeases(ctx context.Context, shiftMS, nowMS, defaultLeaseMS int64) ([]tgdriver.TaskRef, error) {
	rows, err := w.c.Query(ctx, `UPDATE tasks SET lease_expires_at_ms = LEAST(lease_expires_at_ms + $1, $2 + COALESCE(lease_ms, $3))
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
	if err := w.c.QueryRow(ctx, `SELECT head_hash, event_count FROM workflows WHERE workflow_id = $1 FOR NO KEY UPDATE`, workflowID).Scan(&head, &n); err != nil {
		return "", 0, w.fail(ctx, "read the chain head of "+workflowID, err)
	}
	return head, n, nil
}

// AppendEvents inserts linked events and advances each workflow's head by
// compare and set, in one round trip.
func (w *wtx) AppendEvents(ctx context.Context, evs []tgdriver.EventRow) error {
	b := &pgx.Batch{}
	check, err := queueAppend(b, evs)
	if err != nil {
		return err
	}
	return w.run(ctx, "record events", b, check)
}

// JournalEvents records evs, not linked, in the journal in order, in one
// statement.
func (w *wtx) JournalEvents(ctx context.Context, evs []tgdriver.EventRow) error {
	b := &pgx.Batch{}
	queueJournal(b, evs)
	return w.run(ctx, "journal events", b, nil)
}

// LockChains locks the rows of the workflows of workflowIDs in workflow id
// order (FOR UPDATE) and returns them.
func (w *wtx) LockChains(ctx context.Context, workflowIDs []string) ([]tgdriver.WorkflowRow, error) {
	rows, err := w.c.Query(ctx, `SELECT `+workflowColumns+` FROM workflows WHERE workflow_id = ANY($1::text[])
		ORDER BY workflow_id COLLATE "C" FOR NO KEY UPDATE`, workflowIDs)
	if err != nil {
		return nil, w.fail(ctx, "lock workflows", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (tgdriver.WorkflowRow, error) { return scanWorkflow(row) })
	if err != nil {
		return nil, w.fail(ctx, "lock workflows", err)
	}
	return out, nil
}

// tryLockJournaledSQL is TryLockJournaled's one statement: which of the
// workflows have journaled events (an EXISTS probe of
// event_journal_by_workflow each, without locks), then their rows locked
// FOR NO KEY UPDATE SKIP LOCKED in workflow id order, and for each a row
// that says whether it was locked (its columns) or busy (held by another
// transaction) or gone (no row).
const tryLockJournaledSQL = `WITH j AS MATERIALIZED (
		SELECT DISTINCT u.wf FROM unnest($1::text[]) AS u(wf)
		WHERE EXISTS (SELECT 1 FROM event_journal e WHERE e.workflow_id = u.wf)),
	l AS MATERIALIZED (
		SELECT ` + workflowColumns + ` FROM workflows WHERE workflow_id = ANY (ARRAY(SELECT wf FROM j))
		ORDER BY workflow_id COLLATE "C" FOR NO KEY UPDATE SKIP LOCKED)
	SELECT j.wf, l.workflow_id IS NOT NULL, l.workflow_id IS NULL AND w.workflow_id IS NOT NULL,
		COALESCE(l.task_count, 0), COALESCE(l.event_count, 0), COALESCE(l.head_hash, ''),
		COALESCE(l.created_at_ms, 0), COALESCE(l.updated_at_ms, 0)
	FROM j LEFT JOIN l ON l.workflow_id = j.wf LEFT JOIN workflows w ON w.workflow_id = j.wf
	ORDER BY j.wf COLLATE "C"`

// TryLockJournaled implements tgdriver.JournalTryLocker in one statement
// (tryLockJournaledSQL). A pass that finds no journaled event, or only
// rows another linker holds, locks no row, so its transaction takes no
// transaction id and its COMMIT writes and flushes no WAL; a linker that
// finds a workflow's row held moves on instead of queueing behind the
// holder's commit (see package doc, "Replicas on one database").
func (w *wtx) TryLockJournaled(ctx context.Context, workflowIDs []string) ([]tgdriver.WorkflowRow, []string, error) {
	rows, err := w.c.Query(ctx, tryLockJournaledSQL, workflowIDs)
	if err != nil {
		return nil, nil, w.fail(ctx, "lock journaled workflows", err)
	}
	defer rows.Close()
	var locked []tgdriver.WorkflowRow
	var busy []string
	for rows.Next() {
		var r tgdriver.WorkflowRow
		var got, held bool
		if err := rows.Scan(&r.WorkflowID, &got, &held, &r.TaskCount, &r.EventCount, &r.HeadHash, &r.CreatedAtMS, &r.UpdatedAtMS); err != nil {
			return nil, nil, w.fail(ctx, "lock journaled workflows", err)
		}
		switch {
		case got:
			locked = append(locked, r)
		case held:
			busy = append(busy, r.WorkflowID)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, w.fail(ctx, "lock journaled workflows", err)
	}
	return locked, busy, nil
}

// journaledEventsSQL is JournaledEvents' statement: the journal rows of
// the workflows in journal order (journal_id, the first event's id), whole,
// as long as fewer than limit events come before a row, then their events
// in event id order. That order keeps each workflow's events in the order
// of their rows and, within a row, of its array (a statement's events take
// rising ids), and an event that depends on another's commit has the
// higher id; events of rows written at once may interleave, which only
// events that depend on no other's commit do. A row's bodies are in its
// pack (pack_id = journal_id, migration 0029) or, journaled before that,
// in events by id.
var journaledEventsSQL = `WITH s AS MATERIALIZED (SELECT j.journal_id, j.workflow_id, j.event_ids FROM (` + journalRowsSQL + `) j
		WHERE j.before < $2)
	SELECT ` + unlinkedColumns + ` FROM (
		SELECT ` + rowBodyColumns + ` FROM s CROSS JOIN LATERAL unnest(s.event_ids) AS u(id)
			JOIN events e ON e.event_id = u.id AND e.workflow_id = s.workflow_id
			WHERE NOT EXISTS (SELECT 1 FROM event_packs p WHERE p.pack_id = s.journal_id)
		UNION ALL ` + packedBodies(`s JOIN event_packs p ON p.pack_id = s.journal_id AND p.workflow_id = s.workflow_id`,
	`e.event_id = ANY(s.event_ids)`) + `) e ORDER BY e.event_id`

// journalRowsSQL is the journal rows of the workflows of $1, each with
// the number of events of the rows before it in journal order (before):
// JournaledEvents and JournaledEventIDs take the rows with fewer than
// $2 events before them, whole.
const journalRowsSQL = `SELECT j.journal_id, j.workflow_id, j.event_ids,
			sum(cardinality(j.event_ids)) OVER (ORDER BY j.journal_id) - cardinality(j.event_ids) AS before
		FROM event_journal j WHERE j.workflow_id = ANY($1::text[])`

// journaledIDsSQL is JournaledEventIDs' statement: the ids and workflows
// of the events of the journal rows journaledEventsSQL reads, with their
// rows' ids, in event id order.
const journaledIDsSQL = `SELECT u.id, j.workflow_id, j.journal_id FROM (` + journalRowsSQL + `) j
		CROSS JOIN LATERAL unnest(j.event_ids) AS u(id) WHERE j.before < $2 ORDER BY u.id`

// JournaledEventIDs implements tgdriver.JournalIDReader: the events
// JournaledEvents would return, as ids, read from the journal rows alone.
func (w *wtx) JournaledEventIDs(ctx context.Context, workflowIDs []string, limit int) ([]tgdriver.EventRef, error) {
	rows, err := w.c.Query(ctx, journaledIDsSQL, workflowIDs, limit)
	if err != nil {
		return nil, w.fail(ctx, "read the journal", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (tgdriver.EventRef, error) {
		var r tgdriver.EventRef
		err := row.Scan(&r.EventID, &r.WorkflowID, &r.JournalID)
		return r, err
	})
	if err != nil {
		return nil, w.fail(ctx, "read the journal", err)
	}
	return out, nil
}

// journaledBodiesSQL reads journaled bodies by id ($1): from events by id
// (events_pkey), or from the packs of their journal rows ($2: a pack's id
// is its journal row's, migration 0029), through event_packs' primary
// key. The journal rows' ids come with the refs (JournaledEventIDs reads
// them), so no body is searched for: a search for an id's row through
// event_journal_by_workflow read the journal's dead index entries too,
// and at two replicas cost 13 ms a call (pg_stat_statements).
var journaledBodiesSQL = `SELECT ` + unlinkedColumns + ` FROM (
		SELECT ` + rowBodyColumns + ` FROM events e WHERE e.event_id = ANY($1::bigint[])
		UNION ALL ` + packedBodies(`event_packs p`, `p.pack_id = ANY($2::bigint[]) AND e.event_id = ANY($1::bigint[])`) + `) e
	ORDER BY e.event_id`

// JournaledBodies implements tgdriver.JournalIDReader: the journaled
// events of refs (journaledBodiesSQL), unlinked (their links are what the
// caller makes).
func (w *wtx) JournaledBodies(ctx context.Context, refs []tgdriver.EventRef) ([]tgdriver.EventRow, error) {
	ids, packs := make([]int64, len(refs)), make([]int64, 0, len(refs))
	for i, r := range refs {
		ids[i] = r.EventID
		if len(packs) == 0 || packs[len(packs)-1] != r.JournalID {
			packs = append(packs, r.JournalID)
		}
	}
	rows, err := w.c.Query(ctx, journaledBodiesSQL, ids, packs)
	if err != nil {
		return nil, w.fail(ctx, "read journaled events", err)
	}
	out, err := collectEvents(rows)
	if err != nil {
		return nil, w.fail(ctx, "read journaled events", err)
	}
	return out, nil
}

// JournaledEvents returns the journaled events of the workflows of
// workflowIDs, in journal order, in whole journal rows: those of the rows
// that begin before the limit-th event (a row's events are linked together
// or not at all, so the last row may take it past limit).
func (w *wtx) JournaledEvents(ctx context.Context, workflowIDs []string, limit int) ([]tgdriver.EventRow, error) {
	rows, err := w.c.Query(ctx, journaledEventsSQL, workflowIDs, limit)
	if err != nil {
		return nil, w.fail(ctx, "read the journal", err)
	}
	out, err := collectEvents(rows)
	if err != nil {
		return nil, w.fail(ctx, "read the journal", err)
	}
	return out, nil
}

// linkJournaledSQL deletes the journal rows of the events linked and
// writes their links, one run per workflow, if and only if those rows
// hold exactly the events linked (see LinkJournaled).
const linkJournaledSQL = `WITH d AS (DELETE FROM event_journal j USING unnest($10::bigint[], $11::text[]) AS u(id, wf)
		WHERE j.journal_id = u.id AND j.workflow_id = u.wf RETURNING j.event_ids),
	ok AS (SELECT count(*) = $12 AND count(DISTINCT y.id) = $12 AS whole
		FROM d CROSS JOIN LATERAL unnest(d.event_ids) AS x(id) LEFT JOIN unnest($10::bigint[]) AS y(id) ON y.id = x.id)
	INSERT INTO event_links (workflow_id, wseq, prev_hash, event_ids, hashes, min_event_id, max_event_id)
		SELECT r.wf, r.first, r.prev, ($4::bigint[])[r.lo:r.hi], ($5::text[])[r.lo:r.hi], r.lo_id, r.hi_id
		FROM unnest($1::text[], $2::bigint[], $3::text[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[])
			AS r(wf, first, prev, lo, hi, lo_id, hi_id)
		WHERE (SELECT whole FROM ok) ORDER BY r.wf COLLATE "C"`

// LinkJournaled links journaled events into their chains with the links
// given, in one round trip of two statements whatever the number of
// workflows: one advances every head by compare and set, and one deletes
// the events' journal rows and writes the links (the bodies stay where
// the writers put them) into event_links, one row per workflow: the run of
// its events linked here (see package doc, "Events").
func (w *wtx) LinkJournaled(ctx context.Context, evs []tgdriver.EventRow) error {
	runs, err := tgdriver.ChainRuns(evs)
	if err != nil {
		return err
	}
	n := len(evs)
	jids, jwfs := make([]int64, n), make([]string, n)
	for i, e := range evs {
		jids[i], jwfs[i] = e.EventID, e.WorkflowID
	}
	// The runs' events, run after run, each run in chain order (evs may
	// interleave workflows; each workflow's events are in chain order).
	at := make(map[string]int, len(runs))
	for i, r := range runs {
		at[r.WorkflowID] = i
	}
	per := make([][]tgdriver.EventRow, len(runs))
	for _, e := range evs {
		per[at[e.WorkflowID]] = append(per[at[e.WorkflowID]], e)
	}
	m := len(runs)
	wfs, prevs, firsts := make([]string, m), make([]string, m), make([]int64, m)
	los, his, minIDs, maxIDs := make([]int64, m), make([]int64, m), make([]int64, m), make([]int64, m)
	ids, hashes := make([]int64, 0, n), make([]string, 0, n)
	for i, r := range runs {
		wfs[i], prevs[i], firsts[i] = r.WorkflowID, r.First.PrevHash, r.First.Seq
		los[i], minIDs[i], maxIDs[i] = int64(len(ids))+1, per[i][0].EventID, per[i][0].EventID
		for _, e := range per[i] {
			ids, hashes = append(ids, e.EventID), append(hashes, e.Hash)
			minIDs[i], maxIDs[i] = min(minIDs[i], e.EventID), max(maxIDs[i], e.EventID)
		}
		his[i] = int64(len(ids))
	}
	b := &pgx.Batch{}
	checks := []func(pgconn.CommandTag) error{queueAdvanceAll(b, runs), nil}
	// A journal row is linked once, whole: the rows the events begin
	// (journal_id) are deleted, and the links are written only when those
	// rows hold exactly the events linked here, each once (their arrays
	// hold n ids together, n distinct ones of them among the n linked:
	// a hash join, not an array containment per row). Otherwise no link
	// is written,
	// the check below fails and the transaction rolls back (the head's
	// compare and set keeps runs from overlapping).
	b.Queue(linkJournaledSQL, wfs, firsts, prevs, ids, hashes, los, his, minIDs, maxIDs, jids, jwfs, n)
	checks[1] = func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != int64(m) {
			return fmt.Errorf("%d of %d runs of links written (the %d events to link are not all, each once, in journal rows deleted here): %w",
				tag.RowsAffected(), m, n, tgdriver.ErrNoRows)
		}
		return nil
	}
	return w.run(ctx, "link journaled events", b, checks)
}

// queueAdvanceAll queues one compare and set of every run's workflow head
// and returns its check: every head advanced, or ErrChainMoved.
func queueAdvanceAll(b *pgx.Batch, runs []tgdriver.ChainRun) func(pgconn.CommandTag) error {
	n := len(runs)
	wfs, heads, prevs := make([]string, n), make([]string, n), make([]string, n)
	counts, prevCounts, ats := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, r := range runs {
		wfs[i], heads[i], prevs[i] = r.WorkflowID, r.Last.Hash, r.First.PrevHash
		counts[i], prevCounts[i], ats[i] = r.Last.Seq, r.First.Seq-1, r.Last.AtMS
	}
	b.Queue(`UPDATE workflows w SET head_hash = u.head, event_count = u.n, updated_at_ms = GREATEST(w.updated_at_ms, u.at)
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::bigint[]) AS u(wf, head, n, at, prev, prevn)
		WHERE w.workflow_id = u.wf AND w.head_hash = u.prev AND w.event_count = u.prevn`, wfs, heads, counts, ats, prevs, prevCounts)
	return func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != int64(n) {
			return fmt.Errorf("%d of %d workflows: %w", tag.RowsAffected(), n, tgdriver.ErrChainMoved)
		}
		return nil
	}
}

// taskSeqOf is the seq an event of task e.task takes (events.task_seq,
// migration 0021): the writer's (e.tseq, tgdriver.EventRow.TaskSeq) when
// it holds the task's row, else its task's found in the event's own
// INSERT through tasks' unique index on task_id (no round trip more), or
// 0 when no task has that id (none the domain writes; the readers look
// there for one). A task's row is inserted before its first event
// (InsertTasks runs its statement at once), so the subquery sees it.
// COALESCE runs the subquery only for an event without a seq: the probe
// was some 15% of the hot path's events statement (pg_stat_statements at
// W=8: 315-325 µs a statement with it for every event, 271-276 without).
const taskSeqOf = `COALESCE(NULLIF(e.tseq, 0), (SELECT t.seq FROM tasks t WHERE t.task_id = e.task), 0)`

// queueAppend queues the insert of linked events and the compare and set
// of each workflow's head, and returns the checks of their results.
func queueAppend(b *pgx.Batch, evs []tgdriver.EventRow) ([]func(pgconn.CommandTag) error, error) {
	runs, err := tgdriver.ChainRuns(evs)
	if err != nil {
		return nil, err
	}
	n := len(evs)
	wfs, tasks, kinds, owners, details := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	prevs, hashes, aks, ans, aps := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	states, contents := make([]string, n), make([]string, n)
	seqs, gens, ats, hvs, tseqs := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i, e := range evs {
		wfs[i], tasks[i], kinds[i], owners[i], details[i] = e.WorkflowID, e.TaskID, e.Kind, e.Owner, e.Detail
		prevs[i], hashes[i], aks[i], ans[i], aps[i] = e.PrevHash, e.Hash, e.ActorKind, e.ActorName, e.ActorPrincipal
		states[i], contents[i] = e.TaskState, e.Content
		seqs[i], gens[i], ats[i], hvs[i], tseqs[i] = e.Seq, e.Generation, e.AtMS, int64(hashVersion(e)), e.TaskSeq
	}
	// The heads first: when one moved, the insert would only collide with
	// the events it links to.
	checks := []func(pgconn.CommandTag) error{queueAdvanceAll(b, runs)}
	b.Queue(`INSERT INTO events (workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash,
		hash_version, actor_kind, actor_name, actor_principal, task_state, content, task_seq)
		SELECT wf, seq, task, kind, owner, gen, at, detail, prev, hash, hv, ak, an, ap, st, content, `+taskSeqOf+`
		FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::text[], $9::text[], $10::text[],
			$11::bigint[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[], $17::bigint[]) WITH ORDINALITY
			AS e(wf, seq, task, kind, owner, gen, at, detail, prev, hash, hv, ak, an, ap, st, content, tseq, ord) ORDER BY ord`,
		wfs, seqs, tasks, kinds, owners, gens, ats, details, prevs, hashes, hvs, aks, ans, aps, states, contents, tseqs)
	return append(checks, nil), nil
}

// packMax is the most events a pack holds (migration 0029): a read of one
// task's history decompresses its packs whole, so a pack stays small
// however many events one statement writes for one workflow (a creation
// of 1,000 tasks: one pack of them took 1.6 ms to read a task's history
// from, packs of 16 took 0.12 ms).
const packMax = 16

// journalSQL inserts events' bodies in packs, not linked, and one journal
// row per pack (see queueJournal). $1-$13 are the bodies' columns, one
// element per event, the events of each pack contiguous; $14 and $15 each
// pack's first and last element (from 1), $16 its workflow. The events'
// ids are drawn from events' sequence and sorted, so they ascend in the
// events' order whatever order nextval runs in. That order is the
// writer's (evs'), which the arrays, grouped by workflow, are not always
// in: then $17 gives each element's place in the writer's order, and its
// id is the id of that place (packIDsSQL). A pack's id is its first
// event's, and so is its journal row's. taskSeqsSQL is where the task
// seqs come from (see journalSQLs).
const journalSQL = `WITH a AS (SELECT (SELECT array_agg(g.id ORDER BY g.id) FROM (
			SELECT nextval('events_event_id_seq') AS id FROM generate_series(1, cardinality($1::text[]))) g) AS ids,
		taskSeqsSQL AS seqs),
	b AS (SELECT packIDsSQL AS ids, a.seqs FROM a),
	p AS (INSERT INTO event_packs (pack_id, workflow_id, event_ids, task_seqs, task_ids, kinds, owners, generations, ats, details,
			hash_versions, actor_kinds, actor_names, actor_principals, task_states, contents)
		SELECT b.ids[k.s], k.wf, b.ids[k.s:k.e], b.seqs[k.s:k.e], ($1::text[])[k.s:k.e], ($2::text[])[k.s:k.e],
			($3::text[])[k.s:k.e], ($4::bigint[])[k.s:k.e], ($5::bigint[])[k.s:k.e], ($6::text[])[k.s:k.e],
			($7::bigint[])[k.s:k.e], ($8::text[])[k.s:k.e], ($9::text[])[k.s:k.e], ($10::text[])[k.s:k.e],
			($11::text[])[k.s:k.e], ($12::text[])[k.s:k.e]
		FROM b, unnest($14::int[], $15::int[], $16::text[]) AS k(s, e, wf)
		RETURNING pack_id, workflow_id, event_ids)
	INSERT INTO event_journal (journal_id, workflow_id, event_ids)
	SELECT pack_id, workflow_id, event_ids FROM p RETURNING journal_id, workflow_id, event_ids`

// journalSQLs are journalSQL's four forms, by [found][moved]: found when
// some event's task seq is to be found (each event's own, through tasks'
// unique index on task_id, where the writer's is 0, as taskSeqOf does;
// else the writer's, the hot path), moved when the arrays are not in the
// writer's order.
var journalSQLs = func() (out [2][2]string) {
	for found, seqs := range []string{`$13::bigint[]`, `(SELECT array_agg(
			COALESCE(NULLIF(u.tseq, 0), (SELECT t.seq FROM tasks t WHERE t.task_id = u.task), 0) ORDER BY u.o)
			FROM unnest($13::bigint[], $1::text[]) WITH ORDINALITY AS u(tseq, task, o))`} {
		for moved, ids := range []string{`a.ids`, `(SELECT array_agg(a.ids[q.x] ORDER BY q.o) FROM unnest($17::int[]) WITH ORDINALITY AS q(x, o))`} {
			out[found][moved] = strings.NewReplacer("taskSeqsSQL", seqs, "packIDsSQL", ids).Replace(journalSQL)
		}
	}
	return out
}()

// queueJournal queues the insert of evs into packs without their links
// (no position, no hashes), and of one journal row per pack (journal_id
// its pack's first event's id, event_ids its events' ids in order), in
// one statement (journalSQL): each body is written once, where it stays,
// as an element of its pack's arrays, and a pack of up to packMax events
// takes one heap tuple and a few index entries, not three per event.
// evs are packed by workflow, each workflow's in their order (a workflow's
// events depend on each other's order; events of different workflows in
// one statement depend on none). The statement returns each journal row's
// id, workflow and ids (setJournalIDs).
func queueJournal(b *pgx.Batch, evs []tgdriver.EventRow) {
	n := len(evs)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return strings.Compare(evs[i].WorkflowID, evs[j].WorkflowID) })
	tasks, kinds, owners, details := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	aks, ans, aps, states, contents := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	gens, ats, hvs, tseqs := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	var starts, ends []int32
	var wfs []string
	found := false
	for k, i := range order {
		e := &evs[i]
		tasks[k], kinds[k], owners[k], details[k] = e.TaskID, e.Kind, e.Owner, e.Detail
		aks[k], ans[k], aps[k], states[k], contents[k] = e.ActorKind, e.ActorName, e.ActorPrincipal, e.TaskState, e.Content
		gens[k], ats[k], hvs[k], tseqs[k] = e.Generation, e.AtMS, int64(hashVersion(*e)), e.TaskSeq
		found = found || e.TaskSeq == 0
		if m := len(starts); m == 0 || wfs[m-1] != e.WorkflowID || int(ends[m-1]-starts[m-1]) == packMax-1 {
			starts, ends, wfs = append(starts, int32(k+1)), append(ends, int32(k+1)), append(wfs, e.WorkflowID)
		} else {
			ends[m-1] = int32(k + 1)
		}
	}
	args := []any{tasks, kinds, owners, gens, ats, details, hvs, aks, ans, aps, states, contents, tseqs, starts, ends, wfs}
	moved := 0
	for k, i := range order {
		if k != i {
			places := make([]int32, n)
			for k, i := range order {
				places[k] = int32(i + 1)
			}
			args, moved = append(args, places), 1
			break
		}
	}
	b.Queue(journalSQLs[boolIndex(found)][moved], args...)
}

// boolIndex is 1 for true, 0 for false.
func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// setJournalIDs reads the rows journalSQL returns and sets the EventID of
// each of evs, the events it journaled: a workflow's events took the ids
// of its packs' arrays, the packs in journal_id order, in order (see
// queueJournal). When the rows do not account for evs exactly (never
// expected), it clears them all: an event without its id is one the
// linker reads back (audit.Linker).
func setJournalIDs(rows pgx.Rows, evs []tgdriver.EventRow) error {
	type pack struct {
		first int64
		ids   []int64
	}
	packs := map[string][]pack{}
	for rows.Next() {
		var p pack
		var wf string
		if err := rows.Scan(&p.first, &wf, &p.ids); err != nil {
			rows.Close()
			return err
		}
		packs[wf] = append(packs[wf], p)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	ids := make(map[string][]int64, len(packs))
	for wf, ps := range packs {
		slices.SortFunc(ps, func(a, b pack) int { return cmp.Compare(a.first, b.first) })
		for _, p := range ps {
			ids[wf] = append(ids[wf], p.ids...)
		}
	}
	next := make(map[string]int, len(ids))
	for _, e := range evs {
		next[e.WorkflowID]++
	}
	for wf, n := range next {
		if len(ids[wf]) != n {
			for i := range evs {
				evs[i].EventID = 0
			}
			return nil
		}
		next[wf] = 0
	}
	for i := range evs {
		wf := evs[i].WorkflowID
		evs[i].EventID = ids[wf][next[wf]]
		next[wf]++
	}
	return nil
}

func hashVersion(e tgdriver.EventRow) int {
	if e.HashVersion == 0 {
		return 1
	}
	return e.HashVersion
}

// run sends b in one round trip and checks each statement's tag with the
// check of the same index (nil: none).
func (w *wtx) run(ctx context.Context, what string, b *pgx.Batch, checks []func(pgconn.CommandTag) error) error {
	br := w.c.SendBatch(ctx, b)
	for i := range b.Len() {
		tag, err := br.Exec()
		if err == nil && i < len(checks) && checks[i] != nil {
			err = checks[i](tag)
		}
		if err != nil {
			_ = br.Close()
			if errors.Is(err, tgdriver.ErrChainMoved) || errors.Is(err, tgdriver.ErrNoRows) {
				return err
			}
			return w.fail(ctx, what, err)
		}
	}
	if err := br.Close(); err != nil {
		return w.fail(ctx, what, err)
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
	if _, err := w.c.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, notifyPayload(w.d.replicaID, workflowID, requires)); err != nil {
		return w.fail(ctx, "notify", err)
	}
	return nil
}

// The prune's statements: the workflows that may go (pruneCandidatesSQL:
// unchanged before $1, at most $2), and the guarded delete of one
// (pruneWorkflowSQL: $1 if unchanged before $2), each judging a workflow
// finished when it has no unfinished task (unfinishedTasksOf, read from
// the workflows' rows w).
var (
	// A join, not inWorkflow: correlated with the outer row, an IN
	// subquery is planned as a filter over every task. OFFSET 0 keeps the
	// EXISTS a subplan run per workflow, which stops at its first
	// unfinished task: as an anti join, PostgreSQL hashed every unfinished
	// task of the database for each call (TestWorkflowReadsUseTaskNodes).
	unfinishedTasksOf = `EXISTS (SELECT 1 FROM task_nodes n JOIN tasks t ON t.seq = n.seq WHERE n.workflow_id = w.workflow_id
	AND t.state IN ('blocked', 'pending', 'claimed') OFFSET 0)`
	pruneCandidatesSQL = `SELECT w.workflow_id FROM workflows w WHERE w.updated_at_ms < $1 AND NOT ` + unfinishedTasksOf + `
		ORDER BY w.updated_at_ms, w.workflow_id COLLATE "C" LIMIT $2`
	pruneWorkflowSQL = `DELETE FROM workflows w WHERE w.workflow_id = $1 AND w.updated_at_ms < $2 AND NOT ` + unfinishedTasksOf + `
		AND NOT EXISTS (SELECT 1 FROM event_journal j WHERE j.workflow_id = w.workflow_id)
		RETURNING w.task_count, w.event_count, w.head_hash`
)

// PruneCandidates returns finished workflows unchanged since before beforeMS.
func (w *wtx) PruneCandidates(ctx context.Context, beforeMS int64, limit int) ([]string, error) {
	rows, err := w.c.Query(ctx, pruneCandidatesSQL, beforeMS, limit)
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
	err = w.c.QueryRow(ctx, pruneWorkflowSQL, workflowID, beforeMS).Scan(&p.Tasks, &p.Events, &p.HeadHash)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return tgdriver.PrunedRow{}, false, nil
	case err != nil:
		return tgdriver.PrunedRow{}, false, w.fail(ctx, "prune "+workflowID, err)
	}
	if _, err := w.c.Exec(ctx, `DELETE FROM claim_pauses WHERE workflow_id = $1`, workflowID); err != nil {
		return tgdriver.PrunedRow{}, false, w.fail(ctx, "prune the pause of "+workflowID, err)
	}
	// Its tasks and edges went with it (ON DELETE CASCADE); events have no
	// foreign key (a chain outlives nothing, but is checked for orphans).
	// Every event is linked (nothing journaled): in its own row, or in
	// event_links' runs, its body in events or in one of the workflow's
	// packs.
	if _, err := w.c.Exec(ctx, `WITH l AS (DELETE FROM event_links WHERE workflow_id = $1 RETURNING event_ids),
		bodies AS (DELETE FROM events e WHERE e.event_id IN (SELECT unnest(l.event_ids) FROM l)),
		packs AS (DELETE FROM event_packs WHERE workflow_id = $1)
		DELETE FROM events WHERE workflow_id = $1 AND wseq IS NOT NULL`, workflowID); err != nil {
		return tgdriver.PrunedRow{}, false, w.fail(ctx, "prune the events of "+workflowID, err)
	}
	if _, err := w.c.Exec(ctx, `INSERT INTO pruned_workflows (workflow_id, pruned_at_ms, task_count, event_count, head_hash)
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
	err := w.c.QueryRow(ctx, `SELECT alive_at_ms FROM server_clock WHERE singleton = 1 FOR UPDATE`).Scan(&ms)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, w.fail(ctx, "read the alive time", err)
	}
	return ms, true, nil
}

// TryTouchAlive records ms as the servers' alive time unless another
// transaction holds the row (SKIP LOCKED): it never waits. Over a recorded
// time it moves it only forward, by less than withinMS (the update's own
// predicate, on the row it holds).
func (w *wtx) TryTouchAlive(ctx context.Context, ms, withinMS int64) (bool, error) {
	var one int
	err := w.c.QueryRow(ctx, `SELECT 1 FROM server_clock WHERE singleton = 1 FOR UPDATE SKIP LOCKED`).Scan(&one)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// Held by another transaction, or never recorded. The insert
		// records a first alive time as TouchAlive would, only when no
		// committed row exists: ON CONFLICT alone would wait for a
		// transaction that updated the row and has not yet committed. It
		// waits only for a concurrent first insert.
		tag, err := w.c.Exec(ctx, `INSERT INTO server_clock (singleton, alive_at_ms)
			SELECT 1, $1 WHERE NOT EXISTS (SELECT 1 FROM server_clock WHERE singleton = 1)
			ON CONFLICT (singleton) DO NOTHING`, ms)
		if err != nil {
			return false, w.fail(ctx, "record the alive time", err)
		}
		return tag.RowsAffected() == 1, nil
	case err != nil:
		return false, w.fail(ctx, "lock the alive time", err)
	}
	tag, err := w.c.Exec(ctx, `UPDATE server_clock SET alive_at_ms = $1
		WHERE singleton = 1 AND alive_at_ms < $1 AND $1 - alive_at_ms < $2`, ms, withinMS)
	if err != nil {
		return false, w.fail(ctx, "record the alive time", err)
	}
	return tag.RowsAffected() == 1, nil
}

// TouchAlive records ms as the servers' alive time.
func (w *wtx) TouchAlive(ctx context.Context, ms int64) error {
	if _, err := w.c.Exec(ctx, `INSERT INTO server_clock (singleton, alive_at_ms) VALUES (1, $1)
		ON CONFLICT (singleton) DO UPDATE SET alive_at_ms = excluded.alive_at_ms`, ms); err != nil {
		return w.fail(ctx, "record the alive time", err)
	}
	return nil
}

// DueTasks returns up to limit pending tasks whose due time had come at
// atMS, earliest first (tasks_due), without locking them.
func (w *wtx) DueTasks(ctx context.Context, atMS int64, limit int) ([]tgdriver.TaskRef, error) {
	rows, err := w.c.Query(ctx, dueTasksSQL, atMS, limit)
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

// DueGates returns up to limit gates awaiting approval whose decision
// time had come at atMS, earliest first.
func (w *wtx) DueGates(ctx context.Context, atMS int64, limit int) ([]tgdriver.TaskRef, error) {
	rows, err := w.c.Query(ctx, dueGatesSQL, atMS, limit)
	if err != nil {
		return nil, w.fail(ctx, "find due gates", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (tgdriver.TaskRef, error) {
		var r tgdriver.TaskRef
		err := row.Scan(&r.Seq, &r.WorkflowID)
		return r, err
	})
	if err != nil {
		return nil, w.fail(ctx, "find due gates", err)
	}
	return out, nil
}

// Requests reads the requests kept under keys in one statement.
func (w *wtx) Requests(ctx context.Context, keys []string) (map[string]tgdriver.RequestRow, error) {
	rows, err := w.c.Query(ctx, requestsSQL, keys)
	if err != nil {
		return nil, w.fail(ctx, "read kept requests", err)
	}
	out, err := collectRequests(rows)
	if err != nil {
		return nil, w.fail(ctx, "read kept requests", err)
	}
	return out, nil
}

// requestsSQL reads the requests kept under keys (Requests, Fetch).
const requestsSQL = `SELECT request_key, principal, op, args, answer, created_at_ms FROM requests WHERE request_key = ANY($1::text[])`

// collectRequests reads the rows of requestsSQL, by key.
func collectRequests(rows pgx.Rows) (map[string]tgdriver.RequestRow, error) {
	out := map[string]tgdriver.RequestRow{}
	var r tgdriver.RequestRow
	_, err := pgx.ForEachRow(rows, []any{&r.Key, &r.Principal, &r.Op, &r.Args, &r.Answer, &r.CreatedAtMS}, func() error {
		out[r.Key] = r
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// keepRequestsSQL keeps a round's requests in one statement (Apply).
const keepRequestsSQL = `INSERT INTO requests (request_key, principal, op, args, answer, created_at_ms)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[])`

// queueKeepRequests queues the insert of rs (keepRequestsSQL).
func queueKeepRequests(b *pgx.Batch, rs []tgdriver.RequestRow) {
	n := len(rs)
	keys, principals, ops, args, answers, at := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
	for i, r := range rs {
		keys[i], principals[i], ops[i], args[i], answers[i], at[i] = r.Key, r.Principal, r.Op, r.Args, r.Answer, r.CreatedAtMS
	}
	b.Queue(keepRequestsSQL, keys, principals, ops, args, answers, at)
}

// KeepRequest inserts r. A concurrent transaction keeping the same key
// makes it wait for that one's end, then fail with a unique violation if
// it committed: Write retries, and the retry finds the row.
func (w *wtx) KeepRequest(ctx context.Context, r tgdriver.RequestRow) error {
	if _, err := w.c.Exec(ctx, `INSERT INTO requests (request_key, principal, op, args, answer, created_at_ms) VALUES ($1, $2, $3, $4, $5, $6)`,
		r.Key, r.Principal, r.Op, r.Args, r.Answer, r.CreatedAtMS); err != nil {
		return w.fail(ctx, "keep the request's answer", err)
	}
	return nil
}

// PruneRequests removes up to limit requests kept before beforeMS.
func (w *wtx) PruneRequests(ctx context.Context, beforeMS int64, limit int) (int, error) {
	tag, err := w.c.Exec(ctx, `DELETE FROM requests WHERE request_key IN
		(SELECT request_key FROM requests WHERE created_at_ms < $1 ORDER BY created_at_ms LIMIT $2 FOR UPDATE SKIP LOCKED)`, beforeMS, limit)
	if err != nil {
		return 0, w.fail(ctx, "remove expired requests", err)
	}
	return int(tag.RowsAffected()), nil
}

// RequestPrincipals returns the principals keeping more than keep requests.
func (w *wtx) RequestPrincipals(ctx context.Context, keep int) (map[string]int, error) {
	rows, err := w.c.Query(ctx, `SELECT principal, COUNT(*) FROM requests GROUP BY principal HAVING COUNT(*) > $1`, keep)
	if err != nil {
		return nil, w.fail(ctx, "count kept requests", err)
	}
	out := map[string]int{}
	var p string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&p, &n}, func() error { out[p] = int(n); return nil })
	if err != nil {
		return nil, w.fail(ctx, "count kept requests", err)
	}
	return out, nil
}

// TrimRequests removes up to limit of principal's requests beyond its keep
// newest, oldest first.
func (w *wtx) TrimRequests(ctx context.Context, principal string, keep, limit int) (int, error) {
	tag, err := w.c.Exec(ctx, `DELETE FROM requests WHERE request_key IN
		(SELECT request_key FROM requests WHERE principal = $1 AND request_key NOT IN
			(SELECT request_key FROM requests WHERE principal = $1 ORDER BY created_at_ms DESC, request_key COLLATE "C" DESC LIMIT $2)
		ORDER BY created_at_ms, request_key COLLATE "C" LIMIT $3 FOR UPDATE SKIP LOCKED)`, principal, keep, limit)
	if err != nil {
		return 0, w.fail(ctx, "trim the kept requests of "+principal, err)
	}
	return int(tag.RowsAffected()), nil
}

// SetPause records p, replacing the pause of its scope. It first takes
// tasks in EXCLUSIVE mode, which waits for every transaction holding a
// lock on a task row (a claim that has scanned but not committed) and
// holds off new ones until this transaction ends: a claim that commits
// after it took its snapshot after it, and its scan saw the pause.
func (w *wtx) SetPause(ctx context.Context, p tgdriver.PauseRow) (bool, error) {
	if _, err := w.c.Exec(ctx, `LOCK TABLE tasks IN EXCLUSIVE MODE`); err != nil {
		return false, w.fail(ctx, "hold off claims", err)
	}
	var inserted bool
	err := w.c.QueryRow(ctx, `INSERT INTO claim_pauses (workflow_id, paused_at_ms, reason, paused_by) VALUES ($1, $2, $3, $4)
		ON CONFLICT (workflow_id) DO UPDATE SET paused_at_ms = excluded.paused_at_ms, reason = excluded.reason, paused_by = excluded.paused_by
		RETURNING xmax = 0`, p.WorkflowID, p.AtMS, p.Reason, p.By).Scan(&inserted)
	if err != nil {
		return false, w.fail(ctx, "record the pause", err)
	}
	return !inserted, nil
}

// ClearPause removes the pause of workflowID ("" for all claiming).
func (w *wtx) ClearPause(ctx context.Context, workflowID string) (tgdriver.PauseRow, bool, error) {
	p := tgdriver.PauseRow{WorkflowID: workflowID}
	err := w.c.QueryRow(ctx, `DELETE FROM claim_pauses WHERE workflow_id = $1 RETURNING paused_at_ms, reason, paused_by`, workflowID).
		Scan(&p.AtMS, &p.Reason, &p.By)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return tgdriver.PauseRow{}, false, nil
	case err != nil:
		return tgdriver.PauseRow{}, false, w.fail(ctx, "remove the pause", err)
	}
	return p, true, nil
}

// EnsureKey creates concurrency key key, without limits, if it is new.
func (w *wtx) EnsureKey(ctx context.Context, key string, nowMS int64) error {
	if _, err := w.c.Exec(ctx, `INSERT INTO concurrency_keys (key, updated_at_ms) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, key, nowMS); err != nil {
		return w.fail(ctx, "create concurrency key", err)
	}
	return nil
}

// freeKeysSQL is FreeKeys' one statement: the delete of the idle rows
// without a limit among the keys (a data-modifying CTE runs whether or
// not it is read), and for each entry of the keys whose key has a cap,
// its first claimable task, in the entries' order. A row another
// transaction holds is left (SKIP LOCKED; the sweeper's PruneIdleKeys
// takes it later): claims of an uncapped key share its row (migration
// 0024), so this transaction, which holds its task rows, would otherwise
// wait for theirs while they wait for its tasks.
var freeKeysSQL = `WITH pruned AS (DELETE FROM concurrency_keys WHERE key IN (SELECT k.key FROM concurrency_keys k WHERE k.key = ANY($1::text[]) AND ` + idleKey + `
		FOR UPDATE SKIP LOCKED) RETURNING 1)
	SELECT h.* FROM unnest($1::text[]) WITH ORDINALITY AS f(key, n) CROSS JOIN LATERAL (SELECT ` + taskColumns + ` FROM tasks
		WHERE EXISTS (SELECT 1 FROM concurrency_keys c WHERE c.key = f.key AND c.max_claimed > 0) AND ` + keyHeadAt("f.key") + `) h
	ORDER BY f.n`

// FreeKeys implements tgdriver.Tx.FreeKeys in one statement (freeKeysSQL).
func (w *wtx) FreeKeys(ctx context.Context, keys []string) ([]tgdriver.TaskRow, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	return w.tasks(ctx, "free slots of concurrency keys", freeKeysSQL, keys)
}

// PruneIdleKeys deletes the idle keys without a limit among the limit
// keys after after. The guard is the delete's own predicate: a claim or a
// limit committed meanwhile is seen in the row it re-reads after waiting
// for the row's lock. A create's new ready task is not (the NOT EXISTS
// reads the statement's snapshot), which costs nothing: a key's row
// without a claim or a limit is what a missing row means, and the next
// claim makes it again (lockKeyRow).
func (w *wtx) PruneIdleKeys(ctx context.Context, after string, limit int) (int, string, error) {
	var last *string
	if err := w.c.QueryRow(ctx, pruneIdleKeysLastSQL, after, limit).Scan(&last); err != nil {
		return 0, "", w.fail(ctx, "find concurrency keys to prune", err)
	}
	if last == nil {
		return 0, "", nil
	}
	tag, err := w.c.Exec(ctx, pruneIdleKeysSQL, after, *last)
	if err != nil {
		return 0, "", w.fail(ctx, "prune idle concurrency keys", err)
	}
	return int(tag.RowsAffected()), *last, nil
}

// The statements of PruneIdleKeys: the last of the next keys in the
// primary key's order, then the delete of the idle ones up to it, each
// probing tasks_ready_by_key (plans pinned by TestPruneIdleKeysPlan).
const (
	pruneIdleKeysLastSQL = `SELECT MAX(key) FROM (SELECT key FROM concurrency_keys WHERE key > $1 ORDER BY key LIMIT $2) AS next`
	pruneIdleKeysSQL     = `DELETE FROM concurrency_keys k WHERE k.key > $1 AND k.key <= $2 AND ` + idleKey
)

// idleKey is the predicate of a row k of concurrency_keys that may go
// (PruneIdleKeys, FreeKeys): it holds no claim and no limit, and no task of
// the key is claimable. The claimable task is looked for by a scalar
// subquery with LIMIT 1, a subplan run per key row and planned for its
// first row, which looks the key up in tasks_ready_by_key. As NOT EXISTS
// the planner made it an anti-join, and, misled by a table's stale
// statistics (a workflow just created), walked a whole ready index for
// each key (4,754 buffers a call); as NOT EXISTS (... OFFSET 0), a subplan
// planned for all its rows, it read the whole table for a key with none
// (10,000 rows, 40 ms).
const idleKey = `k.claimed = 0 AND k.max_claimed = 0 AND k.rate_count = 0
	AND (SELECT 1 FROM tasks t WHERE t.concurrency_key = k.key AND t.concurrency_key <> ''
		AND t.state = 'pending' AND t.due_at_ms = 0 LIMIT 1) IS NULL`

// lockKeySQL locks a key's row in the mode its limit needs, in one
// statement: FOR KEY SHARE without a limit (claims write nothing to it,
// so they do not wait for one another; a change of the limit, FOR UPDATE,
// waits for them and they for it), FOR NO KEY UPDATE with one (the
// claim's guarded update follows). A row changed while the statement
// waited for it is checked again at its latest version, and one whose
// limit a change set or lifted meanwhile matches neither arm:
// lockKeyAgainSQL then locks it for writing, whatever it holds.
const (
	lockKeySQL = `WITH s AS (SELECT ` + keyColumns + ` FROM concurrency_keys WHERE key = $1 AND max_claimed = 0 AND rate_count = 0 FOR KEY SHARE),
		u AS (SELECT ` + keyColumns + ` FROM concurrency_keys WHERE key = $1 AND (max_claimed > 0 OR rate_count > 0) FOR NO KEY UPDATE)
		SELECT * FROM s UNION ALL SELECT * FROM u`
	lockKeyAgainSQL = `SELECT ` + keyColumns + ` FROM concurrency_keys WHERE key = $1 FOR NO KEY UPDATE`
	// lockKeysSQL is lockKeySQL of several keys, in one statement. The
	// keys after $2 in key order: each arm (w, v) takes its rows in key
	// order, waiting; a shared lock conflicts only with a change of a limit
	// (FOR UPDATE, one key at a time), so the writing locks, in key order
	// among themselves, are the ones whose order matters. The keys up to
	// $2 (the last the transaction holds): arms (s, u) with SKIP LOCKED,
	// which never wait, run first, and a last arm reads, without a lock,
	// those of their rows neither took: rows another transaction holds
	// (busy true). A row this transaction holds is not skipped.
	lockKeysSQL = `WITH s AS (SELECT ` + keyColumns + ` FROM concurrency_keys WHERE key = ANY($1::text[]) AND key COLLATE "C" <= $2
			AND max_claimed = 0 AND rate_count = 0 FOR KEY SHARE SKIP LOCKED),
		u AS (SELECT ` + keyColumns + ` FROM concurrency_keys WHERE key = ANY($1::text[]) AND key COLLATE "C" <= $2
			AND (max_claimed > 0 OR rate_count > 0) FOR NO KEY UPDATE SKIP LOCKED),
		w AS (SELECT ` + keyColumns + ` FROM concurrency_keys WHERE key = ANY($1::text[]) AND key COLLATE "C" > $2
			AND max_claimed = 0 AND rate_count = 0 ORDER BY key COLLATE "C" FOR KEY SHARE),
		v AS (SELECT ` + keyColumns + ` FROM concurrency_keys WHERE key = ANY($1::text[]) AND key COLLATE "C" > $2
			AND (max_claimed > 0 OR rate_count > 0) ORDER BY key COLLATE "C" FOR NO KEY UPDATE)
		SELECT *, false FROM s UNION ALL SELECT *, false FROM u UNION ALL SELECT *, false FROM w UNION ALL SELECT *, false FROM v
		UNION ALL SELECT ` + keyColumns + `, true FROM concurrency_keys WHERE key = ANY($1::text[]) AND key COLLATE "C" <= $2
			AND key NOT IN (SELECT key FROM s UNION ALL SELECT key FROM u)`
)

// LockKeys implements tgdriver.Tx.LockKeys in one statement
// (lockKeysSQL).
func (w *wtx) LockKeys(ctx context.Context, keys []string, held string) (locked []tgdriver.KeyRow, busy []string, err error) {
	if len(keys) == 0 {
		return nil, nil, nil
	}
	rows, err := w.c.Query(ctx, lockKeysSQL, keys, held)
	if err != nil {
		return nil, nil, w.fail(ctx, "lock concurrency keys", err)
	}
	defer rows.Close()
	for rows.Next() {
		var isBusy bool
		k, err := scanKey(rows, &isBusy)
		if err != nil {
			return nil, nil, w.fail(ctx, "lock concurrency keys", err)
		}
		if isBusy {
			busy = append(busy, k.Key)
		} else {
			locked = append(locked, k)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, w.fail(ctx, "lock concurrency keys", err)
	}
	slices.SortFunc(locked, func(a, b tgdriver.KeyRow) int { return strings.Compare(a.Key, b.Key) })
	slices.Sort(busy)
	return locked, busy, nil
}

// LockKey returns concurrency key key, locked: FOR KEY SHARE when it has
// no limit, FOR NO KEY UPDATE when it has one (lockKeySQL).
func (w *wtx) LockKey(ctx context.Context, key string) (tgdriver.KeyRow, bool, error) {
	k, err := scanKey(w.c.QueryRow(ctx, lockKeySQL, key))
	if errors.Is(err, pgx.ErrNoRows) {
		k, err = scanKey(w.c.QueryRow(ctx, lockKeyAgainSQL, key))
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return tgdriver.KeyRow{}, false, nil
	case err != nil:
		return tgdriver.KeyRow{}, false, w.fail(ctx, "lock concurrency key", err)
	}
	return k, true, nil
}

// countClaimedOfKeySQL counts a key's claimed tasks through the index of
// live leases (tasks_leases, whose predicate is state = 'claimed'): it
// reads the claims in flight, never the key's queued tasks or the table
// (TestClaimScanReadsOnlyClosedKeys).
const countClaimedOfKeySQL = `SELECT count(*) FROM tasks WHERE concurrency_key = $1 AND concurrency_key <> '' AND state = 'claimed'`

// LockKeyForLimit returns concurrency key key locked FOR UPDATE (it waits
// for the claims of the key in flight, FOR KEY SHARE or FOR NO KEY
// UPDATE, and those after wait for it) and its claimed tasks, counted by
// a statement of their own after the lock: READ COMMITTED gives it a
// snapshot that holds what those claims committed.
func (w *wtx) LockKeyForLimit(ctx context.Context, key string) (tgdriver.KeyRow, bool, int, error) {
	k, err := scanKey(w.c.QueryRow(ctx, `SELECT `+keyColumns+` FROM concurrency_keys WHERE key = $1 FOR UPDATE`, key))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return tgdriver.KeyRow{}, false, 0, nil
	case err != nil:
		return tgdriver.KeyRow{}, false, 0, w.fail(ctx, "lock concurrency key", err)
	}
	var n int
	if err := w.c.QueryRow(ctx, countClaimedOfKeySQL, key).Scan(&n); err != nil {
		return tgdriver.KeyRow{}, false, 0, w.fail(ctx, "count the claimed tasks of a concurrency key", err)
	}
	return k, true, n, nil
}

// UpdateKey writes k over old if the row still holds old.
func (w *wtx) UpdateKey(ctx context.Context, old, k tgdriver.KeyRow) (bool, error) {
	tag, err := w.c.Exec(ctx, `UPDATE concurrency_keys SET max_claimed = $1, claimed = $2, rate_count = $3, rate_interval_ms = $4, recent_ms = $5,
		rate_open_at_ms = $6, updated_at_ms = $7, updated_by = $8
		WHERE key = $9 AND claimed = $10 AND recent_ms = $11 AND max_claimed = $12 AND rate_count = $13 AND rate_interval_ms = $14`,
		k.MaxClaimed, k.Claimed, k.RateCount, k.RateIntervalMS, k.RecentMS, k.RateOpenAtMS, k.UpdatedAtMS, k.UpdatedBy,
		old.Key, old.Claimed, old.RecentMS, old.MaxClaimed, old.RateCount, old.RateIntervalMS)
	if err != nil {
		return false, w.fail(ctx, "update concurrency key", err)
	}
	return tag.RowsAffected() == 1, nil
}
