package audit

import (
	"encoding/json"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// Actor is who caused an event: a kind, a name (the worker's owner, the
// operator's name; "" when there is none) and the authenticated principal of
// the request (taskgraph.PrincipalFrom), "" when none.
type Actor struct {
	Kind      string
	Name      string
	Principal string
}

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

// ComputeHash computes the chain hash of e from its fields and PrevHash, in e's
// HashVersion (0 means HashV1; see EventHash).
func (e Event) ComputeHash() (string, error) {
	er := e.Row()
	return EventHash(&er)
}

// Row is e as the driver stores it.
func (e Event) Row() tgdriver.EventRow {
	return tgdriver.EventRow{EventID: e.EventID, WorkflowID: e.WorkflowID, Seq: e.Seq, TaskID: e.TaskID, Kind: e.Kind, Owner: e.Owner,
		Generation: e.Generation, AtMS: e.At.UnixMilli(), Detail: string(e.Detail), PrevHash: e.PrevHash, Hash: e.Hash,
		HashVersion: e.HashVersion, ActorKind: e.Actor.Kind, ActorName: e.Actor.Name, ActorPrincipal: e.Actor.Principal,
		TaskState: string(e.State), Content: string(e.Content)}
}

// EventOf is the event the driver's row er holds.
func EventOf(er tgdriver.EventRow) Event {
	return Event{EventID: er.EventID, WorkflowID: er.WorkflowID, Seq: er.Seq, TaskID: er.TaskID, Kind: er.Kind, Owner: er.Owner,
		Generation: er.Generation, At: time.UnixMilli(er.AtMS).UTC(), Detail: json.RawMessage(er.Detail), PrevHash: er.PrevHash, Hash: er.Hash,
		HashVersion: er.HashVersion, Actor: Actor{Kind: er.ActorKind, Name: er.ActorName, Principal: er.ActorPrincipal},
		State: json.RawMessage(er.TaskState), Content: json.RawMessage(er.Content)}
}
