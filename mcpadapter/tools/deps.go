package tools

import (
	"context"
	"encoding/json"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// depJSON is one direct dependency on the wire (graph_task_claim,
// graph_task_inspect): its node, task, state and result, or result null
// with result_omitted true when the answer's bound on results
// (taskgraph.MaxDependencyResultBytes) left it out.
type depJSON struct {
	NodeID        string          `json:"node_id"`
	TaskID        string          `json:"task_id"`
	State         string          `json:"state"`
	Result        json.RawMessage `json:"result"`
	ResultOmitted bool            `json:"result_omitted"`
}

// renderDeps renders dependencies, never as null.
func renderDeps(ds []taskgraph.Dependency) *[]depJSON {
	out := make([]depJSON, 0, len(ds))
	for _, d := range ds {
		r := d.Result
		if r == nil {
			r = json.RawMessage(`null`)
		}
		out = append(out, depJSON{NodeID: d.NodeID, TaskID: d.TaskID, State: string(d.State), Result: r, ResultOmitted: d.ResultOmitted})
	}
	return &out
}

// depsSchema is the output schema of dependencies.
func depsSchema() map[string]any {
	str := map[string]any{"type": "string"}
	states := []string{}
	for _, s := range taskgraph.States {
		states = append(states, string(s))
	}
	item := map[string]any{
		"type": "object", "additionalProperties": false,
		"required": []string{"node_id", "result", "result_omitted", "state", "task_id"},
		"properties": map[string]any{
			"node_id":        str,
			"task_id":        str,
			"state":          map[string]any{"type": "string", "enum": states},
			"result":         map[string]any{"description": "the dependency's result (any JSON); null until completed or when omitted", "anyOf": anyJSONSchema()},
			"result_omitted": map[string]any{"type": "boolean", "description": "true when the result did not fit in this answer's bound on results; inspect the dependency's task_id to read it"},
		},
	}
	return map[string]any{"type": "array", "maxItems": taskgraph.MaxDependsOn, "items": item,
		"description": "the task's direct dependencies in creation order, with at most 262144 bytes of results in total"}
}

// inspect reads a task by task_id or by workflow_id + node_id, with its
// dependencies, or outlines a workflow by workflow_id alone (exactly one of
// the three forms).
func (s *Surface) inspect(ctx context.Context, a *args) (*toolOutput, error) {
	if err := inspectForm(a); err != nil {
		return nil, err
	}
	byID, byNode := a.has("task_id"), a.has("node_id")
	if !byID && !byNode {
		return s.outline(ctx, a.str["workflow_id"])
	}
	var t taskgraph.Task
	var err error
	if byID {
		t, err = s.store.Task(ctx, a.str["task_id"])
	} else {
		t, err = s.store.TaskByNode(ctx, a.str["workflow_id"], a.str["node_id"])
	}
	if err != nil {
		return nil, err
	}
	ds, err := s.store.Dependencies(ctx, t.TaskID)
	if err != nil {
		return nil, err
	}
	out := taskOutput(t)
	out.Dependencies = renderDeps(ds)
	return out, nil
}

// inspectForms names graph_task_inspect's three forms, for its errors.
const inspectForms = "give exactly one of: task_id; workflow_id with node_id (a task by its node); workflow_id alone (the workflow's outline)"

// inspectForm checks that graph_task_inspect's arguments are exactly one
// of its three forms.
func inspectForm(a *args) error {
	byID, byWF, byNode := a.has("task_id"), a.has("workflow_id"), a.has("node_id")
	switch {
	case byID && byWF:
		return fieldErrorf("workflow_id", "task_id and workflow_id cannot be given together; %s", inspectForms)
	case byID && byNode:
		return fieldErrorf("node_id", "task_id and node_id cannot be given together; %s", inspectForms)
	case !byID && !byWF && byNode:
		return fieldErrorf("workflow_id", "workflow_id is required with node_id; %s", inspectForms)
	case !byID && !byWF:
		return fieldErrorf("task_id", "task_id or workflow_id is required; %s", inspectForms)
	}
	return nil
}
