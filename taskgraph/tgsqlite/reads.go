package tgsqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// querier runs the reads' statements: on the read pool, in a read snapshot,
// or on the writer's connection inside the batch transaction.
type querier interface {
	queryRow(ctx context.Context, query string, args ...any) *sql.Row
	query(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// readStmts keeps the read pool's statements prepared, by SQL text: a
// database/sql Stmt compiles its statement once on each pool connection it
// runs on and keeps it there, where a query by text compiles it at every
// call. Like the writer's stmtCache it is bounded by maxCachedStmts (the
// reads are a fixed set of texts); a text beyond the bound, or one that
// does not compile, runs unprepared, and the query reports the error.
//
// Preparing a statement takes a pool connection. A read in a snapshot
// holds one already, and with the pool's every connection held so, a
// prepare would wait for ever: a snapshot's read never prepares. It runs
// a statement kept by an earlier read, else its text, and leaves the text
// for the next snapshot to prepare before it takes its connection
// (prepareWanted).
type readStmts struct {
	db   *sql.DB
	mu   sync.Mutex
	m    map[string]*sql.Stmt
	want map[string]struct{}
}

func newReadStmts(db *sql.DB) *readStmts {
	return &readStmts{db: db, m: make(map[string]*sql.Stmt), want: make(map[string]struct{})}
}

// get returns q's statement, preparing it on first use (outside the lock:
// preparing waits for a pool connection); nil when q runs unprepared.
// Never call it holding a pool connection.
func (s *readStmts) get(ctx context.Context, q string) *sql.Stmt {
	s.mu.Lock()
	st, full := s.m[q], len(s.m) >= maxCachedStmts
	s.mu.Unlock()
	if st != nil || full {
		return st
	}
	st, err := s.db.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.want, q)
	if had := s.m[q]; had != nil {
		st.Close()
		return had
	}
	if len(s.m) >= maxCachedStmts {
		st.Close()
		return nil
	}
	s.m[q] = st
	return st
}

// peek returns q's statement if one is kept, and otherwise notes q for
// prepareWanted and returns nil: it never prepares.
func (s *readStmts) peek(q string) *sql.Stmt {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.m[q]
	if st == nil && len(s.m)+len(s.want) < maxCachedStmts {
		s.want[q] = struct{}{}
	}
	return st
}

// prepareWanted prepares the texts snapshots ran unprepared. Call it
// holding no pool connection.
func (s *readStmts) prepareWanted(ctx context.Context) {
	s.mu.Lock()
	if len(s.want) == 0 {
		s.mu.Unlock()
		return
	}
	qs := make([]string, 0, len(s.want))
	for q := range s.want {
		qs = append(qs, q)
	}
	clear(s.want)
	s.mu.Unlock()
	for _, q := range qs {
		s.get(ctx, q)
	}
}

// close closes every statement kept.
func (s *readStmts) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for q, st := range s.m {
		st.Close()
		delete(s.m, q)
	}
	clear(s.want)
}

// poolQuerier reads on committed state through the read pool.
type poolQuerier struct{ stmts *readStmts }

func (p poolQuerier) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	if st := p.stmts.get(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.stmts.db.QueryRowContext(ctx, q, args...)
}

func (p poolQuerier) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := p.stmts.get(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return p.stmts.db.QueryContext(ctx, q, args...)
}

// txQuerier reads in one read transaction (Snapshot) with the pool's kept
// statements (readStmts.peek): Tx.StmtContext runs one on the
// transaction's connection, prepared there once, and closes it with the
// transaction.
type txQuerier struct {
	tx    *sql.Tx
	stmts *readStmts
}

func (p txQuerier) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	if st := p.stmts.peek(q); st != nil {
		return p.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return p.tx.QueryRowContext(ctx, q, args...)
}

func (p txQuerier) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := p.stmts.peek(q); st != nil {
		return p.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return p.tx.QueryContext(ctx, q, args...)
}

// reads implements tgdriver.Reads on a querier.
type reads struct{ q querier }

var _ tgdriver.Reads = (*reads)(nil)

// taskColumns is the column list every task read selects, in scanTask order.
const taskColumns = `seq, task_id, workflow_id, node_id, payload, depends_on, state, owner, generation,
	token_hash, lease_expires_at_ms, lease_ms, attempts, max_attempts, unmet, result, error, status_message,
	cancel_cause, created_at_ms, updated_at_ms, created_by, priority, requires, due_at_ms, retry_delay_ms, dependents,
	report, usage_input_tokens, usage_output_tokens, usage_cost_usd, prior_input_tokens, prior_output_tokens, prior_cost_usd, lease_losses,
	concurrency_key, kind, gate_timeout_ms, gate_on_timeout`

