package tgpostgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// The claim scans of Fetch: the first claimable tasks (pending, due now) in
// claim-next order, locked, skipping those other transactions hold, by
// whether the scan is within one workflow and has capabilities. Each reads
// the first entries of a ready index (tasks_ready_plain,
// tasks_ready_by_priority, tasks_ready_by_workflow_priority; the plans are
// pinned by TestClaimNextPlanIsIndexServed). Separate statements, not one
// with ($2 = ” OR workflow_id = $2): a generic plan of that one (pgx
// prepares statements) reads the wrong index and sorts.
//
// Each scan excludes paused tasks (notPaused): with nothing paused, the
// two uncorrelated subqueries cost one probe of an empty table each per
// statement (an InitPlan, and a hashed SubPlan), not per row. Pausing is
// exact with them because SetPause takes tasks in EXCLUSIVE mode: a scan's
// row lock waits for it, and the scan's snapshot is taken after its locks.
var (
	notPaused = `NOT EXISTS (SELECT 1 FROM claim_pauses WHERE workflow_id = '')
		AND workflow_id NOT IN (SELECT workflow_id FROM claim_pauses)`
	// notPausedT is notPaused for the update of tasks aliased t.
	notPausedT = `NOT EXISTS (SELECT 1 FROM claim_pauses WHERE workflow_id = '')
		AND t.workflow_id NOT IN (SELECT workflow_id FROM claim_pauses)`
	claimScanSQL = `SELECT ` + taskColumns + ` FROM tasks WHERE state = 'pending' AND due_at_ms = 0 AND NOT key_parked AND requires = ''
		AND ` + notPaused + ` AND ` + keyOpenAt2 + ` ORDER BY priority DESC, seq LIMIT $1 FOR UPDATE SKIP LOCKED`
	claimScanCapsSQL = `SELECT ` + taskColumns + ` FROM tasks WHERE state = 'pending' AND due_at_ms = 0 AND NOT key_parked
		AND (requires = '' OR string_to_array(requires, ' ') <@ $2::text[]) AND ` + notPaused + ` AND ` + keyOpenAt3 + `
		ORDER BY priority DESC, seq LIMIT $1 FOR UPDATE SKIP LOCKED`
	claimScanInWorkflowSQL = `SELECT ` + taskColumns + ` FROM tasks WHERE workflow_id = $2 AND state = 'pending' AND due_at_ms = 0 AND NOT key_parked
		AND requires = '' AND ` + notPaused + ` AND ` + keyOpenAt3 + ` ORDER BY priority DESC, seq LIMIT $1 FOR UPDATE SKIP LOCKED`
	claimScanInWorkflowCapsSQL = `SELECT ` + taskColumns + ` FROM tasks WHERE workflow_id = $2 AND state = 'pending' AND due_at_ms = 0 AND NOT key_parked
		AND (requires = '' OR string_to_array(requires, ' ') <@ $3::text[]) AND ` + notPaused + ` AND ` + keyOpenAt4 + ` ORDER BY priority DESC, seq LIMIT $1 FOR UPDATE SKIP LOCKED`
	lockTasksSQL = `SELECT ` + taskColumns + ` FROM tasks WHERE task_id = ANY($1::text[]) ORDER BY task_id COLLATE "C" FOR UPDATE`
	// lockUpdatedSQL takes the rows a batch's updates will write, in task
	// id order, then lockUpdatedKeysSQL the capped concurrency keys' rows
	// of those that may end a claim (they set its state) in key order (the
	// sort under each LockRows makes it take its rows in that order, and
	// the keys' sort reads every task row first): the trigger that gives a
	// capped key's slot back when an update ends a claim then finds its
	// key's row held, instead of taking it between two task rows, in the
	// order of the updates' statements (one per shape). An uncapped key's
	// row the trigger only share-locks (migration 0024): no wait on it but
	// for a change of its limit.
	//
	// Two statements: the tasks' locks must not hang on the plan of the
	// keys' (a filter on the keys' rows could leave a CTE of the tasks
	// unread, and their rows unlocked).
	lockUpdatedSQL     = `SELECT 1 FROM tasks WHERE task_id = ANY($1::text[]) ORDER BY task_id COLLATE "C" FOR NO KEY UPDATE`
	lockUpdatedKeysSQL = `SELECT key FROM concurrency_keys WHERE key IN (SELECT concurrency_key FROM tasks WHERE task_id = ANY($1::text[]) AND concurrency_key <> '')
		AND max_claimed > 0 ORDER BY key COLLATE "C" FOR NO KEY UPDATE`
)

