package httpfront

import (
	"container/list"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
)

// Admission over Streamable HTTP. The capacity a worker needs to keep its
// lease (a heartbeat, a complete) must never be held by requests that are
// merely waiting: for work (a claim-next long poll), for their own headers
// or body (a slow or hostile client), or for a session that was opened and
// abandoned. The rules:
//
//   - A request takes a --max-concurrent slot only once its headers are in,
//     it is authorized and its whole body is read and parsed.
//   - A claim-next long poll (tools/call of graph_task_claim without
//     task_id and with a positive wait_ms, in either era) takes no slot: it
//     waits in the store, which bounds its waiters itself. Slots are left to
//     the short calls: holder writes, creates, reads.
//   - A short call that finds every slot taken waits up to AdmissionWait for
//     one, then gets 503 with Retry-After.
//   - A holder write (heartbeat, complete, fail, cancel) that finds every
//     slot taken waits ahead of every other short call, up to the call's own
//     deadline (CallTimeout), and is never refused for want of a slot: a
//     refusal could cost a live worker its lease, while the wait costs it
//     nothing (it is judged at the time it arrived, in either era).
//   - At --max-connections, a new connection is accepted and the oldest
//     connection that has never carried an authorized, fully read request is
//     closed to make room, so slow clients cannot keep a worker in the
//     kernel's accept backlog. Connections that have carried one are never
//     closed for room; only when all are such does a new one wait.

// DefaultAdmissionWait is how long a short call waits for a concurrency slot
// before it is refused with 503.
const DefaultAdmissionWait = time.Second

// bodyReadTimeout bounds the read of one POST body, from the end of its
// headers. A body that does not arrive in time is answered with 400.
const bodyReadTimeout = 10 * time.Second

// isLongPoll reports whether m is a claim-next call that may wait for work
// (mcpadapter.ClaimMayWait, the rule stdio parks by too). Anything else,
// including a claim whose arguments are invalid (it is answered at once), is
// short.
func isLongPoll(m *wire.Message) bool {
	if !m.IsCall() {
		return false
	}
	name, args, ok := m.ToolCall()
	return ok && mcpadapter.ClaimMayWait(name, args)
}

// isHolderWrite reports whether m is a call of one of the tools a lease
// holder calls to keep or end its claim: heartbeat, complete, fail, cancel.
// Such a call waits for a slot ahead of every other short call, and for as
// long as its own deadline: refusing it could only cost a live worker its
// lease, and the calls of this kind are bounded by the claims outstanding.
// The arguments are not looked at: a call that is not a valid holder write
// is answered with its error quickly, slot or not.
func isHolderWrite(m *wire.Message) bool {
	if !m.IsCall() {
		return false
	}
	name, _, ok := m.ToolCall()
	return ok && manifest.IsHolderTool(name)
}

// admission is what admit is asked for.
type admission int

const (
	admitShort  admission = iota // a short call: waits up to AdmissionWait
	admitHolder                  // a holder write: first in line, waits up to CallTimeout
	admitLong                    // a long poll: takes no slot
)

// admissionOf classifies m for admit.
func admissionOf(m *wire.Message) admission {
	switch {
	case isLongPoll(m):
		return admitLong
	case isHolderWrite(m):
		return admitHolder
	}
	return admitShort
}

// admit takes a concurrency slot for a short call, waiting for one up to
// AdmissionWait (a holder write: up to CallTimeout, ahead of the others),
// or reports that none came free (false). A long poll takes no slot. The
// returned release must be called when the request is done.
func (h *Handler) admit(ctx context.Context, kind admission) (release func(), ok bool) {
	if kind == admitLong {
		h.longPolls.Add(1)
		if h.metrics != nil {
			h.metrics.inFlight.Inc()
			h.metrics.longPolls.Inc()
		}
		return func() {
			h.longPolls.Add(-1)
			if h.metrics != nil {
				h.metrics.inFlight.Dec()
				h.metrics.longPolls.Dec()
			}
		}, true
	}
	wait := h.opts.AdmissionWait
	if kind == admitHolder {
		wait = h.opts.CallTimeout
	}
	if !h.slots.acquire(ctx, kind == admitHolder, wait) {
		return nil, false
	}
	if h.metrics != nil {
		h.metrics.inFlight.Inc()
	}
	return func() {
		h.slots.release()
		if h.metrics != nil {
			h.metrics.inFlight.Dec()
		}
	}, true
}

// slotPool is a counting semaphore of --max-concurrent slots with two
// queues of waiters, each first in, first out: a freed slot goes to the
// first waiting holder write if there is one, else to the first other
// waiter. A freed slot is handed to its waiter directly, so a call that
// arrives just then cannot take it past the queue.
type slotPool struct {
	mu      sync.Mutex
	free    int
	holders list.List // of chan struct{}, closed when the slot is handed over
	others  list.List
}

func newSlotPool(n int) *slotPool { return &slotPool{free: n} }

