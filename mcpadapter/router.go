package mcpadapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/input"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
)

// router splits one client's message stream between two SDK sessions on the
// same server: a modern session for requests that carry the 2026-07-28
// protocol version in their own _meta, and a legacy session for the
// initialize handshake and everything after it. Each era thus keeps its own
// state, and the per-request rules of 2026-07-28 (-32602 for missing _meta,
// -32022 for an unsupported version) are applied before the SDK sees a
// request, on every transport that uses the router.
type router struct {
	out    func(jsonrpc.Message) error // serialised by the caller
	legacy *pipeConn
	modern *pipeConn

	mu         sync.Mutex
	owner      map[jsonrpc.ID]*pipeConn // request id -> session, for notifications/cancelled
	legacyInit bool
	cancelled  map[jsonrpc.ID]bool // requests the client cancelled: their answers are dropped
	outBroken  bool                // a write to the client failed: no more answers can arrive
	answered   chan struct{}       // signalled (without blocking) when a session answers or out breaks
	log        func(msg string, args ...any)

	// srv serves subscriptions/listen streams (listen.go); nil: none.
	srv       *Server
	listeners map[jsonrpc.ID]*Listener // open streams, by their request id
	listenWG  sync.WaitGroup           // their writers

	// Set by ServeStdio, nil elsewhere:
	limit    *callLimit      // bounds the calls in flight; intake waits for room
	gone     <-chan struct{} // closed when out can no longer carry answers: intake stops
	shutdown func()          // called when the drain bound is reached: fails writes still waiting
	writing  func() bool     // reports answers still being written: drain waits for them
}

// pipeConn is the mcp.Connection the router feeds one session through.
type pipeConn struct {
	r      *router
	in     chan jsonrpc.Message
	closed chan struct{}
	once   sync.Once
	legacy bool
}

func (c *pipeConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case msg, ok := <-c.in:
		if !ok {
			return nil, io.EOF
		}
		return msg, nil
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *pipeConn) Write(_ context.Context, msg jsonrpc.Message) error {
	resp, isResp := msg.(*jsonrpc.Response)
	if c.legacy && !isResp {
		// Before initialize, a legacy session has no peer to notify.
		c.r.mu.Lock()
		init := c.r.legacyInit
		c.r.mu.Unlock()
		if !init {
			return nil
		}
	}
	if !c.legacy && !isResp {
		// The 2026-07-28 era has no server-to-client traffic outside a
		// request's own response; nothing unsolicited is sent.
		return nil
	}
	if isResp {
		c.r.mu.Lock()
		delete(c.r.owner, resp.ID)
		dropped := c.r.cancelled[resp.ID]
		delete(c.r.cancelled, resp.ID)
		c.r.mu.Unlock()
		if dropped {
			// MCP: a request the client cancelled gets no response (the SDK
			// would send -32603 "context canceled").
			c.r.releaseCall(resp.ID)
			c.r.signalAnswered()
			return nil
		}
		resp.Error = wire.NormalizeError(resp.Error)
	}
	// The id may be reused once the client reads this answer, so it is freed
	// first; the place only once the answer is out (or cannot go out).
	placed := isResp && c.r.limit != nil && c.r.limit.answering(resp.ID)
	err := c.r.out(msg)
	if placed {
		c.r.limit.free()
	}
	if err != nil {
		c.r.mu.Lock()
		c.r.outBroken = true
		c.r.mu.Unlock()
	}
	c.r.signalAnswered() // an answer, or a write drain may be waiting for
	return err
}

// releaseCall frees the id and the in-flight place of a call that gets no
// answer.
func (r *router) releaseCall(id jsonrpc.ID) {
	if r.limit != nil && r.limit.answering(id) {
		r.limit.free()
	}
}

func (r *router) signalAnswered() {
	select {
	case r.answered <- struct{}{}:
	default:
	}
}

