package mcpadapter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/skills"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// roleSurface is the server's surface narrowed by one set of roles, with
// the manifest that describes it.
type roleSurface struct {
	surface  manifest.Surface
	manifest manifest.Manifest
}

// roleSetKey names a set of roles (sorted, joined).
func roleSetKey(roles []string) string { return strings.Join(sortedUniqueStrings(roles), ",") }

// buildRoleSurfaces computes the narrowed surface and manifest of every set
// of roles (eight, the empty set included), once, at New.
func (s *Server) buildRoleSurfaces() error {
	s.roleSurfaces = map[string]roleSurface{}
	for mask := 0; mask < 1<<len(AllRoles); mask++ {
		var roles []string
		for i, r := range AllRoles {
			if mask&(1<<i) != 0 {
				roles = append(roles, r)
			}
		}
		prof := roleProfile(&Principal{Roles: roles})
		base := s.cfg.Surface
		sf := manifest.Surface{
			Resources:      base.Resources && prof.Resources,
			TasksExtension: base.TasksExtension && prof.TasksExtension,
			SkillURIs:      []string{},
		}
		sf.Tools = []string{}
		for _, t := range base.Tools {
			if slices.Contains(prof.AllowedTools, t) {
				sf.Tools = append(sf.Tools, t)
			}
		}
		// The extension surfaces tasks through create and inspect.
		sf.TasksExtension = sf.TasksExtension && slices.Contains(sf.Tools, manifest.ToolCreate) && slices.Contains(sf.Tools, manifest.ToolInspect)
		sf.SkillsExtension = base.SkillsExtension && prof.Skills && sf.Resources
		sf.UIExtension = base.UIExtension && sf.Resources && slices.Contains(sf.Tools, manifest.ToolInspect)
		if sf.SkillsExtension {
			sf.SkillURIs = append([]string{}, base.SkillURIs...)
		}
		m, err := manifest.Build(sf, s.cfg.ExtraLimits)
		if err != nil {
			return fmt.Errorf("build capability manifest for roles %q: %w", roleSetKey(roles), err)
		}
		s.roleSurfaces[roleSetKey(roles)] = roleSurface{surface: sf, manifest: m}
	}
	return nil
}

// surfaceFor returns the surface and manifest the caller of ctx sees: the
// server's own without a principal, else its roles' narrowing.
func (s *Server) surfaceFor(ctx context.Context) (manifest.Surface, manifest.Manifest) {
	p, ok := principalOf(ctx)
	if !ok {
		return s.cfg.Surface, s.manifest
	}
	rs := s.roleSurfaces[roleSetKey(p.Roles)]
	return rs.surface, rs.manifest
}

// manifestFor returns the manifest whose digest the caller's receipts carry.
func (s *Server) manifestFor(ctx context.Context) manifest.Manifest {
	_, m := s.surfaceFor(ctx)
	return m
}

// forbiddenRPC is the JSON-RPC error of a method outside the caller's roles.
func forbiddenRPC(err error) error {
	var fe *forbiddenError
	scope := "role"
	if errors.As(err, &fe) {
		scope = fe.scope
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error(),
		Data: errorData(map[string]any{"kind": "forbidden", "scope": scope})}
}

// principalMiddleware narrows what a principal sees and may call to its
// roles' surface: tools/list, initialize and server/discover describe only
// that surface; resources and skills methods need the roles that grant
// them. Tool calls are checked by the tool handler (authorizeTool), tasks/*
// by lookupTask.
func (s *Server) principalMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		p, ok := principalOf(ctx)
		if !ok || isNotification(method) {
			return next(ctx, method, req)
		}
		sf, _ := s.surfaceFor(ctx)
		switch {
		case resourceMethods[method] && s.cfg.Surface.Resources && !sf.Resources:
			return nil, forbiddenRPC(missingRole(p, method, []string{RoleObserve}))
		case isSkillsMethod(method) && s.cfg.Surface.SkillsExtension && !sf.SkillsExtension:
			return nil, forbiddenRPC(missingRole(p, method, []string{RoleObserve}))
		}
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		switch r := res.(type) {
		case *mcp.ListToolsResult:
			cp := *r
			cp.Tools = nil
			for _, t := range r.Tools {
				if sf.Allows(t.Name) {
					cp.Tools = append(cp.Tools, t)
				}
			}
			if cp.Tools == nil {
				cp.Tools = []*mcp.Tool{}
			}
			return &cp, nil
		case *mcp.ListResourcesResult:
			// The manifest resource describes the caller's own manifest.
			_, m := s.surfaceFor(ctx)
			cp := *r
			cp.Resources = make([]*mcp.Resource, len(r.Resources))
			for i, res := range r.Resources {
				if res.URI == manifest.ManifestURI {
					c := *res
					c.Size, c.Meta = int64(len(m.Bytes())), mcp.Meta{"sha256": m.SHA256()}
					res = &c
				}
				cp.Resources[i] = res
			}
			return &cp, nil
		case *mcp.InitializeResult:
			cp := *r
			cp.Capabilities = narrowCaps(r.Capabilities, sf)
			return &cp, nil
		case *mcp.DiscoverResult:
			cp := *r
			cp.Capabilities = narrowCaps(r.Capabilities, sf)
			return &cp, nil
		}
		return res, nil
	}
}

