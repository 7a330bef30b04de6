package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/input"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// The Tasks extension (io.modelcontextprotocol/tasks, 2026-07-28 only): a
// graph_task_create whose request declares the extension gets a task handle
// for the graph task it created, and tasks/get, tasks/update and
// tasks/cancel act on such tasks. Which requests declare the extension, and
// the -32021 of those that do not, is the MCP server's business; here is
// what the handle and the three methods answer.

// Tasks extension constants.
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

// TaskIDParams are the params of tasks/get and tasks/cancel.
type TaskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// UpdateParams are the params of tasks/update.
type UpdateParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
}

// AckResult acknowledges tasks/update and tasks/cancel.
type AckResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// TaskResult is a CreateTaskResult (resultType "task") or a GetTaskResult
// (resultType "complete"): a flat task with status-specific fields.
type TaskResult struct {
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

// CreateTask runs graph_task_create for a request that declares the Tasks
// extension: a task handle once the task is durably created (or found, for
// an idempotent repeat), else the ordinary tool result (invalid arguments, a
// refusal), which is always a compliant answer; a whole graph (nodes) is
// answered with the ordinary tool result too. The surface must offer
// graph_task_create.
func (s *Surface) CreateTask(ctx context.Context, c Caller, rawArgs json.RawMessage) (mcp.Result, error) {
	ctx = c.storeContext(ctx)
	a, err := s.admit(ctx, c, manifest.ToolCreate, rawArgs)
	if err == nil && a.nodes != nil {
		// A handle stands for one task: a whole graph is answered as
		// graph_task_create answers it without the extension (a
		// synchronous result is always a compliant answer).
		var out *toolOutput
		if out, err = s.run(ctx, manifest.ToolCreate, a); err == nil {
			return s.toolResult(c, manifest.ToolCreate, out, true)
		}
	}
	var created taskgraph.Created
	if err == nil {
		if err = createForm(a); err == nil {
			created, err = s.store.CreateTask(withRequestIDOf(ctx, a), a.str["workflow_id"], nodeSpecOf(a))
		}
	}
	if err != nil {
		res, err := s.toolError(ctx, manifest.ToolCreate, err)
		if err != nil {
			return nil, err
		}
		return res, nil
	}
	s.observe(manifest.ToolCreate, "ok")
	return s.taskHandle(c, created.Task, "task", manifest.Operation(manifest.ToolCreate))
}

// taskStatus maps a graph task to the extension's status and message.
// Blocked, pending and claimed are all "working"; a worker's failure is a
// tool-level failure and so surfaces as "completed" with isError; "failed"
// is reserved for protocol-level errors, which graph tasks never have.
func taskStatus(t taskgraph.Task) (status, message string) {
	switch t.State {
	case taskgraph.StateBlocked:
		if t.AwaitingApproval {
			// Not input_required: the input is a person's decision outside
			// MCP (admin approve|reject, POST /gates/...), which no
			// tasks/update of the client can give.
			return "working", "awaiting approval: " + t.StatusMessage
		}
		return "working", "blocked: " + t.StatusMessage
	case taskgraph.StatePending:
		if !t.DueAt.IsZero() {
			return "working", "pending: waiting until " + formatTime(t.DueAt) + ", then ready to be claimed by a worker"
		}
		return "working", "pending: ready to be claimed by a worker"
	case taskgraph.StateClaimed:
		msg := fmt.Sprintf("claimed by %s at generation %d (attempt %d of %d, lease until %s)",
			t.Owner, t.Generation, t.Attempts, t.MaxAttempts, formatTime(t.LeaseExpiresAt))
		if t.Report != nil && t.Report.Generation == t.Generation {
			if p := progressText(t.Report); p != "" {
				msg += ": " + p
			}
		}
		return "working", msg
	case taskgraph.StateCompleted:
		return "completed", t.StatusMessage
	case taskgraph.StateFailed:
		return "completed", "failed: " + t.StatusMessage
	default:
		return "cancelled", t.StatusMessage
	}
}

// settledResult is the final result of a finished task handle: the
// CallToolResult of the graph_task_create the handle answered, as the
// extension requires ("the structure matches the result type of the
// original request"). So it is what graph_task_create declares in its
// outputSchema — {task, created, receipt} — with the task as it is now: the
// worker's result is task.result. created is true (the handle stands for
// the task its create made; an idempotent repeat of that create, a retry,
// gets the same handle), and the receipt binds operation create to the
// task's id and generation now. A worker's failure is the tool error
// graph_task_create would give: the error as text and isError, with no
// structured content (MCP requires structured content to conform only on
// success). It is a 2026-07-28 result like any other (tasks/* exist only in
// that era), so it carries resultType "complete": the official Tasks client
// (@modelcontextprotocol/ext-tasks) validates the inlined result against
// the CallToolResult schema and refuses to settle without it.
func (s *Surface) settledResult(c Caller, t taskgraph.Task) (json.RawMessage, error) {
	if t.State == taskgraph.StateFailed {
		return json.Marshal(map[string]any{"resultType": "complete", "content": []any{map[string]any{"type": "text", "text": t.Error}}, "isError": true})
	}
	res, err := s.toolResult(c, manifest.ToolCreate, &toolOutput{Task: renderTask(t), Created: boolPtr(true)}, false)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var r map[string]json.RawMessage
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	r["resultType"] = json.RawMessage(`"complete"`)
	r["isError"] = json.RawMessage(`false`)
	return json.Marshal(r)
}

// taskHandle renders t as a CreateTaskResult (resultType "task") or a
// GetTaskResult (resultType "complete", with the settled result once the
// task completed or failed), with the receipt of operation in _meta.
func (s *Surface) taskHandle(c Caller, t taskgraph.Task, resultType, operation string) (*TaskResult, error) {
	rec, err := manifest.NewReceipt(s.manifestFor(c).SHA256(), operation, t.TaskID, t.Generation)
	if err != nil {
		return nil, s.internal(operation, err)
	}
	status, msg := taskStatus(t)
	out := &TaskResult{
		ResultBase: mcp.ResultBase{Meta: mcp.Meta{ReceiptMetaKey: rec}},
		ResultType: resultType, TaskID: t.TaskID, Status: status, StatusMessage: msg,
		CreatedAt: formatTime(t.CreatedAt), LastUpdatedAt: formatTime(t.UpdatedAt), PollIntervalMs: TaskPollIntervalMs,
	}
	if resultType == "complete" && status == "completed" {
		if out.Result, err = s.settledResult(c, t); err != nil {
			return nil, s.internal(operation, err)
		}
	}
	return out, nil
}

// lookupTask reads a task for a tasks/* method; an unknown id is -32602.
func (s *Surface) lookupTask(ctx context.Context, c Caller, method, taskID string) (taskgraph.Task, error) {
	if taskID == "" {
		return taskgraph.Task{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + ": params.taskId is required"}
	}
	if err := taskMethodAllowed(c.Principal, method); err != nil {
		return taskgraph.Task{}, err
	}
	t, err := s.store.Task(ctx, taskID)
	if err == nil && taskHidden(c.Principal, t) {
		// A task outside the caller's workflows, or created by another
		// principal, is answered exactly like a missing one.
		err = &hiddenTaskError{id: taskID}
	}
	if errors.Is(err, taskgraph.ErrNotFound) {
		return taskgraph.Task{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: unknown task %q", method, input.Clip(taskID)),
			Data: errorData(map[string]string{"taskId": taskID})}
	}
	if err != nil {
		return taskgraph.Task{}, s.internal(method, err)
	}
	return t, nil
}

// TaskGet answers tasks/get.
func (s *Surface) TaskGet(ctx context.Context, c Caller, taskID string) (*TaskResult, error) {
	ctx = c.storeContext(ctx)
	t, err := s.lookupTask(ctx, c, MethodTasksGet, taskID)
	if err != nil {
		return nil, err
	}
	return s.taskHandle(c, t, "complete", MethodTasksGet)
}

// TaskUpdate answers tasks/update.
func (s *Surface) TaskUpdate(ctx context.Context, c Caller, p *UpdateParams) (*AckResult, error) {
	ctx = c.storeContext(ctx)
	if p == nil {
		p = &UpdateParams{}
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
	t, err := s.lookupTask(ctx, c, MethodTasksUpdate, p.TaskID)
	if err != nil {
		return nil, err
	}
	// Graph tasks never enter input_required, so no key is outstanding and
	// every response is ignored, as the extension requires.
	return s.ack(c, MethodTasksUpdate, t)
}

// TaskCancel answers tasks/cancel: the store's protocol cancel, which fences
// out a worker still holding the task and cancels its unfinished
// dependents; a finished task is left unchanged.
func (s *Surface) TaskCancel(ctx context.Context, c Caller, taskID string) (*AckResult, error) {
	ctx = c.storeContext(ctx)
	if _, err := s.lookupTask(ctx, c, MethodTasksCancel, taskID); err != nil {
		return nil, err
	}
	t, _, err := s.store.CancelTask(ctx, taskID, "cancelled by tasks/cancel")
	if err != nil {
		if errors.Is(err, taskgraph.ErrNotFound) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("tasks/cancel: unknown task %q", input.Clip(taskID))}
		}
		return nil, s.internal(MethodTasksCancel, err)
	}
	return s.ack(c, MethodTasksCancel, t)
}

func (s *Surface) ack(c Caller, method string, t taskgraph.Task) (*AckResult, error) {
	rec, err := manifest.NewReceipt(s.manifestFor(c).SHA256(), method, t.TaskID, t.Generation)
	if err != nil {
		return nil, s.internal(method, err)
	}
	return &AckResult{ResultBase: mcp.ResultBase{Meta: mcp.Meta{ReceiptMetaKey: rec}}, ResultType: "complete"}, nil
}

// errorData marshals v for a jsonrpc.Error's Data.
func errorData(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
