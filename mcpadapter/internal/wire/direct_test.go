package wire

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPlainToolCallResultIsTheSDKs requires the hand-written encoding of a
// plain tool result to be, byte for byte, what the SDK's MarshalJSON path
// (encodeToolCallResult) writes, and every result it declines to be one
// that path encodes differently or that is not of the plain shape.
func TestPlainToolCallResultIsTheSDKs(t *testing.T) {
	t.Parallel()
	server := &mcp.Implementation{Name: "graph-engineering-mcp", Version: "v1<2>&3"}
	texts := []string{
		"", "plain", `{"task":{"id":"01J","error":null},"ok":true}`,
		"<script>&amp;</script>", "line\u2028sep\u2029end", "tab\there\nnew\r\b\f\x00\x1f\x7f",
		"quote\" back\\slash /", "日本語 ✓ 🎉", "bad \xff utf-8 \xc3", strings.Repeat("x", 5000),
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		texts = append(texts, string(b))
	}
	type res struct {
		name  string
		res   *mcp.CallToolResult
		plain bool // the hand-written path takes it
	}
	var cases []res
	for _, text := range texts {
		raw, _ := json.Marshal(map[string]any{"text": text, "n": 1.5e300})
		cases = append(cases,
			res{"text " + text, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: json.RawMessage(raw)}, true},
			res{"error " + text, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: true}, true},
		)
	}
	text := func() []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: "t"}} }
	cases = append(cases,
		res{"empty meta map", &mcp.CallToolResult{Meta: mcp.Meta{}, Content: text()}, true},
		res{"own meta", &mcp.CallToolResult{Meta: mcp.Meta{"k": "v"}, Content: text()}, false},
		res{"no content", &mcp.CallToolResult{}, false},
		res{"two contents", &mcp.CallToolResult{Content: append(text(), text()...)}, false},
		res{"text meta", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "t", Meta: mcp.Meta{"a": 1}}}}, false},
		res{"annotations", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "t", Annotations: &mcp.Annotations{Priority: 1}}}}, false},
		res{"request state", &mcp.CallToolResult{Content: text(), RequestState: "s"}, false},
		res{"structured map", &mcp.CallToolResult{Content: text(), StructuredContent: map[string]any{"a": 1}}, false},
		res{"structured with spaces", &mcp.CallToolResult{Content: text(), StructuredContent: json.RawMessage(`{"a": 1}`)}, false},
		res{"structured with a space in a string", &mcp.CallToolResult{Content: text(), StructuredContent: json.RawMessage(`{"a":"b c","d":"\"e f\\\\"}`)}, true},
		res{"structured with HTML", &mcp.CallToolResult{Content: text(), StructuredContent: json.RawMessage(`{"a":"<b>"}`)}, false},
		res{"structured with U+2028", &mcp.CallToolResult{Content: text(), StructuredContent: json.RawMessage("{\"a\":\"\u2028\"}")}, false},
		res{"structured with escapes", &mcp.CallToolResult{Content: text(), StructuredContent: json.RawMessage(`{"a":"\u003c\n\ud83c\udf89"}`)}, true},
		res{"structured null", &mcp.CallToolResult{Content: text(), StructuredContent: json.RawMessage(`null`)}, true},
		res{"structured nil raw", &mcp.CallToolResult{Content: text(), StructuredContent: json.RawMessage(nil)}, false},
	)
	for _, c := range cases {
		// The plain path first: the SDK's sets the server's identity in
		// the result's own _meta map.
		got, ok := plainToolCallResult([]byte("prefix"), c.res, server)
		got, _ = bytes.CutPrefix(got, []byte("prefix"))
		want, wantErr := encodeToolCallResult(c.res, "complete", server)
		if ok != c.plain {
			t.Errorf("%q: taken by the plain path %v, want %v", c.name, ok, c.plain)
		}
		if ok && (wantErr != nil || string(got) != string(want)) {
			t.Errorf("%q: plain path wrote\n%s\nthe SDK's\n%s (%v)", c.name, got, want, wantErr)
		}
	}
	// Invalid JSON is never taken: the SDK's encoder refuses it.
	if _, ok := plainToolCallResult(nil, &mcp.CallToolResult{Content: text(), StructuredContent: json.RawMessage(`{"a":`)}, server); ok {
		t.Error("invalid structured content taken by the plain path")
	}
}