// taskColumnsNoBodies is taskColumns with the payload read as JSON null
// and the result as NULL (ListFilter.NoBodies): neither is copied out of
// the row.
var taskColumnsNoBodies = tgdriver.NoBodiesColumns(taskColumns)

type scanner interface{ Scan(dest ...any) error }

// scanTask reads one task row; NULL columns become zero values (see
// tgdriver.TaskRow), and HasResult tells a NULL result from any value.
func scanTask(sc scanner) (tgdriver.TaskRow, error) {
	var (
		r                      tgdriver.TaskRow
		owner, result, errText sql.NullString
		createdBy, report      sql.NullString
		leaseAt, leaseMS, ccs  sql.NullInt64
	)
	err := sc.Scan(&r.Seq, &r.TaskID, &r.WorkflowID, &r.NodeID, &r.Payload, &r.DependsOn, &r.State, &owner, &r.Generation,
		&r.TokenHash, &leaseAt, &leaseMS, &r.Attempts, &r.MaxAttempts, &r.Unmet, &result, &errText, &r.StatusMessage,
		&ccs, &r.CreatedAtMS, &r.UpdatedAtMS, &createdBy, &r.Priority, &r.Requires, &r.DueAtMS, &r.RetryDelayMS, &r.Dependents,
		&report, &r.Usage.InputTokens, &r.Usage.OutputTokens, &r.Usage.CostUSD, &r.PriorUsage.InputTokens, &r.PriorUsage.OutputTokens, &r.PriorUsage.CostUSD, &r.LeaseLosses,
		&r.ConcurrencyKey, &r.Kind, &r.GateTimeoutMS, &r.GateOnTimeout)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return tgdriver.TaskRow{}, tgdriver.ErrNoRows
		}
		return tgdriver.TaskRow{}, err
	}
	r.Owner = owner.String
	r.LeaseExpiresAtMS = leaseAt.Int64
	r.LeaseMS = leaseMS.Int64
	r.Result, r.HasResult = result.String, result.Valid
	r.Error = errText.String
	r.CancelCause = ccs.Int64
	r.CreatedBy = createdBy.String
	r.Report = report.String
	return r, nil
}

func noRows(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return tgdriver.ErrNoRows
	}
	return err
}

