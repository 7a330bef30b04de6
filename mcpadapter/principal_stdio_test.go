package mcpadapter

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
)

// serve --principal NAME: stdio serves that principal's surface and scopes.
func TestStdioNarrowedToALocalPrincipal(t *testing.T) {
	ps, err := principal.ParseAuthFile([]byte(`{"principals": [
		{"name": "planner", "token_sha256": "` + principal.TokenDigest("planner-token-0123456789") + `", "roles": ["submit", "observe"]},
		{"name": "watcher", "token_sha256": "` + principal.TokenDigest("watcher-token-0123456789") + `", "roles": ["observe"]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	auth := principal.NewAuthenticator(ps)
	if _, err := auth.Caller("nobody"); !errors.Is(err, principal.ErrInvalidAuthFile) {
		t.Fatalf("an unknown principal was accepted (%v)", err)
	}
	local, err := auth.Caller("watcher")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *Config) { c.Local = local })
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- f.srv.ServeStdio(f.ctx, inR, outW); outW.Close() }()
	sc := bufio.NewScanner(outR)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	call := func(line string) map[string]any {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
		if !sc.Scan() {
			t.Fatalf("no answer: %v", sc.Err())
		}
		var m map[string]any
		json.Unmarshal(sc.Bytes(), &m)
		return m
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
	list := call(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`)
	b, _ := json.Marshal(list["result"])
	if !strings.Contains(string(b), `"name":"`+manifest.ToolInspect+`"`) || strings.Contains(string(b), `"name":"`+manifest.ToolCreate+`"`) {
		t.Errorf("tools/list for the watcher: %s", b)
	}
	res := call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"w","node_id":"n"},` + meta + `}}`)
	b, _ = json.Marshal(res["result"])
	if !strings.Contains(string(b), `"kind":"forbidden"`) || !strings.Contains(string(b), "needs the role submit") {
		t.Errorf("create by the watcher on stdio: %s", b)
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
