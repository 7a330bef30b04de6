package mcpadapter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
)

// Inbound is what a transport knows about one request that the protocol
// does not carry: when it arrived, whom it acts for, and how long its call
// may take. The HTTP front builds one for every request it hands to the SDK
// (Admit); stdio and in-memory transports act for Config.Local and are
// judged when their tool runs.
type Inbound struct {
	// Arrival is the server time the request arrived; its holder writes are
	// judged at it. Zero: the store's clock when the store is called.
	Arrival time.Time
	// Caller is whom the request acts for; the zero Caller is every role.
	Caller principal.Caller
	// Timeout bounds the call (0: no bound).
	Timeout time.Duration
	// Abort, when done, cancels the call (a shutdown that stopped waiting);
	// nil never does.
	Abort context.Context
}

// Admit registers in for one request that the HTTP front is about to hand
// to the SDK. It returns the key the front sends in the request's
// wire.HeaderInbound header (the only per-request value the SDK hands a
// call of a legacy session; see package wire) and the func that forgets the
// key, to be called once the request is answered.
func (s *Server) Admit(in Inbound) (key string, done func()) {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	var h [2 * len(b)]byte
	hex.Encode(h[:], b[:])
	key = string(h[:]) // one allocation, where hex.EncodeToString makes two
	s.inboundMu.Lock()
	s.inbound[key] = &in
	s.inboundMu.Unlock()
	return key, func() {
		s.inboundMu.Lock()
		delete(s.inbound, key)
		s.inboundMu.Unlock()
	}
}

// inboundOf returns the Inbound of req: the one the HTTP front admitted
// under the key its header carries, or, for a request that came over stdio
// or another framed transport (no header), Config.Local. ok is false for a
// request whose key is not (or no longer) admitted.
func (s *Server) inboundOf(req mcp.Request) (Inbound, bool) {
	var key string
	if req != nil {
		if extra := req.GetExtra(); extra != nil && extra.Header != nil {
			key = extra.Header.Get(wire.HeaderInbound)
		}
	}
	if key == "" {
		return Inbound{Caller: s.cfg.Local}, true
	}
	s.inboundMu.Lock()
	in, ok := s.inbound[key]
	s.inboundMu.Unlock()
	if !ok {
		return Inbound{}, false
	}
	return *in, true
}

// callKey carries a call's resolved Caller down the middleware chain to its
// handler: the SDK's middleware signature has no other place for it.
type callKey struct{}

// callerOf returns the Caller of the call ctx belongs to (inboundMiddleware
// put it there).
func callerOf(ctx context.Context) tools.Caller {
	c, _ := ctx.Value(callKey{}).(tools.Caller)
	return c
}

// inboundMiddleware finds the request's Inbound once, resolves its
// principal against the live table, hands both to the rest of the chain,
// and bounds the call by the Inbound's timeout and abort. A call whose
// Inbound is gone (its HTTP request ended before the call started) is
// refused: it must not run as nobody, or as everybody.
func (s *Server) inboundMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		in, ok := s.inboundOf(req)
		notification := wire.IsNotificationMethod(method)
		if !ok && !notification {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error: the request ended before its call started; nothing was done"}
		}
		p, _ := in.Caller.Resolve()
		ctx = context.WithValue(ctx, callKey{}, tools.Caller{Principal: p, Arrival: in.Arrival})
		if notification || in.Timeout <= 0 {
			return next(ctx, method, req)
		}
		ctx, cancel := context.WithTimeout(ctx, in.Timeout)
		defer cancel()
		if in.Abort != nil {
			stop := context.AfterFunc(in.Abort, cancel)
			defer stop()
		}
		return next(ctx, method, req)
	}
}
