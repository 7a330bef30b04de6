package taskgraph

import (
	"context"
	"errors"
	"fmt"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/audit"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// Event kinds recorded in the history.
const (
	EventCreate    = audit.EventCreate
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

// Event is one recorded transition (package audit owns its hash format).
type Event = audit.Event

// EventHash computes the chain hash of e from its fields and PrevHash, in
// e's HashVersion (0 means HashV1; see audit.EventHash).
func EventHash(e Event) (string, error) { return e.ComputeHash() }

// appendEvent records a transition of task r in its workflow's history:
// the event is recorded, with the others of the transaction and in order,
// when the transaction ends (flush): linked into the chain there, or
// journaled and linked right after the commit (see audit.Linker).
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
	w.out.events = append(w.out.events, tgdriver.EventRow{WorkflowID: r.WorkflowID, TaskID: r.TaskID, TaskSeq: r.seq, Kind: kind, Owner: owner,
		Generation: generation, AtMS: w.nowMS, Detail: string(d), HashVersion: HashV2,
		ActorKind: a.Kind, ActorName: a.Name, ActorPrincipal: a.Principal,
		TaskState: string(audit.TaskStateJSON(string(r.State), r.Owner, r.Generation, r.Attempts, string(r.Result), r.Result != nil, r.Error)),
		Content:   string(audit.ContentJSON(kind, string(r.State), string(r.Payload), string(r.Result), r.Error, detail))})
	return nil
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
		out = append(out, audit.EventOf(er))
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
		out = append(out, audit.EventOf(er))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read events of workflow %s: %w", workflowID, err)
	}
	return out, nil
}

// linker links the events the driver journals into their chains
// (audit.Linker); kick is the write path's door to it.
type linker struct{ *audit.Linker }

// kick asks for a pass soon for the workflows of evs. It never blocks.
func (l linker) kick(evs []tgdriver.EventRow) { l.Kick(evs) }

// linkAll links the journaled events of every workflow that has some.
func (s *Store) linkAll(ctx context.Context) error {
	if !s.journal {
		return nil
	}
	return s.linker.LinkAll(ctx)
}

// linkWorkflow links every journaled event of workflowID, in journal order,
// onto its chain. Its reads of the history see those events linked.
func (s *Store) linkWorkflow(ctx context.Context, workflowID string) error {
	if !s.journal {
		return nil
	}
	return s.linker.LinkWorkflows(ctx, []string{workflowID})
}

// linkTaskWorkflow links the journaled events of taskID's workflow.
func (s *Store) linkTaskWorkflow(ctx context.Context, taskID string) error {
	if !s.journal {
		return nil
	}
	tr, err := s.drv.Reads().TaskByID(ctx, taskID)
	if errors.Is(err, tgdriver.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.linkWorkflow(ctx, tr.WorkflowID)
}

// LinkHistory links every event recorded so far into its workflow's chain.
// With a driver that journals events (PostgreSQL), a server links them
// within moments of their commit; readers of the history (WorkflowEvents,
// TaskEvents, VerifyHistory, anchors) link what they read first. It is a
// no-op on other drivers and on a read-only store.
func (s *Store) LinkHistory(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.linkAll(ctx)
}
