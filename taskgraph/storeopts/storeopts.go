package storeopts

import (
	"log/slog"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
)

// Options configure taskgraph.OpenDriver. The zero value is usable. What configures a
// database (SQLite's sync mode and busy timeout, PostgreSQL's pool) is the
// driver's own Options, given when the driver is opened.
type Options struct {
	// Clock tells server time; nil means lease.SystemClock, or the driver's
	// clock when it has one (PostgreSQL: the database's clock, see
	// tgpostgres).
	Clock lease.Clock
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Sweep marks the server's store: it runs a background loop that expires
	// leases as they lapse and wakes claim-next waiters, and it keeps lease
	// time running only while it runs (see taskgraph's leaseclock.go): on Open, live
	// leases get back the time since it was last alive, and while it runs,
	// pauses of the process and steps of the wall clock. One-shot tools
	// leave it off and never move leases.
	Sweep bool
	// Monotonic is the monotonic source compared with Clock to notice pauses
	// and clock steps (with Sweep). nil means Go's monotonic clock when Clock
	// is nil too; with a custom Clock and no Monotonic, pauses and steps
	// are not detected (the restart downtime still is). A lease.ManualClock
	// is both.
	Monotonic lease.Monotonic
	// ClockCheckInterval is how often the server's store compares its clocks;
	// 0 means 250 ms. It is capped at 500 ms: a monotonic gap of more than
	// 2 s between two checks is taken as the process having been away.
	ClockCheckInterval time.Duration
	// MaxLeaseLosses is how many lapsed leases fail a task as a poison
	// task (its worker keeps dying on it) instead of reclaiming it again:
	// 0 means taskgraph.DefaultMaxLeaseLosses; at most
	// taskgraph.MaxMaxLeaseLosses. Replicas of one database should agree
	// on it.
	MaxLeaseLosses int
	// MaxWaiters bounds the claim-next calls parked waiting for a task; 0
	// means taskgraph.DefaultMaxWaiters. At the bound, a claim-next that finds
	// no task answers at once with taskgraph.ErrWaitLimit instead of parking.
	MaxWaiters int
	// MaxRequestsPerPrincipal bounds the request answers kept for one
	// principal (see "Request ids" in package taskgraph); 0 means
	// taskgraph.MaxRequestsPerPrincipal.
	MaxRequestsPerPrincipal int
	// OnBatch, when set, is called after every commit attempt with the number
	// of operations in the batch (for metrics).
	OnBatch func(size int, took time.Duration, err error)
	// HotBatches bounds the batches of claim-next, heartbeat and complete
	// this store runs at once on a driver of many writers (PostgreSQL),
	// each one transaction on one connection: 0 means 2, and never more
	// than half the driver's connections, so that the hot path never holds
	// the whole pool. Operations that arrive while every batch runs wait
	// and go together in the next; a batch beside a running one starts
	// only for enough waiting callers, or for callers held longer than
	// the pacer's hold (package hotpace), so that replicas sharing a
	// database do not multiply its commits. The SQLite driver's one writer commits
	// one transaction at a time, and one batch runs at once there.
	HotBatches int
}
