package taskgraph

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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

// Event is one recorded transition. Events of a workflow form a hash chain
// whose format is versioned (HashVersion; see MCP.md, "Audit trail format").
// At version 1 (events written before migration 0003), Hash =
// hex(sha256(PrevHash + "\n" + encoding/json of the keys at_ms, detail,
// generation, kind, owner, seq, task_id and workflow_id in that order)). At
// version 2, Hash = hex(sha256(RFC 8785 canonical JSON of an object holding
// those fields, prev_hash, the actor, the task state the event leaves and the
// digests of the content it changed)).
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
	// HashVersion is HashV1 or HashV2; the fields below are zero at HashV1.
	HashVersion int
	Actor       Actor
	// State is the canonical JSON of the task state the event leaves:
	// attempts, error_sha256, generation, owner, result_sha256, state.
	State json.RawMessage
	// Content is the canonical JSON of the digests of the content the event
	// changed (payload_sha256, result_sha256, error_sha256, reason_sha256).
	Content json.RawMessage
}

// canonicalEvent fixes the hashed encoding of HashV1; fields are in key order.
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

// EventHash computes the chain hash of e from its fields and PrevHash, in
// e's HashVersion (0 means HashV1).
func EventHash(e Event) (string, error) {
	if e.HashVersion >= HashV2 {
		if e.HashVersion != HashV2 {
			return "", fmt.Errorf("%w: unknown hash version %d", errNotCanonical, e.HashVersion)
		}
		return eventHashV2(e)
	}
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

// appendEvent records a transition of task r in its workflow's history:
// the event is recorded, with the others of the transaction and in order,
// when the transaction ends (flush): linked into the chain there, or
// journaled and linked right after the commit (see linker).
func (w *wtx) appendEvent(r *row, kind, owner string, generation int64, detail map[string]any) error {
	var d []byte
	if len(detail) == 0 {
		d = []byte("{}")
	} else {
		var err error
		if d, err = canonicalJSON(make([]byte, 0, 128), detail); err != nil {
			return fmt.Errorf("%w: encode event detail: %v", errInternal, err)
		}
	}
	a := w.actorOf()
	w.out.events = append(w.out.events, tgdriver.EventRow{WorkflowID: r.WorkflowID, TaskID: r.TaskID, Kind: kind, Owner: owner,
		Generation: generation, AtMS: w.nowMS, Detail: string(d), HashVersion: HashV2,
		ActorKind: a.Kind, ActorName: a.Name, ActorPrincipal: a.Principal,
		TaskState: string(taskStateJSON(string(r.State), r.Owner, r.Generation, r.Attempts, string(r.Result), r.Result != nil, r.Error)),
		Content:   string(contentJSON(kind, r, detail))})
	return nil
}

// linkInPlace links evs (unlinked, in the order they happened) onto their
// workflows' chain heads as they stand in w's transaction, and returns
// them linked.
func (w *wtx) linkInPlace(evs []tgdriver.EventRow) ([]tgdriver.EventRow, error) {
	type head struct {
		hash  string
		count int64
	}
	heads := make(map[string]*head, 2)
	for i := range evs {
		e := &evs[i]
		h := heads[e.WorkflowID]
		if h == nil {
			hash, count, err := w.tx.ChainHead(w.ctx, e.WorkflowID)
			if err != nil {
				return nil, fmt.Errorf("read chain head of workflow %s: %w", e.WorkflowID, err)
			}
			h = &head{hash, count}
			heads[e.WorkflowID] = h
		}
		h.count++
		linkEvent(e, h.hash, h.count)
		h.hash = e.Hash
	}
	return evs, nil
}

// linkEvent makes e (HashV2) the event after prevHash at position seq of
// its workflow's chain: it sets Seq, PrevHash and Hash.
func linkEvent(e *tgdriver.EventRow, prevHash string, seq int64) {
	e.Seq, e.PrevHash = seq, prevHash
	ev := Event{WorkflowID: e.WorkflowID, Seq: seq, TaskID: e.TaskID, Kind: e.Kind, Owner: e.Owner, Generation: e.Generation,
		At: time.UnixMilli(e.AtMS), PrevHash: prevHash, HashVersion: HashV2,
		Actor: Actor{Kind: e.ActorKind, Name: e.ActorName, Principal: e.ActorPrincipal}}
	b := make([]byte, 0, 320+len(e.Detail)+len(e.TaskState)+len(e.Content))
	e.Hash = hashHex(appendEventObjectV2(b, ev, e.Detail, e.TaskState, e.Content))
}

func toEvent(er tgdriver.EventRow) Event {
	return Event{EventID: er.EventID, WorkflowID: er.WorkflowID, Seq: er.Seq, TaskID: er.TaskID, Kind: er.Kind, Owner: er.Owner,
		Generation: er.Generation, At: time.UnixMilli(er.AtMS).UTC(), Detail: json.RawMessage(er.Detail), PrevHash: er.PrevHash, Hash: er.Hash,
		HashVersion: er.HashVersion, Actor: Actor{Kind: er.ActorKind, Name: er.ActorName, Principal: er.ActorPrincipal},
		State: json.RawMessage(er.TaskState), Content: json.RawMessage(er.Content)}
}

// TaskEvents returns the history of one task, oldest first.
func (s *Store) TaskEvents(ctx context.Context, taskID string) ([]Event, error) {
	if err := checkTaskID(taskID); err != nil {
		return nil, err
	}
	if err := s.linkTaskWorkflow(ctx, taskID); err != nil {
		return nil, fmt.Errorf("read events of task %s: %w", taskID, err)
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
	if err := s.linkWorkflow(ctx, workflowID); err != nil {
		return nil, fmt.Errorf("read events of workflow %s: %w", workflowID, err)
	}
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
