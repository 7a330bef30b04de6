package taskgraph

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
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

// appendEvent records a transition of task r in its workflow's chain. The
// caller holds the workflow's lock (lockWorkflow); the driver advances the
// head by compare and set, so two writers can never fork the chain however
// the store is driven: a moved head is an error and the operation rolls back.
func (w *wtx) appendEvent(r *row, kind, owner string, generation int64, detail map[string]any) error {
	var d []byte
	if len(detail) == 0 {
		d = []byte("{}")
	} else {
		var err error
		if d, err = json.Marshal(detail); err != nil { // map keys are sorted: a stable encoding
			return fmt.Errorf("%w: encode event detail: %v", errInternal, err)
		}
	}
	head, count, err := w.tx.ChainHead(w.ctx, r.WorkflowID)
	if err != nil {
		return fmt.Errorf("read chain head of workflow %s: %w", r.WorkflowID, err)
	}
	e := Event{WorkflowID: r.WorkflowID, Seq: count + 1, TaskID: r.TaskID, Kind: kind, Owner: owner,
		Generation: generation, At: time.UnixMilli(w.nowMS), Detail: d, PrevHash: head}
	if e.Hash, err = EventHash(e); err != nil {
		return err
	}
	err = w.tx.AppendEvent(w.ctx, tgdriver.EventRow{WorkflowID: e.WorkflowID, Seq: e.Seq, TaskID: e.TaskID, Kind: e.Kind,
		Owner: e.Owner, Generation: e.Generation, AtMS: w.nowMS, Detail: string(d), PrevHash: e.PrevHash, Hash: e.Hash})
	if errors.Is(err, tgdriver.ErrChainMoved) {
		return fmt.Errorf("%w: the chain head of workflow %s moved while event %d was appended: %v", errInternal, r.WorkflowID, e.Seq, err)
	}
	if err != nil {
		return fmt.Errorf("append event: %w", err)
	}
	return nil
}

func toEvent(er tgdriver.EventRow) Event {
	return Event{EventID: er.EventID, WorkflowID: er.WorkflowID, Seq: er.Seq, TaskID: er.TaskID, Kind: er.Kind, Owner: er.Owner,
		Generation: er.Generation, At: time.UnixMilli(er.AtMS).UTC(), Detail: json.RawMessage(er.Detail), PrevHash: er.PrevHash, Hash: er.Hash}
}

// TaskEvents returns the history of one task, oldest first.
func (s *Store) TaskEvents(ctx context.Context, taskID string) ([]Event, error) {
	if err := checkTaskID(taskID); err != nil {
		return nil, err
	}
	ers, err := s.drv.Reads().TaskEvents(ctx, taskID)
	if err != nil {
		return nil, fmt.Errorf("read events of task %s: %w", taskID, err)
	}
	out := make([]Event, 0, len(ers))
	for _, er := range ers {
		out = append(out, toEvent(er))
	}
	return out, nil
}

// WorkflowEvents returns the history of a workflow, oldest first.
func (s *Store) WorkflowEvents(ctx context.Context, workflowID string) ([]Event, error) {
	var out []Event
	err := s.drv.Reads().WorkflowEvents(ctx, workflowID, func(er tgdriver.EventRow) error {
		out = append(out, toEvent(er))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read events of workflow %s: %w", workflowID, err)
	}
	return out, nil
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
// returns it in the report, with an error matching ErrBrokenChain. It reads
// one consistent snapshot while writers go on.
func (s *Store) VerifyHistory(ctx context.Context) (VerifyReport, error) {
	var rep VerifyReport
	var brokenErr error
	err := s.drv.Snapshot(ctx, func(rd tgdriver.Reads) error {
		rep = VerifyReport{}
		orphan, ok, err := rd.OrphanEventWorkflow(ctx)
		if err != nil {
			return err
		}
		if ok {
			rep.Broken = &BrokenLink{WorkflowID: orphan, Reason: "events exist for a workflow that has no chain head"}
			brokenErr = fmt.Errorf("%w: workflow %s: %s", ErrBrokenChain, orphan, rep.Broken.Reason)
			return nil
		}
		heads, err := rd.Workflows(ctx)
		if err != nil {
			return err
		}
		for _, h := range heads {
			rep.Workflows++
			broken, n, err := verifyChain(ctx, rd, h.WorkflowID, h.HeadHash, h.EventCount)
			rep.Events += n
			if err != nil {
				return err
			}
			if broken != nil {
				rep.Broken = broken
				brokenErr = fmt.Errorf("%w: workflow %s event %d: %s", ErrBrokenChain, broken.WorkflowID, broken.Seq, broken.Reason)
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	return rep, brokenErr
}

// errStop ends a WorkflowEvents walk early.
var errStop = errors.New("stop")

func verifyChain(ctx context.Context, rd tgdriver.Reads, workflowID, headHash string, count int64) (*BrokenLink, int64, error) {
	prev := ""
	var n int64
	var broken *BrokenLink
	err := rd.WorkflowEvents(ctx, workflowID, func(er tgdriver.EventRow) error {
		e := toEvent(er)
		n++
		stop := func(reason string, args ...any) error {
			broken = &BrokenLink{WorkflowID: workflowID, Seq: e.Seq, EventID: e.EventID, Reason: fmt.Sprintf(reason, args...)}
			return errStop
		}
		if e.Seq != n {
			return stop("sequence %d found where %d was expected (an event is missing or was inserted)", e.Seq, n)
		}
		if e.PrevHash != prev {
			return stop("prev_hash does not match the hash of event %d", n-1)
		}
		want, err := EventHash(e)
		if err != nil {
			return err
		}
		if want != e.Hash {
			return stop("content does not match its hash (the event was edited)")
		}
		prev = e.Hash
		return nil
	})
	if broken != nil {
		return broken, n, nil
	}
	if err != nil {
		return nil, n, err
	}
	if n != count || prev != headHash {
		return &BrokenLink{WorkflowID: workflowID, Reason: fmt.Sprintf("the chain has %d events ending in %q but the workflow's head records %d ending in %q (events were removed or added)", n, prev, count, headHash)}, n, nil
	}
	return nil, n, nil
}
