package taskgraph

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Event kinds recorded in the history.
const (
	EventCreate    = "create"
	EventReady     = "ready"
	EventClaim     = "claim"
	EventHeartbeat = "heartbeat"
	EventComplete  = "complete"
	EventFail      = "fail"
	EventRetry     = "retry"
	EventExpire    = "expire"
	EventCancel    = "cancel"
	EventRequeue   = "requeue"
	EventSkip      = "skip"
	EventAbort     = "abort"
	EventRevive    = "revive"
	// EventLeaseShift records a live lease moved by the time the server was
	// away (a restart, a pause, a clock step); detail has the new
	// lease_expires_at_ms and shift_ms.
	EventLeaseShift = "lease_shift"
)

// Event is one recorded transition. Events of a workflow form a hash chain:
// Hash = hex(sha256(PrevHash + "\n" + canonical JSON of the event)), where the
// canonical JSON has the keys at_ms, detail, generation, kind, owner, seq,
// task_id and workflow_id in that order, detail as stored.
type Event struct {
	EventID    int64
	WorkflowID string
	Seq        int64 // position in the workflow's chain, from 1
	TaskID     string
	Kind       string
	Owner      string
	Generation int64
	At         time.Time
	Detail     json.RawMessage // a JSON object
	PrevHash   string
	Hash       string
}

// canonicalEvent fixes the hashed encoding; fields are in key order.
type canonicalEvent struct {
	AtMS       int64           `json:"at_ms"`
	Detail     json.RawMessage `json:"detail"`
	Generation int64           `json:"generation"`
	Kind       string          `json:"kind"`
	Owner      string          `json:"owner"`
	Seq        int64           `json:"seq"`
	TaskID     string          `json:"task_id"`
	WorkflowID string          `json:"workflow_id"`
}

// EventHash computes the chain hash of e from its fields and PrevHash.
func EventHash(e Event) (string, error) {
	b, err := json.Marshal(canonicalEvent{
		AtMS: e.At.UnixMilli(), Detail: e.Detail, Generation: e.Generation, Kind: e.Kind,
		Owner: e.Owner, Seq: e.Seq, TaskID: e.TaskID, WorkflowID: e.WorkflowID,
	})
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(e.PrevHash))
	h.Write([]byte{'\n'})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// appendEvent records a transition of task r in its workflow's chain.
