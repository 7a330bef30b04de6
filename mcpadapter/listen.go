package mcpadapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/watch"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// Push of task status (issue 26): subscriptions/listen with the Tasks
// extension's notifications.taskIds, in the 2026-07-28 era, over stdio and
// Streamable HTTP. The SDK cannot carry it (package wire, listen.go), so
// the server owns the stream: a transport opens a Listener (Server.Listen)
// and writes what Listener.Next gives it until Next says the stream is over.
//
// One hub per server watches the tasks of every open listener. It wakes
// when the store reports a commit (taskgraph.Store.Changed: this process's
// commits at once, another replica's when its driver tells) and at least
// every ListenPoll (another replica's commits that no driver announces),
// reads each watched task as stored (one indexed read per task, never a
// workflow), and for each task whose state, generation, attempts or update
// time moved, queues its id on every listener that watches it. It never
// waits for a listener: a queue is bounded (ListenBuffer ids), and a
// listener whose queue is full has fallen behind: its stream is ended with
// notifications/cancelled naming the reason, and the client listens again
// (the first notifications of a new stream carry every task's current
// state, so nothing is lost by resuming). The transport renders a queued
// id when it writes it, through the same code as tasks/get
// (tools.Surface.TaskGet), so a notification carries exactly what tasks/get
// returns at that moment, and only what the listener's principal may see.

// Listen bounds.
const (
	// MaxListenTaskIDs bounds the taskIds of one subscriptions/listen.
	MaxListenTaskIDs = 256
	// ListenBuffer bounds the notifications queued, not yet written, on
	// one stream; beyond it the stream is ended (the listener fell behind).
	ListenBuffer = 64
	// ListenPoll is the longest the hub waits before reading the watched
	// tasks again when no commit was reported.
	ListenPoll = 250 * time.Millisecond
	// MaxListeners bounds the streams open at once on one server; beyond it
	// subscriptions/listen is refused (-32603, retry later).
	MaxListeners = 1024
)

// ErrListenerGone ends a Listener's Next when the listener was closed.
var ErrListenerGone = errors.New("listen: the stream is closed")

// ListenOptions tune the hub (tests); the zero value is the defaults.
type ListenOptions struct {
	Buffer int           // 0: ListenBuffer
	Poll   time.Duration // 0: ListenPoll
}

// listenHub watches the tasks of open listeners.
type listenHub struct {
	s    *Server
	opts ListenOptions

	listeners *watch.Set[*Listener] // at most MaxListeners

	// Counters for tests and metrics.
	notified   atomic.Int64 // ids queued
	overflowed atomic.Int64 // listeners ended for falling behind
	scans      atomic.Int64
	sent       atomic.Int64 // notifications/tasks handed to a transport
	shutdown   atomic.Int64 // listeners ended by a shutdown
	closed     atomic.Int64 // listeners the transport closed (client gone)
}

// How a stream ended (ListenMetrics).
const (
	endFellBehind = iota
	endShutdown
	endClosed
)

// fingerprint is what a change of a task's stored state changes.
type fingerprint struct {
	state      taskgraph.State
	generation int64
	attempts   int
	updated    time.Time
}

func fingerprintOf(t taskgraph.Task) fingerprint {
	return fingerprint{state: t.State, generation: t.Generation, attempts: t.Attempts, updated: t.UpdatedAt}
}

// Listener is one open subscriptions/listen stream.
type Listener struct {
	hub   *listenHub
	id    jsonrpc.ID
	who   principal.Caller
	tasks []string // acknowledged, in request order

	queue chan string   // task ids to notify, rendered when written
	ack   *wire.Note    // the acknowledgement, until Next returns it
	ended chan struct{} // closed by end (the hub or Close)
	once  sync.Once
	why   string // set before ended closes
	last  bool   // Next returned the closing note

	// seen: the hub's last fingerprint per task (the hub's goroutine only).
	seen map[string]fingerprint
}