// acquire takes a slot, waiting up to wait (not at all when wait <= 0) or
// until ctx ends; it reports whether it took one.
func (p *slotPool) acquire(ctx context.Context, holder bool, wait time.Duration) bool {
	p.mu.Lock()
	if p.free > 0 {
		p.free--
		p.mu.Unlock()
		return true
	}
	if wait <= 0 {
		p.mu.Unlock()
		return false
	}
	q := &p.others
	if holder {
		q = &p.holders
	}
	granted := make(chan struct{})
	elem := q.PushBack(granted)
	p.mu.Unlock()

	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-granted:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-granted: // handed over while the timer fired: keep it
		return true
	default:
		q.Remove(elem)
		return false
	}
}

// tryAcquire takes a slot if one is free at once.
func (p *slotPool) tryAcquire() bool { return p.acquire(context.Background(), false, 0) }

// release frees a slot, handing it to the first waiter in line.
func (p *slotPool) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, q := range []*list.List{&p.holders, &p.others} {
		if front := q.Front(); front != nil {
			q.Remove(front)
			close(front.Value.(chan struct{}))
			return
		}
	}
	p.free++
}

// waiting returns how many holder writes and other short calls wait for a
// slot.
func (p *slotPool) waiting() (holders, others int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holders.Len(), p.others.Len()
}

// readBody reads a POST body of at most MaxBodyBytes within bodyReadTimeout,
// then lifts the read deadline, so that a long poll is not cut off by the
// server's ReadTimeout while it waits (the server watches the idle
// connection for a client that goes away).
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rc := http.NewResponseController(w)
	// Errors here mean the writer cannot set deadlines (a handler mounted
	// behind a wrapper without Unwrap): the server's ReadTimeout still holds.
	_ = rc.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	if err == nil {
		_ = rc.SetReadDeadline(time.Time{})
	}
	return body, err
}

// connTrustKey carries the connection's *trackedConn in request contexts.
type connTrustKey struct{}

// trustConn records that the request's connection has carried an
// authorized, fully read request: it is no longer closed to make room.
func trustConn(r *http.Request) {
	if c, ok := r.Context().Value(connTrustKey{}).(*trackedConn); ok {
		c.trust()
	}
}

// connContext puts a tracked connection into its requests' contexts (an
// http.Server ConnContext).
func connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*trackedConn); ok {
		return context.WithValue(ctx, connTrustKey{}, tc)
	}
	return ctx
}

// connLimiter keeps at most max connections of a listener open. When a
// connection arrives at the cap it closes the oldest untrusted connection
// (one that has never carried an authorized, fully read request); when
// every open connection is trusted, the new one waits, already accepted,
// until one closes.
type connLimiter struct {
	net.Listener
	max     int
	onEvict func()

	mu        sync.Mutex
	open      int
	untrusted list.List     // of *trackedConn, oldest first
	freed     chan struct{} // signalled when a connection closes
	done      chan struct{}
	closeOnce sync.Once
}

func newConnLimiter(ln net.Listener, max int, onEvict func()) *connLimiter {
	return &connLimiter{Listener: ln, max: max, onEvict: onEvict, freed: make(chan struct{}, 1), done: make(chan struct{})}
}

// Accept implements net.Listener.
func (l *connLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		l.mu.Lock()
		if l.open < l.max {
			l.open++
			tc := &trackedConn{Conn: c, l: l}
			tc.elem = l.untrusted.PushBack(tc)
			l.mu.Unlock()
			return tc, nil
		}
		var victim *trackedConn
		if front := l.untrusted.Front(); front != nil {
			victim = front.Value.(*trackedConn)
			l.untrusted.Remove(front)
			victim.elem = nil
		}
		l.mu.Unlock()
		if victim != nil {
			_ = victim.Close() // frees its place; the error of a dying connection is of no use
			if l.onEvict != nil {
				l.onEvict()
			}
			continue
		}
		select {
		case <-l.freed:
		case <-l.done:
			_ = c.Close()
			return nil, net.ErrClosed
		}
	}
}

// Close implements net.Listener.
func (l *connLimiter) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// trackedConn is a connection counted by a connLimiter.
type trackedConn struct {
	net.Conn
	l      *connLimiter
	elem   *list.Element // in l.untrusted while untrusted; guarded by l.mu
	closed bool          // guarded by l.mu
}

func (c *trackedConn) trust() {
	c.l.mu.Lock()
	if c.elem != nil {
		c.l.untrusted.Remove(c.elem)
		c.elem = nil
	}
	c.l.mu.Unlock()
}

// Close implements net.Conn.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	first := !c.closed
	if first {
		c.closed = true
		c.l.open--
		if c.elem != nil {
			c.l.untrusted.Remove(c.elem)
			c.elem = nil
		}
	}
	c.l.mu.Unlock()
	if first {
		select {
		case c.l.freed <- struct{}{}:
		default:
		}
	}
	return err
}