// keyOpenAt passes over the tasks of a concurrency key that is full or
// whose rate opens after the scan's server time, bound as the parameter
// that ends its name (tgdriver.KeyRow.Closed); keyOpen over those of a
// full key only. A task without a key never reads concurrency_keys; the
// subquery is uncorrelated (a hashed SubPlan, once per statement) and
// reads only the closed keys: the full ones from concurrency_keys_at_cap,
// the rate-held ones from the range of concurrency_keys_rate_open past
// the scan's time (migration 0017; pinned by
// TestClaimScanReadsOnlyClosedKeys), so its cost does not grow with the
// number of keys. A claim takes its key's slot by a guarded update of the
// key's row (UpdateKey, after LockKey), so a scan that read a key open
// just before another transaction filled it only costs the claim a
// second look.
func keyOpenAt(param string) string {
	return `(concurrency_key = '' OR concurrency_key NOT IN (SELECT key FROM concurrency_keys WHERE at_cap
		UNION ALL SELECT key FROM concurrency_keys WHERE rate_open_at_ms > 0 AND rate_open_at_ms > ` + param + `::bigint))`
}

var (
	keyOpenAt2 = keyOpenAt("$2")
	keyOpenAt3 = keyOpenAt("$3")
	keyOpenAt4 = keyOpenAt("$4")
	keyOpen    = `(concurrency_key = '' OR concurrency_key NOT IN (SELECT key FROM concurrency_keys WHERE at_cap))`
)

// queueScan queues claim scan c.
func queueScan(b *pgx.Batch, c tgdriver.ClaimScan) {
	switch {
	case c.WorkflowID == "" && len(c.Caps) == 0:
		b.Queue(claimScanSQL, c.N, c.AtMS)
	case c.WorkflowID == "":
		b.Queue(claimScanCapsSQL, c.N, c.Caps, c.AtMS)
	case len(c.Caps) == 0:
		b.Queue(claimScanInWorkflowSQL, c.N, c.WorkflowID, c.AtMS)
	default:
		b.Queue(claimScanInWorkflowCapsSQL, c.N, c.WorkflowID, c.Caps, c.AtMS)
	}
}

