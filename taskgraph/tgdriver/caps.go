package tgdriver

import (
	"context"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
)

// A driver's optional capabilities are the interfaces of this file: a driver
// that has one implements it, and the domain asserts them once, when it
// starts a store on the driver (taskgraph.OpenDriver). Nothing else in the
// domain or above it looks at a driver's concrete type or its name.
// Operations that only one database has and that the domain never uses (the
// SQLite file's backup, integrity check and checkpoint) are not capabilities:
// they are methods of that driver, which the composition root (the CLI)
// calls on the driver it opened.

// SharedClock is a driver whose database several server processes
// (replicas) serve at once, judging leases by one clock: Clock, the
// database's. The domain then uses Clock unless it was given a clock of its
// own, and gives back only the time no replica ran (package taskgraph,
// "Lease time"): a replica's own pause or clock step moves no lease, so such
// a driver never calls Hooks.BatchStart.
type SharedClock interface {
	// Clock returns the replicas' shared clock.
	Clock() lease.Clock
}

// ReplicaCounter is a driver whose database several server processes
// (replicas) may serve at once and that can tell how many do. The domain
// paces its hot lane by it: with more replicas on the database, a lane
// starts a batch beside a running one only for as many times more waiting
// callers (package hotpace, "Replicas"), so that the replicas together
// run about as many batches at once as one would.
type ReplicaCounter interface {
	// Replicas returns how many replicas, this one included, served the
	// database at the driver's last look: at least 1. It must be cheap
	// and safe for concurrent use (the hot lane's pacer reads it whenever
	// it decides on a batch beside a running one): a driver counts in the
	// background and returns what it counted last.
	Replicas() int
}

// JournalTryLocker is a Tx of a driver that journals events
// (Info.JournalEvents) whose linking skips what it need not lock or wait
// for. The linker (audit.Linker) asserts it on the Tx of each link: its
// own passes skip the rows another holds; a reader that links before it
// reads and finds a row held locks them all again, waiting
// (Tx.LockChains).
type JournalTryLocker interface {
	// TryLockJournaled locks, without waiting, the rows of those workflows
	// of workflowIDs that have journaled events, in workflow id order, and
	// returns them with their chain heads (locked); busy names those with
	// journaled events whose row another transaction holds, which were not
	// locked. A workflow without journaled events, or without a row, is in
	// neither. It reads the journal without locks first, so a pass that
	// finds nothing to link writes nothing: its commit flushes no WAL.
	TryLockJournaled(ctx context.Context, workflowIDs []string) (locked []WorkflowRow, busy []string, err error)
}

// JournalIDReader is a Tx of a driver that journals events
// (Info.JournalEvents) whose linker may take the bodies of the events it
// links from those its store journaled (audit.Linker keeps the bodies it
// is kicked with) instead of reading each back: it reads which events the
// journal holds without their bodies, and reads by id only the bodies the
// linker does not have. Such a driver's Apply sets, in place, the EventID
// of each event of a.Events it journals (a.Journal), so that the events
// committed name the rows they were written to.
type JournalIDReader interface {
	// JournaledEventIDs is JournaledEvents without the bodies: the same
	// events (whole entries, the last may take it past limit), in the same
	// order, each as its EventID and WorkflowID.
	JournaledEventIDs(ctx context.Context, workflowIDs []string, limit int) ([]EventRef, error)
	// JournaledBodies returns the journaled events of refs (each named as
	// JournaledEventIDs names it) as
	// JournaledEvents does (Seq 0, no hashes), in id order; a ref without
	// a journaled event is left out.
	JournaledBodies(ctx context.Context, refs []EventRef) ([]EventRow, error)
}

// EventRef names a journaled event: its id and its workflow, and the id
// of the journal entry that holds it (JournalID, as JournaledEventIDs read
// it; 0 when the driver has none to give), by which JournaledBodies may
// find its body without a search.
type EventRef struct {
	EventID    int64
	WorkflowID string
	JournalID  int64
}
