package tgpostgres

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// maxPendingWorkflows bounds a coalesced Change: beyond it the change says
// Unknown instead of listing workflows.
const maxPendingWorkflows = 1024

// pendingChange is what the listener heard and the pump has not delivered
// yet, merged.
type pendingChange struct {
	mu        sync.Mutex
	has       bool
	unknown   bool
	workflows []string
	// requires parallels workflows (the requires of each ready task).
	requires []string
	signal   chan struct{}
}

// offer merges a change into the pending one without ever blocking.
func (d *Driver) offer(workflows, requires []string, unknown bool) {
	p := &d.pending
	p.mu.Lock()
	p.has = true
	switch {
	case unknown || p.unknown:
		p.unknown, p.workflows, p.requires = true, nil, nil
	default:
		p.workflows = append(p.workflows, workflows...)
		p.requires = append(p.requires, requires...)
		if len(p.workflows) > maxPendingWorkflows {
			p.unknown, p.workflows, p.requires = true, nil, nil
		}
	}
	p.mu.Unlock()
	select {
	case p.signal <- struct{}{}:
	default:
	}
}

// pump hands the pending change to Changes() whenever the reader is ready.
func (d *Driver) pump(ctx context.Context) {
	defer d.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.pending.signal:
		}
		p := &d.pending
		p.mu.Lock()
		if !p.has {
			p.mu.Unlock()
			continue
		}
		c := tgdriver.Change{Workflows: p.workflows, Requires: p.requires, Unknown: p.unknown}
		p.has, p.unknown, p.workflows, p.requires = false, false, nil, nil
		p.mu.Unlock()
		select {
		case d.changes <- c:
		case <-ctx.Done():
			return
		}
	}
}

// listenUnsupported reports whether LISTEN failed because the database does
// not implement it (a distributed PostgreSQL-compatible engine).
func listenUnsupported(err error) bool {
	switch sqlState(err) {
	case codeFeatureNotSupported, codeSyntaxError, codeUndefinedFunction:
		return true
	}
	return false
}

// listen keeps a dedicated connection LISTENing for other replicas'
// notifications. After a lost connection it reconnects with backoff and
// reports Unknown (notifications sent meanwhile were missed). ready is
// closed after the first attempt, whatever its outcome.
func (d *Driver) listen(ctx context.Context, ready chan<- struct{}) {
	defer d.wg.Done()
	first := true
	signalReady := func() {
		if ready != nil {
			close(ready)
			ready = nil
		}
	}
	defer signalReady()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		conn, err := pgx.ConnectConfig(ctx, d.connCfg)
		if err == nil {
			// The replica's lock first, so that LISTEN stays the
			// connection's last statement (pg_stat_activity.query).
			d.holdReplicaLock(ctx, conn)
			stmt := `LISTEN ` + notifyChannel
			if d.opts.listenSQL != "" {
				stmt = d.opts.listenSQL
			}
			if _, err = conn.Exec(ctx, stmt); err != nil {
				_ = conn.Close(context.Background())
				if listenUnsupported(err) {
					d.noNotify.Store(true)
					d.log.Info("the database does not support LISTEN; polling for pending tasks instead", "interval", d.opts.WatchInterval, "err", d.redact(err))
					signalReady()
					d.poll(ctx)
					return
				}
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.log.Warn("the listener could not connect; retrying", "in", backoff, "err", d.classify(ctx, err))
			first = false
			signalReady()
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		if !first {
			d.log.Info("the listener reconnected")
			d.offer(nil, nil, true)
		}
		first = false
		backoff = 100 * time.Millisecond
		signalReady()
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				if ctx.Err() == nil {
					d.log.Warn("the listener lost its connection; reconnecting", "err", d.classify(ctx, err))
				}
				break
			}
			replica, rest, ok := strings.Cut(n.Payload, " ")
			if !ok || replica == d.replicaID {
				continue
			}
			workflow, requires, _ := strings.Cut(rest, " ")
			if workflow == "" { // tasks of any workflow may have become claimable (a resume)
				d.offer(nil, nil, true)
				continue
			}
			d.offer([]string{workflow}, []string{requires}, false)
		}
		_ = conn.Close(context.Background())
	}
}

// poll is the watch of a database without LISTEN: every WatchInterval it
// reports Unknown while tasks are pending.
func (d *Driver) poll(ctx context.Context) {
	t := time.NewTicker(d.opts.WatchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		wfs, err := d.Reads().PendingWorkflows(ctx, 1)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("could not poll for pending tasks", "err", err)
			}
			continue
		}
		if len(wfs) > 0 {
			d.offer(nil, nil, true)
		}
	}
}

// sleep waits d or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