func isSkillsMethod(method string) bool {
	return method == skills.MethodList || method == skills.MethodGet || method == skills.MethodDirectoryRead
}

// narrowCaps removes from caps what sf does not serve.
func narrowCaps(caps *mcp.ServerCapabilities, sf manifest.Surface) *mcp.ServerCapabilities {
	if caps == nil {
		return nil
	}
	c := *caps
	if !sf.Resources {
		c.Resources = nil
	}
	c.Extensions = maps.Clone(caps.Extensions)
	if !sf.TasksExtension {
		delete(c.Extensions, manifest.TasksExtension)
	}
	if !sf.SkillsExtension {
		delete(c.Extensions, manifest.SkillsExtension)
	}
	if len(c.Extensions) == 0 {
		c.Extensions = nil
	}
	return &c
}

// hiddenTaskError is what a task outside the caller's workflows looks like:
// exactly the store's answer for a task that does not exist.
type hiddenTaskError struct{ id string }

func (e *hiddenTaskError) Error() string        { return fmt.Sprintf("task %q not found", e.id) }
func (e *hiddenTaskError) Is(target error) bool { return target == taskgraph.ErrNotFound }

// visibleTask returns nil when the task may be shown to p, the not-found
// error of a missing task when it may not (or does not exist), or the
// store's error. A principal with every workflow costs no read.
func (s *Server) visibleTask(ctx context.Context, p *Principal, taskID string) error {
	if p.AllWorkflows() {
		return nil
	}
	t, err := s.store.Task(ctx, taskID)
	if err != nil {
		return err
	}
	if !p.WorkflowAllowed(t.WorkflowID) {
		return &hiddenTaskError{id: taskID}
	}
	return nil
}

func workflowScopeError(p *Principal, workflowID string) error {
	return &forbiddenError{scope: "workflows", msg: fmt.Sprintf("principal %q may not touch workflow %q; its workflows scope is: %s",
		p.Name, clip(workflowID), strings.Join(p.Workflows, ", "))}
}

// authorizeTool checks a tool call against the caller's roles and scopes:
// a missing role or a workflow or owner outside its patterns is a
// forbidden error naming it; a task outside its workflows is not found.
func (s *Server) authorizeTool(ctx context.Context, tool string, a *args) error {
	p, ok := principalOf(ctx)
	if !ok {
		return nil
	}
	roles := toolRoles[tool]
	if !slices.ContainsFunc(roles, p.HasRole) {
		return missingRole(p, tool, roles)
	}
	if owner, ok := a.str["owner"]; ok && a.has("owner") && !p.OwnerAllowed(owner) {
		return &forbiddenError{scope: "owners", msg: fmt.Sprintf("principal %q may not work as owner %q; its owners scope is: %s",
			p.Name, clip(owner), strings.Join(p.ownerPatterns(), ", "))}
	}
	switch tool {
	case manifest.ToolCreate:
		if w := a.str["workflow_id"]; !p.WorkflowAllowed(w) {
			return workflowScopeError(p, w)
		}
		return nil
	case manifest.ToolClaim:
		if id := a.str["task_id"]; a.has("task_id") {
			return s.visibleTask(ctx, p, id)
		}
		if a.has("workflow_id") {
			if w := a.str["workflow_id"]; !p.WorkflowAllowed(w) {
				return workflowScopeError(p, w)
			}
			return nil
		}
		if !p.AllWorkflows() {
			return &forbiddenError{scope: "workflows", msg: fmt.Sprintf("principal %q may claim only within its workflows (%s): pass workflow_id or task_id",
				p.Name, strings.Join(p.Workflows, ", "))}
		}
		return nil
	case manifest.ToolInspect:
		if err := inspectForm(a); err != nil {
			return err // before any read: says nothing about the task
		}
		if !a.has("task_id") {
			// By node or the outline: a workflow outside the scope is
			// missing, whichever form asks.
			if w := a.str["workflow_id"]; !p.WorkflowAllowed(w) {
				if a.has("node_id") {
					return &hiddenNodeError{workflowID: w, nodeID: a.str["node_id"]}
				}
				return &hiddenWorkflowError{id: w}
			}
			return nil
		}
	}
	return s.visibleTask(ctx, p, a.str["task_id"])
}

// taskMethodAllowed checks that the caller of a tasks/* request holds the
// submit role (before any read, so the answer says nothing about the task).
func taskMethodAllowed(ctx context.Context, method string) error {
	if p, ok := principalOf(ctx); ok && !p.HasRole(RoleSubmit) {
		return forbiddenRPC(missingRole(p, method, []string{RoleSubmit}))
	}
	return nil
}

// taskHidden reports whether a tasks/* request must treat t as unknown: it
// lies outside the caller's workflows or another principal created it.
func taskHidden(ctx context.Context, t taskgraph.Task) bool {
	p, ok := principalOf(ctx)
	return ok && !p.everything && (!p.WorkflowAllowed(t.WorkflowID) || !createdBy(t, p.Name))
}

// createdBy reports whether t was created by the principal name.
func createdBy(t taskgraph.Task, name string) bool { return t.CreatedBy == name }
