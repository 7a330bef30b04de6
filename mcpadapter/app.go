package mcpadapter

import (
	"context"
	"fmt"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/liveview"
)

// The MCP App (SEP-1865, io.modelcontextprotocol/ui): the live view's
// drawing as one self-contained HTML resource, manifest.UIResourceURI of
// type manifest.UIMIMEType, that a host renders in a sandboxed frame for
// the results of graph_task_create and graph_task_inspect. Inside the host
// it reads only through the host bridge, and only with graph_task_inspect
// (read-only): from the tool result it is handed it learns the workflow id,
// reads the workflow's outline (inspect by workflow_id alone: at most
// tools.MaxOutlineTasks tasks) with one call and draws the whole DAG with the
// live view's layout rules (package liveview, ported to its script), re-reading the
// outline every 5 seconds until every task is finished. An outline result
// it is handed is drawn without a call. No new tool exists for it and it
// has no write path.
//
// The extension is offered (manifest uiExtension) when resources are served
// and graph_task_inspect is allowed, and advertised only to a client that
// declares it: in 2026-07-28 by the request's own _meta clientCapabilities
// (server/discover, tools/list, resources/list), in the legacy era by the
// capabilities of the session's initialize. Only then do server/discover or
// initialize list the extension, tools/list carry _meta.ui.resourceUri on
// graph_task_create and graph_task_inspect, and resources/list the
// resource. resources/read serves it to any caller allowed resources.

// uiAppTools are the tools whose results the App shows.
var uiAppTools = map[string]bool{manifest.ToolCreate: true, manifest.ToolInspect: true}

// addUIApp registers the App's resource.
func (s *Server) addUIApp() error {
	html, err := liveview.AppHTML()
	if err != nil {
		return fmt.Errorf("mcpadapter: build the MCP App: %w", err)
	}
	meta := mcp.Meta{"ui": map[string]any{"prefersBorder": true, "csp": map[string]any{"connectDomains": []string{}, "resourceDomains": []string{}}}}
	s.mcp.AddResource(&mcp.Resource{
		URI: manifest.UIResourceURI, Name: "workflow-view", Title: "Workflow view",
		Description: "An MCP App (io.modelcontextprotocol/ui) that draws a task's whole workflow: every task with its state, dependencies, holder and lease countdown, stuck claims marked. It reads only with graph_task_inspect (the workflow outline).",
		MIMEType:    manifest.UIMIMEType, Size: int64(len(html)), Meta: meta,
	}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
			URI: manifest.UIResourceURI, MIMEType: manifest.UIMIMEType, Text: html, Meta: meta,
		}}}, nil
	})
	return nil
}

// declaresUI reports whether the client declares the UI extension: in
// 2026-07-28 in this request's _meta, in the legacy era at initialize.
func declaresUI(method string, req mcp.Request) bool {
	if modernRequest(req) {
		return declaresExtension(req, manifest.UIExtension)
	}
	var caps *mcp.ClientCapabilities
	if ir, ok := req.(*mcp.InitializeRequest); ok && method == "initialize" && ir.Params != nil {
		caps = ir.Params.Capabilities
	} else if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
		if ip := ss.InitializeParams(); ip != nil {
			caps = ip.Capabilities
		}
	}
	if caps == nil {
		return false
	}
	_, ok := caps.Extensions[manifest.UIExtension]
	return ok
}

// uiCapability is the extension's value in the server's capabilities.
func uiCapability() map[string]any {
	return map[string]any{"mimeTypes": []string{manifest.UIMIMEType}}
}

// uiMiddleware advertises the App to the clients that declare the
// extension, and hides it from the others.
func (s *Server) uiMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || !s.cfg.Surface.UIExtension || wire.IsNotificationMethod(method) {
			return res, err
		}
		// A principal without resources or graph_task_inspect has no App.
		sf, _ := s.tools.For(callerOf(ctx).Principal)
		show := sf.UIExtension && declaresUI(method, req)
		switch r := res.(type) {
		case *mcp.InitializeResult:
			if show && r.Capabilities != nil {
				cp := *r
				cp.Capabilities = withUICapability(r.Capabilities)
				return &cp, nil
			}
		case *mcp.DiscoverResult:
			if show && r.Capabilities != nil {
				cp := *r
				cp.Capabilities = withUICapability(r.Capabilities)
				return &cp, nil
			}
		case *mcp.ListToolsResult:
			if !show {
				return res, nil
			}
			cp := *r
			cp.Tools = make([]*mcp.Tool, len(r.Tools))
			for i, t := range r.Tools {
				if uiAppTools[t.Name] {
					c := *t
					c.Meta = maps.Clone(t.Meta)
					if c.Meta == nil {
						c.Meta = mcp.Meta{}
					}
					c.Meta["ui"] = map[string]any{"resourceUri": manifest.UIResourceURI}
					t = &c
				}
				cp.Tools[i] = t
			}
			return &cp, nil
		case *mcp.ListResourcesResult:
			if show {
				return res, nil
			}
			cp := *r
			cp.Resources = make([]*mcp.Resource, 0, len(r.Resources))
			for _, rs := range r.Resources {
				if rs.URI != manifest.UIResourceURI {
					cp.Resources = append(cp.Resources, rs)
				}
			}
			return &cp, nil
		}
		return res, nil
	}
}

func withUICapability(caps *mcp.ServerCapabilities) *mcp.ServerCapabilities {
	c := *caps
	c.Extensions = maps.Clone(caps.Extensions)
	if c.Extensions == nil {
		c.Extensions = map[string]any{}
	}
	c.Extensions[manifest.UIExtension] = uiCapability()
	return &c
}
