package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// mcpExampleBlock matches a code block of MCP.md marked <!-- mcp: NAME -->.
var mcpExampleBlock = regexp.MustCompile("(?m)^<!-- mcp: ([a-z-]+) -->\\n```[a-z]*\\n((?s).*?)```")

// TestMCPExampleExchange runs MCP.md's complete exchange against the real
// server and compares the answer with the one MCP.md shows, apart from the
// values that vary (ids, times, digests, the version) and the text block,
// which must hold the structured content (issue 29 item 15).
func TestMCPExampleExchange(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed to run MCP.md's example request")
	}
	b, err := os.ReadFile("../../MCP.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	for _, m := range mcpExampleBlock.FindAllStringSubmatch(string(b), -1) {
		blocks[m[1]] = m[2]
	}
	req, want := blocks["example-request"], blocks["example-response"]
	if req == "" || want == "" {
		t.Fatalf("MCP.md lacks the example-request or example-response block: %v", blocks)
	}
	c := startHTTPChild(t, nil)
	script := strings.ReplaceAll(req, "127.0.0.1:7330", c.addr)
	cmd := exec.CommandContext(testwait.Context(t), "bash", "-euo", "pipefail", "-c", script)
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("MCP.md's example request: %v\n%s", err, got)
	}
	normalize := func(what string, raw []byte) any {
		t.Helper()
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s is not JSON: %v\n%s", what, err, raw)
		}
		res, _ := v["result"].(map[string]any)
		sc, _ := res["structuredContent"].(map[string]any)
		task, _ := sc["task"].(map[string]any)
		receipt, _ := sc["receipt"].(map[string]any)
		meta, _ := res["_meta"].(map[string]any)
		info, _ := meta["io.modelcontextprotocol/serverInfo"].(map[string]any)
		content, _ := res["content"].([]any)
		if task == nil || receipt == nil || info == nil || len(content) != 1 {
			t.Fatalf("%s lacks a task, receipt, serverInfo or its one content block:\n%s", what, raw)
		}
		// The text block holds the structured content (the example
		// shortens it to …).
		block, _ := content[0].(map[string]any)
		if text, _ := block["text"].(string); text != "…" {
			var inText any
			if err := json.Unmarshal([]byte(text), &inText); err != nil || !reflect.DeepEqual(inText, any(sc)) {
				t.Fatalf("%s: the text block is not the structured content (%v):\n%s", what, err, text)
			}
			block["text"] = "…"
		}
		for _, k := range []string{"task_id", "created_at", "updated_at"} {
			if s, ok := task[k].(string); !ok || s == "" {
				t.Fatalf("%s: task.%s = %v", what, k, task[k])
			}
			task[k] = "varies"
		}
		for _, k := range []string{"manifestSha256", "receiptSha256"} {
			if s, _ := receipt[k].(string); !strings.HasPrefix(s, "sha256:") || len(s) != 71 {
				t.Fatalf("%s: receipt.%s = %v", what, k, receipt[k])
			}
			receipt[k] = "varies"
		}
		info["version"] = "varies"
		return v
	}
	if g, w := normalize("the answer", got), normalize("MCP.md's answer", []byte(want)); !reflect.DeepEqual(g, w) {
		gb, _ := json.MarshalIndent(g, "", "  ")
		wb, _ := json.MarshalIndent(w, "", "  ")
		t.Fatalf("the server's answer differs from MCP.md's:\n--- server\n%s\n--- MCP.md\n%s", gb, wb)
	}
}