const (
	sqlTaskByID   = `SELECT ` + taskColumns + ` FROM tasks WHERE task_id = ?`
	sqlTaskBySeq  = `SELECT ` + taskColumns + ` FROM tasks WHERE seq = ?`
	sqlTaskByNode = `SELECT ` + taskColumns + ` FROM tasks WHERE workflow_id = ? AND node_id = ?`
	// ListTasks, by which filters are set, after SELECT and the columns;
	// LIMIT -1 is no limit.
	sqlListAll        = ` FROM tasks ORDER BY seq LIMIT CAST(? AS INTEGER)`
	sqlListWF         = ` FROM tasks WHERE workflow_id = CAST(? AS TEXT) ORDER BY seq LIMIT CAST(? AS INTEGER)`
	sqlListState      = ` FROM tasks WHERE state = CAST(? AS TEXT) ORDER BY seq LIMIT CAST(? AS INTEGER)`
	sqlListWFState    = ` FROM tasks WHERE workflow_id = CAST(? AS TEXT) AND state = CAST(? AS TEXT) ORDER BY seq LIMIT CAST(? AS INTEGER)`
	sqlCountByState   = `SELECT state, COUNT(*) FROM tasks GROUP BY state`
	sqlWorkflowCounts = `SELECT state, COUNT(*), COALESCE(SUM(state = 'claimed' AND lease_expires_at_ms <= CAST(? AS INTEGER)), 0)
		FROM tasks WHERE workflow_id = CAST(? AS TEXT) GROUP BY state`
	sqlDependencies = `SELECT t.seq, t.task_id, t.node_id, t.state FROM edges e JOIN tasks t ON t.seq = e.dep_seq WHERE e.task_seq = CAST(? AS INTEGER) ORDER BY t.seq`
	// The newest event of a task at a generation: a journaled one is newer
	// than any linked one.
	sqlLastEventOfGen = `SELECT kind, at_ms FROM (
		SELECT kind, at_ms, 1 AS src, journal_id AS id FROM event_journal
			WHERE workflow_id = (SELECT workflow_id FROM tasks WHERE task_id = ?1) AND task_id = ?1 AND generation = ?2
		UNION ALL SELECT kind, at_ms, 0, event_id FROM events
			WHERE task_seq = COALESCE((SELECT seq FROM tasks WHERE task_id = ?1), 0) AND task_id = ?1 AND generation = ?2)
		ORDER BY src DESC, id DESC LIMIT 1`
	workflowColumns  = `workflow_id, task_count, event_count, head_hash, created_at_ms, updated_at_ms`
	sqlWorkflow      = `SELECT ` + workflowColumns + ` FROM workflows WHERE workflow_id = ?`
	sqlWorkflows     = `SELECT ` + workflowColumns + ` FROM workflows ORDER BY workflow_id`
	sqlWorkflowEdges = `SELECT d.node_id, t.node_id FROM edges e JOIN tasks d ON d.seq = e.dep_seq
		JOIN tasks t ON t.seq = e.task_seq WHERE t.workflow_id = CAST(? AS TEXT) ORDER BY t.seq, d.seq`
	eventColumns = `event_id, workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash,
		hash_version, actor_kind, actor_name, actor_principal, task_state, content`
	// journalColumns reads a journal entry as eventColumns read an event:
	// its journal id as event_id, no position and no link.
	journalColumns = `journal_id, workflow_id, 0, task_id, kind, owner, generation, at_ms, detail, '', '',
		hash_version, actor_kind, actor_name, actor_principal, task_state, content`
	// A task's or workflow's events, then its journaled ones (in one
	// statement, so that an entry the linker moves meanwhile is read once).
	sqlTaskEvents = `SELECT ` + eventColumns + ` FROM (SELECT ` + eventColumns + `, 0 AS src, event_id AS ord FROM events
			WHERE task_seq = COALESCE((SELECT seq FROM tasks WHERE task_id = ?1), 0) AND task_id = ?1
		UNION ALL SELECT ` + journalColumns + `, 1, journal_id FROM event_journal
			WHERE workflow_id = (SELECT workflow_id FROM tasks WHERE task_id = ?2) AND task_id = ?2) ORDER BY src, ord`
	sqlWorkflowEvents = `SELECT ` + eventColumns + ` FROM (SELECT ` + eventColumns + `, 0 AS src, wseq AS ord FROM events WHERE workflow_id = ?
		UNION ALL SELECT ` + journalColumns + `, 1, journal_id FROM event_journal WHERE workflow_id = ?) ORDER BY src, ord`
	sqlJournaledWorkflows = `SELECT workflow_id FROM event_journal GROUP BY workflow_id ORDER BY MIN(journal_id) LIMIT CAST(? AS INTEGER)`
	sqlOrphanEvents       = `SELECT e.workflow_id FROM (SELECT workflow_id FROM events UNION ALL SELECT workflow_id FROM event_journal) e
		LEFT JOIN workflows w ON w.workflow_id = e.workflow_id WHERE w.workflow_id IS NULL LIMIT 1`

	// The lookups every claim-next runs, and the one the sweeper and waiting
	// claims run. Each must read only the first entries of a partial index
	// (of pending or of claimed tasks), whatever the number of other tasks.
	// Without statistics SQLite may prefer another index (before 0015,
	// tasks_by_state), which for the lease queries read every claimed task
	// and sorted them, so INDEXED BY pins the index: a schema change that
	// drops it makes these statements fail to prepare rather than silently
	// scan.
	sqlExpiredLeases = `SELECT seq, workflow_id, lease_expires_at_ms FROM tasks INDEXED BY tasks_leases
		WHERE state = 'claimed' AND lease_expires_at_ms <= ? ORDER BY lease_expires_at_ms LIMIT CAST(? AS INTEGER)`
	sqlNextLeaseExpiry  = `SELECT MIN(lease_expires_at_ms) FROM tasks INDEXED BY tasks_leases WHERE state = 'claimed'`
	sqlPendingWorkflows = `SELECT workflow_id FROM tasks INDEXED BY tasks_ready_by_priority WHERE state = 'pending' AND due_at_ms = 0 AND key_parked = 0
		ORDER BY priority DESC, seq LIMIT CAST(? AS INTEGER)`
	sqlDueTasks = `SELECT seq, workflow_id FROM tasks INDEXED BY tasks_due
		WHERE state = 'pending' AND due_at_ms > 0 AND due_at_ms <= ? ORDER BY due_at_ms LIMIT CAST(? AS INTEGER)`
	sqlNextDue = `SELECT MIN(due_at_ms) FROM tasks INDEXED BY tasks_due WHERE state = 'pending' AND due_at_ms > 0`
	// The gates awaiting approval with a decision time (tasks_gate_due).
	sqlDueGates = `SELECT seq, workflow_id FROM tasks INDEXED BY tasks_gate_due
		WHERE kind = 'gate' AND state = 'blocked' AND due_at_ms > 0 AND due_at_ms <= ? ORDER BY due_at_ms LIMIT CAST(? AS INTEGER)`
	sqlNextGateDue = `SELECT MIN(due_at_ms) FROM tasks INDEXED BY tasks_gate_due WHERE kind = 'gate' AND state = 'blocked' AND due_at_ms > 0`
)

