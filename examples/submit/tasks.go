package main

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/examples/internal/mcpclient"
)

// methodTasksGet is the Tasks extension's read method (MCP.md §7).
const methodTasksGet = "tasks/get"

// taskIDParams are the params of tasks/get.
type taskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// taskResult is a CreateTaskResult (resultType "task", the handle
// graph_task_create returns) or a GetTaskResult (resultType "complete").
type taskResult struct {
	mcp.ResultBase
	ResultType     string `json:"resultType"`
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	StatusMessage  string `json:"statusMessage"`
	PollIntervalMs int64  `json:"pollIntervalMs"`
	// Result is the CallToolResult of the graph_task_create the handle
	// answered: present once the status is completed. Its structured
	// content is what graph_task_create returns ({task, created, receipt},
	// MCP.md §7), the task as it is now.
	Result *toolResult `json:"result"`
}

// toolResult is the part of a CallToolResult a report needs.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent *mcpclient.Result `json:"structuredContent"`
	IsError           bool              `json:"isError"`
}

// apply copies the task's status into a report. The extension reports a
// worker's failure as a completed tool call with isError (its own "failed"
// status is for protocol errors, which graph tasks never have).
func (h taskResult) apply(r *NodeReport) {
	r.State, r.Status = h.Status, h.StatusMessage
	switch h.Status {
	case "completed":
		if h.Result == nil {
			return
		}
		if h.Result.IsError {
			r.State = "failed"
			for _, c := range h.Result.Content {
				r.Error += c.Text
			}
			return
		}
		if sc := h.Result.StructuredContent; sc != nil && sc.Task != nil {
			r.Result = sc.Task.Result // the worker's result
		}
	case "failed":
		r.Error = h.StatusMessage
	}
}

// registerTasksGet lets client send tasks/get; the session then declares the
// extension in each request's _meta because the client's capabilities do.
func registerTasksGet(client *mcp.Client) error {
	if err := mcp.AddSendingCustomMethod[*taskIDParams, *taskResult](client, methodTasksGet); err != nil {
		return fmt.Errorf("register %s: %w", methodTasksGet, err)
	}
	return nil
}

// tasksFollower polls tasks/get.
type tasksFollower struct{ cs *mcp.ClientSession }

func (f tasksFollower) poll(ctx context.Context, r *NodeReport) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := mcp.CallCustomMethod[*taskIDParams, *taskResult](cctx, f.cs, methodTasksGet, &taskIDParams{TaskID: r.TaskID})
	if err != nil {
		return fmt.Errorf("%s: %w", methodTasksGet, err)
	}
	if res.ResultType != "complete" || res.TaskID != r.TaskID {
		return fmt.Errorf("%s returned resultType %q for task %q; is this a graph-engineering server?", methodTasksGet, res.ResultType, res.TaskID)
	}
	res.apply(r)
	return nil
}

// tasksCapabilities declares the Tasks extension, so that graph_task_create
// returns a task handle and tasks/get is allowed.
func tasksCapabilities() *mcp.ClientCapabilities {
	return &mcp.ClientCapabilities{Extensions: map[string]any{mcpclient.TasksExtension: map[string]any{}}}
}
