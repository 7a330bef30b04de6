package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/input"
)

// EncodeMessage is jsonrpc.EncodeMessage, except that an error about a
// request whose id could not be read carries "id": null, which JSON-RPC 2.0
// requires; the SDK's encoder (v1.8.0) leaves the member out.
// TestSDKCanaryErrorWithoutIDOmitsIt is the canary.
func EncodeMessage(msg jsonrpc.Message) ([]byte, error) {
	if r, ok := msg.(*jsonrpc.Response); ok && !r.ID.IsValid() && r.Error != nil {
		return json.Marshal(struct {
			JSONRPC string `json:"jsonrpc"`
			ID      *int   `json:"id"`
			Error   error  `json:"error"`
		}{JSONRPC: "2.0", Error: r.Error})
	}
	return jsonrpc.EncodeMessage(msg)
}

// LineReader reads newline-terminated lines of at most Max bytes (stdio's
// framing). A longer line is consumed in chunks and dropped; only a flag says
// it happened, so a hostile line is never buffered whole. The SDK's stdio
// transport (v1.8.0) decodes a stream instead and ends the session at the
// first line it cannot decode.
type LineReader struct {
	br  *bufio.Reader
	max int
}

// NewLineReader returns a LineReader of r for lines of at most max bytes.
func NewLineReader(r *bufio.Reader, max int) *LineReader { return &LineReader{br: r, max: max} }

// Next returns the next line without its line ending, whether it was too
// long (then line is nil), and the read error (io.EOF at the end).
func (lr *LineReader) Next() (line []byte, tooLong bool, err error) {
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

// DecodeLine turns one stdio line into a message for the SDK, with the
// parts Parse read (so that nothing reads them again), or into the Failure
// to answer it with (the same envelope rules as HTTP, Parse). The SDK decodes
// the line itself too, as it decodes an HTTP body. A notification that
// breaks a rule gets neither (all nil): JSON-RPC never answers a
// notification. An empty line is nothing at all. The SDK's own stdio reader
// (v1.8.0) ends the session on such input instead
// (TestSDKCanaryNonJSONLineEndsTheSession).
func DecodeLine(line []byte) (jsonrpc.Message, *Message, *Failure) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, nil, nil
	}
	m, fail := Parse(line)
	if fail != nil {
		if m != nil && m.IsNotification() {
			return nil, nil, nil
		}
		return nil, nil, fail
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		f := &Failure{Code: jsonrpc.CodeInvalidRequest, Msg: "invalid request: " + input.Clip(err.Error())}
		if m.HasID {
			id := m.ID
			f.ID = &id
		}
		return nil, nil, f
	}
	// Answer with exactly the id read above.
	switch r := msg.(type) {
	case *jsonrpc.Request:
		if m.HasID {
			r.ID = m.ID
		}
	case *jsonrpc.Response:
		r.ID = m.ID
	}
	return msg, m, nil
}