// requiresAmongCaps is true when every tag of a task's requires (canonical:
// tags joined by one space) is among the capabilities bound as a JSON array;
// tags are identifiers, so the requires text turns into a JSON array as is.
const requiresAmongCaps = `(requires = '' OR NOT EXISTS (SELECT 1 FROM json_each('["' || replace(requires, ' ', '","') || '"]') AS r
		WHERE r.value NOT IN (SELECT value FROM json_each(?))))`

// The claim-next lookups (see doc.go, "Claim-next"), by whether they are
// within one workflow and whether the claim has capabilities: without, the
// first entry of tasks_ready_plain (or the workflow's entries of
// tasks_ready_by_workflow_priority that require nothing); with, the first
// entry of tasks_ready_by_priority (or tasks_ready_by_workflow_priority)
// whose requires are among the capabilities.
var (
	sqlNextPending               = claimableSQL(`SELECT `+taskColumns, false, false, false) + ` LIMIT 1`
	sqlNextPendingCaps           = claimableSQL(`SELECT `+taskColumns, false, true, false) + ` LIMIT 1`
	sqlNextPendingInWorkflow     = claimableSQL(`SELECT `+taskColumns, true, false, false) + ` LIMIT 1`
	sqlNextPendingInWorkflowCaps = claimableSQL(`SELECT `+taskColumns, true, true, false) + ` LIMIT 1`
	sqlClaimable                 = claimableSQL(`SELECT `+taskColumns, false, false, true) + ` LIMIT CAST(? AS INTEGER)`
	sqlClaimableCaps             = claimableSQL(`SELECT `+taskColumns, false, true, true) + ` LIMIT CAST(? AS INTEGER)`
	sqlClaimableInWorkflow       = claimableSQL(`SELECT `+taskColumns, true, false, true) + ` LIMIT CAST(? AS INTEGER)`
	sqlClaimableInWorkflowCaps   = claimableSQL(`SELECT `+taskColumns, true, true, true) + ` LIMIT CAST(? AS INTEGER)`
	sqlCountClaimable            = `SELECT COUNT(*) FROM (` + claimableSQL(`SELECT 1`, false, false, false) + ` LIMIT CAST(? AS INTEGER))`
	sqlCountClaimableCaps        = `SELECT COUNT(*) FROM (` + claimableSQL(`SELECT 1`, false, true, false) + ` LIMIT CAST(? AS INTEGER))`
	sqlCountClaimableWF          = `SELECT COUNT(*) FROM (` + claimableSQL(`SELECT 1`, true, false, false) + ` LIMIT CAST(? AS INTEGER))`
	sqlCountClaimableWFCaps      = `SELECT COUNT(*) FROM (` + claimableSQL(`SELECT 1`, true, true, false) + ` LIMIT CAST(? AS INTEGER))`
)

// notPaused excludes the tasks of paused workflows, and everything while
// all claiming is paused (claim_pauses). Both subqueries are uncorrelated:
// SQLite evaluates each once per statement (the set of paused workflows
// into an ephemeral index probed per row), so with nothing paused the scan
// costs what it did.
const notPaused = `NOT EXISTS (SELECT 1 FROM claim_pauses WHERE workflow_id = '')
	AND workflow_id NOT IN (SELECT workflow_id FROM claim_pauses)`

// keyOpen passes over the tasks of a full concurrency key (claimed at its
// cap); keyOpenAt also over those of a key whose rate opens after the
// server time given as its argument (tgdriver.KeyRow.Closed). A task
// without a key never reads concurrency_keys; the subquery is
// uncorrelated, evaluated once per statement, and reads only the closed
// keys: the full ones from concurrency_keys_at_cap, the rate-held ones
// from the range of concurrency_keys_rate_open past the time (migration
// 0017; pinned by TestClaimAndLeaseQueries), so its cost does not grow
// with the number of keys.
const (
	keyOpen = `(concurrency_key = '' OR concurrency_key NOT IN
		(SELECT key FROM concurrency_keys INDEXED BY concurrency_keys_at_cap WHERE at_cap))`
	keyOpenAt = `(concurrency_key = '' OR concurrency_key NOT IN
		(SELECT key FROM concurrency_keys INDEXED BY concurrency_keys_at_cap WHERE at_cap
		UNION ALL SELECT key FROM concurrency_keys INDEXED BY concurrency_keys_rate_open WHERE rate_open_at_ms > 0 AND rate_open_at_ms > ?))`
)

// claimableSQL is the claim-next scan: its arguments are the workflow (when
// inWorkflow), the server time (when atRate: keys rate-limited then are
// passed over, else only full keys), and then the capabilities as a JSON
// array (when caps).
func claimableSQL(sel string, inWorkflow, caps, atRate bool) string {
	q := sel + ` FROM tasks INDEXED BY `
	switch {
	case inWorkflow:
		q += `tasks_ready_by_workflow_priority WHERE workflow_id = CAST(? AS TEXT) AND `
	case caps:
		q += `tasks_ready_by_priority WHERE `
	default:
		q += `tasks_ready_plain WHERE `
	}
	q += `state = 'pending' AND due_at_ms = 0 AND key_parked = 0 AND ` + notPaused + ` AND `
	if atRate {
		q += keyOpenAt + ` AND `
	} else {
		q += keyOpen + ` AND `
	}
	if caps {
		q += requiresAmongCaps
	} else {
		q += `requires = ''`
	}
	return q + ` ORDER BY priority DESC, seq`
}

