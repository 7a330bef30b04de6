package tgpostgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// workflowExists reads, on a direct connection, whether workflowID was
// committed, once no other session of the database is inside a transaction:
// the server has then processed the COMMIT it read before the proxy cut the
// connection, or rolled the transaction back.
func workflowExists(t *testing.T, ctx context.Context, url, workflowID string) bool {
	t.Helper()
	c := raw(t, url)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		var n, open int
		if err := c.QueryRow(ctx, `SELECT (SELECT count(*) FROM workflows WHERE workflow_id = $1),
			(SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL)`,
			workflowID).Scan(&n, &open); err != nil {
			t.Fatal(err)
		}
		if open == 0 {
			return n == 1
		}
		select {
		case <-ctx.Done():
			t.Fatalf("a session stayed in its transaction: %v", ctx.Err())
		case <-time.After(wait):
		}
	}
}

// A write whose connection is lost once its COMMIT was sent is an unknown
// outcome, whether the server committed it (the COMMIT arrived, the answer
// was lost) or not (the COMMIT never arrived); a connection lost before the
// COMMIT was sent is ErrUnreachable, and nothing was written.
func TestLostCommitIsUnknownOutcome(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url := pgtest.URL(t)
	p, proxied := pgtest.NewCutProxy(t, url)
	d := open(t, proxied, Options{})
	for _, c := range []struct {
		name      string
		cut       pgtest.Cut
		want      error
		committed bool
	}{
		{"committed, answer lost", pgtest.CutAfterCommit, tgdriver.ErrUnknownOutcome, true},
		{"COMMIT lost", pgtest.CutBeforeCommit, tgdriver.ErrUnknownOutcome, false},
		{"lost before COMMIT", pgtest.CutNext, tgdriver.ErrUnreachable, false},
	} {
		wf := "wf-" + c.name
		runs := 0
		err := d.Write(ctx, func(tx tgdriver.Tx) error {
			runs++
			if c.cut == pgtest.CutNext {
				p.Arm(pgtest.CutNext)
			}
			if _, err := tx.EnsureWorkflow(ctx, wf, 1); err != nil {
				return err
			}
			if c.cut != pgtest.CutNext {
				p.Arm(c.cut)
			}
			return nil
		})
		select {
		case got := <-p.Fired:
			if got != c.cut {
				t.Fatalf("%s: the proxy cut at %v", c.name, got)
			}
		case <-ctx.Done():
			t.Fatalf("%s: the proxy never cut (Write: %v): %v", c.name, err, ctx.Err())
		}
		if !errors.Is(err, c.want) || !errors.Is(err, tgdriver.ErrUnavailable) {
			t.Errorf("%s: Write: %v, want %v", c.name, err, c.want)
		}
		if got := tgdriver.MayHaveApplied(err); got != (c.want == tgdriver.ErrUnknownOutcome) {
			t.Errorf("%s: MayHaveApplied = %v for %v", c.name, got, err)
		}
		if runs != 1 {
			t.Errorf("%s: the write ran %d times; a lost connection is never retried inside the driver", c.name, runs)
		}
		if got := workflowExists(t, ctx, url, wf); got != c.committed {
			t.Errorf("%s: committed = %v, want %v", c.name, got, c.committed)
		}
	}
	if err := d.Ping(ctx); err != nil {
		t.Fatalf("Ping after the cuts: %v (the pool replaces a lost connection)", err)
	}
}

// The server's own answer that a COMMIT did not commit (an ERROR, which
// rolls the transaction back) keeps its usual class: it is no unknown
// outcome.
func TestClassifyCommit(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	d := open(t, pgtest.URL(t), Options{})
	// A deferred unique violation is reported by COMMIT, and rolls back.
	err := d.Write(ctx, func(tx tgdriver.Tx) error {
		w := tx.(*wtx)
		if _, err := w.c.Exec(ctx, `CREATE TEMP TABLE once (k int UNIQUE DEFERRABLE INITIALLY DEFERRED) ON COMMIT DROP`); err != nil {
			return err
		}
		_, err := w.c.Exec(ctx, `INSERT INTO once VALUES (1), (1)`)
		return err
	})
	if err == nil || errors.Is(err, tgdriver.ErrUnknownOutcome) || sqlState(err) != codeUniqueViolation {
		t.Errorf("a COMMIT refused with an ERROR: %v, want the unique violation itself", err)
	}
}