// Bounds on answering the requests in flight when input ends: long enough
// for the longest claim wait after end of input, short after a shutdown
// signal.
const (
	drainAfterEOF    = 40 * time.Second
	drainAfterCancel = 10 * time.Second
)

// drain waits until every call handed to a session has been answered (or
// cancelled by the client), so that end of input finishes the requests in
// flight: the SDK cancels a session's requests, and drops their answers, as
// soon as its input ends. It stops early when a write to the client failed or
// a session closed (its calls can no longer be answered), and waits at most
// drainAfterEOF, or drainAfterCancel once parent is done; it reports whether
// it stopped at that bound.
func (r *router) drain(parent context.Context) (bounded bool) {
	eof := time.NewTimer(drainAfterEOF)
	defer eof.Stop()
	var cancelled <-chan time.Time
	done := parent.Done()
	for {
		r.mu.Lock()
		waiting := false
		for _, c := range r.owner {
			waiting = waiting || !c.isClosed()
		}
		waiting = (waiting || r.writing != nil && r.writing()) && !r.outBroken
		r.mu.Unlock()
		if !waiting {
			return false
		}
		select {
		case <-r.gone:
			return false
		case <-r.answered:
		case <-r.legacy.closed:
		case <-r.modern.closed:
		case <-eof.C:
			return true
		case <-cancelled:
			return true
		case <-done:
			done = nil
			t := time.NewTimer(drainAfterCancel)
			defer t.Stop()
			cancelled = t.C
		}
	}
}

func (c *pipeConn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

func (c *pipeConn) Close() error      { c.once.Do(func() { close(c.closed) }); return nil }
func (c *pipeConn) SessionID() string { return "" }

type connTransport struct{ c mcp.Connection }

func (t connTransport) Connect(context.Context) (mcp.Connection, error) { return t.c, nil }

// inbound is one message a transport read: the SDK's form, and, where the
// transport checked its envelope (stdio), the parts package wire read, so
// that nothing decodes the message again (nil: the router reads params
// itself).
type inbound struct {
	msg    jsonrpc.Message
	parsed *wire.Message
}

// serve connects the two sessions to srv and feeds them from next until it
// returns io.EOF or an error (or ctx is done); it then lets the requests in
// flight finish and be answered (bounded, see drain), closes both sessions
// and waits for them. Handlers do not see ctx's cancellation: a shutdown
// stops intake, it does not abort work already accepted.
func (r *router) serve(ctx context.Context, srv *mcp.Server, next func() (inbound, error)) error {
	r.owner = map[jsonrpc.ID]*pipeConn{}
	r.cancelled = map[jsonrpc.ID]bool{}
	r.answered = make(chan struct{}, 1)
	r.listeners = map[jsonrpc.ID]*Listener{}
	parent := ctx
	ctx = context.WithoutCancel(ctx)
	listenCtx, stopListen := context.WithCancel(ctx)
	defer stopListen() // input ended: streams end; the client is gone or done
	shutdown := parent.Done()
	r.legacy = &pipeConn{r: r, in: make(chan jsonrpc.Message), closed: make(chan struct{}), legacy: true}
	r.modern = &pipeConn{r: r, in: make(chan jsonrpc.Message), closed: make(chan struct{})}
	legacy, err := srv.Connect(ctx, connTransport{r.legacy}, nil)
	if err != nil {
		return err
	}
	// The modern session starts as 2026-07-28, so the SDK never treats it as
	// a legacy session awaiting initialize.
	modern, err := srv.Connect(ctx, connTransport{r.modern}, &mcp.ServerSessionOptions{State: &mcp.ServerSessionState{
		InitializeParams: &mcp.InitializeParams{ProtocolVersion: manifest.ModernVersion, Capabilities: &mcp.ClientCapabilities{}},
	}})
	if err != nil {
		legacy.Close()
		return err
	}
	var readErr error
	for {
		if r.limit != nil && !r.limit.wait(parent.Done(), r.gone) {
			break // a shutdown signal or a gone client: stop intake
		}
		in, err := next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = err
			}
			break
		}
		if in.msg != nil {
			if r.listenCall(listenCtx, shutdown, in) {
				continue
			}
			r.dispatch(ctx, in)
		}
	}
	if r.drain(parent) && r.shutdown != nil {
		r.shutdown()
	}
	close(r.legacy.in)
	close(r.modern.in)
	legacy.Wait()
	modern.Wait()
	return readErr
}