// Listen opens a subscriptions/listen stream for request id with params and
// the request's _meta, acting for who. It fails with -32602 for a malformed
// filter, -32021 for taskIds without the Tasks extension declared in the
// request's _meta, and -32603 when MaxListeners streams are open. Of the
// requested tasks, only those who may read with tasks/get are
// acknowledged; an unknown task and a task of someone else's are left out
// alike. The first notes of the stream are the acknowledgement, then the
// current state of every acknowledged task.
func (s *Server) Listen(ctx context.Context, id jsonrpc.ID, who principal.Caller, params json.RawMessage, meta map[string]json.RawMessage) (*Listener, *wire.Failure) {
	h := s.listen
	m := &wire.Message{ID: id, HasID: true, Method: wire.MethodListen, Params: params, Meta: meta}
	f, fail := wire.ParseListen(params, MaxListenTaskIDs)
	if fail != nil {
		fail.ID = &id
		return nil, fail
	}
	if f.TaskIDs != nil && !wire.DeclaresExtension(meta, manifest.TasksExtension) {
		return nil, wire.MissingExtension(m, manifest.TasksExtension, "subscriptions/listen with notifications.taskIds")
	}
	l := &Listener{hub: h, id: id, who: who, ended: make(chan struct{}), seen: map[string]fingerprint{}}
	caller := l.caller()
	for _, tid := range f.TaskIDs {
		// The state read before the visibility check is what the hub
		// compares with: every later change is notified, whenever the
		// first notification is rendered.
		t, err := s.store.PeekTask(ctx, tid)
		if err != nil {
			continue
		}
		if _, err := s.tools.TaskGet(ctx, caller, tid); err == nil {
			l.tasks = append(l.tasks, tid)
			l.seen[tid] = fingerprintOf(t)
		}
	}
	// Only taskIds are honoured: the list-changed and resource filters
	// concern lists and resources that never change while the server runs.
	ack := map[string]any{"notifications": map[string]any{}}
	if f.TaskIDs != nil {
		ack["notifications"] = map[string]any{"taskIds": append([]string{}, l.tasks...)}
	}
	note, err := wire.NewNote(wire.MethodAcknowledged, id, ack)
	if err != nil {
		return nil, &wire.Failure{Status: http.StatusInternalServerError, ID: &id, Code: jsonrpc.CodeInternalError, Msg: "internal error: " + err.Error()}
	}
	l.ack = &note
	l.queue = make(chan string, max(h.opts.Buffer, len(l.tasks)))
	for _, tid := range l.tasks {
		l.queue <- tid // the current state follows the acknowledgement
	}
	if !h.listeners.Add(l) {
		return nil, &wire.Failure{Status: http.StatusServiceUnavailable, ID: &id, Code: jsonrpc.CodeInternalError,
			Msg: fmt.Sprintf("too many subscriptions: %d streams are open, the most this server keeps; retry later, or poll tasks/get", MaxListeners)}
	}
	return l, nil
}

// caller is whom the listener acts for now (its principal as the live
// table has it).
func (l *Listener) caller() tools.Caller {
	p, _ := l.who.Resolve()
	return tools.Caller{Principal: p}
}

// ListenStats reports the subscriptions/listen streams open now, and how
// many were ended since the server started because they fell behind.
func (s *Server) ListenStats() (open int, overflowed int64) {
	return s.listen.listeners.Len(), s.listen.overflowed.Load()
}

// ListenMetrics are the subscriptions/listen streams open now, what they
// hold, and counters since the server started.
type ListenMetrics struct {
	// Open is the number of streams open now (at most MaxListeners).
	Open int
	// Queued is the task notifications queued on open streams, not yet
	// written; QueueBound the most they may hold (the sum of their bounds):
	// what a stalled client can make the server keep.
	Queued, QueueBound int
	// Sent counts the notifications/tasks handed to a transport.
	Sent int64
	// Ended counts the streams that ended, by reason: fell_behind (the
	// server ended it: its queue was full), shutdown, closed (the client
	// closed it, or a write to it failed).
	Ended map[string]int64
}

// ListenMetrics returns the listen streams' figures (metrics, tests).
func (s *Server) ListenMetrics() ListenMetrics {
	h := s.listen
	m := ListenMetrics{Sent: h.sent.Load(), Ended: map[string]int64{
		"fell_behind": h.overflowed.Load(), "shutdown": h.shutdown.Load(), "closed": h.closed.Load()}}
	h.listeners.Each(func(l *Listener) {
		m.Open++
		m.Queued += len(l.queue)
		m.QueueBound += cap(l.queue)
	})
	return m
}

// ServesListen reports whether subscriptions/listen is served: in the
// 2026-07-28 era, when the surface offers the Tasks extension.
func (s *Server) ServesListen() bool { return s.cfg.Surface.TasksExtension }