// Every pooled session carries the bounds on holding and waiting for locks
// (the defaults, an option, or the URL's own runtime parameter), and a wait
// for a lock beyond the lock timeout is ErrBusy, nothing written.
func TestSessionBoundsAndLockTimeoutIsBusy(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url := pgtest.URL(t)
	show := func(d *Driver, name string) string {
		var v string
		if err := d.pool.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	d := open(t, url, Options{})
	for name, want := range map[string]string{"idle_in_transaction_session_timeout": "3s", "lock_timeout": "15s", "tcp_keepalives_count": "3"} {
		if got := show(d, name); got != want {
			t.Errorf("default %s = %s, want %s", name, got, want)
		}
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	d2 := open(t, url+sep+"lock_timeout=7000", Options{LockTimeout: 150 * time.Millisecond, IdleInTransactionTimeout: -1, StatementTimeout: 20 * time.Second})
	for name, want := range map[string]string{"idle_in_transaction_session_timeout": "0", "lock_timeout": "7s", "statement_timeout": "20s"} {
		if got := show(d2, name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}

	d3 := open(t, url, Options{LockTimeout: 150 * time.Millisecond})
	if err := d3.Write(ctx, func(tx tgdriver.Tx) error { _, err := tx.EnsureWorkflow(ctx, "locked", 1); return err }); err != nil {
		t.Fatal(err)
	}
	holder := raw(t, url)
	htx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer htx.Rollback(ctx)
	if _, err := htx.Exec(ctx, `SELECT 1 FROM workflows WHERE workflow_id = 'locked' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	err = d3.Write(ctx, func(tx tgdriver.Tx) error {
		_, err := tx.LockWorkflow(ctx, "locked")
		return err
	})
	if !errors.Is(err, tgdriver.ErrBusy) || tgdriver.MayHaveApplied(err) {
		t.Fatalf("a write waiting beyond the lock timeout: %v, want ErrBusy", err)
	}
	if reason, retryable, _ := tgdriver.UnavailableReason(err); reason != "busy" || !retryable {
		t.Fatalf("reason %q retryable %v", reason, retryable)
	}
}

// statusOf reads a task's status message on a direct connection.
func statusOf(t *testing.T, ctx context.Context, url string, seq int64) string {
	t.Helper()
	var s string
	if err := raw(t, url).QueryRow(ctx, `SELECT status_message FROM tasks WHERE seq = $1`, seq).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestApplyCommitsInItsRound: an Apply with Commit sends the COMMIT in its
// own round trip and ends the transaction (Write's commit does nothing
// more). Each of its updates is checked on the server before the COMMIT
// runs: one whose guard fails aborts the whole transaction (ErrGuardFailed,
// nothing written, the other updates and the workflow created before
// included); a round lost once it reached the server is an unknown
// outcome, never run again, whether or not it committed.
func TestApplyCommitsInItsRound(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url := pgtest.URL(t)
	p, proxied := pgtest.NewCutProxy(t, url)
	// Exec mode: a batch is one round of the extended protocol with one
	// Sync, so the proxy can forward a round whole (CutAfterCommitRound).
	proxied = strings.Replace(proxied, "describe_exec", "exec", 1)
	d := open(t, proxied, Options{})
	a, b := addTask(t, d, "wf", "a", "pending"), addTask(t, d, "wf", "b", "pending")
	status := func(seq int64, text string, states ...string) tgdriver.TaskUpdate {
		return tgdriver.TaskUpdate{Seq: seq, Set: tgdriver.TaskSet{StatusMessage: tgdriver.Val(text), UpdatedAtMS: 2000},
			Guard: tgdriver.TaskGuard{States: states}}
	}
	for _, c := range []struct {
		name      string
		updates   []tgdriver.TaskUpdate
		cut       pgtest.Cut
		want      error
		committed bool
	}{
		{"committed", []tgdriver.TaskUpdate{status(a, "one", "pending"), status(b, "one", "pending")}, pgtest.CutNone, nil, true},
		{"a guard fails", []tgdriver.TaskUpdate{status(a, "two", "pending"), status(b, "two", "claimed")}, pgtest.CutNone, tgdriver.ErrGuardFailed, false},
		{"committed, answer lost", []tgdriver.TaskUpdate{status(a, "three", "pending")}, pgtest.CutAfterCommitRound, tgdriver.ErrUnknownOutcome, true},
	} {
		wf := "wf-" + c.name
		runs := 0
		err := d.Write(ctx, func(tx tgdriver.Tx) error {
			runs++
			if _, err := tx.EnsureWorkflow(ctx, wf, 1); err != nil {
				return err
			}
			if c.cut != pgtest.CutNone {
				p.Arm(c.cut)
			}
			if err := tx.Apply(ctx, tgdriver.Apply{Updates: c.updates, Commit: true}); err != nil {
				return err
			}
			if tx.(*wtx).c.begun {
				t.Errorf("%s: the transaction is still open after Apply with Commit", c.name)
			}
			return nil
		})
		if c.cut != pgtest.CutNone {
			if got := <-p.Fired; got != c.cut {
				t.Fatalf("%s: the proxy cut at %v", c.name, got)
			}
		}
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: Write: %v, want %v", c.name, err, c.want)
		}
		if got := tgdriver.MayHaveApplied(err); err != nil && got != (c.want == tgdriver.ErrUnknownOutcome) {
			t.Errorf("%s: MayHaveApplied = %v for %v", c.name, got, err)
		}
		if runs != 1 {
			t.Errorf("%s: the write ran %d times", c.name, runs)
		}
		if got := workflowExists(t, ctx, url, wf); got != c.committed {
			t.Errorf("%s: committed = %v, want %v", c.name, got, c.committed)
		}
		want := c.updates[0].Set.StatusMessage.V
		if !c.committed {
			want = "one"
		}
		if got := statusOf(t, ctx, url, a); got != want {
			t.Errorf("%s: task a's status %q, want %q", c.name, got, want)
		}
	}
}