// reply answers a request directly, without the SDK, with f (id null when
// f has none).
func (r *router) reply(f *wire.Failure) {
	var id jsonrpc.ID
	if f.ID != nil {
		id = *f.ID
	}
	if err := r.out(&jsonrpc.Response{ID: id, Error: f.Err()}); err != nil && r.log != nil {
		r.log("write error response", "err", err)
	}
}

// send hands msg to a session; it reports whether the session took it.
func (r *router) send(ctx context.Context, c *pipeConn, msg jsonrpc.Message) bool {
	select {
	case c.in <- msg:
		return true
	case <-c.closed:
	case <-ctx.Done():
	}
	return false
}

func (r *router) dispatch(ctx context.Context, in inbound) {
	switch msg := in.msg.(type) {
	case *jsonrpc.Response:
		// An answer to a server-to-client request: only legacy sessions send
		// those. Before initialize the connection is none, and the response
		// gets the answer HTTP gives one outside a session.
		r.mu.Lock()
		init := r.legacyInit
		r.mu.Unlock()
		if !init {
			r.reply(wire.ResponseOutsideSession())
			return
		}
		r.send(ctx, r.legacy, msg)
	case *jsonrpc.Request:
		if !msg.IsCall() {
			if target := r.notificationTarget(msg); target != nil {
				r.send(ctx, target, msg)
			}
			return
		}
		target, fail := r.classify(msg, in.parsed)
		if f := wire.UnknownMethod(msg.Method, KnownMethod); f != nil && fail == nil {
			target, fail = nil, f
		}
		if fail != nil {
			fail.ID = &msg.ID
			r.reply(fail)
			return
		}
		if r.limit != nil {
			if r.limit.holds(msg.ID) {
				// As the SDK would answer, but before the call takes a
				// place: its answer (id null) could not release one.
				r.reply(&wire.Failure{Code: jsonrpc.CodeInvalidRequest, Msg: "invalid request: the id " + input.Clip(fmt.Sprint(msg.ID.Raw())) + " is already used by a request in flight"})
				return
			}
			r.limit.admit(msg, in.parsed) // room was waited for before reading msg
		}
		r.mu.Lock()
		r.owner[msg.ID] = target // in flight until answered: see drain
		r.mu.Unlock()
		if !r.send(ctx, target, msg) {
			r.mu.Lock()
			delete(r.owner, msg.ID)
			r.mu.Unlock()
			r.releaseCall(msg.ID)
		}
	}
}

func (r *router) notificationTarget(msg *jsonrpc.Request) *pipeConn {
	if msg.Method == "notifications/cancelled" {
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(msg.Params, &p) == nil {
			if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
				if r.cancelListen(id) {
					return nil
				}
				r.mu.Lock()
				defer r.mu.Unlock()
				if o := r.owner[id]; o != nil {
					// The client gave up on it: end of input need not
					// wait for its answer, and the answer is not sent.
					delete(r.owner, id)
					r.cancelled[id] = true
					return o
				}
			}
		}
	}
	return r.legacy
}

