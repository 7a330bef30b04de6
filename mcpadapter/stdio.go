package mcpadapter

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
)

// MaxStdioLineBytes bounds one JSON-RPC message on stdio. A longer line is
// answered with a JSON-RPC error and discarded without being buffered whole.
const MaxStdioLineBytes = 512 << 10

// ServeStdio serves MCP on r and w, one JSON-RPC message per line, until r
// ends or ctx is done (then it returns nil), or w can no longer carry
// answers: then it returns an error wrapping ErrStdoutClosed or
// ErrStdoutStalled (or the write error). A write that stalls after ctx is
// done is not reported: the caller asked to stop. w carries nothing but protocol
// messages. At most MaxStdioInFlight calls are in flight: beyond that it
// stops reading r until an answer has been written. Every write to w has
// the deadline StdioWriteTimeout.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	return s.serveStdio(ctx, r, w, MaxStdioInFlight, MaxStdioParkedClaims, StdioWriteTimeout)
}

func (s *Server) serveStdio(ctx context.Context, r io.Reader, w io.Writer, maxInFlight, maxParked int, writeTimeout time.Duration) error {
	parent := ctx
	sw := newStdioWriter(w, writeTimeout)
	rt := &router{log: s.log.Warn, srv: s, limit: newCallLimit(maxInFlight, maxParked), gone: sw.gone(), shutdown: sw.shutdown, writing: sw.busy}
	rt.out = func(msg jsonrpc.Message) error {
		b, err := wire.EncodeMessage(msg)
		if err != nil {
			return err
		}
		return sw.write(append(b, '\n'))
	}
	lr := wire.NewLineReader(bufio.NewReaderSize(r, 64<<10), MaxStdioLineBytes)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lines := make(chan lineOrErr)
	go func() {
		defer close(lines)
		for {
			line, tooLong, err := lr.Next()
			select {
			case lines <- lineOrErr{line, tooLong, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	next := func() (inbound, error) {
		for {
			var l lineOrErr
			var ok bool
			select {
			case l, ok = <-lines:
				if !ok {
					return inbound{}, io.EOF
				}
			case <-ctx.Done():
				return inbound{}, io.EOF
			case <-sw.gone():
				return inbound{}, io.EOF
			}
			if l.tooLong {
				rt.reply(&wire.Failure{Code: jsonrpc.CodeInvalidRequest, Msg: fmt.Sprintf("message too large: a line may hold at most %d bytes; it was discarded", MaxStdioLineBytes)})
			} else if msg, parsed, fail := wire.DecodeLine(l.line); fail != nil {
				rt.reply(fail)
			} else if msg != nil {
				return inbound{msg, parsed}, nil
			}
			if l.err != nil {
				if errors.Is(l.err, io.EOF) {
					return inbound{}, io.EOF
				}
				return inbound{}, l.err
			}
		}
	}
	s.log.Info("stdio session started", "eras", stdioEras)
	err := rt.serve(ctx, s.mcp, next)
	s.log.Info("stdio session ended", "eras", stdioEras)
	cancel() // the line reader stops
	sw.close()
	rt.waitListeners()
	res := sw.result()
	if errors.Is(res, ErrStdoutStalled) && parent.Err() != nil {
		res = nil
	}
	return errors.Join(err, res)
}

// ServeTransport serves MCP on an already framed transport (for example an
// in-memory transport in tests), with the same era routing as stdio.
func (s *Server) ServeTransport(ctx context.Context, t mcp.Transport) error {
	conn, err := t.Connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := &router{log: s.log.Warn, srv: s, out: func(msg jsonrpc.Message) error { return conn.Write(ctx, msg) }}
	var wmu sync.Mutex
	out := rt.out
	rt.out = func(msg jsonrpc.Message) error { wmu.Lock(); defer wmu.Unlock(); return out(msg) }
	err = rt.serve(ctx, s.mcp, func() (inbound, error) {
		msg, err := conn.Read(ctx)
		return inbound{msg: msg}, err
	})
	conn.Close()
	rt.waitListeners()
	return err
}

type lineOrErr struct {
	line    []byte
	tooLong bool
	err     error
}

// stdioEras describes, for the session log lines, the two SDK sessions a
// stdio client is served by (their own lifecycle lines are at debug, see
// wire.SDKLogger).
const stdioEras = "legacy (initialize, 2024-11-05 to 2025-11-25) and 2026-07-28 (per-request _meta)"
