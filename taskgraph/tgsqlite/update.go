package tgsqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// An update's SQL text depends only on its shape (tgdriver.Shape: which
// columns it sets, to a value or to NULL, which tests it makes, the states
// it accepts and whether it finds its task by seq or by id), so the text is
// built once per shape (Driver.updates) and its prepared statement cached by
// that text in stmtCache. Every value is a parameter.

// UpdateTask applies set to task seq if guard holds in the same statement
// and returns the task as updated (RETURNING); ok is false when no row
// matched.
func (t *wtx) UpdateTask(_ context.Context, seq int64, set tgdriver.TaskSet, guard tgdriver.TaskGuard) (tgdriver.TaskRow, bool, error) {
	return t.update(tgdriver.TaskUpdate{Seq: seq, Set: set, Guard: guard})
}

func (t *wtx) update(u tgdriver.TaskUpdate) (tgdriver.TaskRow, bool, error) {
	q, args, err := t.updateArgs(u, true)
	if err != nil {
		return tgdriver.TaskRow{}, false, err
	}
	r, err := scanTask(t.queryRow(bg, q, args...))
	switch {
	case errors.Is(err, tgdriver.ErrNoRows):
		return tgdriver.TaskRow{}, false, nil
	case err != nil:
		return tgdriver.TaskRow{}, false, fmt.Errorf("update task %s: %w", taskName(u), err)
	}
	return r, true, nil
}

