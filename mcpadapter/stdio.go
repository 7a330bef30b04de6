package mcpadapter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	rt := &router{log: s.log.Warn, limit: newCallLimit(maxInFlight, maxParked), gone: sw.gone(), shutdown: sw.shutdown, writing: sw.busy}
	rt.out = func(msg jsonrpc.Message) error {
		b, err := encodeMessage(msg)
		if err != nil {
			return err
		}
		return sw.write(append(b, '\n'))
	}
	lr := &lineReader{br: bufio.NewReaderSize(r, 64<<10), max: MaxStdioLineBytes}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lines := make(chan lineOrErr)
	go func() {
		defer close(lines)
		for {
			line, tooLong, err := lr.next()
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
	next := func() (jsonrpc.Message, error) {
		for {
			var l lineOrErr
			var ok bool
			select {
			case l, ok = <-lines:
				if !ok {
					return nil, io.EOF
				}
			case <-ctx.Done():
				return nil, io.EOF
			case <-sw.gone():
				return nil, io.EOF
			}
			if l.tooLong {
				rt.reply(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, fmt.Sprintf("message too large: a line may hold at most %d bytes; it was discarded", MaxStdioLineBytes), nil)
			} else if msg := decodeLine(rt, l.line); msg != nil {
				return msg, nil
			}
			if l.err != nil {
				if errors.Is(l.err, io.EOF) {
					return nil, io.EOF
				}
				return nil, l.err
			}
		}
	}
	s.log.Info("stdio session started", "eras", stdioEras)
	err := rt.serve(ctx, s.mcp, next)
	s.log.Info("stdio session ended", "eras", stdioEras)
	cancel() // the line reader stops
	sw.close()
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
	rt := &router{log: s.log.Warn, out: func(msg jsonrpc.Message) error { return conn.Write(ctx, msg) }}
	var wmu sync.Mutex
	out := rt.out
	rt.out = func(msg jsonrpc.Message) error { wmu.Lock(); defer wmu.Unlock(); return out(msg) }
	return rt.serve(ctx, s.mcp, func() (jsonrpc.Message, error) { return conn.Read(ctx) })
}

// encodeMessage is jsonrpc.EncodeMessage, except that an error about a
// request whose id could not be read carries "id": null, which JSON-RPC 2.0
// requires; the SDK's encoder leaves the member out.
func encodeMessage(msg jsonrpc.Message) ([]byte, error) {
	if r, ok := msg.(*jsonrpc.Response); ok && !r.ID.IsValid() && r.Error != nil {
		return json.Marshal(struct {
			JSONRPC string `json:"jsonrpc"`
			ID      *int   `json:"id"`
			Error   error  `json:"error"`
		}{JSONRPC: "2.0", Error: r.Error})
	}
	return jsonrpc.EncodeMessage(msg)
}

type lineOrErr struct {
	line    []byte
	tooLong bool
	err     error
}

// lineReader reads newline-terminated lines of at most max bytes. A longer
// line is consumed in chunks and dropped; only a flag says it happened.
type lineReader struct {
	br  *bufio.Reader
	max int
}

func (lr *lineReader) next() (line []byte, tooLong bool, err error) {
	for {
		chunk, err := lr.br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > lr.max+2 { // room for "\r\n"
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), tooLong, err
	}
}

// decodeLine turns one line into a message, or answers it with the error of
// the shared envelope rules (parseMessage, the same as HTTP's) and returns
// nil. The SDK's own stdio reader would end the session on such input
// instead. A notification that breaks a rule is dropped: JSON-RPC never
// answers a notification.
func decodeLine(rt *router, line []byte) jsonrpc.Message {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	m, fail := parseMessage(line)
	if fail != nil {
		if m != nil && m.isNotification() {
			return nil
		}
		id := jsonrpc.ID{}
		if fail.id != nil {
			id = *fail.id
		}
		rt.reply(id, fail.code, fail.msg, fail.data)
		return nil
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		var id jsonrpc.ID
		if m.hasID {
			id = m.id
		}
		rt.reply(id, jsonrpc.CodeInvalidRequest, "invalid request: "+clip(err.Error()), nil)
		return nil
	}
	// Answer with exactly the id read above.
	switch r := msg.(type) {
	case *jsonrpc.Request:
		if m.hasID {
			r.ID = m.id
		}
	case *jsonrpc.Response:
		r.ID = m.id
	}
	return msg
}

// readID reads a request id: a string, or a number denoting an integer that
// a float64 holds exactly (|n| < 2^53). The SDK keeps numeric ids as float64
// and truncates them to int64, so 1.5 would be answered as 1 and
// 9007199254740993 as 9007199254740992 — answers a client could pair with
// the wrong request. Such ids are refused instead.
func readID(raw json.RawMessage) (jsonrpc.ID, error) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return jsonrpc.ID{}, errors.New("id must be a string or a number")
		}
		return jsonrpc.MakeID(s)
	}
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return jsonrpc.ID{}, errors.New("id must be a string or a number")
	}
	n, err := exactInt(raw)
	if err != nil || n > maxSafeInteger || n < -maxSafeInteger {
		return jsonrpc.ID{}, fmt.Errorf("a numeric id must be an integer between %d and %d (got %s)", -maxSafeInteger, maxSafeInteger, clip(string(raw)))
	}
	return jsonrpc.MakeID(float64(n))
}