// Tasks returns the acknowledged task ids.
func (l *Listener) Tasks() []string { return l.tasks }

// Next returns the next note to write: the acknowledgement first, then a
// notifications/tasks for each task as it changes. When the hub ended the
// stream (the listener fell behind) or the server is shutting down (stop is
// done), it returns a notifications/cancelled naming the reason with last
// set: the transport writes it and ends the stream. It returns an error
// once ctx is done or the listener was closed.
func (l *Listener) Next(ctx context.Context, stop <-chan struct{}) (note wire.Note, last bool, err error) {
	if l.ack != nil {
		n := *l.ack
		l.ack = nil
		return n, false, nil
	}
	for {
		if l.last {
			return wire.Note{}, false, ErrListenerGone
		}
		select {
		case <-l.ended:
			return l.closing()
		default:
		}
		select {
		case <-ctx.Done():
			return wire.Note{}, false, ctx.Err()
		case <-stop:
			l.end(endShutdown, "the server is shutting down; listen again once it is back (the new stream starts with every task's current state)")
			return l.closing()
		case <-l.ended:
			return l.closing()
		case tid := <-l.queue:
			res, err := l.hub.s.tools.TaskGet(context.WithoutCancel(ctx), l.caller(), tid)
			if err != nil {
				// The task is gone from the principal's view (or the
				// read failed): nothing is said about it.
				continue
			}
			// A notification carries the task as tasks/get returns it; the
			// result type belongs to the response, not the task.
			res.ResultType = ""
			n, err := wire.NewNote(wire.MethodTaskStatus, l.id, taskParams{res})
			if err != nil {
				continue
			}
			l.hub.sent.Add(1)
			return n, false, nil
		}
	}
}

// taskParams marshals a tasks/get result without its resultType.
type taskParams struct{ *tools.TaskResult }

func (p taskParams) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(p.TaskResult)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	delete(m, "resultType")
	return json.Marshal(m)
}

// closing is the last note of a stream the server ended; a stream the
// transport closed (Close) ends without one.
func (l *Listener) closing() (wire.Note, bool, error) {
	l.last = true
	if l.why == "" {
		return wire.Note{}, false, ErrListenerGone
	}
	n, err := wire.NewNote(wire.MethodCancelled, l.id, map[string]any{"requestId": l.id.Raw(), "reason": l.why})
	if err != nil {
		return wire.Note{}, false, err
	}
	return n, true, nil
}

// end ends the stream with reason why, counted as kind (the first
// reason wins).
func (l *Listener) end(kind int, why string) {
	l.once.Do(func() {
		l.why = why
		close(l.ended)
		switch kind {
		case endFellBehind:
			l.hub.overflowed.Add(1)
		case endShutdown:
			l.hub.shutdown.Add(1)
		default:
			l.hub.closed.Add(1)
		}
	})
	l.hub.listeners.Remove(l)
}

// Close ends the stream from the transport's side (the client went away or
// cancelled it): nothing more is written. It is safe to call more than once.
func (l *Listener) Close() { l.end(endClosed, "") }

// scan reads each watched task once and queues the changed ones.
func (h *listenHub) scan(ls []*Listener) {
	h.scans.Add(1)
	ctx := context.Background()
	now := map[string]fingerprint{}
	gone := map[string]bool{}
	for _, l := range ls {
		for _, tid := range l.tasks {
			if _, ok := now[tid]; ok || gone[tid] {
				continue
			}
			t, err := h.s.store.PeekTask(ctx, tid)
			if err != nil {
				gone[tid] = true // pruned, or the read failed: next pass
				continue
			}
			now[tid] = fingerprintOf(t)
		}
	}
listeners:
	for _, l := range ls {
		for _, tid := range l.tasks {
			fp, ok := now[tid]
			if !ok {
				continue
			}
			prev, had := l.seen[tid]
			l.seen[tid] = fp
			if had && prev == fp {
				continue
			}
			select {
			case l.queue <- tid:
				h.notified.Add(1)
			default:
				h.s.log.Warn("a subscriptions/listen stream fell behind and was ended", "buffer", cap(l.queue), "subscription", fmt.Sprint(l.id.Raw()))
				l.end(endFellBehind, fmt.Sprintf("the listener fell behind: %d task notifications were waiting to be written, the most a stream keeps; listen again to resume (the new stream starts with every task's current state)", cap(l.queue)))
				continue listeners
			}
		}
	}
}
