package wire

import (
	"net/http"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
)

// BenchmarkParseToolCall reads a worker's graph_task_complete with
// claim_next as the HTTP front does before the tool runs: Parse, then
// DirectToolCall's checks and params.
func BenchmarkParseToolCall(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"graph_task_complete","arguments":{"claim_next":{"lease_ms":60000},"claim_token":"3f1c0a9b7e5d4c2b1a0f9e8d7c6b5a49","generation":1,"owner":"bench-worker-03","result":{"ok":true},"task_id":"01KBG7Z9Q2W3E4R5T6Y7U8I9O0"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"graph-engineering-bench","version":"dev"}}}}`)
	h := http.Header{HeaderProtocolVersion: {manifest.ModernVersion}, HeaderMethod: {"tools/call"}, HeaderName: {"graph_task_complete"}}
	b.ReportAllocs()
	for b.Loop() {
		m, fail := ParseBody(body)
		if fail != nil {
			b.Fatal(fail.Msg)
		}
		if _, ok := DirectToolCall(h, m); !ok {
			b.Fatal("not a direct call")
		}
	}
}