// updateNoRow applies u as update does, without reading the task back
// (Apply); ok is false when no row matched.
func (t *wtx) updateNoRow(u tgdriver.TaskUpdate) (bool, error) {
	q, args, err := t.updateArgs(u, false)
	if err != nil {
		return false, err
	}
	res, err := t.stmts.exec(bg, q, args...)
	if err != nil {
		return false, fmt.Errorf("update task %s: %w", taskName(u), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("update task %s: %w", taskName(u), err)
	}
	return n == 1, nil
}

// updateArgs returns the statement of u's shape (returning the task's
// columns when rows) and its arguments.
func (t *wtx) updateArgs(u tgdriver.TaskUpdate, rows bool) (string, []any, error) {
	sh, vals, gvals, err := tgdriver.Shape(u)
	if err != nil {
		return "", nil, err
	}
	k := updateKey{sh, rows}
	q, ok := t.d.updates[k]
	if !ok {
		q = updateSQL(sh, rows)
		t.d.updates[k] = q
	}
	args := make([]any, 0, len(vals)+len(gvals)+6)
	args = append(args, vals...)
	args = append(args, u.Set.UpdatedAtMS)
	if sh.ByTaskID {
		args = append(args, u.TaskID)
	} else {
		args = append(args, u.Seq)
	}
	for _, st := range u.Guard.States {
		args = append(args, st)
	}
	args = append(args, gvals...)
	return q, args, nil
}

// updateKey names the text of an update shape, with or without the
// task's columns returned.
type updateKey struct {
	sh   tgdriver.UpdateShape
	rows bool
}

// taskName names u's task for an error.
func taskName(u tgdriver.TaskUpdate) string {
	if u.Seq != 0 {
		return fmt.Sprintf("seq %d", u.Seq)
	}
	return u.TaskID
}

// updateSQL builds the UPDATE of shape sh, returning the task's columns
// when rows. Its parameters are the set values (in tgdriver.Set* order),
// updated_at_ms, the seq or task id, the accepted states, then the tested
// values (in tgdriver.Guard* order).
func updateSQL(sh tgdriver.UpdateShape, rows bool) string {
	var b strings.Builder
	b.WriteString("UPDATE tasks SET ")
	for i, c := range tgdriver.SetColumns {
		switch sh.Set[i] {
		case tgdriver.FormValue:
			b.WriteString(c + " = ?, ")
		case tgdriver.FormNull:
			b.WriteString(c + " = NULL, ")
		}
		if i == tgdriver.SetAttempts && sh.AddAttempt {
			b.WriteString("attempts = attempts + 1, ")
		}
	}
	b.WriteString("updated_at_ms = ? WHERE ")
	if sh.ByTaskID {
		b.WriteString("task_id = ?")
	} else {
		b.WriteString("seq = ?")
	}
	switch n := strings.Count(sh.States, ",") + 1; {
	case sh.States == "":
	case n == 1:
		b.WriteString(" AND state = ?")
	default:
		b.WriteString(" AND state IN (?" + strings.Repeat(", ?", n-1) + ")")
	}
	for j, c := range tgdriver.GuardColumns {
		switch sh.Guard[j] {
		case tgdriver.FormValue:
			b.WriteString(" AND " + c + " " + tgdriver.GuardOps[j] + " ?")
		case tgdriver.FormNull:
			b.WriteString(" AND " + c + " IS NULL")
		}
	}
	if sh.NoUnmet {
		b.WriteString(" AND unmet = 0")
	}
	if sh.NotPaused {
		b.WriteString(" AND " + notPaused)
	}
	if rows {
		b.WriteString(" RETURNING " + taskColumns)
	}
	return b.String()
}

// Fetch takes the locks, applies the updates and reads the claimable tasks
// of a batch's first round. The single writer serialises every write
// transaction, so reading is locking.
func (t *wtx) Fetch(ctx context.Context, f tgdriver.Fetch) (tgdriver.Fetched, error) {
	var out tgdriver.Fetched
	if len(f.Requests) > 0 {
		kept, err := t.Requests(ctx, f.Requests)
		if err != nil {
			return out, err
		}
		out.Kept = kept
	}
	if err := t.updateKeys(ctx, f.Keys); err != nil {
		return out, err
	}
	ids := slices.Clone(f.Lock)
	slices.Sort(ids)
	for _, id := range slices.Compact(ids) {
		r, err := t.TaskByID(ctx, id)
		switch {
		case errors.Is(err, tgdriver.ErrNoRows):
			continue
		case err != nil:
			return out, fmt.Errorf("read task %s: %w", id, err)
		}
		out.Locked = append(out.Locked, r)
	}
	out.Updated = make([]tgdriver.Updated, len(f.Updates))
	for i, u := range f.Updates {
		r, ok, err := t.update(u)
		if err != nil {
			return out, err
		}
		out.Updated[i] = tgdriver.Updated{Row: r, OK: ok}
	}
	out.Claimable = make([][]tgdriver.TaskRow, len(f.Claims))
	for i, c := range f.Claims {
		if c.N <= 0 {
			continue
		}
		rows, err := t.query(bg, claimableLimitQuery(c.WorkflowID, c.Caps), append(claimableArgs(c.WorkflowID, c.Caps, c.AtMS), c.N)...)
		if err != nil {
			return out, fmt.Errorf("find claimable tasks: %w", err)
		}
		for rows.Next() {
			r, err := scanTask(rows)
			if err != nil {
				rows.Close()
				return out, fmt.Errorf("find claimable tasks: %w", err)
			}
			out.Claimable[i] = append(out.Claimable[i], r)
		}
		if err := rows.Close(); err != nil {
			return out, fmt.Errorf("find claimable tasks: %w", err)
		}
	}
	return out, nil
}

// claimableLimitQuery is the claim-next lookup of up to a given number of
// tasks.
func claimableLimitQuery(workflowID string, caps []string) string {
	switch wf, c := workflowID != "", len(caps) > 0; {
	case wf && c:
		return sqlClaimableInWorkflowCaps
	case wf:
		return sqlClaimableInWorkflow
	case c:
		return sqlClaimableCaps
	}
	return sqlClaimable
}

// Apply applies a batch's last round: the guarded updates, then the events
// (linked or journaled), then the requests kept. Notifications are not
// needed: other processes see the commit through PRAGMA data_version.
// Commit is left to the writer, which commits the batch.
func (t *wtx) Apply(ctx context.Context, a tgdriver.Apply) error {
	if err := t.updateKeys(ctx, a.Keys); err != nil {
		return err
	}
	for _, u := range a.Updates {
		ok, err := t.updateNoRow(u)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: task %s", tgdriver.ErrGuardFailed, taskName(u))
		}
	}
	if len(a.Events) > 0 {
		var err error
		switch {
		case a.Journal:
			err = t.JournalEvents(ctx, a.Events)
		case a.Link != nil:
			if err = t.linkOnto(a.Events, a.Link); err == nil {
				err = t.appendEvents(a.Events)
			}
		default:
			err = t.appendEvents(a.Events)
		}
		if err != nil {
			return err
		}
	}
	for _, r := range a.Requests {
		if err := t.KeepRequest(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// get returns the prepared statement for query, preparing it on first use;
// nil, nil when the cache is full and query is not in it.
func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	if st := c.m[query]; st != nil {
		return st, nil
	}
	if len(c.m) >= maxCachedStmts {
		return nil, nil
	}
	st, err := c.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.m[query] = st
	return st, nil
}

func (c *stmtCache) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := c.get(ctx, query)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return c.conn.ExecContext(ctx, query, args...)
	}
	return st.ExecContext(ctx, args...)
}

