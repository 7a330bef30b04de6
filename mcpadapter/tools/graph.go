package tools

import (
	"context"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// graph_task_create's two forms: one node (node_id and its fields) or a
// whole graph (nodes), created through taskgraph.Store.CreateWorkflow, all
// or nothing.

// createBothForms and createNoForm are the errors of a graph_task_create
// that gives both forms or neither.
const (
	createBothForms = "give either node_id (with its optional fields) to create one task, or nodes to create a graph, not both: %s cannot be combined with nodes (give it on each node instead); nothing was created"
	createNoForm    = "node_id is required: give node_id to create one task, or nodes to create a graph; nothing was created"
)

// createForm checks that a graph_task_create gives exactly one of its
// forms: no single-node field beside nodes, and node_id without nodes.
func createForm(a *args) error {
	if a.nodes == nil {
		if !a.has("node_id") {
			return fieldErrorf("node_id", createNoForm)
		}
		return nil
	}
	for _, f := range nodeFields {
		if a.has(f.name) {
			return fieldErrorf(f.name, createBothForms, f.name)
		}
	}
	return nil
}

// nodeSpecOf is the task graph_task_create's single-node arguments, or one
// of its nodes, describe.
func nodeSpecOf(a *args) taskgraph.NodeSpec {
	spec := taskgraph.NodeSpec{NodeID: a.str["node_id"], Payload: a.raw["payload"], DependsOn: a.lst["depends_on"], MaxAttempts: int(a.num["max_attempts"]), Priority: int(a.num["priority"]),
		Requires: a.lst["requires"], NotBefore: a.tim["not_before"],
		Kind: a.str["kind"], GateTimeout: time.Duration(a.num["gate_timeout_ms"]) * time.Millisecond, OnTimeout: a.str["on_timeout"]}
	if a.has("retry_delay_ms") {
		d := time.Duration(a.num["retry_delay_ms"]) * time.Millisecond
		spec.RetryDelay = &d
	}
	spec.ConcurrencyKey = a.str["concurrency_key"]
	if a.has("concurrency_max_claimed") || a.has("concurrency_rate") || a.has("concurrency_rate_interval_ms") {
		spec.KeyLimit = &taskgraph.KeyLimit{MaxClaimed: int(a.num["concurrency_max_claimed"]), Rate: int(a.num["concurrency_rate"]),
			RateInterval: time.Duration(a.num["concurrency_rate_interval_ms"]) * time.Millisecond}
	}
	return spec
}

// createdNodeJSON is one node of a whole-graph create's answer.
type createdNodeJSON struct {
	NodeID  string `json:"node_id"`
	TaskID  string `json:"task_id"`
	State   string `json:"state"`
	Created bool   `json:"created"`
}

// graphOutput is the structured result of the whole-graph form: no task,
// every node's task in the order of nodes.
type graphOutput struct {
	Created bool              `json:"created"`
	Nodes   []createdNodeJSON `json:"nodes"`
	Receipt manifest.Receipt  `json:"receipt"`
}

// createdNodesSchema is the output schema of the whole-graph form's nodes.
func createdNodesSchema() map[string]any {
	states := []string{}
	for _, s := range taskgraph.States {
		states = append(states, string(s))
	}
	return map[string]any{"type": "array", "description": "with nodes: each node's task, in the order of nodes",
		"items": map[string]any{"type": "object", "additionalProperties": false,
			"required": []string{"created", "node_id", "state", "task_id"},
			"properties": map[string]any{
				"node_id": map[string]any{"type": "string"},
				"task_id": map[string]any{"type": "string"},
				"state":   map[string]any{"type": "string", "enum": states},
				"created": map[string]any{"type": "boolean"},
			}}}
}

// create runs graph_task_create, in either form.
func (s *Surface) create(ctx context.Context, a *args) (*toolOutput, error) {
	if err := createForm(a); err != nil {
		return nil, err
	}
	if a.nodes == nil {
		c, err := s.store.CreateTask(ctx, a.str["workflow_id"], nodeSpecOf(a))
		if err != nil {
			return nil, err
		}
		out := taskOutput(c.Task)
		out.Created = boolPtr(c.Created)
		return out, nil
	}
	specs := make([]taskgraph.NodeSpec, len(a.nodes))
	for i, n := range a.nodes {
		specs[i] = nodeSpecOf(n)
	}
	made, err := s.store.CreateWorkflow(ctx, a.str["workflow_id"], specs)
	if err != nil {
		return nil, err
	}
	g := &graphOutput{Nodes: make([]createdNodeJSON, len(made))}
	for i, c := range made {
		g.Nodes[i] = createdNodeJSON{NodeID: c.Task.NodeID, TaskID: c.Task.TaskID, State: string(c.Task.State), Created: c.Created}
		g.Created = g.Created || c.Created
	}
	return &toolOutput{Graph: g}, nil
}