// classify picks the session for a call, or the error to answer it with.
// The _meta rules are the HTTP transport's (wire.MetaVersion,
// wire.CheckModernMeta, wire.MissingMeta); only what a connection remembers
// (its initialize) is stdio's own.
func (r *router) classify(req *jsonrpc.Request, m *wire.Message) (*pipeConn, *wire.Failure) {
	if m == nil {
		// A framed transport (ServeTransport) hands over decoded messages:
		// read the _meta here.
		m = &wire.Message{ID: req.ID, HasID: req.IsCall(), Method: req.Method, Params: req.Params}
		var p struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		if len(req.Params) > 0 && json.Unmarshal(req.Params, &p) == nil {
			m.Meta = p.Meta // params that are not an object: the session reports it
		}
	}
	pv, hasPV, fail := wire.MetaVersion(m)
	if fail != nil {
		return nil, fail
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !hasPV {
		switch {
		case req.Method == "initialize":
			if r.legacyInit {
				return nil, &wire.Failure{Code: jsonrpc.CodeInvalidRequest, Msg: "initialize was already received on this connection; the session is initialized"}
			}
			r.legacyInit = true
			return r.legacy, nil
		case r.legacyInit, req.Method == "ping":
			return r.legacy, nil
		}
		return nil, wire.MissingMeta(m)
	}
	if pv != manifest.ModernVersion && r.legacyInit && slices.Contains(manifest.LegacyVersions, pv) {
		return r.legacy, nil
	}
	if f := wire.CheckModernMeta(m, pv); f != nil {
		return nil, f
	}
	return r.modern, nil
}

// listenCall serves a 2026-07-28 subscriptions/listen itself, when the
// server serves it (Server.ServesListen), and reports whether in was one:
// the SDK cannot carry its notifications (see package wire). The stream's
// notes are written by a goroutine of their own through r.out, among the
// answers; it ends when the client sends notifications/cancelled for the
// listen's id (nothing more is written), when input ends, or, with a
// notifications/cancelled naming the reason, when the listener fell behind
// or shutdown is done.
func (r *router) listenCall(ctx context.Context, shutdown <-chan struct{}, in inbound) bool {
	msg, ok := in.msg.(*jsonrpc.Request)
	if !ok || r.srv == nil || !msg.IsCall() || msg.Method != wire.MethodListen || !r.srv.ServesListen() {
		return false
	}
	target, fail := r.classify(msg, in.parsed)
	if fail != nil || target != r.modern {
		return false // dispatch answers it (an error, or -32601 in legacy)
	}
	m := in.parsed
	if m == nil {
		m = &wire.Message{}
		var p struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		if json.Unmarshal(msg.Params, &p) == nil {
			m.Meta = p.Meta
		}
	}
	r.mu.Lock()
	_, dup := r.listeners[msg.ID]
	r.mu.Unlock()
	if dup || (r.limit != nil && r.limit.holds(msg.ID)) {
		r.reply(&wire.Failure{ID: &msg.ID, Code: jsonrpc.CodeInvalidRequest, Msg: "invalid request: the id " + input.Clip(fmt.Sprint(msg.ID.Raw())) + " is already used by a request or stream in flight"})
		return true
	}
	l, fail := r.srv.Listen(ctx, msg.ID, r.srv.cfg.Local, msg.Params, m.Meta)
	if fail != nil {
		r.reply(fail)
		return true
	}
	r.mu.Lock()
	r.listeners[msg.ID] = l
	r.mu.Unlock()
	r.listenWG.Add(1)
	go func() {
		defer r.listenWG.Done()
		defer func() {
			l.Close()
			r.mu.Lock()
			if r.listeners[msg.ID] == l {
				delete(r.listeners, msg.ID)
			}
			r.mu.Unlock()
		}()
		for {
			n, last, err := l.Next(ctx, shutdown)
			if err != nil {
				return
			}
			if r.out(n.Message()) != nil || last {
				return
			}
		}
	}()
	return true
}

// cancelListen ends the stream opened by request id, if any, without a
// word (the client cancelled it); it reports whether there was one.
func (r *router) cancelListen(id jsonrpc.ID) bool {
	r.mu.Lock()
	l := r.listeners[id]
	delete(r.listeners, id)
	r.mu.Unlock()
	if l == nil {
		return false
	}
	l.Close()
	return true
}

// waitListeners waits for the writers of the streams, which end once input
// ended (serve returned) and their last write returned.
func (r *router) waitListeners() { r.listenWG.Wait() }