func (w *wtx) appendEvent(r *row, kind, owner string, generation int64, detail map[string]any) error {
	if detail == nil {
		detail = map[string]any{}
	}
	d, err := json.Marshal(detail) // map keys are sorted: a stable encoding
	if err != nil {
		return fmt.Errorf("%w: encode event detail: %v", errInternal, err)
	}
	var head string
	var count int64
	if err := w.queryRow(`SELECT head_hash, event_count FROM workflows WHERE workflow_id = ?`, r.WorkflowID).Scan(&head, &count); err != nil {
		return fmt.Errorf("read chain head of workflow %s: %w", r.WorkflowID, err)
	}
	e := Event{WorkflowID: r.WorkflowID, Seq: count + 1, TaskID: r.TaskID, Kind: kind, Owner: owner,
		Generation: generation, At: time.UnixMilli(w.nowMS), Detail: d, PrevHash: head}
	if e.Hash, err = EventHash(e); err != nil {
		return err
	}
	if _, err := w.exec(`INSERT INTO events (workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, e.WorkflowID, e.Seq, e.TaskID, e.Kind, e.Owner, e.Generation, w.nowMS, string(d), e.PrevHash, e.Hash); err != nil {
		return fmt.Errorf("append event: %w", err)
	}
	// Compare and set: the head advances only from the head this event
	// links to, so two writers can never fork the chain, however the store
	// is driven; a moved head is an error and the operation rolls back.
	res, err := w.exec(`UPDATE workflows SET head_hash = ?, event_count = ?, updated_at_ms = ? WHERE workflow_id = ? AND head_hash = ? AND event_count = ?`,
		e.Hash, e.Seq, w.nowMS, r.WorkflowID, head, count)
	if err != nil {
		return fmt.Errorf("advance chain head: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%w: the chain head of workflow %s moved while event %d was appended (rows %d, %v)", errInternal, r.WorkflowID, e.Seq, n, err)
	}
	return nil
}

const eventColumns = `event_id, workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash`

func scanEvent(sc scanner) (Event, error) {
	var e Event
	var at int64
	var detail string
	if err := sc.Scan(&e.EventID, &e.WorkflowID, &e.Seq, &e.TaskID, &e.Kind, &e.Owner, &e.Generation, &at, &detail, &e.PrevHash, &e.Hash); err != nil {
		return Event{}, err
	}
	e.At = time.UnixMilli(at).UTC()
	e.Detail = json.RawMessage(detail)
	return e, nil
}

// TaskEvents returns the history of one task, oldest first.
func (s *Store) TaskEvents(ctx context.Context, taskID string) ([]Event, error) {
	if err := checkTaskID(taskID); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+eventColumns+` FROM events WHERE task_id = ? ORDER BY event_id`, taskID)
	if err != nil {
		return nil, fmt.Errorf("read events of task %s: %w", taskID, err)
	}
	return collectEvents(rows)
}

// WorkflowEvents returns the history of a workflow, oldest first.
func (s *Store) WorkflowEvents(ctx context.Context, workflowID string) ([]Event, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+eventColumns+` FROM events WHERE workflow_id = ? ORDER BY wseq`, workflowID)
	if err != nil {
		return nil, fmt.Errorf("read events of workflow %s: %w", workflowID, err)
	}
	return collectEvents(rows)
}

func collectEvents(rows *sql.Rows) ([]Event, error) {
	defer rows.Close()
	var out []Event
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// BrokenLink locates the first place where the history does not verify.
type BrokenLink struct {
	WorkflowID string
	Seq        int64 // chain position; 0 when the problem is the workflow's head
	EventID    int64
	Reason     string
}

// VerifyReport is the outcome of VerifyHistory.
type VerifyReport struct {
	Workflows int
	Events    int64
	// Broken is nil when every chain verifies.
	Broken *BrokenLink
}

// ErrBrokenChain matches the error VerifyHistory returns with a report whose
// Broken is set.
var ErrBrokenChain = errors.New("event history does not verify")

// VerifyHistory recomputes every workflow's hash chain: each event's hash
// from its content and the previous hash, sequence numbers without gaps, and
// the stored chain head and count. It stops at the first broken link and
// returns it in the report, with an error matching ErrBrokenChain.
func (s *Store) VerifyHistory(ctx context.Context) (VerifyReport, error) {
	var rep VerifyReport
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return rep, err
	}
	defer tx.Rollback()
	// One read transaction: a consistent snapshot while writers go on.
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM workflows LIMIT 1`); err != nil {
		return rep, err
	}
	var orphan sql.NullString
	err = tx.QueryRowContext(ctx, `SELECT e.workflow_id FROM events e LEFT JOIN workflows w ON w.workflow_id = e.workflow_id
		WHERE w.workflow_id IS NULL LIMIT 1`).Scan(&orphan)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return rep, err
	}
	if orphan.Valid {
		rep.Broken = &BrokenLink{WorkflowID: orphan.String, Reason: "events exist for a workflow that has no chain head"}
		return rep, fmt.Errorf("%w: workflow %s: %s", ErrBrokenChain, orphan.String, rep.Broken.Reason)
	}
	wrows, err := tx.QueryContext(ctx, `SELECT workflow_id, head_hash, event_count FROM workflows ORDER BY workflow_id`)
	if err != nil {
		return rep, err
	}
	type head struct {
		id    string
		hash  string
		count int64
	}
	var heads []head
	for wrows.Next() {
		var h head
		if err := wrows.Scan(&h.id, &h.hash, &h.count); err != nil {
			wrows.Close()
			return rep, err
		}
		heads = append(heads, h)
	}
	wrows.Close()
	if err := wrows.Err(); err != nil {
		return rep, err
	}
	for _, h := range heads {
		rep.Workflows++
		broken, n, err := verifyChain(ctx, tx, h.id, h.hash, h.count)
		rep.Events += n
		if err != nil {
			return rep, err
		}
		if broken != nil {
			rep.Broken = broken
			return rep, fmt.Errorf("%w: workflow %s event %d: %s", ErrBrokenChain, broken.WorkflowID, broken.Seq, broken.Reason)
		}
	}
	return rep, nil
}

func verifyChain(ctx context.Context, tx *sql.Tx, workflowID, headHash string, count int64) (*BrokenLink, int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+eventColumns+` FROM events WHERE workflow_id = ? ORDER BY wseq`, workflowID)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	prev := ""
	var n int64
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, n, err
		}
		n++
		broken := func(reason string, args ...any) (*BrokenLink, int64, error) {
			return &BrokenLink{WorkflowID: workflowID, Seq: e.Seq, EventID: e.EventID, Reason: fmt.Sprintf(reason, args...)}, n, nil
		}
		if e.Seq != n {
			return broken("sequence %d found where %d was expected (an event is missing or was inserted)", e.Seq, n)
		}
		if e.PrevHash != prev {
			return broken("prev_hash does not match the hash of event %d", n-1)
		}
		want, err := EventHash(e)
		if err != nil {
			return nil, n, err
		}
		if want != e.Hash {
			return broken("content does not match its hash (the event was edited)")
		}
		prev = e.Hash
	}
	if err := rows.Err(); err != nil {
		return nil, n, err
	}
	if n != count || prev != headHash {
		return &BrokenLink{WorkflowID: workflowID, Reason: fmt.Sprintf("the chain has %d events ending in %q but the workflow's head records %d ending in %q (events were removed or added)", n, prev, count, headHash)}, n, nil
	}
	return nil, n, nil
}