// claimableArgs are claimableSQL's arguments; atMS is the server time of
// a scan atRate, nil for one that is not.
func claimableArgs(workflowID string, caps []string, atMS ...int64) []any {
	var args []any
	if workflowID != "" {
		args = append(args, workflowID)
	}
	args = append(args, anys(atMS)...)
	if len(caps) > 0 {
		b, _ := json.Marshal(caps)
		args = append(args, string(b))
	}
	return args
}

// claimableQuery picks the claim-next statement (next) or its count.
func claimableQuery(workflowID string, caps []string, count bool) string {
	wf, c := workflowID != "", len(caps) > 0
	switch {
	case count && wf && c:
		return sqlCountClaimableWFCaps
	case count && wf:
		return sqlCountClaimableWF
	case count && c:
		return sqlCountClaimableCaps
	case count:
		return sqlCountClaimable
	case wf && c:
		return sqlNextPendingInWorkflowCaps
	case wf:
		return sqlNextPendingInWorkflow
	case c:
		return sqlNextPendingCaps
	}
	return sqlNextPending
}

// CountClaimable counts, up to limit, the claimable tasks a claim-next of
// workflowID with caps could take.
func (r *reads) CountClaimable(ctx context.Context, workflowID string, caps []string, limit int) (int, error) {
	var n int
	args := append(claimableArgs(workflowID, caps), limit)
	if err := r.q.queryRow(ctx, claimableQuery(workflowID, caps, true), args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count claimable tasks: %w", err)
	}
	return n, nil
}

// Pauses returns the pauses in effect: all claiming's first, then
// workflowID's, or up to limit workflows' when workflowID is "".
func (r *reads) Pauses(ctx context.Context, workflowID string, limit int) ([]tgdriver.PauseRow, error) {
	q, args := `SELECT workflow_id, paused_at_ms, reason, paused_by FROM claim_pauses WHERE workflow_id IN ('', ?) ORDER BY workflow_id`, []any{workflowID}
	if workflowID == "" {
		q, args = `SELECT workflow_id, paused_at_ms, reason, paused_by FROM claim_pauses ORDER BY workflow_id LIMIT CAST(? AS INTEGER)`, []any{limit + 1}
	}
	rows, err := r.q.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read the pauses: %w", err)
	}
	defer rows.Close()
	var out []tgdriver.PauseRow
	for rows.Next() {
		var p tgdriver.PauseRow
		if err := rows.Scan(&p.WorkflowID, &p.AtMS, &p.Reason, &p.By); err != nil {
			return nil, fmt.Errorf("read the pauses: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the pauses: %w", err)
	}
	if workflowID == "" && len(out) > 0 && out[0].WorkflowID != "" && len(out) > limit {
		out = out[:limit] // no pause of all: limit workflows only
	}
	return out, nil
}

// NextDue returns the earliest due time of a pending task not yet promoted.
func (r *reads) NextDue(ctx context.Context) (int64, bool, error) {
	var ms sql.NullInt64
	if err := r.q.queryRow(ctx, sqlNextDue).Scan(&ms); err != nil {
		return 0, false, err
	}
	return ms.Int64, ms.Valid, nil
}

// NextGateDue returns the earliest decision time of a gate awaiting
// approval with a timeout.
func (r *reads) NextGateDue(ctx context.Context) (int64, bool, error) {
	var ms sql.NullInt64
	if err := r.q.queryRow(ctx, sqlNextGateDue).Scan(&ms); err != nil {
		return 0, false, err
	}
	return ms.Int64, ms.Valid, nil
}

// TaskByID returns the task with id taskID, or tgdriver.ErrNoRows.
func (r *reads) TaskByID(ctx context.Context, taskID string) (tgdriver.TaskRow, error) {
	return scanTask(r.q.queryRow(ctx, sqlTaskByID, taskID))
}

// TaskBySeq returns the task with seq, or tgdriver.ErrNoRows.
func (r *reads) TaskBySeq(ctx context.Context, seq int64) (tgdriver.TaskRow, error) {
	return scanTask(r.q.queryRow(ctx, sqlTaskBySeq, seq))
}

// TaskByNode returns node nodeID of workflowID, or tgdriver.ErrNoRows.
func (r *reads) TaskByNode(ctx context.Context, workflowID, nodeID string) (tgdriver.TaskRow, error) {
	return scanTask(r.q.queryRow(ctx, sqlTaskByNode, workflowID, nodeID))
}