// Fetch sends a batch's first round in one round trip (with BEGIN when the
// transaction has not begun): the read of the requests kept under
// f.Requests (requestsSQL: it locks nothing); the locks in task id order;
// with two updates or more, their rows in task id order (lockUpdatedSQL)
// and then the capped keys' rows of those that may end a claim in key
// order (lockUpdatedKeysSQL, answered in Fetched.Keys); then the updates,
// one statement per shape, then the claim scans. The scans come last and
// never wait (SKIP LOCKED), and the locks and updates take rows in task id
// order, then keys in key order, so two batches can wait for one another
// only through rows they both lock or update in that order.
func (w *wtx) Fetch(ctx context.Context, f tgdriver.Fetch) (tgdriver.Fetched, error) {
	var out tgdriver.Fetched
	b := &pgx.Batch{}
	if len(f.Requests) > 0 {
		b.Queue(requestsSQL, f.Requests)
	}
	if len(f.Keys) > 0 {
		queueKeyUpdates(b, f.Keys)
	}
	if len(f.Lock) > 0 {
		ids := slices.Clone(f.Lock)
		slices.Sort(ids)
		b.Queue(lockTasksSQL, slices.Compact(ids))
	}
	// toEnd are the updates that may end a claim (they set its state):
	// only those give a key's slot back, so a heartbeat takes no key row.
	var toUpdate, toEnd []string
	for _, u := range f.Updates {
		if u.TaskID != "" {
			toUpdate = append(toUpdate, u.TaskID)
			if u.Set.State.Set {
				toEnd = append(toEnd, u.TaskID)
			}
		}
	}
	lockKeys := len(toUpdate) > 1 && len(toEnd) > 0
	if len(toUpdate) > 1 {
		b.Queue(lockUpdatedSQL, toUpdate)
		if lockKeys {
			b.Queue(lockUpdatedKeysSQL, toEnd)
		}
	}
	groups, err := groupUpdates(f.Updates)
	if err != nil {
		return out, err
	}
	for _, g := range groups {
		g.queue(w.d.updates, b, false, true)
	}
	for _, c := range f.Claims {
		if c.N > 0 {
			queueScan(b, c)
		}
	}
	if b.Len() == 0 {
		out.Claimable = make([][]tgdriver.TaskRow, len(f.Claims))
		return out, nil
	}
	br := w.c.SendRound(ctx, b)
	fail := func(err error) (tgdriver.Fetched, error) {
		_ = br.Close()
		return tgdriver.Fetched{}, w.fail(ctx, "fetch a batch", err)
	}
	if len(f.Requests) > 0 {
		rows, err := br.Query()
		if err == nil {
			out.Kept, err = collectRequests(rows)
		}
		if err != nil {
			return fail(err)
		}
	}
	if len(f.Keys) > 0 {
		if _, err := br.Exec(); err != nil {
			return fail(err)
		}
	}
	if len(f.Lock) > 0 {
		rows, err := br.Query()
		if err != nil {
			return fail(err)
		}
		if out.Locked, err = collectTasks(rows); err != nil {
			return fail(err)
		}
	}
	if len(toUpdate) > 1 {
		if _, err := br.Exec(); err != nil {
			return fail(err)
		}
	}
	if lockKeys {
		rows, err := br.Query()
		if err == nil {
			out.Keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil {
			return fail(err)
		}
	}
	updated, ok := make([]tgdriver.TaskRow, len(f.Updates)), make([]bool, len(f.Updates))
	for _, g := range groups {
		rows, err := br.Query()
		if err == nil {
			err = g.readUpdated(rows, updated, ok)
		}
		if err != nil {
			return fail(err)
		}
	}
	out.Updated = make([]tgdriver.Updated, len(f.Updates))
	for i := range updated {
		out.Updated[i] = tgdriver.Updated{Row: updated[i], OK: ok[i]}
	}
	out.Claimable = make([][]tgdriver.TaskRow, len(f.Claims))
	for i, c := range f.Claims {
		if c.N <= 0 {
			continue
		}
		rows, err := br.Query()
		if err != nil {
			return fail(err)
		}
		if out.Claimable[i], err = collectTasks(rows); err != nil {
			return fail(err)
		}
	}
	if err := br.Close(); err != nil {
		return tgdriver.Fetched{}, w.fail(ctx, "fetch a batch", err)
	}
	return out, nil
}

// updateKeysSQL writes a batch's key updates (tgdriver.KeyUpdate: each
// row's new values over its old ones, under UpdateKey's guard) in one
// statement, which fails on the server (apply_guard: SQLSTATE TG001,
// ErrGuardFailed) unless every guard held: the COMMIT may follow in the
// same round trip.
const updateKeysSQL = `WITH u AS (UPDATE concurrency_keys k SET max_claimed = v.mc, claimed = v.c, rate_count = v.rc,
		rate_interval_ms = v.ri, recent_ms = v.r, rate_open_at_ms = v.ro, updated_at_ms = v.ua, updated_by = v.ub
	FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[], $7::bigint[], $8::bigint[], $9::text[],
		$10::bigint[], $11::text[], $12::bigint[], $13::bigint[], $14::bigint[]) AS v(key, mc, c, rc, ri, r, ro, ua, ub, oc, orecent, omc, orc, ori)
	WHERE k.key = v.key AND k.claimed = v.oc AND k.recent_ms = v.orecent AND k.max_claimed = v.omc AND k.rate_count = v.orc
		AND k.rate_interval_ms = v.ori
	RETURNING 1)
	SELECT apply_guard(count(*), cardinality($1::text[])) FROM u`

// queueKeyUpdates queues the write of keys (updateKeysSQL).
func queueKeyUpdates(b *pgx.Batch, keys []tgdriver.KeyUpdate) {
	n := len(keys)
	names, recent, by, orecent := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	mc, c, rc, ri, ro, ua := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	oc, omc, orc, ori := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i, k := range keys {
		nk, old := k.New, k.Old
		names[i], recent[i], by[i], orecent[i] = old.Key, nk.RecentMS, nk.UpdatedBy, old.RecentMS
		mc[i], c[i], rc[i], ri[i], ro[i], ua[i] = int64(nk.MaxClaimed), int64(nk.Claimed), int64(nk.RateCount), nk.RateIntervalMS, nk.RateOpenAtMS, nk.UpdatedAtMS
		oc[i], omc[i], orc[i], ori[i] = int64(old.Claimed), int64(old.MaxClaimed), int64(old.RateCount), old.RateIntervalMS
	}
	b.Queue(updateKeysSQL, names, mc, c, rc, ri, recent, ro, ua, by, oc, orecent, omc, orc, ori)
}

func collectTasks(rows pgx.Rows) ([]tgdriver.TaskRow, error) {
	var s taskScanner
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (tgdriver.TaskRow, error) { return s.scan(row) })
}

