package audit

import (
	"context"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// History is a store's history as this package reads it: the store links
// what its driver journaled, and hands out consistent snapshots and its
// server time. *taskgraph.Store provides one (taskgraph's Store methods
// VerifyHistory, ExportAudit, AuditHead, CheckAnchor, RecentWorkflowHeads
// and CheckWorkflowAnchor call this package with it).
type History interface {
	// Link links the events journaled for workflowID (for every workflow
	// when it is ""), so that a snapshot taken after it holds every event
	// committed before the call (see tgdriver.Info.JournalEvents).
	Link(ctx context.Context, workflowID string) error
	// Snapshot runs fn on one consistent snapshot of the database.
	Snapshot(ctx context.Context, fn func(tgdriver.Reads) error) error
	// Now is the store's server time.
	Now() time.Time
}
