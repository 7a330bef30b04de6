package taskgraph

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/audit"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/jcs"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// Hash format versions of events and of the audit chain (see MCP.md, "Audit
// trail format"; package audit owns the format).
const (
	// HashV1 is the format of events written before migration 0003.
	HashV1 = audit.HashV1
	// HashV2 is the format of every event written since.
	HashV2 = audit.HashV2
)

// Actor kinds: who caused an event.
const (
	ActorWorker    = "worker"    // the holder of a claim, or a claimant
	ActorOperator  = "operator"  // an operator command (requeue, skip, abort, prune)
	ActorRequestor = "requestor" // a protocol request (MCP tasks/cancel)
	ActorSweeper   = "sweeper"   // the server's lease sweeper
	ActorServer    = "server"    // the store itself (expiries in passing, lease shifts)
	ActorSubmitter = "submitter" // the creator of a task
)

// Audit chain entry kinds (the database-wide chain; see package audit).
const (
	// AuditSwitch is the first entry: the database moved to hash format 2.
	AuditSwitch = audit.EntrySwitch
	// AuditAdopt records a workflow that existed at the switch, with its head.
	AuditAdopt = audit.EntryAdopt
	// AuditCreate records a workflow's creation.
	AuditCreate = audit.EntryCreate
	// AuditPrune records a workflow's removal by prune, with its final head.
	AuditPrune = audit.EntryPrune
)

// Actor is who caused an event (audit.Actor): a kind, a name and the
// principal of the request.
type Actor = audit.Actor

// actorOf is the actor of w's operation, with the principal of its context.
func (w *wtx) actorOf() Actor {
	a := w.actor
	if a.Kind == "" {
		a.Kind = ActorServer
	}
	a.Principal = PrincipalFrom(w.ctx)
	return a
}

// as sets the actor of w's operation and returns w.
func (w *wtx) as(kind, name string) *wtx {
	w.actor = Actor{Kind: kind, Name: name}
	return w
}

// canonicalJSON appends v in RFC 8785 form (jcs.Append), the one encoder
// of the store and the manifest. A value the encoder refuses is a bug of
// the store, never of its input.
func canonicalJSON(b []byte, v any) ([]byte, error) {
	out, err := jcs.Append(b, v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInternal, err)
	}
	return out, nil
}

// appendAudit records an entry of the database-wide chain in w's
// transaction at its server time (audit.AppendEntry: the head is locked
// after any workflow row this operation locked; an empty chain first
// records the switch and adopts every workflow). A chain that moved under
// the lock, or an entry that does not encode, is a fault of the store.
func (w *wtx) appendAudit(kind, workflowID string, detail map[string]any) error {
	err := audit.AppendEntry(w.ctx, w.tx, w.nowMS, kind, workflowID, detail)
	if errors.Is(err, tgdriver.ErrChainMoved) || errors.Is(err, audit.ErrEncode) {
		return fmt.Errorf("%w: %v", errInternal, err)
	}
	return err
}

// ensureAudit starts the audit chain of a database that has none (at Open,
// so that the switch to hash format 2 is recorded before anything else).
func (s *Store) ensureAudit(ctx context.Context) error {
	return s.do(ctx, func(w *wtx) error { return w.appendAudit("", "", nil) })
}

// The history's readers live in package audit; these are the store's
// doors to them (the store links what is journaled first).

// VerifyReport is the outcome of VerifyHistory (audit.VerifyReport).
type VerifyReport = audit.VerifyReport

// AuditHead is the database-wide head of the audit trail at a moment.
type AuditHead = audit.Head

// WorkflowHead is one workflow's chain head at a time.
type WorkflowHead = audit.WorkflowHead

// Errors of the history's readers (see package audit).
var (
	// ErrBrokenChain matches the error of VerifyHistory with a broken report.
	ErrBrokenChain = audit.ErrBrokenChain
	// ErrAnchorNotExtended matches the error of CheckAnchor and
	// CheckWorkflowAnchor when the database does not extend the anchor.
	ErrAnchorNotExtended = audit.ErrAnchorNotExtended
)

// Bounds of anchors (see package audit).
const (
	// MaxAnchorLine bounds one line of an anchor file.
	MaxAnchorLine = audit.MaxAnchorLine
	// MaxAnchorWorkflows bounds the workflow heads RecentWorkflowHeads returns.
	MaxAnchorWorkflows = audit.MaxAnchorWorkflows
)

// ParseAuditHead parses a head token or an anchor line (audit.ParseHead).
func ParseAuditHead(s string) (AuditHead, error) { return audit.ParseHead(s) }

// ParseWorkflowHead parses a workflow head's anchor line.
func ParseWorkflowHead(s string) (WorkflowHead, error) { return audit.ParseWorkflowHead(s) }

// IsWorkflowHeadLine reports whether an anchor line holds a workflow head.
func IsWorkflowHeadLine(s string) bool { return audit.IsWorkflowHeadLine(s) }

// history is the store as package audit reads it.
type history struct{ s *Store }

func (h history) Link(ctx context.Context, workflowID string) error {
	if workflowID == "" {
		return h.s.linkAll(ctx)
	}
	return h.s.linkWorkflow(ctx, workflowID)
}

func (h history) Snapshot(ctx context.Context, fn func(tgdriver.Reads) error) error {
	return h.s.drv.Snapshot(ctx, fn)
}

func (h history) Now() time.Time { return h.s.clock.Now() }

// VerifyHistory checks the whole audit trail on one consistent snapshot
// while writers go on (audit.Verify).
func (s *Store) VerifyHistory(ctx context.Context) (VerifyReport, error) {
	return audit.Verify(ctx, history{s})
}

// ExportAudit writes `audit export` to w from one consistent snapshot
// (audit.Export).
func (s *Store) ExportAudit(ctx context.Context, w io.Writer) error {
	return audit.Export(ctx, history{s}, w)
}

// AuditHead returns the database-wide head now, from one snapshot.
func (s *Store) AuditHead(ctx context.Context) (AuditHead, error) {
	return audit.CurrentHead(ctx, history{s})
}

// CheckAnchor returns nil if the database extends anchored, a head taken
// earlier, else an error matching ErrAnchorNotExtended (audit.CheckAnchor).
func (s *Store) CheckAnchor(ctx context.Context, anchored AuditHead) error {
	return audit.CheckAnchor(ctx, history{s}, anchored)
}

// RecentWorkflowHeads returns the heads of the workflows changed at or
// after sinceMS (server time), the most recently changed first, at most
// MaxAnchorWorkflows, from one snapshot.
func (s *Store) RecentWorkflowHeads(ctx context.Context, sinceMS int64) ([]WorkflowHead, error) {
	return audit.RecentWorkflowHeads(ctx, history{s}, sinceMS)
}

// CheckWorkflowAnchor returns nil if the database extends anchored, else an
// error matching ErrAnchorNotExtended naming the events the workflow lost.
func (s *Store) CheckWorkflowAnchor(ctx context.Context, anchored WorkflowHead) error {
	return audit.CheckWorkflowAnchor(ctx, history{s}, anchored)
}