// Apply sends a batch's last round in one round trip: the updates (one
// statement per shape), the events (journaled, or linked with each
// workflow's compare and set) and the notifications; with a.Commit, and
// no check of the client's to make on the round's results (journaled
// events), the COMMIT too, and then every update is checked on the server
// (checkedText): see doc.go, "Batches".
func (w *wtx) Apply(ctx context.Context, a tgdriver.Apply) error {
	b := &pgx.Batch{}
	groups, err := groupUpdates(a.Updates)
	if err != nil {
		return err
	}
	commit := a.Commit && (len(a.Events) == 0 || a.Journal)
	if len(a.Keys) > 0 {
		queueKeyUpdates(b, a.Keys)
	}
	for _, g := range groups {
		g.queue(w.d.updates, b, commit, false)
	}
	var checks []func(pgconn.CommandTag) error
	if len(a.Events) > 0 {
		if a.Journal {
			queueJournal(b, a.Events)
		} else {
			if a.Link != nil {
				if err := w.linkOnto(ctx, a.Events, a.Link); err != nil {
					return err
				}
			}
			if checks, err = queueAppend(b, a.Events); err != nil {
				return err
			}
		}
	}
	if len(a.Requests) > 0 {
		queueKeepRequests(b, a.Requests)
	}
	notify := len(a.Ready) > 0 && !w.d.noNotify.Load()
	if notify {
		payloads := make([]string, len(a.Ready))
		for i, r := range a.Ready {
			payloads[i] = notifyPayload(w.d.replicaID, r.WorkflowID, r.Requires)
		}
		b.Queue(`SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, notifyChannel, payloads)
	}
	if b.Len() == 0 {
		return nil
	}
	if commit {
		b.Queue("COMMIT")
	}
	br := w.c.SendRound(ctx, b)
	fail := func(err error) error {
		_ = br.Close()
		if commit {
			return w.failCommitted(ctx, err)
		}
		return w.fail(ctx, "apply a batch", err)
	}
	if len(a.Keys) > 0 {
		if _, err := br.Exec(); err != nil {
			return fail(err)
		}
	}
	ok := make([]bool, len(a.Updates))
	for _, g := range groups {
		rows, err := br.Query()
		if err == nil {
			err = g.readUpdated(rows, nil, ok)
		}
		if err != nil {
			return fail(err)
		}
	}
	if len(a.Events) > 0 {
		if a.Journal {
			rows, err := br.Query()
			if err == nil {
				err = setJournalIDs(rows, a.Events)
			}
			if err != nil {
				return fail(err)
			}
		} else {
			for _, check := range checks {
				tag, err := br.Exec()
				if err == nil && check != nil {
					err = check(tag)
				}
				if err != nil {
					_ = br.Close()
					return err
				}
			}
		}
	}
	if len(a.Requests) > 0 {
		if _, err := br.Exec(); err != nil {
			return fail(err)
		}
	}
	missing := func() string {
		for i, u := range a.Updates {
			if !ok[i] {
				if u.Seq != 0 {
					return fmt.Sprintf("seq %d", u.Seq)
				}
				return u.TaskID
			}
		}
		return ""
	}
	if commit {
		if notify {
			if _, err := br.Exec(); err != nil {
				return fail(err)
			}
		}
		tag, err := br.Exec()
		if err != nil {
			return fail(err)
		}
		w.c.ended()
		_ = br.Close()
		if tag.String() != "COMMIT" {
			return w.fail(ctx, "commit a batch", errCommitRolledBack)
		}
		if name := missing(); name != "" {
			// The server checked every update before the COMMIT ran: a
			// row missing here is a fault of the check itself, and the
			// batch has committed.
			return fmt.Errorf("%w: the batch committed, but its update of task %s returned no row", tgdriver.ErrUnknownOutcome, name)
		}
		return nil
	}
	if err := br.Close(); err != nil {
		return w.fail(ctx, "apply a batch", err)
	}
	if name := missing(); name != "" {
		return fmt.Errorf("%w: task %s", tgdriver.ErrGuardFailed, name)
	}
	return nil
}

// failCommitted maps an error of a round that carried the transaction's
// COMMIT (Apply with Commit). The server's ERROR in a statement before the
// COMMIT (a guard that did not hold, TG001, included) aborted the
// transaction, and the server passed over the rest of the round, the
// COMMIT with it: nothing was written, and the transaction is left for
// Write to roll back. Anything else (the connection lost, the caller's
// context ended) may have come after the COMMIT ran: the outcome is not
// known (classifyCommit), and the transaction is over either way.
func (w *wtx) failCommitted(ctx context.Context, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Severity == "ERROR" || pe.Code == codeIdleInTransactionTimeout) {
		return w.fail(ctx, "apply a batch", err)
	}
	w.c.ended()
	return fmt.Errorf("apply a batch and commit it: %w", w.d.classifyCommit(ctx, err))
}

// notifyPayload is the payload of a ready notification: "<replica>
// <workflow>", then " <requires>" when the task requires capabilities
// (tags are identifiers: no spaces).
func notifyPayload(replica, workflowID, requires string) string {
	p := replica + " " + workflowID
	if requires != "" {
		p += " " + requires
	}
	return p
}

// linkOnto links evs, in order and in place, onto their workflows' chain
// heads, which one statement reads and locks (as ChainHead does), in
// workflow order (Apply.Link).
func (w *wtx) linkOnto(ctx context.Context, evs []tgdriver.EventRow, link func(*tgdriver.EventRow, string, int64)) error {
	type head struct {
		hash string
		n    int64
	}
	heads := map[string]*head{}
	var wfs []string
	for _, e := range evs {
		if heads[e.WorkflowID] == nil {
			heads[e.WorkflowID] = &head{}
			wfs = append(wfs, e.WorkflowID)
		}
	}
	rows, err := w.c.Query(ctx, `SELECT workflow_id, head_hash, event_count FROM workflows WHERE workflow_id = ANY($1)
		ORDER BY workflow_id FOR NO KEY UPDATE`, wfs)
	if err != nil {
		return w.fail(ctx, "read the chain heads", err)
	}
	found := 0
	for rows.Next() {
		var wf string
		var h head
		if err := rows.Scan(&wf, &h.hash, &h.n); err != nil {
			rows.Close()
			return w.fail(ctx, "read the chain heads", err)
		}
		*heads[wf] = h
		found++
	}
	if err := rows.Err(); err != nil {
		return w.fail(ctx, "read the chain heads", err)
	}
	if found != len(wfs) {
		return fmt.Errorf("read the chain heads of %v: %w", wfs, tgdriver.ErrNoRows)
	}
	for i := range evs {
		e := &evs[i]
		h := heads[e.WorkflowID]
		h.n++
		link(e, h.hash, h.n)
		h.hash = e.Hash
	}
	return nil
}
