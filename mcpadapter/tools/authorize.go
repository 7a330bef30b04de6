package tools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/input"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// authorize checks a tool call against p's roles and scopes, before the
// store is called: a missing role or a workflow or owner outside its
// patterns is a forbidden error naming it; a task or workflow outside its
// workflows is not found, exactly as a missing one. Without a principal
// (nil) every call is allowed.
func (s *Surface) authorize(ctx context.Context, p *principal.Principal, tool string, a *args) error {
	if p == nil {
		return nil
	}
	roles := principal.ToolRoles[tool]
	if !slices.ContainsFunc(roles, p.HasRole) {
		return principal.MissingRole(p, tool, roles)
	}
	if owner, ok := a.str["owner"]; ok && a.has("owner") && !p.OwnerAllowed(owner) {
		return principal.Forbidden("owners", "principal %q may not work as owner %q; its owners scope is: %s",
			p.Name, input.Clip(owner), strings.Join(p.OwnerPatterns(), ", "))
	}
	if a.next != nil {
		// claim_next claims as graph_task_claim does without task_id.
		if err := claimNextAllowed(p, a.next, "pass claim_next.workflow_id"); err != nil {
			return err
		}
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
		return claimNextAllowed(p, a, "pass workflow_id or task_id")
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

// claimNextAllowed checks a claim-next's workflow_id (in a) against p's
// workflows: one outside them, or none while p has not every workflow, is
// forbidden, the error ending with fix.
func claimNextAllowed(p *principal.Principal, a *args, fix string) error {
	if a.has("workflow_id") {
		if w := a.str["workflow_id"]; !p.WorkflowAllowed(w) {
			return workflowScopeError(p, w)
		}
		return nil
	}
	if !p.AllWorkflows() {
		return principal.Forbidden("workflows", "principal %q may claim only within its workflows (%s): %s",
			p.Name, strings.Join(p.Workflows, ", "), fix)
	}
	return nil
}

func workflowScopeError(p *principal.Principal, workflowID string) error {
	return principal.Forbidden("workflows", "principal %q may not touch workflow %q; its workflows scope is: %s",
		p.Name, input.Clip(workflowID), strings.Join(p.Workflows, ", "))
}

// visibleTask returns nil when the task may be shown to p, the not-found
// error of a missing task when it may not (or does not exist), or the
// store's error. A principal with every workflow costs no read.
func (s *Surface) visibleTask(ctx context.Context, p *principal.Principal, taskID string) error {
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

// hiddenTaskError is what a task outside the caller's workflows looks like:
// exactly the store's answer for a task that does not exist.
type hiddenTaskError struct{ id string }

func (e *hiddenTaskError) Error() string        { return fmt.Sprintf("task %q not found", e.id) }
func (e *hiddenTaskError) Is(target error) bool { return target == taskgraph.ErrNotFound }

// hiddenWorkflowError is what a workflow outside the caller's workflows
// looks like: exactly the store's answer for a workflow that does not exist.
type hiddenWorkflowError struct{ id string }

func (e *hiddenWorkflowError) Error() string        { return fmt.Sprintf("workflow %q not found", e.id) }
func (e *hiddenWorkflowError) Is(target error) bool { return target == taskgraph.ErrNotFound }

// hiddenNodeError is a node of a workflow outside the caller's workflows:
// exactly the store's answer for a missing node.
type hiddenNodeError struct{ workflowID, nodeID string }

func (e *hiddenNodeError) Error() string {
	return fmt.Sprintf("node %q of workflow %q not found", e.nodeID, e.workflowID)
}
func (e *hiddenNodeError) Is(target error) bool { return target == taskgraph.ErrNotFound }

// ForbiddenRPC is the JSON-RPC error of a method outside the caller's roles
// (err matches principal.ErrForbidden): -32600 with data {kind: forbidden,
// scope}.
func ForbiddenRPC(err error) error {
	scope := "role"
	var fe *principal.ForbiddenError
	if errors.As(err, &fe) {
		scope = fe.Scope
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error(),
		Data: errorData(map[string]any{"kind": "forbidden", "scope": scope})}
}

// taskMethodAllowed checks that the caller of a tasks/* request holds the
// submit role (before any read, so the answer says nothing about the task).
func taskMethodAllowed(p *principal.Principal, method string) error {
	if p != nil && !p.HasRole(principal.RoleSubmit) {
		return ForbiddenRPC(principal.MissingRole(p, method, []string{principal.RoleSubmit}))
	}
	return nil
}

// taskHidden reports whether a tasks/* request of p must treat t as
// unknown: it lies outside p's workflows or another principal created it.
func taskHidden(p *principal.Principal, t taskgraph.Task) bool {
	return p != nil && !p.Everything() && (!p.WorkflowAllowed(t.WorkflowID) || t.CreatedBy != p.Name)
}