// collectTasks scans every row of rows (or returns err) and closes them.
func collectTasks(rows *sql.Rows, err error) ([]tgdriver.TaskRow, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []tgdriver.TaskRow
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// ListTasks returns tasks matching f in seq order.
func (r *reads) ListTasks(ctx context.Context, f tgdriver.ListFilter) ([]tgdriver.TaskRow, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = -1
	}
	sel := `SELECT ` + taskColumns
	if f.NoBodies {
		sel = `SELECT ` + taskColumnsNoBodies
	}
	var out []tgdriver.TaskRow
	var err error
	switch {
	case f.WorkflowID != "" && f.State != "":
		out, err = collectTasks(r.q.query(ctx, sel+sqlListWFState, f.WorkflowID, f.State, limit))
	case f.WorkflowID != "":
		out, err = collectTasks(r.q.query(ctx, sel+sqlListWF, f.WorkflowID, limit))
	case f.State != "":
		out, err = collectTasks(r.q.query(ctx, sel+sqlListState, f.State, limit))
	default:
		out, err = collectTasks(r.q.query(ctx, sel+sqlListAll, limit))
	}
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return out, nil
}

// CountByState counts tasks per state over all workflows; states without
// tasks are absent.
func (r *reads) CountByState(ctx context.Context) (map[string]int, error) {
	rows, err := r.q.query(ctx, sqlCountByState)
	if err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	defer rows.Close()
	out := make(map[string]int, 6)
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[st] = n
	}
	return out, rows.Err()
}

// WorkflowUsage sums the usage of the tasks of workflowID ("" for all).
func (r *reads) WorkflowUsage(ctx context.Context, workflowID string) (tgdriver.Usage, error) {
	q := sqlUsageAll
	var args []any
	if workflowID != "" {
		q, args = sqlUsageWorkflow, []any{workflowID}
	}
	var u tgdriver.Usage
	if err := r.q.queryRow(ctx, q, args...).Scan(&u.InputTokens, &u.OutputTokens, &u.CostUSD); err != nil {
		return tgdriver.Usage{}, fmt.Errorf("sum usage: %w", err)
	}
	return u, nil
}

// The sums of WorkflowUsage.
const (
	sqlUsageSums = `SELECT COALESCE(SUM(usage_input_tokens + prior_input_tokens), 0), COALESCE(SUM(usage_output_tokens + prior_output_tokens), 0),
	COALESCE(SUM(usage_cost_usd + prior_cost_usd), 0.0) FROM tasks`
	sqlUsageAll      = sqlUsageSums
	sqlUsageWorkflow = sqlUsageSums + ` WHERE workflow_id = ?`
)

// WorkflowCounts counts the tasks of workflowID per state, and its stuck
// claims (claimed, lease expired at or before nowMS).
func (r *reads) WorkflowCounts(ctx context.Context, workflowID string, nowMS int64) (map[string]int, int, error) {
	rows, err := r.q.query(ctx, sqlWorkflowCounts, nowMS, workflowID)
	if err != nil {
		return nil, 0, fmt.Errorf("count tasks of workflow %s: %w", workflowID, err)
	}
	defer rows.Close()
	out := make(map[string]int, 6)
	stuck := 0
	for rows.Next() {
		var st string
		var n, late int
		if err := rows.Scan(&st, &n, &late); err != nil {
			return nil, 0, err
		}
		out[st] = n
		stuck += late
	}
	return out, stuck, rows.Err()
}

// NextLeaseExpiry returns the earliest lease expiry of a claimed task.
func (r *reads) NextLeaseExpiry(ctx context.Context) (int64, bool, error) {
	var ms sql.NullInt64
	if err := r.q.queryRow(ctx, sqlNextLeaseExpiry).Scan(&ms); err != nil {
		return 0, false, err
	}
	return ms.Int64, ms.Valid, nil
}

