package tools

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/input"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// The workflow outline: graph_task_inspect's third form, workflow_id alone.
// It answers {workflow: {workflow_id, read_at, counts, tasks, truncated},
// receipt}: every task of the workflow in creation order with what a
// picture of the DAG needs (state, edges, holder, lease, attempts, routing
// and clipped texts), never a payload, result or claim token. It is how the
// MCP App draws a whole workflow with one read-only call.
//
// Invariants: counts cover the whole workflow; tasks holds at most
// MaxOutlineTasks tasks and at most MaxOutlineBytes bytes of their JSON
// (taken in creation order while they fit; truncated says some were left
// out); error and status_message are clipped to MaxOutlineTextBytes bytes.
// It reads one snapshot through Store.Workflow and never expires a lapsed
// lease: a claimed task whose lease_expires_at is at or before read_at is a
// stuck claim, expired by the next read of that task or claim. A workflow
// outside the principal's workflows answers exactly like a missing one.

const (
	// MaxOutlineTasks bounds the tasks of one workflow outline (the
	// manifest's limits.maxOutlineTasks).
	MaxOutlineTasks = manifest.MaxOutlineTasks
	// MaxOutlineBytes bounds the JSON of an outline's tasks (the manifest's
	// limits.maxOutlineBytes).
	MaxOutlineBytes = manifest.MaxOutlineBytes
	// MaxOutlineTextBytes bounds each task's error and status_message in
	// an outline (inspect the task_id for the whole text).
	MaxOutlineTextBytes = 256
)

// outlineJSON is the workflow outline on the wire.
type outlineJSON struct {
	WorkflowID string            `json:"workflow_id"`
	ReadAt     string            `json:"read_at"`
	Counts     map[string]int    `json:"counts"`
	Tasks      []json.RawMessage `json:"tasks"`
	Truncated  bool              `json:"truncated"`
	// Usage is the usage of every attempt of every task of the workflow.
	Usage usageJSON `json:"usage"`
}

// outlineTaskJSON is one task of an outline.
type outlineTaskJSON struct {
	TaskID string `json:"task_id"`
	NodeID string `json:"node_id"`
	State  string `json:"state"`
	claimStateJSON
	Error         *string     `json:"error"`
	StatusMessage string      `json:"status_message"`
	Report        *reportJSON `json:"report,omitempty"`
}

func renderOutlineTask(t taskgraph.Task) outlineTaskJSON {
	out := outlineTaskJSON{TaskID: t.TaskID, NodeID: t.NodeID, State: string(t.State), claimStateJSON: renderClaimState(t),
		StatusMessage: input.Cut(t.StatusMessage, MaxOutlineTextBytes), Report: renderReport(t.Report, MaxOutlineTextBytes)}
	if t.Error != "" {
		e := input.Cut(t.Error, MaxOutlineTextBytes)
		out.Error = &e
	}
	return out
}

// outline answers graph_task_inspect with workflow_id alone.
func (s *Surface) outline(ctx context.Context, workflowID string) (*toolOutput, error) {
	now := s.store.Clock().Now()
	wf, err := s.store.WorkflowGraph(ctx, workflowID, MaxOutlineTasks)
	if err != nil {
		return nil, err
	}
	out := &outlineJSON{WorkflowID: wf.WorkflowID, ReadAt: formatTime(now), Counts: map[string]int{}, Tasks: []json.RawMessage{}, Usage: renderUsage(wf.Usage)}
	total := 0
	for st, n := range wf.Counts {
		out.Counts[string(st)] = n
		total += n
	}
	out.Truncated = total > len(wf.Tasks)
	const overhead = 1 // a comma between tasks, or the brackets
	size := 0
	for _, t := range wf.Tasks {
		b, err := json.Marshal(renderOutlineTask(t))
		if err != nil {
			return nil, err
		}
		if size+len(b)+overhead > MaxOutlineBytes {
			out.Truncated = true
			break
		}
		size += len(b) + overhead
		out.Tasks = append(out.Tasks, b)
	}
	return &toolOutput{Workflow: out}, nil
}

// outlineOutput is the structured result of the outline form: no task, no
// dependencies.
type outlineOutput struct {
	Workflow *outlineJSON     `json:"workflow"`
	Receipt  manifest.Receipt `json:"receipt"`
}

// outlineSchema is the output schema of the workflow outline.
func outlineSchema() map[string]any {
	str := map[string]any{"type": "string"}
	states := []string{}
	for _, s := range taskgraph.States {
		states = append(states, string(s))
	}
	// An outline task is a task object's fields but payload, result and the
	// times of its row, with its texts clipped.
	full := taskSchema()["properties"].(map[string]any)
	props := map[string]any{}
	for _, k := range []string{"task_id", "node_id", "state", "depends_on", "owner", "generation", "lease_expires_at",
		"attempts", "max_attempts", "priority", "requires", "due_at"} {
		props[k] = full[k]
	}
	props["depends_on"] = map[string]any{"type": "array", "items": str, "maxItems": taskgraph.MaxDependsOn}
	props["error"] = nullable(map[string]any{"type": "string", "description": fmt.Sprintf("the error, clipped to %d bytes", MaxOutlineTextBytes)})
	props["status_message"] = map[string]any{"type": "string", "description": fmt.Sprintf("clipped to %d bytes", MaxOutlineTextBytes)}
	task := closedObject(props)
	// Present only when the task has a report.
	props["report"] = withDescription(reportSchema(), fmt.Sprintf("the current (or last) attempt's report, its status_message clipped to %d bytes; absent when none", MaxOutlineTextBytes))
	counts := map[string]any{}
	for _, s := range states {
		counts[s] = map[string]any{"type": "integer", "minimum": 0}
	}
	return map[string]any{
		"type": "object", "additionalProperties": false,
		"description": fmt.Sprintf("the workflow outline (graph_task_inspect with workflow_id alone): counts of the whole workflow by state, and its tasks in creation order, at most %d and %d bytes of them (truncated: true when some were left out), without payloads or results", MaxOutlineTasks, MaxOutlineBytes),
		"required":    []string{"counts", "read_at", "tasks", "truncated", "usage", "workflow_id"},
		"properties": map[string]any{
			"workflow_id": str,
			"read_at":     map[string]any{"type": "string", "format": "date-time", "description": "server time of the read: a claimed task whose lease_expires_at is not after it is a stuck claim"},
			"counts":      map[string]any{"type": "object", "properties": counts, "additionalProperties": false},
			"tasks":       map[string]any{"type": "array", "maxItems": MaxOutlineTasks, "items": task},
			"truncated":   map[string]any{"type": "boolean"},
			"usage":       withDescription(usageOutSchema(), "the usage of every attempt of every task of the workflow, as their workers reported it"),
		},
	}
}