// queryRow runs q in the batch transaction through the writer's statement
// cache (stmtCache.get); a statement that is not cached, or does not
// compile, runs directly, and the Row reports its error.
func (t *wtx) queryRow(_ context.Context, q string, args ...any) *sql.Row {
	st, err := t.stmts.get(bg, q)
	if err != nil || st == nil {
		return t.stmts.conn.QueryRowContext(bg, q, args...)
	}
	return st.QueryRowContext(bg, args...)
}

// query runs q in the batch transaction through the writer's statement
// cache, or directly when the cache is full.
func (t *wtx) query(_ context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := t.stmts.get(bg, q)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return t.stmts.conn.QueryContext(bg, q, args...)
	}
	return st.QueryContext(bg, args...)
}

func (t *wtx) exec(q string, args ...any) (sql.Result, error) {
	return t.stmts.exec(bg, q, args...)
}

// seqs runs q and returns the first column of every row.
func (t *wtx) seqs(q string, args ...any) ([]int64, error) {
	rows, err := t.query(bg, q, args...)
	if err != nil {
		return nil, err
	}
	return scanColumn[int64](rows)
}

// AppendEvents inserts linked events and advances each workflow's head
// from the head its first event links to, to its last event, by compare and
// set.
func (t *wtx) AppendEvents(_ context.Context, evs []tgdriver.EventRow) error {
	return t.appendEvents(evs)
}

func (t *wtx) appendEvents(evs []tgdriver.EventRow) error {
	runs, err := tgdriver.ChainRuns(evs)
	if err != nil {
		return err
	}
	// The heads first: when one moved, inserting the events would only
	// collide with the events they repeat (a unique violation rather than
	// ErrChainMoved).
	for _, run := range runs {
		// Compare and set: the head advances only from the head the run
		// links to, so two writers can never fork the chain, however the
		// driver is used; a moved head is an error and the operation rolls
		// back.
		res, err := t.exec(sqlAdvanceHead, run.Last.Hash, run.Last.Seq, run.Last.AtMS, run.WorkflowID, run.First.PrevHash, run.First.Seq-1)
		if err != nil {
			return fmt.Errorf("advance chain head: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("%w: workflow %s, events %d to %d link to head %q at %d events (rows %d, %v)",
				tgdriver.ErrChainMoved, run.WorkflowID, run.First.Seq, run.Last.Seq, run.First.PrevHash, run.First.Seq-1, n, err)
		}
	}
	for i := range evs {
		e := &evs[i]
		if _, err := t.exec(sqlInsertEvent, e.WorkflowID, e.Seq, e.TaskID, e.Kind, e.Owner, e.Generation, e.AtMS, e.Detail, e.PrevHash, e.Hash,
			hashVersion(*e), e.ActorKind, e.ActorName, e.ActorPrincipal, e.TaskState, e.Content, e.TaskSeq); err != nil {
			return fmt.Errorf("append event: %w", err)
		}
	}
	return nil
}

// linkOnto links evs, in order and in place, onto their workflows' heads as
// they stand in the transaction (Apply.Link).
func (t *wtx) linkOnto(evs []tgdriver.EventRow, link func(*tgdriver.EventRow, string, int64)) error {
	type head struct {
		hash string
		n    int64
	}
	heads := make(map[string]*head, 2)
	for i := range evs {
		e := &evs[i]
		h := heads[e.WorkflowID]
		if h == nil {
			hash, n, err := t.ChainHead(bg, e.WorkflowID)
			if err != nil {
				return err
			}
			h = &head{hash, n}
			heads[e.WorkflowID] = h
		}
		h.n++
		link(e, h.hash, h.n)
		h.hash = e.Hash
	}
	return nil
}

// ChainHead returns the head hash and event count of workflowID's chain.
func (t *wtx) ChainHead(_ context.Context, workflowID string) (string, int64, error) {
	var head string
	var n int64
	if err := t.queryRow(bg, sqlChainHead, workflowID).Scan(&head, &n); err != nil {
		return "", 0, fmt.Errorf("read chain head of workflow %s: %w", workflowID, noRows(err))
	}
	return head, n, nil
}

// updateKeys writes a round's key updates (UpdateKey each): a guard that
// does not hold is ErrGuardFailed.
func (t *wtx) updateKeys(ctx context.Context, keys []tgdriver.KeyUpdate) error {
	for _, k := range keys {
		ok, err := t.UpdateKey(ctx, k.Old, k.New)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: concurrency key %s", tgdriver.ErrGuardFailed, k.Old.Key)
		}
	}
	return nil
}
