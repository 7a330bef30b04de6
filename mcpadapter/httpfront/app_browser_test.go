package httpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/liveview"
)

// appHostPage is a minimal MCP Apps host: it loads the App's HTML (read
// with resources/read by the Go side) into a frame, answers ui/initialize,
// hands it a tool result, and forwards its tools/call requests to the real
// server through the Go side's MCP client session.
const appHostPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>test host</title>
<style>iframe { width: 1500px; height: 700px; border: 1px solid #888; }</style></head>
<body><iframe id="app" sandbox="allow-scripts allow-same-origin"></iframe>
<script src="/host.js"></script></body></html>`

const appHostScript = `"use strict";
var frame = document.getElementById("app");
window.__calls = [];
window.addEventListener("message", function (ev) {
  if (ev.source !== frame.contentWindow) return;
  var m = ev.data, reply = function (r) { frame.contentWindow.postMessage({ jsonrpc: "2.0", id: m.id, result: r }, "*"); };
  if (m.method === "ui/initialize") {
    reply({ protocolVersion: "2026-01-26", hostInfo: { name: "test-host", version: "1" }, hostCapabilities: { serverTools: {} }, hostContext: { theme: "light" } });
  } else if (m.method === "ui/notifications/initialized") {
    fetch("/tool-result").then(function (r) { return r.json(); }).then(function (res) {
      frame.contentWindow.postMessage({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: res }, "*");
    });
  } else if (m.method === "tools/call") {
    window.__calls.push(m.params.name);
    fetch("/call", { method: "POST", body: JSON.stringify(m.params) }).then(function (r) { return r.json(); }).then(reply);
  } else if (m.id !== undefined && m.method) {
    frame.contentWindow.postMessage({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "not in this host" } }, "*");
  }
});
fetch("/app.html").then(function (r) { return r.text(); }).then(function (html) { frame.srcdoc = html; });
`

// appHost serves appHostPage with the App's html in its frame: GET
// /tool-result answers toolResult(), and POST /call forwards a tools/call
// of the App to cs when allow accepts the tool's name (else 400). It is
// closed when t ends.
func appHost(t *testing.T, cs *mcp.ClientSession, html string, toolResult func() any, allow func(name string) bool) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	page := func(ct, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", ct)
			_, _ = w.Write([]byte(body))
		}
	}
	mux.HandleFunc("GET /{$}", page("text/html", appHostPage))
	mux.HandleFunc("GET /host.js", page("text/javascript", appHostScript))
	mux.HandleFunc("GET /app.html", page("text/html", html))
	mux.HandleFunc("GET /tool-result", func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(toolResult()) })
	mux.HandleFunc("POST /call", func(w http.ResponseWriter, r *http.Request) {
		var p mcp.CallToolParams
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if !allow(p.Name) {
			http.Error(w, "this host forwards no call of "+p.Name, http.StatusBadRequest)
			return
		}
		res, err := cs.CallTool(r.Context(), &p)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		_ = json.NewEncoder(w).Encode(res)
	})
	host := httptest.NewServer(mux)
	t.Cleanup(host.Close)
	return host
}

// appExpr wraps the JavaScript expression expr, which may use d (the App
// frame's document), to be evaluated in the host page: null until the
// frame has a body.
func appExpr(expr string) string {
	return `(function () { var d = document.getElementById("app").contentDocument; return d && d.body ? (` + expr + `) : null; })()`
}

func TestUIAppInAHostPage(t *testing.T) {
	f := newUIFixture(t, Options{})
	compile, _ := f.shapeTwelve(t, "build-42")
	ctx := context.Background()
	// A legacy client that declares the extension at initialize, as a host would.
	client := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{
		Extensions: map[string]any{manifest.UIExtension: map[string]any{"mimeTypes": []string{manifest.UIMIMEType}}}}})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	uri := ""
	for _, tool := range tools.Tools {
		if tool.Name == manifest.ToolInspect {
			if ui, ok := tool.Meta["ui"].(map[string]any); ok {
				uri, _ = ui["resourceUri"].(string)
			}
		}
	}
	if uri != manifest.UIResourceURI {
		t.Fatalf("graph_task_inspect links %q", uri)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].MIMEType != manifest.UIMIMEType {
		t.Fatalf("read %s: %v", uri, err)
	}
	// The tool results the host hands the App: an inspect of lint (a task
	// in the middle, with siblings and downstream the old upstream walk never
	// saw), an inspect of announce (the last), an idempotent create of a
	// root (fetch-deps), and an outline itself.
	lintTask, err := f.store.TaskByNode(f.ctx, "build-42", "lint")
	if err != nil {
		t.Fatal(err)
	}
	announce, err := f.store.TaskByNode(f.ctx, "build-42", "announce")
	if err != nil {
		t.Fatal(err)
	}
	handed := []struct {
		name string
		tool string
		args map[string]any
	}{
		{"inspect lint", manifest.ToolInspect, map[string]any{"task_id": lintTask.TaskID}},
		{"inspect announce", manifest.ToolInspect, map[string]any{"task_id": announce.TaskID}},
		{"create fetch-deps", manifest.ToolCreate, map[string]any{"workflow_id": "build-42", "node_id": "fetch-deps"}},
		{"outline", manifest.ToolInspect, map[string]any{"workflow_id": "build-42"}},
	}
	var toolResult *mcp.CallToolResult
	handOver := func(i int) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: handed[i].tool, Arguments: handed[i].args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %v", handed[i].name, err, res)
		}
		toolResult = res
	}
	// The live view's own layout of the workflow, to compare positions with.
	status, _, body := f.get(t, http.MethodGet, "/ui/api/workflows/build-42", nil)
	if status != http.StatusOK {
		t.Fatalf("the live view's workflow: %d %s", status, body)
	}
	var view liveview.Workflow
	if err := json.Unmarshal([]byte(body), &view); err != nil {
		t.Fatal(err)
	}
	wantPos := map[string]string{}
	for _, n := range view.Nodes {
		wantPos[n.NodeID] = fmt.Sprintf("translate(%d,%d)", n.X, n.Y)
	}

	var mu sync.Mutex
	var called []string
	host := appHost(t, cs, rr.Contents[0].Text, func() any {
		mu.Lock()
		defer mu.Unlock()
		return toolResult
	}, func(name string) bool {
		mu.Lock()
		called = append(called, name)
		mu.Unlock()
		return true
	})

	tab := browser(t)
	for i, h := range handed {
		mu.Lock()
		handOver(i)
		called = nil
		mu.Unlock()
		navigate(t, tab, host.URL+"/")
		// Whatever task it was handed, the App draws the whole workflow,
		// all 12, with the states the store has, where the live view puts
		// them, after one read of the outline.
		waitJS(t, tab, appExpr(`d.querySelectorAll("#dag g.node").length === 12`))
		got := eval[map[string]string](t, tab, appExpr(`Object.fromEntries(Array.from(d.querySelectorAll("#dag g.node")).map(g => [g.dataset.nodeId, g.dataset.state]))`))
		for node, st := range f.states(t, "build-42") {
			if got[node] != st {
				t.Errorf("%s: the App draws %s as %q, the store has %q", h.name, node, got[node], st)
			}
		}
		pos := eval[map[string]string](t, tab, appExpr(`Object.fromEntries(Array.from(d.querySelectorAll("#dag g.node")).map(g => [g.dataset.nodeId, g.getAttribute("transform")]))`))
		for node, p := range wantPos {
			if pos[node] != p {
				t.Errorf("%s: the App places %s at %s, the live view at %s", h.name, node, pos[node], p)
			}
		}
		if edges := eval[int](t, tab, appExpr(`d.querySelectorAll("#dag path.edge").length`)); edges != len(view.Edges) {
			t.Errorf("%s: the App draws %d edges, the workflow has %d", h.name, edges, len(view.Edges))
		}
		// One read of the outline draws it all (none when handed one).
		want := 1
		if h.name == "outline" {
			want = 0
		}
		if reads := eval[string](t, tab, appExpr(`d.body.dataset.firstDrawReads`)); reads != fmt.Sprint(want) {
			t.Errorf("%s: the App read the outline %s times before its first drawing, want %d", h.name, reads, want)
		}
	}
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(artifactsDir(t), "ui-mcp-app-in-host.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the MCP App in the test host: %s", shot)
	// A completion on the server reaches the App through its read-only
	// refresh of the outline (every 5 s).
	if _, err := f.store.Complete(f.ctx, holder(compile), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, tab, appExpr(`d.querySelector('g.node[data-node-id="compile"]').dataset.state === "completed"`))
	mu.Lock()
	defer mu.Unlock()
	if len(called) == 0 || slices.ContainsFunc(called, func(n string) bool { return n != manifest.ToolInspect }) {
		t.Fatalf("the App called %v; it may call graph_task_inspect only", called)
	}
	t.Logf("the App made %d graph_task_inspect calls through the host since it was handed the last result", len(called))
}

// TestUIAppRender1000Nodes hands the App the outline of a 1,000-node
// workflow (20 layers of 50, two dependencies each) and checks that it
// places every node where the live view does; it reports the time to draw,
// it does not assert a bound.
func TestUIAppRender1000Nodes(t *testing.T) {
	f := newUIFixture(t, Options{})
	nodes := bigWorkflow(1000, 50)
	for i := 0; i < len(nodes); i += 500 {
		if _, err := f.store.CreateWorkflow(f.ctx, "big", nodes[i:i+500]); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	outline, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: manifest.ToolInspect, Arguments: map[string]any{"workflow_id": "big"}})
	if err != nil || outline.IsError {
		t.Fatalf("outline: %v %v", err, outline)
	}
	html, err := liveview.AppHTML()
	if err != nil {
		t.Fatal(err)
	}
	status, _, body := f.get(t, http.MethodGet, "/ui/api/workflows/big", nil)
	if status != http.StatusOK {
		t.Fatalf("the live view's workflow: %d", status)
	}
	var view liveview.Workflow
	if err := json.Unmarshal([]byte(body), &view); err != nil {
		t.Fatal(err)
	}
	host := appHost(t, cs, html, func() any { return outline }, func(name string) bool { return name == manifest.ToolInspect })

	tab := browser(t)
	start := time.Now()
	navigate(t, tab, host.URL+"/")
	waitJS(t, tab, appExpr(`d.querySelectorAll("#dag g.node").length === 1000`))
	took := time.Since(start)
	pos := eval[map[string]string](t, tab, appExpr(`Object.fromEntries(Array.from(d.querySelectorAll("#dag g.node")).map(g => [g.dataset.nodeId, g.getAttribute("transform")]))`))
	wrong := 0
	for _, n := range view.Nodes {
		if want := fmt.Sprintf("translate(%d,%d)", n.X, n.Y); pos[n.NodeID] != want {
			if wrong++; wrong <= 5 {
				t.Errorf("the App places %s at %s, the live view at %s", n.NodeID, pos[n.NodeID], want)
			}
		}
	}
	if wrong > 0 {
		t.Errorf("%d of 1000 nodes placed differently from the live view", wrong)
	}
	layoutMS := eval[string](t, tab, appExpr(`d.body.dataset.layoutMs`))
	drawMS := eval[string](t, tab, appExpr(`d.body.dataset.renderMs`))
	t.Logf("MCP App, 1,000-node outline (%d bytes of text): host page load to 1,000 nodes drawn %s (layout %s ms, SVG build %s ms in the frame); headless Chromium, 2 shared cores",
		len(toolText(outline)), took.Round(time.Millisecond), layoutMS, drawMS)
	fmt.Fprintf(os.Stderr, "mcp app render 1000 nodes: %s (layout %s ms, draw %s ms)\n", took.Round(time.Millisecond), layoutMS, drawMS)
}
