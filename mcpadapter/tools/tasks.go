package mcpadapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// Tasks extension (io.modelcontextprotocol/tasks) constants.
const (
	// TaskPollIntervalMs is the poll interval suggested to tasks/get clients:
	// a tasks/get is one indexed read, which this server sustains far faster.
	TaskPollIntervalMs = 1000
	// MaxUpdateKeys and MaxUpdateBytes bound tasks/update inputResponses.
	MaxUpdateKeys  = 64
	MaxUpdateBytes = 64 << 10
	// ReceiptMetaKey is the _meta key carrying receipts on extension results.
	ReceiptMetaKey = "graph-engineering/receipt"
)

// Tasks extension methods.
const (
	MethodTasksGet    = "tasks/get"
	MethodTasksUpdate = "tasks/update"
	MethodTasksCancel = "tasks/cancel"
)

// taskIDParams are the params of tasks/get and tasks/cancel.
type taskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// updateParams are the params of tasks/update.
type updateParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
}

// ackResult acknowledges tasks/update and tasks/cancel.
type ackResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// taskResult is a CreateTaskResult (resultType "task") or a GetTaskResult
// (resultType "complete"): a flat task with status-specific fields.
type taskResult struct {
	mcp.ResultBase
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          *int64          `json:"ttlMs"` // null: kept until an operator prunes it
	PollIntervalMs int64           `json:"pollIntervalMs,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
}

// createCapture lets the tasks middleware see the task a graph_task_create
// call created without re-parsing the tool's output.
type createCapture struct{ task taskgraph.Task }

type createCaptureKey struct{}

func createCaptureFrom(ctx context.Context) *createCapture {
	c, _ := ctx.Value(createCaptureKey{}).(*createCapture)
	return c
}

func (s *Server) addTasksExtension() error {
	for _, err := range []error{
		mcp.AddReceivingCustomMethod(s.mcp, MethodTasksGet, s.tasksGet),
		mcp.AddReceivingCustomMethod(s.mcp, MethodTasksUpdate, s.tasksUpdate),
		mcp.AddReceivingCustomMethod(s.mcp, MethodTasksCancel, s.tasksCancel),
	} {
		if err != nil {
			return fmt.Errorf("register tasks extension: %w", err)
		}
	}
	return nil
}

// tasksMiddleware implements the request-scoped parts of the extension: a
// graph_task_create call that declares the extension in its own _meta gets a
// task handle; tasks/* calls that do not declare it get -32021.
func (s *Server) tasksMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if !s.cfg.Surface.TasksExtension {
			return next(ctx, method, req)
		}
		switch method {
		case MethodTasksGet, MethodTasksUpdate, MethodTasksCancel:
			if !declaresExtension(req, manifest.TasksExtension) {
				return nil, &jsonrpc.Error{
					Code:    mcp.CodeMissingRequiredClientCapabilities,
					Message: fmt.Sprintf("%s requires this request's _meta clientCapabilities to declare the %s extension", method, manifest.TasksExtension),
					Data:    errorData(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{manifest.TasksExtension: map[string]any{}}}}),
				}
			}
			return next(ctx, method, req)
		case "tools/call":
			p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
			if !ok || p == nil || p.Name != manifest.ToolCreate || !declaresExtension(req, manifest.TasksExtension) {
				return next(ctx, method, req)
			}
			capture := &createCapture{}
			res, err := next(context.WithValue(ctx, createCaptureKey{}, capture), method, req)
			if err != nil {
				return res, err
			}
			if cr, ok := res.(*mcp.CallToolResult); !ok || cr.IsError || capture.task.TaskID == "" {
				// Not created (for example invalid arguments): the ordinary
				// tool result, which is always a compliant answer.
				return res, nil
			}
			return s.taskHandle(ctx, capture.task, "task", manifest.Operation(manifest.ToolCreate))
		}
		return next(ctx, method, req)
	}
}

// taskStatus maps a graph task to the extension's status and message.
// Blocked, pending and claimed are all "working"; a worker's failure is a
// tool-level failure and so surfaces as "completed" with isError; "failed"
// is reserved for protocol-level errors, which graph tasks never have.
func taskStatus(t taskgraph.Task) (status, message string) {
	switch t.State {
	case taskgraph.StateBlocked:
		return "working", "blocked: " + t.StatusMessage
	case taskgraph.StatePending:
		if !t.DueAt.IsZero() {
			return "working", "pending: waiting until " + formatTime(t.DueAt) + ", then ready to be claimed by a worker"
		}
		return "working", "pending: ready to be claimed by a worker"
	case taskgraph.StateClaimed:
		return "working", fmt.Sprintf("claimed by %s at generation %d (attempt %d of %d, lease until %s)",
			t.Owner, t.Generation, t.Attempts, t.MaxAttempts, formatTime(t.LeaseExpiresAt))
	case taskgraph.StateCompleted:
		return "completed", t.StatusMessage
	case taskgraph.StateFailed:
		return "completed", "failed: " + t.StatusMessage
	default:
		return "cancelled", t.StatusMessage
	}
}

// callToolResultOf renders a finished task as the CallToolResult the
// original tools/call would have had: the worker's result as structured
// content (and as text), or the worker's error with isError. It is a
// 2026-07-28 result like any other (tasks/* exist only in that era), so it
// carries resultType "complete": the official Tasks client
// (@modelcontextprotocol/ext-tasks) validates the inlined result against
// the CallToolResult schema and refuses to settle without it.
func callToolResultOf(t taskgraph.Task) json.RawMessage {
	var r map[string]any
	if t.State == taskgraph.StateFailed {
		r = map[string]any{"resultType": "complete", "content": []any{map[string]any{"type": "text", "text": t.Error}}, "isError": true}
	} else {
		res := t.Result
		if len(res) == 0 {
			res = json.RawMessage("null")
		}
		r = map[string]any{"resultType": "complete", "content": []any{map[string]any{"type": "text", "text": string(res)}}, "structuredContent": res, "isError": false}
	}
	b, _ := json.Marshal(r)
	return b
}

func (s *Server) taskHandle(ctx context.Context, t taskgraph.Task, resultType, operation string) (*taskResult, error) {
	rec, err := manifest.NewReceipt(s.manifestFor(ctx).SHA256(), operation, t.TaskID, t.Generation)
	if err != nil {
		return nil, s.internal(operation, err)
	}
	status, msg := taskStatus(t)
	out := &taskResult{
		ResultBase: mcp.ResultBase{Meta: mcp.Meta{ReceiptMetaKey: rec}},
		ResultType: resultType, TaskID: t.TaskID, Status: status, StatusMessage: msg,
		CreatedAt: formatTime(t.CreatedAt), LastUpdatedAt: formatTime(t.UpdatedAt), PollIntervalMs: TaskPollIntervalMs,
	}
	if resultType == "complete" && status == "completed" {
		out.Result = callToolResultOf(t)
	}
	return out, nil
}

// lookupTask reads a task for a tasks/* method; an unknown id is -32602.
func (s *Server) lookupTask(ctx context.Context, method, taskID string) (taskgraph.Task, error) {
	if taskID == "" {
		return taskgraph.Task{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + ": params.taskId is required"}
	}
	if err := taskMethodAllowed(ctx, method); err != nil {
		return taskgraph.Task{}, err
	}
	t, err := s.store.Task(ctx, taskID)
	if err == nil && taskHidden(ctx, t) {
		// A task outside the caller's workflows, or created by another
		// principal, is answered exactly like a missing one.
		err = &hiddenTaskError{id: taskID}
	}
	if errors.Is(err, taskgraph.ErrNotFound) {
		return taskgraph.Task{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: unknown task %q", method, clip(taskID)),
			Data: errorData(map[string]string{"taskId": taskID})}
	}
	if err != nil {
		return taskgraph.Task{}, s.internal(method, err)
	}
	return t, nil
}

func (s *Server) tasksGet(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*taskResult, error) {
	if p == nil {
		p = &taskIDParams{}
	}
	t, err := s.lookupTask(ctx, MethodTasksGet, p.TaskID)
	if err != nil {
		return nil, err
	}
	return s.taskHandle(ctx, t, "complete", MethodTasksGet)
}

func (s *Server) tasksUpdate(ctx context.Context, _ *mcp.ServerSession, p *updateParams) (*ackResult, error) {
	if p == nil {
		p = &updateParams{}
	}
	if len(p.InputResponses) > MaxUpdateKeys {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("tasks/update: inputResponses must have at most %d keys (got %d)", MaxUpdateKeys, len(p.InputResponses))}
	}
	size := 0
	for k, v := range p.InputResponses {
		size += len(k) + len(v)
	}
	if size > MaxUpdateBytes {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("tasks/update: inputResponses must be at most %d bytes (got %d)", MaxUpdateBytes, size)}
	}
	t, err := s.lookupTask(ctx, MethodTasksUpdate, p.TaskID)
	if err != nil {
		return nil, err
	}
	// Graph tasks never enter input_required, so no key is outstanding and
	// every response is ignored, as the extension requires.
	return s.ack(ctx, MethodTasksUpdate, t)
}

func (s *Server) tasksCancel(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*ackResult, error) {
	if p == nil {
		p = &taskIDParams{}
	}
	if _, err := s.lookupTask(ctx, MethodTasksCancel, p.TaskID); err != nil {
		return nil, err
	}
	t, _, err := s.store.CancelTask(ctx, p.TaskID, "cancelled by tasks/cancel")
	if err != nil {
		if errors.Is(err, taskgraph.ErrNotFound) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("tasks/cancel: unknown task %q", clip(p.TaskID))}
		}
		return nil, s.internal(MethodTasksCancel, err)
	}
	return s.ack(ctx, MethodTasksCancel, t)
}

func (s *Server) ack(ctx context.Context, method string, t taskgraph.Task) (*ackResult, error) {
	rec, err := manifest.NewReceipt(s.manifestFor(ctx).SHA256(), method, t.TaskID, t.Generation)
	if err != nil {
		return nil, s.internal(method, err)
	}
	return &ackResult{ResultBase: mcp.ResultBase{Meta: mcp.Meta{ReceiptMetaKey: rec}}, ResultType: "complete"}, nil
}
