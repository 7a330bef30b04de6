package mcpadapter

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/mcptest"
)

var uiDeclared = map[string]any{"extensions": map[string]any{manifest.UIExtension: map[string]any{"mimeTypes": []string{manifest.UIMIMEType}}}}

// appAdvertised reports what a tools/list, resources/list and capabilities
// answer say about the App.
func appAdvertised(t *testing.T, caps map[string]any, tools, resources *jsonrpc.Response) (capOK, toolsLinked, resourceListed bool, linkedNames []string) {
	t.Helper()
	if ext, ok := caps["extensions"].(map[string]any); ok {
		v, ok := ext[manifest.UIExtension].(map[string]any)
		capOK = ok && strings.Contains(toJSON(v), manifest.UIMIMEType)
	}
	var tl struct {
		Tools []struct {
			Name string         `json:"name"`
			Meta map[string]any `json:"_meta"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(tools.Result, &tl); err != nil {
		t.Fatal(err)
	}
	for _, tool := range tl.Tools {
		if ui, ok := tool.Meta["ui"].(map[string]any); ok && ui["resourceUri"] == manifest.UIResourceURI {
			linkedNames = append(linkedNames, tool.Name)
		}
	}
	toolsLinked = len(linkedNames) > 0
	resourceListed = strings.Contains(string(resources.Result), manifest.UIResourceURI)
	return
}

func TestUIAppAdvertisedOnlyToDeclaringClients(t *testing.T) {
	f := newFixture(t)
	if !strings.Contains(string(f.srv.Manifest().Bytes()), `"uiExtension":true`) {
		t.Fatalf("the manifest does not state the App: %s", f.srv.Manifest().Bytes())
	}
	r := f.raw()
	for _, declare := range []bool{false, true} {
		var caps map[string]any
		if declare {
			caps = uiDeclared
		}
		disc := mustResult(t, r.modernCall("server/discover", nil, caps))
		tools := r.modernCall("tools/list", nil, caps)
		res := r.modernCall("resources/list", nil, caps)
		capOK, linked, listed, names := appAdvertised(t, disc["capabilities"].(map[string]any), tools, res)
		if capOK != declare || linked != declare || listed != declare {
			t.Errorf("2026-07-28, declaring=%v: capability %v, tools linked %v, resource listed %v", declare, capOK, linked, listed)
		}
		if declare && strings.Join(names, ",") != manifest.ToolCreate+","+manifest.ToolInspect {
			t.Errorf("linked tools %v, want create and inspect", names)
		}
	}
	// Declaring once does not count for the next request.
	if _, linked, _, _ := appAdvertised(t, map[string]any{}, r.modernCall("tools/list", nil, nil), r.modernCall("resources/list", nil, nil)); linked {
		t.Error("a later request that does not declare the extension still sees the App")
	}
	// The resource: one HTML document of the App's MIME type.
	read := mustResult(t, r.modernCall("resources/read", map[string]any{"uri": manifest.UIResourceURI}, uiDeclared))
	contents := read["contents"].([]any)[0].(map[string]any)
	html, _ := contents["text"].(string)
	if contents["mimeType"] != manifest.UIMIMEType || !strings.HasPrefix(html, "<!doctype html>") || !strings.Contains(html, "graph_task_inspect") || strings.Contains(html, "/*SCRIPT*/") {
		t.Fatalf("resources/read %s: %.200s", contents["mimeType"], html)
	}
	for _, w := range []string{"graph_task_create\"", "graph_task_claim", "graph_task_complete", "graph_task_fail", "graph_task_cancel", "graph_task_heartbeat", "http://", "https://"} {
		// The SVG namespace is a name, not something loaded.
		if strings.Contains(strings.ReplaceAll(html, `"http://www.w3.org/2000/svg"`, ""), w) {
			t.Errorf("the App mentions %s: it must call only graph_task_inspect and load nothing from outside", w)
		}
	}

	// Legacy: the initialize capabilities decide, for the whole session.
	for _, declare := range []bool{false, true} {
		lr := f.raw()
		clientCaps := map[string]any{}
		if declare {
			clientCaps = uiDeclared
		}
		init := mustResult(t, lr.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": clientCaps, "clientInfo": map[string]any{"name": "raw", "version": "1"}}))
		lr.notify("notifications/initialized", map[string]any{})
		capOK, linked, listed, _ := appAdvertised(t, init["capabilities"].(map[string]any), lr.call("tools/list", map[string]any{}), lr.call("resources/list", map[string]any{}))
		if capOK != declare || linked != declare || listed != declare {
			t.Errorf("legacy, declaring=%v: capability %v, tools linked %v, resource listed %v", declare, capOK, linked, listed)
		}
	}
}

func TestUIAppFollowsTheProfileAndRoles(t *testing.T) {
	noInspect := manifest.Profile{AllowedTools: []string{manifest.ToolClaim, manifest.ToolComplete}, Resources: true}
	f := newFixture(t, func(c *Config) { c.Surface = manifest.NewSurface(manifest.Options{Profile: &noInspect}) })
	if strings.Contains(string(f.srv.Manifest().Bytes()), `"uiExtension":true`) {
		t.Fatal("a surface without graph_task_inspect offers the App")
	}
	r := f.raw()
	disc := mustResult(t, r.modernCall("server/discover", nil, uiDeclared))
	if capOK, _, listed, _ := appAdvertised(t, disc["capabilities"].(map[string]any), r.modernCall("tools/list", nil, uiDeclared), r.modernCall("resources/list", nil, uiDeclared)); capOK || listed {
		t.Fatal("the App is advertised without graph_task_inspect")
	}
}

var toJSON = mcptest.ToJSON