// Dependencies returns the dependencies of task seq, in seq order.
func (r *reads) Dependencies(ctx context.Context, seq int64) ([]tgdriver.DepRow, error) {
	rows, err := r.q.query(ctx, sqlDependencies, seq)
	if err != nil {
		return nil, fmt.Errorf("read dependencies: %w", err)
	}
	defer rows.Close()
	var out []tgdriver.DepRow
	for rows.Next() {
		var d tgdriver.DepRow
		if err := rows.Scan(&d.Seq, &d.TaskID, &d.NodeID, &d.State); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// LastEventOfGeneration returns the kind and time of the newest event of
// taskID recorded at generation.
func (r *reads) LastEventOfGeneration(ctx context.Context, taskID string, generation int64) (string, int64, bool, error) {
	var kind string
	var at int64
	err := r.q.queryRow(ctx, sqlLastEventOfGen, taskID, generation).Scan(&kind, &at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", 0, false, nil
	case err != nil:
		return "", 0, false, fmt.Errorf("read the task's last event: %w", err)
	}
	return kind, at, true, nil
}

func scanWorkflow(sc scanner) (tgdriver.WorkflowRow, error) {
	var w tgdriver.WorkflowRow
	err := sc.Scan(&w.WorkflowID, &w.TaskCount, &w.EventCount, &w.HeadHash, &w.CreatedAtMS, &w.UpdatedAtMS)
	return w, noRows(err)
}

// Workflow returns the chain head row of workflowID, or tgdriver.ErrNoRows.
func (r *reads) Workflow(ctx context.Context, workflowID string) (tgdriver.WorkflowRow, error) {
	return scanWorkflow(r.q.queryRow(ctx, sqlWorkflow, workflowID))
}

// Workflows returns every workflow row in workflow_id order.
func (r *reads) Workflows(ctx context.Context) ([]tgdriver.WorkflowRow, error) {
	rows, err := r.q.query(ctx, sqlWorkflows)
	if err != nil {
		return nil, fmt.Errorf("read workflows: %w", err)
	}
	defer rows.Close()
	var out []tgdriver.WorkflowRow
	for rows.Next() {
		w, err := scanWorkflow(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// WorkflowEdges returns the edges among the tasks of workflowID by node id.
func (r *reads) WorkflowEdges(ctx context.Context, workflowID string) ([]tgdriver.EdgeRow, error) {
	rows, err := r.q.query(ctx, sqlWorkflowEdges, workflowID)
	if err != nil {
		return nil, fmt.Errorf("read edges of workflow %s: %w", workflowID, err)
	}
	defer rows.Close()
	var out []tgdriver.EdgeRow
	for rows.Next() {
		var e tgdriver.EdgeRow
		if err := rows.Scan(&e.Dependency, &e.Task); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func scanEvent(sc scanner) (tgdriver.EventRow, error) {
	var e tgdriver.EventRow
	err := sc.Scan(&e.EventID, &e.WorkflowID, &e.Seq, &e.TaskID, &e.Kind, &e.Owner, &e.Generation, &e.AtMS, &e.Detail, &e.PrevHash, &e.Hash,
		&e.HashVersion, &e.ActorKind, &e.ActorName, &e.ActorPrincipal, &e.TaskState, &e.Content)
	return e, err
}

// TaskEvents returns the events of taskID, oldest first.
func (r *reads) TaskEvents(ctx context.Context, taskID string) ([]tgdriver.EventRow, error) {
	var out []tgdriver.EventRow
	err := r.events(ctx, sqlTaskEvents, taskID, func(e tgdriver.EventRow) error {
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read events of task %s: %w", taskID, err)
	}
	return out, nil
}

// WorkflowEvents calls fn with each event of workflowID in chain order.
func (r *reads) WorkflowEvents(ctx context.Context, workflowID string, fn func(tgdriver.EventRow) error) error {
	return r.events(ctx, sqlWorkflowEvents, workflowID, fn)
}

func (r *reads) events(ctx context.Context, q, arg string, fn func(tgdriver.EventRow) error) error {
	rows, err := r.q.query(ctx, q, arg, arg)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return rows.Err()
}

// OrphanEventWorkflow names a workflow that has events but no workflow row.
func (r *reads) OrphanEventWorkflow(ctx context.Context) (string, bool, error) {
	var wf string
	err := r.q.queryRow(ctx, sqlOrphanEvents).Scan(&wf)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return wf, true, nil
}

// UnheldEvent reports none: an SQLite event row is its own link (its wseq
// and hashes are NOT NULL), and a journaled event is in event_journal.
func (r *reads) UnheldEvent(context.Context) (string, int64, bool, error) { return "", 0, false, nil }

// JournaledWorkflows returns up to limit workflows with journaled events,
// oldest entry first.
func (r *reads) JournaledWorkflows(ctx context.Context, limit int) ([]string, error) {
	rows, err := r.q.query(ctx, sqlJournaledWorkflows, limit)
	if err != nil {
		return nil, fmt.Errorf("find journaled events: %w", err)
	}
	return scanColumn[string](rows)
}

// PendingWorkflows returns the workflow of each of the first limit
// claimable tasks, in claim-next order.
func (r *reads) PendingWorkflows(ctx context.Context, limit int) ([]string, error) {
	rows, err := r.q.query(ctx, sqlPendingWorkflows, limit)
	if err != nil {
		return nil, fmt.Errorf("find pending tasks: %w", err)
	}
	return scanColumn[string](rows)
}

// scanColumn collects the one column of every row of rows, and closes them.
func scanColumn[T any](rows *sql.Rows) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func anys(v []int64) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = x
	}
	return out
}

const keyColumns = `key, max_claimed, claimed, rate_count, rate_interval_ms, recent_ms, rate_open_at_ms, updated_at_ms, updated_by`

func scanKey(sc scanner) (tgdriver.KeyRow, error) {
	var k tgdriver.KeyRow
	err := sc.Scan(&k.Key, &k.MaxClaimed, &k.Claimed, &k.RateCount, &k.RateIntervalMS, &k.RecentMS, &k.RateOpenAtMS, &k.UpdatedAtMS, &k.UpdatedBy)
	return k, err
}

// Key returns concurrency key key.
func (r *reads) Key(ctx context.Context, key string) (tgdriver.KeyRow, bool, error) {
	k, err := scanKey(r.q.queryRow(ctx, `SELECT `+keyColumns+` FROM concurrency_keys WHERE key = ?`, key))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return tgdriver.KeyRow{}, false, nil
	case err != nil:
		return tgdriver.KeyRow{}, false, fmt.Errorf("read concurrency key %q: %w", key, err)
	}
	return k, true, nil
}

// Keys returns up to limit concurrency keys after after, in key order.
func (r *reads) Keys(ctx context.Context, after string, limit int) ([]tgdriver.KeyRow, error) {
	rows, err := r.q.query(ctx, `SELECT `+keyColumns+` FROM concurrency_keys WHERE key > ? ORDER BY key LIMIT CAST(? AS INTEGER)`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read the concurrency keys: %w", err)
	}
	defer rows.Close()
	var out []tgdriver.KeyRow
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("read the concurrency keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the concurrency keys: %w", err)
	}
	return out, nil
}

// RateHeldKeys returns up to limit keys whose rate holds claims back at
// nowMS and that are not full, in the order their rates open, each with
// whether it has a claimable task of workflowID whose requires are among
// caps.
func (r *reads) RateHeldKeys(ctx context.Context, workflowID string, caps []string, nowMS int64, limit int) ([]tgdriver.RateHeldKey, error) {
	req, args := `requires = ''`, []any{workflowID, workflowID}
	if len(caps) > 0 {
		b, err := json.Marshal(caps)
		if err != nil {
			return nil, fmt.Errorf("encode capabilities: %w", err)
		}
		req, args = requiresAmongCaps, append(args, string(b))
	}
	args = append(args, nowMS, limit)
	rows, err := r.q.query(ctx, `SELECT k.key, k.rate_open_at_ms, EXISTS (SELECT 1 FROM tasks INDEXED BY tasks_ready_by_key
			WHERE concurrency_key = k.key AND concurrency_key <> '' AND state = 'pending' AND due_at_ms = 0
			AND (? = '' OR workflow_id = ?) AND `+notPaused+` AND `+req+`)
		FROM concurrency_keys AS k INDEXED BY concurrency_keys_rate_open
		WHERE k.rate_open_at_ms > 0 AND k.rate_open_at_ms > ? AND NOT (k.max_claimed > 0 AND k.claimed >= k.max_claimed)
		ORDER BY k.rate_open_at_ms, k.key LIMIT CAST(? AS INTEGER)`, args...)
	if err != nil {
		return nil, fmt.Errorf("read the rate-limited concurrency keys: %w", err)
	}
	defer rows.Close()
	var out []tgdriver.RateHeldKey
	for rows.Next() {
		var k tgdriver.RateHeldKey
		if err := rows.Scan(&k.Key, &k.OpenAtMS, &k.Claimable); err != nil {
			return nil, fmt.Errorf("read the rate-limited concurrency keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the rate-limited concurrency keys: %w", err)
	}
	return out, nil
}

// KeyHead returns the first claimable task of concurrency key key.
//
// The key is compared as CAST(? AS TEXT), not as a bare parameter: SQLite
// proves that concurrency_key = ? implies the index's predicate (a key
// that is not empty) from the bound value, which ties the plan to the
// value, so the statement was prepared again at every execution:
// BenchmarkKeyHead went from 166 to 72 µs, and bench --keys 100 from
// 367-418 to 267-316 µs of CPU per cycle.
func (r *reads) KeyHead(ctx context.Context, key string) (tgdriver.TaskRow, bool, error) {
	t, err := scanTask(r.q.queryRow(ctx, `SELECT `+taskColumns+` FROM tasks INDEXED BY tasks_ready_by_key
		WHERE concurrency_key = CAST(? AS TEXT) AND concurrency_key <> '' AND state = 'pending' AND due_at_ms = 0 AND `+notPaused+`
		ORDER BY priority DESC, seq LIMIT 1`, key))
	switch {
	case errors.Is(err, tgdriver.ErrNoRows):
		return tgdriver.TaskRow{}, false, nil
	case err != nil:
		return tgdriver.TaskRow{}, false, fmt.Errorf("read the first ready task of concurrency key %q: %w", key, err)
	}
	return t, true, nil
}
