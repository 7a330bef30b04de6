package wire

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestFixRPCResponseNeverSendsCodeZero(t *testing.T) {
	for _, c := range []struct {
		body         string
		modern       bool
		status, code int
	}{
		{`{"jsonrpc":"2.0","id":1,"error":{"code":0,"message":"plain"}}`, true, 500, -32603},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":0,"message":"plain"}}`, false, 200, -32603},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"h"}}`, true, 400, -32020},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32021,"message":"c"}}`, true, 400, -32021},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"m"}}`, true, 404, -32601},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"i"}}`, true, 500, -32603},
		{`{"jsonrpc":"2.0","id":1,"result":{"error":0}}`, true, 200, 1},
	} {
		body, status := FixRPCResponse([]byte(c.body), 200, c.modern)
		var got struct {
			ID    float64 `json:"id"`
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		code := 1
		if got.Error != nil {
			code = got.Error.Code
		}
		if status != c.status || code != c.code || got.ID != 1 {
			t.Errorf("fix(%s, modern=%v) = HTTP %d %s, want HTTP %d code %d", c.body, c.modern, status, body, c.status, c.code)
		}
	}
}

func TestFixWriterMarksEventStreamsUnbuffered(t *testing.T) {
	rec := httptest.NewRecorder()
	fw := NewFixWriter(rec, true)
	fw.Header().Set("Content-Type", "text/event-stream")
	fw.WriteHeader(http.StatusOK)
	fw.Write([]byte("event: message\ndata: {}\n\n"))
	fw.Flush()
	fw.Finish()
	if rec.Header().Get("X-Accel-Buffering") != "no" || !rec.Flushed || rec.Body.String() != "event: message\ndata: {}\n\n" {
		t.Fatalf("SSE through the fixer: headers %v flushed %v body %q", rec.Header(), rec.Flushed, rec.Body.String())
	}
	// A JSON error is held until finish, then sent with the corrected status.
	rec = httptest.NewRecorder()
	fw = NewFixWriter(rec, true)
	fw.Header().Set("Content-Type", "application/json")
	fw.WriteHeader(http.StatusOK)
	fw.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"x"}}`))
	if rec.Body.Len() != 0 {
		t.Fatal("the JSON response was sent before finish")
	}
	fw.Finish()
	if rec.Code != http.StatusBadRequest || rec.Header().Get("X-Accel-Buffering") != "" {
		t.Fatalf("JSON -32020 through the fixer: HTTP %d, headers %v", rec.Code, rec.Header())
	}
}

// TopLevelError decides whether a response must be decoded and corrected;
// only a top-level "error" member counts, wherever else the word appears.
func TestTopLevelError(t *testing.T) {
	for body, want := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"error":{"code":0,"message":"plain"}}`:                          true,
		`{"jsonrpc":"2.0","id":"result","error":{"code":-32603,"message":"result"}}`:             true,
		`{"error":{"code":1,"message":"m"},"jsonrpc":"2.0","id":1}`:                              true,
		`{"jsonrpc":"2.0","id":1,"result":{"error":null}}`:                                       false,
		`{"jsonrpc":"2.0","id":"error","result":{"content":[{"text":"\"error\": x"}]}}`:          false,
		`{"jsonrpc":"2.0","id":{"error":1},"result":{}}`:                                         false,
		`{"jsonrpc":"2.0","id":1,"result":{"task":{"error":"boom","state":"failed"}},"x":"err"}`: false,
		`not json "error"`: false,
		`{"jsonrpc":"2.0","id":"a\"b\\","result":{"error":1}}`:                                  false,
		`{"jsonrpc":"2.0","id":"a\"b\\","error":{"code":1,"message":"result"}}`:                 true,
		`{"jsonrpc":"2.0","id":-12,"result":{"error":1}}`:                                       false,
		`{"jsonrpc":"2.0","id":1.5,"error":{"code":1,"message":"m"},"result":{}}`:               true,
		`{"jsonrpc":"2.0","id":"unterminated ,\"result\":"error"`:                               false,
		`{"jsonrpc":"2.0","id":"x\",\"error\":1,\"result\":","error":{"code":1,"message":"m"}}`: true,
	} {
		if got := TopLevelError([]byte(body)); got != want {
			t.Errorf("TopLevelError(%s) = %v, want %v", body, got, want)
		}
	}
}

// An error body is JSON, not HTML: a message quoting "Bearer <token>" reads
// as written, not as \u003ctoken\u003e (issue 29 item 15).
func TestWriteErrorKeepsAngleBrackets(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	const msg = "unauthorized: send Authorization: Bearer <token> & retry"
	WriteError(rec, &Failure{Status: http.StatusUnauthorized, Code: -32600, Msg: msg})
	body := rec.Body.String()
	var resp struct {
		Error struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.Error.Message != msg || rec.Code != http.StatusUnauthorized {
		t.Fatalf("body %q (%v), status %d", body, err, rec.Code)
	}
	if !strings.Contains(body, "<token> &") || strings.Contains(body, `\u003c`) {
		t.Fatalf("body escapes HTML characters: %s", body)
	}
}
